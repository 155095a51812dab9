// Each CUDA kernel (kernels/cuda/kernels.hpp) on a device against its CPU
// twin on random inputs: shapes, block sizes, GQA ratios and KV dtypes. On a
// machine without a device every test skips and says why; the release build
// also runs them on the emulated device (tests/cuda_emulator/simt.hpp), as
// Emulated.CudaKernels.*.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "kernels/cuda/kernels.hpp"
#include "model/sampling/sampler.hpp"
#include "tests/cuda_device.hpp"
#include "tests/kernels/cuda/fixtures.hpp"

namespace conveyor::kernels::cuda {
namespace {

using testing::make_batch;
using testing::random_vector;
using testing::relative_error;

#define CUDA_OK(expr)                                                        \
  do {                                                                       \
    const cudaError_t launched = (expr);                                     \
    ASSERT_EQ(launched, cudaSuccess) << #expr << ": " << cudaGetErrorString(launched); \
    const cudaError_t ran = cudaDeviceSynchronize();                         \
    ASSERT_EQ(ran, cudaSuccess) << #expr << ": " << cudaGetErrorString(ran); \
  } while (0)

// Device memory holding a copy of a host vector.
template <class T>
class Device {
 public:
  explicit Device(size_t n) : n_(n) { cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T)); }
  explicit Device(const std::vector<T>& host) : Device(host.size()) {
    cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~Device() { cudaFree(p_); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  T* get() const { return p_; }
  std::vector<T> read() const {
    std::vector<T> out(n_);
    cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return out;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

TEST(CudaKernels, RmsNormMatchesTheCpu) {
  SKIP_WITHOUT_DEVICE();
  for (int32_t dim : {7, 64, 288, 4096}) {
    const int32_t n = 9;
    const auto x = random_vector(size_t(n) * dim, 1 + dim, -3.0f, 3.0f), w = random_vector(size_t(dim), 2);
    std::vector<float> cpu(x.size());
    kernels::rmsnorm(x.data(), dim, n, dim, w.data(), 1e-5f, cpu.data(), dim);
    Device<float> dx(x), dw(w), dout(x.size());
    CUDA_OK(rmsnorm(dx.get(), dim, n, dim, dw.get(), 1e-5f, dout.get(), dim, nullptr));
    EXPECT_LT(relative_error(dout.read().data(), cpu.data(), cpu.size()), 1e-5) << dim;
  }
}

TEST(CudaKernels, RopeMatchesTheCpuInBothLayouts) {
  SKIP_WITHOUT_DEVICE();
  const int32_t hd = 64, rot = 48, heads = 6, n = 5, n_pos = 4096;
  std::vector<float> table(size_t(rope_table_floats(rot, n_pos)));
  kernels::rope_table(500000.0f, rot, n_pos, table.data());
  const std::vector<int32_t> positions = {0, 3, 100, 2047, 4095};
  for (RopeStyle style : {RopeStyle::adjacent_pairs, RopeStyle::half_split}) {
    auto cpu = random_vector(size_t(n) * heads * hd, 3);
    Device<float> dx(cpu), dt(table);
    Device<int32_t> dp(positions);
    kernels::rope_apply(cpu.data(), heads * hd, n, heads, hd, rot, style, positions.data(), table.data());
    CUDA_OK(rope_apply(dx.get(), heads * hd, n, heads, hd, rot, style, dp.get(), dt.get(), nullptr));
    EXPECT_LT(relative_error(dx.read().data(), cpu.data(), cpu.size()), 1e-6);
  }
}

TEST(CudaKernels, SwiGluAndEmbeddingMatchTheCpu) {
  SKIP_WITHOUT_DEVICE();
  const int32_t n = 3, hidden = 1000;
  const auto both = random_vector(size_t(n) * 2 * hidden, 4, -10.0f, 10.0f);
  std::vector<float> cpu(size_t(n) * hidden);
  kernels::swiglu(both.data(), both.data() + hidden, 2 * hidden, n, hidden, cpu.data(), hidden);
  Device<float> din(both), dout(cpu.size());
  CUDA_OK(swiglu(din.get(), din.get() + hidden, 2 * hidden, n, hidden, dout.get(), hidden, nullptr));
  EXPECT_LT(relative_error(dout.read().data(), cpu.data(), cpu.size()), 1e-5);

  const int32_t vocab = 100, dim = 40;
  const auto values = random_vector(size_t(vocab) * dim, 5);
  std::vector<uint16_t> table(values.size());
  for (size_t i = 0; i < values.size(); ++i) table[i] = kv_half::f32_to_bf16(values[i]);
  const std::vector<int32_t> tokens = {5, 0, 99, 5};
  Device<uint16_t> dtable(table);
  Device<int32_t> dtokens(tokens);
  Device<float> drows(tokens.size() * dim);
  CUDA_OK(embedding_gather(dtable.get(), dim, dtokens.get(), int32_t(tokens.size()), drows.get(), nullptr));
  const auto rows = drows.read();
  for (size_t t = 0; t < tokens.size(); ++t)
    for (int32_t i = 0; i < dim; ++i)
      ASSERT_EQ(rows[t * dim + i], kv_half::bf16_to_f32(table[size_t(tokens[t]) * dim + i]));
}

// The batch's index arrays on the device.
struct DeviceSpans {
  explicit DeviceSpans(const testing::Batch& b)
      : begin(b.token_begin), start(b.start_pos), tables(b.block_tables), table_begin(b.table_begin) {}
  SpanTable table(int32_t n_seqs) const {
    return {n_seqs, begin.get(), start.get(), tables.get(), table_begin.get()};
  }
  Device<int32_t> begin, start, tables, table_begin;
};

const std::vector<int32_t> kStarts = {1500, 5, 0, 300, 10, 0, 257};
const std::vector<int32_t> kSpans = {1, 1, 64, 20, 0, 1, 1};

TEST(CudaKernels, KvWritesAndAttentionMatchTheCpu) {
  SKIP_WITHOUT_DEVICE();
  struct Shape {
    int32_t n_heads, n_kv_heads, head_dim;
  };
  struct Case {
    KvDtype dtype;
    int32_t bs;
    Shape s;
  };
  // On a device, every dtype, block size and shape. On the emulated device,
  // where a case takes about a second (several under TSan), fewer
  // (CONVEYOR_EMULATED_CASES): each shape in each dtype, the block size in
  // turn (1); for the race check, each dtype, block size and head size once,
  // 1 to 8 query heads to a KV head (2).
  const Shape shapes[] = {{8, 8, 64}, {8, 4, 64}, {16, 4, 128}, {32, 4, 128}, {14, 2, 64}, {8, 2, 256}, {4, 2, 48}};
  const KvDtype dtypes[] = {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::q8_0};
  const int32_t block_sizes[] = {8, 16, 32};
  std::vector<Case> cases;
#if CONVEYOR_EMULATED_CASES == 2
  cases = {{dtypes[0], block_sizes[0], shapes[0]}, {dtypes[1], block_sizes[1], shapes[4]},
           {dtypes[2], block_sizes[2], shapes[3]}, {dtypes[1], block_sizes[0], {16, 2, 256}},
           {dtypes[2], block_sizes[1], shapes[6]}, {dtypes[3], block_sizes[1], shapes[2]}};
#elif CONVEYOR_EMULATED_CASES == 1
  for (int d = 0; d < 4; ++d)
    for (int i = 0; i < 7; ++i) cases.push_back({dtypes[d], block_sizes[(d + i) % 3], shapes[i]});
#else
  for (KvDtype dtype : dtypes)
    for (int32_t bs : block_sizes)
      for (const Shape& s : shapes) cases.push_back({dtype, bs, s});
#endif
  for (const auto& [dtype, bs, s] : cases) {
    if (!kv_dtype_fits(dtype, s.head_dim)) continue;  // q8_0: heads a multiple of 32
    SCOPED_TRACE(std::string(kv_dtype_name(dtype)) + " block " + std::to_string(bs) + " heads " +
                 std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) + " dim " +
                 std::to_string(s.head_dim));
    auto b = make_batch(s.n_heads, s.n_kv_heads, s.head_dim, bs, dtype, kStarts, kSpans, 7 + bs);
    Device<std::byte> pool(b.pool);
    Device<float> q(b.q), k(b.k), v(b.v), out(size_t(b.n_tokens()) * b.q_width());
    DeviceSpans spans(b);
    CUDA_OK(write_kv(k.get(), v.get(), b.kv_width(), b.n_tokens(), spans.table(b.n_seqs()), b.view(pool.get()),
                     nullptr));
    kernels::write_kv(b.k.data(), b.v.data(), b.kv_width(), b.spans(), b.view(b.pool.data()));
    ASSERT_EQ(pool.read(), b.pool);  // bit for bit

    Device<std::byte> ws(size_t(paged_attention_workspace_bytes(b.n_tokens(), b.n_heads, b.head_dim,
                                                                b.max_context())));
    CUDA_OK(paged_attention(q.get(), b.q_width(), b.n_tokens(), b.n_heads, spans.table(b.n_seqs()),
                            b.view(pool.get()), b.max_context(), out.get(), b.q_width(), ws.get(), nullptr));
    std::vector<float> cpu(size_t(b.n_tokens()) * b.q_width());
    AttentionWorkspace cpu_ws;
    cpu_ws.widen_keys = true;  // as the CUDA kernel
    kernels::paged_attention(b.q.data(), b.q_width(), b.n_heads, b.spans(), b.view(b.pool.data()), cpu.data(),
                             b.q_width(), cpu_ws);
    EXPECT_LT(relative_error(out.read().data(), cpu.data(), cpu.size()), 1e-5);
  }
}

TEST(CudaKernels, BlockCopiesMoveWholeBlocks) {
  SKIP_WITHOUT_DEVICE();
  const int64_t block_bytes = 4096;
  std::vector<std::byte> host(8 * block_bytes);
  for (size_t i = 0; i < host.size(); ++i) host[i] = std::byte(i * 7 + i / 4096);
  Device<std::byte> pool(host);
  const std::vector<int32_t> pairs = {1, 3, 1, 6, 0, 7};
  Device<int32_t> dpairs(pairs);
  CUDA_OK(copy_blocks(pool.get(), block_bytes, dpairs.get(), 3, nullptr));
  for (size_t p = 0; p < 3; ++p)
    std::memcpy(host.data() + pairs[2 * p + 1] * block_bytes, host.data() + pairs[2 * p] * block_bytes, block_bytes);
  EXPECT_EQ(pool.read(), host);
}

TEST(CudaKernels, FillTokensPutsThePreviousSamplesInPlaceholders) {
  SKIP_WITHOUT_DEVICE();
  std::vector<int32_t> tokens(600);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(i);
  std::vector<int32_t> picks(300), pairs;
  for (size_t i = 0; i < picks.size(); ++i) picks[i] = int32_t(1000 + i * 3);
  for (int32_t i = 0; i < 300; ++i) pairs.insert(pairs.end(), {2 * i + 1, 299 - i});  // more than one block
  Device<int32_t> dtokens(tokens), dpicks(picks), dpairs(pairs);
  CUDA_OK(fill_tokens(dtokens.get(), dpairs.get(), 300, dpicks.get(), nullptr));
  for (size_t i = 0; i < 300; ++i) tokens[size_t(pairs[2 * i])] = picks[size_t(pairs[2 * i + 1])];
  EXPECT_EQ(dtokens.read(), tokens);
}

// The forward pass's glue (rows.cu) on strided rows: per-head RMSNorm of the
// first heads only, bias adds and the bf16 conversion over rows wider than a
// block, row gathers; what they must not write stays as it was.
TEST(CudaKernels, HeadNormBiasGatherAndBf16MatchTheCpu) {
  SKIP_WITHOUT_DEVICE();
  for (int32_t head_dim : {64, 200}) {
    const int32_t n = 5, n_heads = 3, ldx = 4 * head_dim + 7;
    const auto x = random_vector(size_t(n) * ldx, 11 + head_dim, -3.0f, 3.0f), w = random_vector(size_t(head_dim), 12);
    std::vector<float> cpu = x;
    for (int32_t t = 0; t < n; ++t) {
      float* row = cpu.data() + size_t(t) * ldx;
      kernels::rmsnorm(row, head_dim, n_heads, head_dim, w.data(), 1e-6f, row, head_dim);
    }
    Device<float> dx(x), dw(w);
    CUDA_OK(head_rmsnorm(dx.get(), ldx, n, n_heads, head_dim, dw.get(), 1e-6f, nullptr));
    const auto got = dx.read();
    EXPECT_LT(relative_error(got.data(), cpu.data(), cpu.size()), 1e-5) << head_dim;
    for (int32_t t = 0; t < n; ++t)
      for (int32_t i = n_heads * head_dim; i < ldx; ++i)
        ASSERT_EQ(got[size_t(t) * ldx + i], x[size_t(t) * ldx + i]) << "head_dim " << head_dim << " row " << t;
  }

  const int32_t n = 6, cols = 700, ldx = 709, ldo = 703;
  const auto x = random_vector(size_t(n) * ldx, 13, -3.0f, 3.0f), bias = random_vector(size_t(cols), 14);
  std::vector<float> biased = x;
  for (int32_t t = 0; t < n; ++t)
    for (int32_t i = 0; i < cols; ++i) biased[size_t(t) * ldx + i] += bias[size_t(i)];
  Device<float> dx(x), dbias(bias);
  CUDA_OK(add_bias(dx.get(), ldx, n, cols, dbias.get(), nullptr));
  EXPECT_EQ(dx.read(), biased);

  const std::vector<int32_t> rows = {5, 0, 5, 2};
  std::vector<float> gathered(rows.size() * ldo, -7.0f);
  Device<float> dgathered(gathered);
  Device<int32_t> drows(rows);
  CUDA_OK(gather_rows(dx.get(), ldx, drows.get(), int32_t(rows.size()), cols, dgathered.get(), ldo, nullptr));
  for (size_t r = 0; r < rows.size(); ++r)
    std::copy_n(biased.begin() + rows[r] * ldx, cols, gathered.begin() + r * ldo);
  EXPECT_EQ(dgathered.read(), gathered);

  std::vector<uint16_t> halves(size_t(n) * ldo, 0xbeef);
  Device<uint16_t> dhalves(halves);
  CUDA_OK(to_bf16(dx.get(), ldx, n, cols, dhalves.get(), ldo, nullptr));
  for (int32_t t = 0; t < n; ++t)
    for (int32_t i = 0; i < cols; ++i) halves[size_t(t) * ldo + i] = kv_half::f32_to_bf16(biased[size_t(t) * ldx + i]);
  EXPECT_EQ(dhalves.read(), halves);
}

// Penalties, top-k, top-p, min-p and the draw against the CPU Sampler, the
// host drawing each row's uniform from a generator seeded as the Sampler's.
TEST(CudaKernels, SamplingGivesTheCpuSamplersIds) {
  SKIP_WITHOUT_DEVICE();
  const int32_t rows = 6, vocab = 32000;
  const float temps[rows] = {0.0f, 1.0f, 0.7f, 1.3f, 0.9f, 0.0f};
  const float min_ps[rows] = {0, 0, 0.05f, 0, 0.02f, 0};
  const float reps[rows] = {1, 1, 1, 1.2f, 1.1f, 1.3f};
  const float freqs[rows] = {0, 0, 0, 0, 0.4f, 0.5f};
  const float pres[rows] = {0, 0, 0, 0, 0.3f, -0.2f};
  const int32_t top_ks[rows] = {0, 40, 0, 50, 0, 3};
  const float top_ps[rows] = {1, 1, 0.9f, 0.8f, 0.95f, 1};
  std::vector<float> logits = random_vector(size_t(rows) * vocab, 8, -4.0f, 4.0f);
  std::vector<int32_t> seen_begin{0}, seen, gen_begin{0}, generated, gen_counts;
  std::vector<double> uniforms;
  std::vector<int32_t> want;
  for (int32_t r = 0; r < rows; ++r) {
    SamplingParams p;
    p.temperature = temps[r];
    p.min_p = min_ps[r];
    p.repetition_penalty = reps[r];
    p.frequency_penalty = freqs[r];
    p.presence_penalty = pres[r];
    p.top_k = top_ks[r];
    p.top_p = top_ps[r];
    p.seed = 77 + r;
    p.has_seed = true;
    const std::vector<int32_t> prompt = {r, 100 + r, 5000};
    for (int32_t t : prompt) seen.push_back(t);
    seen_begin.push_back(int32_t(seen.size()));
    generated.insert(generated.end(), {7, 9});
    gen_counts.insert(gen_counts.end(), {2, 1});
    gen_begin.push_back(int32_t(generated.size()));
    std::mt19937_64 rng(p.seed);
    // Sampler state as if it had generated 7, 7, 9 (seen then holds them too).
    seen.insert(seen.end() - 3, {7, 9});
    seen_begin.back() += 2;
    Sampler cpu(p, prompt);
    std::vector<float> row(logits.begin() + size_t(r) * vocab, logits.begin() + size_t(r + 1) * vocab);
    for (int32_t t : {7, 7, 9}) {  // make the Sampler record them, with rows where they win
      std::vector<float> forced(size_t(vocab), -100.0f);
      forced[size_t(t)] = 100.0f;
      (void)cpu.sample(forced);
      if (p.temperature >= kGreedyTemperature) (void)rng();  // the Sampler drew a uniform for each
    }
    want.push_back(cpu.sample(row).token);
    uniforms.push_back(double(rng() >> 11) * 0x1.0p-53);
  }
  // The lists need not be sorted here: no row has a pending sample to look up in them.
  Device<float> dl(logits), dt(std::vector<float>(temps, temps + rows)), dm(std::vector<float>(min_ps, min_ps + rows)),
      dr(std::vector<float>(reps, reps + rows)), df(std::vector<float>(freqs, freqs + rows)),
      dp(std::vector<float>(pres, pres + rows)), dtp(std::vector<float>(top_ps, top_ps + rows));
  Device<int32_t> dtk(std::vector<int32_t>(top_ks, top_ks + rows)), dsb(seen_begin), ds(seen), dgb(gen_begin), dg(generated), dgc(gen_counts), dtok(static_cast<size_t>(rows));
  Device<double> du(uniforms);
  CUDA_OK(apply_penalties(dl.get(), rows, vocab,
                          RowPenalties{dr.get(), df.get(), dp.get(), dsb.get(), ds.get(), dgb.get(), dg.get(),
                                       dgc.get(), nullptr, nullptr},
                          nullptr));
  CUDA_OK(sample_rows(dl.get(), rows, vocab, RowSampling{dt.get(), dm.get(), dtk.get(), dtp.get(), du.get()},
                      dtok.get(), nullptr));
  EXPECT_EQ(dtok.read(), want);
}

// The draw on rows full of ties, with NaN, -inf and -0, and vocabularies
// smaller than a block: each row's id is the CPU Sampler's for the same seed
// (sample_kernel's block-wide histograms and tie search, whose arithmetic
// math_test checks on a host thread).
TEST(CudaKernels, SamplingOnTiedAndNonFiniteRowsGivesTheCpuSamplersIds) {
  SKIP_WITHOUT_DEVICE();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Case {
    float temperature, min_p;
    int32_t top_k;
    float top_p;
  };
  const Case cases[] = {{0.0f, 0, 0, 1},      {1.0f, 0, 0, 1},      {0.7f, 0.05f, 0, 1}, {1.0f, 0, 40, 1},
                        {1.5f, 0, 0, 0.9f},   {0.8f, 0.01f, 50, 0.8f}, {1.2f, 0, 3, 0.5f}, {2.0f, 0, 0, 0.99f},
                        {1.0f, 0, 1, 1},      {0.9f, 0, 2, 0.05f}};
  constexpr int32_t kRows = 8;
  std::mt19937 pick(11);
  for (int32_t vocab : {1, 97, 5000, 32000})
    for (const Case& c : cases) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + " temperature " + std::to_string(c.temperature) + " top_k " +
                   std::to_string(c.top_k) + " top_p " + std::to_string(c.top_p));
      std::vector<float> logits;
      std::vector<double> uniforms;
      std::vector<int32_t> want;
      for (int32_t r = 0; r < kRows; ++r) {
        auto row = random_vector(size_t(vocab), 500 + r + vocab, -6.0f, 6.0f);
        for (float& x : row) x = std::round(x * 2.0f) / 2.0f;  // many ties
        if (vocab > 2 && r % 2 == 1) {
          row[pick() % vocab] = nan;
          row[pick() % vocab] = -inf;
          row[pick() % vocab] = -0.0f;
        }
        SamplingParams p;
        p.temperature = c.temperature;
        p.min_p = c.min_p;
        p.top_k = c.top_k;
        p.top_p = c.top_p;
        p.seed = 900 + uint64_t(r);
        p.has_seed = true;
        Sampler cpu(p, {});
        std::vector<float> scratch = row;
        want.push_back(cpu.sample(scratch).token);
        std::mt19937_64 rng(p.seed);
        uniforms.push_back(double(rng() >> 11) * 0x1.0p-53);
        logits.insert(logits.end(), row.begin(), row.end());
      }
      auto per_row = [&](auto v) { return std::vector<decltype(v)>(size_t(kRows), v); };
      Device<float> dl(logits), dt(per_row(c.temperature)), dm(per_row(c.min_p)), dtp(per_row(c.top_p));
      Device<int32_t> dtk(per_row(c.top_k)), dtok(static_cast<size_t>(kRows));
      Device<double> du(uniforms);
      CUDA_OK(sample_rows(dl.get(), kRows, vocab, RowSampling{dt.get(), dm.get(), dtk.get(), dtp.get(), du.get()},
                          dtok.get(), nullptr));
      EXPECT_EQ(dtok.read(), want);
    }
}

// A sample still on the device only (a pipelined step's): the penalties
// count it as the CPU Sampler does once it has recorded it, whether it was
// generated before, only in the prompt, or new; logits equal bit for bit.
TEST(CudaKernels, PenaltiesCountTheSampleStillOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  const int32_t rows = 4, vocab = 1000;
  std::vector<float> logits = random_vector(size_t(rows) * vocab, 12, -4.0f, 4.0f);
  const int32_t pending[rows] = {7, 500, 42, 9};  // generated, in the prompt, new, generated (no penalty)
  const std::vector<int32_t> previous_picks = {0, 9, 42, 7, 500};
  const std::vector<int32_t> previous_row = {3, 4, 2, 1};
  std::vector<float> want = logits;
  std::vector<float> reps, freqs, pres;
  std::vector<int32_t> seen_begin{0}, seen, gen_begin{0}, generated, gen_counts;
  for (int32_t r = 0; r < rows; ++r) {
    SamplingParams p;
    p.repetition_penalty = r == 3 ? 1.0f : 1.25f;
    p.frequency_penalty = r == 3 ? 0.0f : 0.5f;
    p.presence_penalty = r == 3 ? 0.0f : 0.25f;
    const std::vector<int32_t> prompt = {500, 3, 800};
    Sampler cpu(p, prompt);
    for (int32_t t : {7, 9, 7, 11}) cpu.accept(t);
    reps.push_back(p.repetition_penalty);
    freqs.push_back(p.frequency_penalty);
    pres.push_back(p.presence_penalty);
    for (int32_t t : cpu.seen_tokens()) seen.push_back(t);
    seen_begin.push_back(int32_t(seen.size()));
    for (const auto& [t, n] : cpu.generated_counts()) {
      generated.push_back(t);
      gen_counts.push_back(n);
    }
    gen_begin.push_back(int32_t(generated.size()));
    ASSERT_EQ(previous_picks[size_t(previous_row[size_t(r)])], pending[r]);
    cpu.accept(pending[r]);
    cpu.apply_penalties(std::span(want).subspan(size_t(r) * vocab, size_t(vocab)));
  }
  Device<float> dl(logits), dr(reps), df(freqs), dp(pres);
  Device<int32_t> dsb(seen_begin), ds(seen), dgb(gen_begin), dg(generated), dgc(gen_counts), dpr(previous_row),
      dpp(previous_picks);
  CUDA_OK(apply_penalties(dl.get(), rows, vocab,
                          RowPenalties{dr.get(), df.get(), dp.get(), dsb.get(), ds.get(), dgb.get(), dg.get(),
                                       dgc.get(), dpr.get(), dpp.get()},
                          nullptr));
  EXPECT_EQ(dl.read(), want);
}

}  // namespace
}  // namespace conveyor::kernels::cuda
