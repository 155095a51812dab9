// KV writes into blocks and block copies (kernels.hpp); the index
// arithmetic is kv_math.hpp's, the conversions hd.hpp's (bit for bit the
// CPU's).
#include "kernels/cuda/kernels.hpp"
#include "kernels/cuda/kv_math.hpp"

namespace conveyor::kernels::cuda {
namespace {

// One block per token; threads over its n_kv_heads × head_dim values.
template <int D>
__global__ void write_kv_kernel(const float* k, const float* v, int64_t ld, SpanTable spans,
                                PagedKvView kv) {
  using E = typename KvElem<D>::type;
  const int32_t t = blockIdx.x;
  const int32_t s = sequence_of_token(spans.token_begin, spans.n_seqs, t);
  const int32_t pos = spans.start_pos[s] + (t - spans.token_begin[s]);
  const int32_t* table = spans.block_tables + spans.table_begin[s];
  E* keys = static_cast<E*>(kv.keys);
  E* values = static_cast<E*>(kv.values);
  const int32_t width = kv.n_kv_heads * kv.head_dim;
  for (int32_t e = threadIdx.x; e < width; e += blockDim.x) {
    const int32_t h = e / kv.head_dim, d = e % kv.head_dim;
    const int64_t dst = kv_slot(table, pos, h, kv.block_size, kv.head_dim, kv.block_stride) + d;
    keys[dst] = kv_from_float<D>(k[t * ld + e]);
    values[dst] = kv_from_float<D>(v[t * ld + e]);
  }
}

// q8_0: one block per token; each warp quantizes 32-value blocks in turn,
// lane i holding value i (the largest magnitude by a warp reduction, NaNs
// ignored as the CPU's std::max ignores them).
__global__ void write_kv_q8_kernel(const float* k, const float* v, int64_t ld, SpanTable spans, PagedKvView kv) {
  const int32_t t = blockIdx.x;
  const int32_t s = sequence_of_token(spans.token_begin, spans.n_seqs, t);
  const int32_t pos = spans.start_pos[s] + (t - spans.token_begin[s]);
  const int32_t* table = spans.block_tables + spans.table_begin[s];
  const int32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int32_t n_blocks = kv.n_kv_heads * kv.head_dim / kQ8Block;
  for (int32_t qb = warp; qb < n_blocks; qb += warps) {
    const int32_t e = qb * kQ8Block, h = e / kv.head_dim, d = e % kv.head_dim;
    const int64_t at = q8_bytes(kv_slot(table, pos, h, kv.block_size, kv.head_dim, kv.block_stride) + d);
    for (int kind = 0; kind < 2; ++kind) {
      const float x = (kind == 0 ? k : v)[t * ld + e + lane];
      float amax = fabsf(x);
      for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
      const float delta = q8_delta(amax);
      uint8_t* block = static_cast<uint8_t*>(kind == 0 ? kv.keys : kv.values) + at;
      if (lane == 0) {
        const uint16_t dh = f32_to_f16(delta);
        block[0] = uint8_t(dh & 0xffu);
        block[1] = uint8_t(dh >> 8);
      }
      block[2 + lane] = q8_quantize(x, q8_inverse(delta));
    }
  }
}

// blockIdx.y picks the pair; the block strides over its 16-byte words.
__global__ void copy_blocks_kernel(uint4* pool, int64_t words_per_block, const int32_t* pairs) {
  const int64_t src = int64_t(pairs[2 * blockIdx.y]) * words_per_block;
  const int64_t dst = int64_t(pairs[2 * blockIdx.y + 1]) * words_per_block;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < words_per_block;
       i += int64_t(gridDim.x) * blockDim.x)
    pool[dst + i] = pool[src + i];
}

}  // namespace

cudaError_t write_kv(const float* k, const float* v, int64_t ld, int32_t n_tokens, const SpanTable& spans,
                     const PagedKvView& kv, cudaStream_t stream) {
  if (n_tokens == 0) return cudaSuccess;
  const int threads = 128;
  switch (kv.dtype) {
    case KvDtype::f16: write_kv_kernel<1><<<n_tokens, threads, 0, stream>>>(k, v, ld, spans, kv); break;
    case KvDtype::bf16: write_kv_kernel<2><<<n_tokens, threads, 0, stream>>>(k, v, ld, spans, kv); break;
    case KvDtype::q8_0:
      if (kv.head_dim % kQ8Block != 0) return cudaErrorInvalidValue;
      write_kv_q8_kernel<<<n_tokens, threads, 0, stream>>>(k, v, ld, spans, kv);
      break;
    default: write_kv_kernel<0><<<n_tokens, threads, 0, stream>>>(k, v, ld, spans, kv); break;
  }
  return cudaGetLastError();
}

cudaError_t copy_blocks(void* pool, int64_t block_bytes, const int32_t* pairs, int32_t n_pairs,
                        cudaStream_t stream) {
  if (n_pairs == 0) return cudaSuccess;
  if (block_bytes % 16 != 0 || n_pairs > 65535) return cudaErrorInvalidValue;
  const int64_t words = block_bytes / 16;
  const int threads = 256;
  const int64_t wanted = (words + threads - 1) / threads;
  const unsigned chunks = unsigned(wanted < 64 ? wanted : 64);
  copy_blocks_kernel<<<dim3(chunks, n_pairs), threads, 0, stream>>>(static_cast<uint4*>(pool), words, pairs);
  return cudaGetLastError();
}

}  // namespace conveyor::kernels::cuda
