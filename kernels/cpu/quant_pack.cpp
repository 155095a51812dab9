// Packing for quant_matmul.hpp: ggml blocks to panels, and back for one row.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/quant_formats.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "kernels/cpu/quant_panel.hpp"

namespace conveyor::kernels {

bool is_quant_matmul_type(WeightType type) { return type != WeightType::f32; }

int32_t quant_k_multiple(WeightType type) {
  return std::max<int32_t>(weight_type_traits(type).block_elems, 32);
}

PanelFormat panel_format(WeightType type, int32_t k) {
  PanelFormat f;
  switch (type) {
    case WeightType::f16:
    case WeightType::bf16:
      f.half = true;
      f.bf16 = type == WeightType::bf16;
      f.panel_bytes = size_t(k) * kQuantPanelRows * 2;
      return f;
    case WeightType::q8_0: f.block = 32, f.bits = 8, f.zero = 128, f.full_range = true; break;
    case WeightType::q4_0: f.block = 32, f.bits = 4, f.zero = 8; break;
    case WeightType::q4_k: f.block = 32, f.bits = 4, f.super = kQK; break;
    case WeightType::q5_k: f.block = 32, f.bits = 4, f.planes = 1, f.super = kQK; break;
    case WeightType::q6_k:
      f.block = 16, f.bits = 4, f.planes = 2, f.zero = 32, f.super = kQK, f.centered = true;
      break;
    case WeightType::f32: break;
  }
  f.quant_bytes = size_t(kQuantPanelRows) * f.block * (f.bits + f.planes) / 8;
  if (f.super > 0) {
    const int32_t blocks = f.super / f.block;
    f.super_bytes = super_header(blocks, f.centered).bytes + blocks * f.quant_bytes;
    f.panel_bytes = size_t(k / f.super) * f.super_bytes;
    return f;
  }
  f.block_bytes = kQuantPanelRows * 2 + f.quant_bytes;
  f.panel_bytes = size_t(k / f.block) * f.block_bytes;
  return f;
}

namespace {

// One block of `block` values of a row as unsigned integers q: value =
// scale · (q − zero) (PanelFormat::zero) for Q8_0 and Q4_0; for the
// K-quants, d · sc · (q − zero) − dmin · min with ggml's f16 d and dmin.
struct IntBlock {
  uint8_t q[32];
  float scale = 0;             // Q8_0, Q4_0
  uint16_t d = 0, dmin = 0;    // K-quants: their super-block's, f16
  int32_t sc = 0, min = 0;     // K-quants: the block's scale (Q6_K's signed) and min
};

// Internal block `ib` (of panel_format's block size) of a row in ggml blocks.
IntBlock decode_int_block(WeightType type, const uint8_t* row, int64_t ib) {
  IntBlock out{};
  switch (type) {
    case WeightType::q8_0: {
      const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[ib];
      out.scale = fp16_to_f32(b.d);
      for (int j = 0; j < 32; ++j) out.q[j] = uint8_t(b.qs[j] + 128);
      break;
    }
    case WeightType::q4_0: {
      const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[ib];
      out.scale = fp16_to_f32(b.d);
      for (int j = 0; j < 16; ++j) out.q[j] = b.qs[j] & 15, out.q[j + 16] = b.qs[j] >> 4;
      break;
    }
    case WeightType::q4_k:
    case WeightType::q5_k: {
      const int64_t super = ib / 8;
      const int sub = int(ib % 8);
      const uint8_t *scales, *qs, *qh = nullptr;
      if (type == WeightType::q4_k) {
        const auto& b = reinterpret_cast<const BlockQ4_K*>(row)[super];
        scales = b.scales, qs = b.qs, out.d = b.d, out.dmin = b.dmin;
      } else {
        const auto& b = reinterpret_cast<const BlockQ5_K*>(row)[super];
        scales = b.scales, qs = b.qs, qh = b.qh, out.d = b.d, out.dmin = b.dmin;
      }
      uint8_t sc, m;
      k_quant_scale_min(sub, scales, &sc, &m);
      out.sc = sc, out.min = m;
      const uint8_t* q = qs + (sub / 2) * 32;
      for (int l = 0; l < 32; ++l) {
        out.q[l] = (q[l] >> (4 * (sub & 1))) & 15;
        if (qh) out.q[l] |= uint8_t(((qh[l] >> sub) & 1) << 4);
      }
      break;
    }
    case WeightType::q6_k: {
      const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[ib / 16];
      const int sub = int(ib % 16), h = sub / 8, o = (sub % 8) * 16, t = o / 32;
      const uint8_t* ql = b.ql + 64 * h + (t & 1) * 32;
      const uint8_t* qh = b.qh + 32 * h;
      for (int i = 0; i < 16; ++i) {
        const int l = o % 32 + i;
        const int low = t < 2 ? ql[l] & 15 : ql[l] >> 4;
        out.q[i] = uint8_t(low | (((qh[l] >> (2 * t)) & 3) << 4));
      }
      out.d = b.d, out.sc = b.scales[sub];
      break;
    }
    default:
      break;
  }
  return out;
}

// Where block `ib` of a panel keeps its parts, in bytes from the panel's
// start: its quants; without super-blocks its 16 f16 scales, with them its
// super-block's header, its index there, and the byte of its min in its
// first row's lane (SuperHeader).
struct BlockPlace {
  size_t quants, scale = 0, head = 0, block = 0, lane_byte = 0;
};

BlockPlace place_block(const PanelFormat& f, int32_t ib) {
  if (f.super == 0) {
    const size_t blk = size_t(ib) * f.block_bytes;
    return {blk + kQuantPanelRows * 2, blk};
  }
  const int32_t blocks = f.super / f.block, j = ib % blocks;
  BlockPlace at;
  at.head = size_t(ib / blocks) * f.super_bytes;
  at.block = size_t(j);
  at.lane_byte = size_t(j / 4) * kQuantPanelRows * 4 + j % 4;
  at.quants = at.head + super_header(blocks, f.centered).bytes + size_t(j) * f.quant_bytes;
  return at;
}

// Packs `rows` (<= 16) rows starting at `w` into one panel; missing rows are zero.
void pack_panel(WeightType type, const PanelFormat& f, const uint8_t* w, size_t row_stride,
                int32_t rows, int32_t k, uint8_t* out) {
  std::memset(out, 0, f.panel_bytes);
  if (f.half) {
    auto* dst = reinterpret_cast<uint16_t*>(out);
    for (int32_t r = 0; r < rows; ++r) {
      const uint8_t* src = w + r * row_stride;
      for (int32_t c = 0; c < k; ++c) std::memcpy(&dst[size_t(c) * kQuantPanelRows + r], src + 2 * c, 2);
    }
    return;
  }
  const int32_t blocks = k / f.block;
  const SuperHeader sh = super_header(f.super > 0 ? f.super / f.block : 0, f.centered);
  for (int32_t ib = 0; ib < blocks; ++ib) {
    const BlockPlace at = place_block(f, ib);
    uint8_t* quants = out + at.quants;
    for (int32_t r = 0; r < rows; ++r) {
      const IntBlock b = decode_int_block(type, w + r * row_stride, ib);
      if (f.super > 0) {
        uint8_t* head = out + at.head;
        std::memcpy(head + 2 * r, &b.d, 2);
        head[sh.scales + at.block * kQuantPanelRows + r] = uint8_t(b.sc);  // Q6_K's as int8
        if (f.centered) {
          int32_t centered_sum = 0;
          for (int32_t c = 0; c < f.block; ++c) centered_sum += b.q[c] - int32_t(f.zero);
          int32_t k;
          std::memcpy(&k, head + sh.consts + 4 * r, 4);
          k += 128 * b.sc * centered_sum;
          std::memcpy(head + sh.consts + 4 * r, &k, 4);
        } else {
          std::memcpy(head + sh.dmin + 2 * r, &b.dmin, 2);
          head[sh.mins + at.lane_byte + r * 4] = uint8_t(b.min);
        }
      } else {
        reinterpret_cast<uint16_t*>(out + at.scale)[r] = f32_to_fp16(b.scale);
      }
      for (int32_t c = 0; c < f.block; ++c) {
        const int32_t group = c / 4, byte = r * 4 + c % 4;
        if (f.bits == 8) {
          quants[group * 64 + byte] = b.q[c];
          continue;
        }
        const int32_t chunks = f.block / 8;  // nibble vectors: groups g and g + chunks
        const int32_t chunk = group % chunks, shift = group < chunks ? 0 : 4;
        quants[chunk * 64 + byte] |= uint8_t((b.q[c] & 15) << shift);
        // High bits after all nibbles (group = the value vector): Q5_K's as
        // a 64-bit mask per group, bit `byte`; Q6_K's in one vector, byte
        // `byte`, bits 2·group (quant_kernels.inc's add_plane, add_high2).
        uint8_t* high = quants + f.block * kQuantPanelRows / 2;
        if (f.planes == 1 && (b.q[c] >> 4) != 0) high[group * 8 + byte / 8] |= uint8_t(1 << (byte % 8));
        if (f.planes == 2) high[byte] |= uint8_t((b.q[c] >> 4) << (2 * group));
      }
    }
  }
}

}  // namespace

size_t packed_weight_bytes(WeightType type, int32_t m, int32_t k) {
  return size_t((m + kQuantPanelRows - 1) / kQuantPanelRows) * panel_format(type, k).panel_bytes;
}

void pack_weights(WeightType type, const uint8_t* w, int32_t m, int32_t k, uint8_t* packed) {
  const PanelFormat f = panel_format(type, k);
  const size_t stride = row_bytes(type, k);
  const int32_t panels = (m + kQuantPanelRows - 1) / kQuantPanelRows;
#pragma omp parallel for schedule(static) if (size_t(m) * k > (size_t(1) << 16))
  for (int32_t p = 0; p < panels; ++p)
    pack_panel(type, f, w + size_t(p) * kQuantPanelRows * stride, stride,
               std::min(kQuantPanelRows, m - p * kQuantPanelRows), k, packed + p * f.panel_bytes);
}

size_t packed_gate_up_bytes(WeightType type, int32_t hidden, int32_t k) {
  return 2 * packed_weight_bytes(type, hidden, k);
}

void pack_gate_up_weights(WeightType type, const uint8_t* gate, const uint8_t* up,
                          int32_t hidden, int32_t k, uint8_t* packed) {
  const PanelFormat f = panel_format(type, k);
  const size_t stride = row_bytes(type, k);
  const int32_t chunks = (hidden + kQuantPanelRows - 1) / kQuantPanelRows;
#pragma omp parallel for schedule(static) if (size_t(hidden) * k > (size_t(1) << 16))
  for (int32_t i = 0; i < chunks; ++i) {
    const int32_t rows = std::min(kQuantPanelRows, hidden - i * kQuantPanelRows);
    const size_t at = size_t(i) * kQuantPanelRows * stride;
    pack_panel(type, f, gate + at, stride, rows, k, packed + 2 * i * f.panel_bytes);
    pack_panel(type, f, up + at, stride, rows, k, packed + (2 * i + 1) * f.panel_bytes);
  }
}

void unpack_weight_row(WeightType type, const uint8_t* packed, int32_t k, int32_t row, float* out) {
  const PanelFormat f = panel_format(type, k);
  const uint8_t* panel = packed + size_t(row / kQuantPanelRows) * f.panel_bytes;
  const int32_t r = row % kQuantPanelRows;
  if (f.half) {
    const auto* src = reinterpret_cast<const uint16_t*>(panel);
    for (int32_t c = 0; c < k; ++c) {
      const uint16_t h = src[size_t(c) * kQuantPanelRows + r];
      out[c] = f.bf16 ? bf16_to_f32(h) : fp16_to_f32(h);
    }
    return;
  }
  const SuperHeader sh = super_header(f.super > 0 ? f.super / f.block : 0, f.centered);
  for (int32_t ib = 0; ib < k / f.block; ++ib) {
    const BlockPlace at = place_block(f, ib);
    // As ggml's dequantize_row_*: (d · sc) · (q − zero) − dmin · min.
    float scale, offset = 0;
    if (f.super > 0) {
      const uint8_t* head = panel + at.head;
      const uint8_t byte = head[sh.scales + at.block * kQuantPanelRows + r];
      const int32_t sc = f.centered ? int32_t(int8_t(byte)) : int32_t(byte);
      scale = fp16_to_f32(reinterpret_cast<const uint16_t*>(head)[r]) * float(sc);
      if (!f.centered)
        offset = fp16_to_f32(reinterpret_cast<const uint16_t*>(head + sh.dmin)[r]) *
                 float(head[sh.mins + at.lane_byte + r * 4]);
    } else {
      scale = fp16_to_f32(reinterpret_cast<const uint16_t*>(panel + at.scale)[r]);
    }
    const uint8_t* quants = panel + at.quants;
    for (int32_t c = 0; c < f.block; ++c) {
      const int32_t group = c / 4, byte = r * 4 + c % 4;
      int q;
      if (f.bits == 8) {
        q = quants[group * 64 + byte];
      } else {
        const int32_t chunks = f.block / 8;
        q = (quants[(group % chunks) * 64 + byte] >> (group < chunks ? 0 : 4)) & 15;
        const uint8_t* high = quants + f.block * kQuantPanelRows / 2;
        if (f.planes == 1) q |= ((high[group * 8 + byte / 8] >> (byte % 8)) & 1) << 4;
        if (f.planes == 2) q |= ((high[byte] >> (2 * group)) & 3) << 4;
      }
      out[ib * f.block + c] = scale * (float(q) - f.zero) - offset;
    }
  }
}

}  // namespace conveyor::kernels
