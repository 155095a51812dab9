#include "kernels/cpu/matmul_dnnl.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <vector>

namespace conveyor::kernels {

namespace {

using dnnl::memory;
using dt = memory::data_type;

struct FreeBytes {
  void operator()(void* p) const { std::free(p); }
};

// Large reordered matrices go on transparent huge pages, like the packed ones
// (kernels/cpu/README.md: 4 KiB pages cost a third of the read bandwidth).
std::unique_ptr<void, FreeBytes> alloc_weights(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
  if (align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);  // advice: failure is harmless
  return std::unique_ptr<void, FreeBytes>(p);
}

}  // namespace

struct DnnlMatmul::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  int32_t m = 0, k = 0;
  memory::desc w_desc;  // the primitive's preferred (blocked) layout
  std::unique_ptr<void, FreeBytes> w_data;
  memory w_mem;

  // One primitive per call shape; its src/dst memory objects get the
  // caller's pointers on every call.
  struct Entry {
    int32_t n;
    int64_t ldx, ldy;
    bool accumulate;
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
    memory src, dst, scratch;
    dnnl_exec_arg_t args[4];
  };
  std::vector<std::unique_ptr<Entry>> cache;

  // The matmul of x [n, k] (row stride ldx) by W viewed as [k, m] (weights
  // `wd`), into y [n, m] (row stride ldy).
  dnnl::matmul::primitive_desc make_pd(int32_t n, int64_t ldx, int64_t ldy, bool accumulate,
                                       const memory::desc& wd) const {
    const memory::desc src({n, k}, dt::f32, memory::dims{ldx, 1});
    const memory::desc dst({n, m}, dt::f32, memory::dims{ldy, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wd, dst), attr, engine);
  }

  Entry& entry(int32_t n, int64_t ldx, int64_t ldy, bool accumulate) {
    for (const std::unique_ptr<Entry>& e : cache)
      if (e->n == n && e->ldx == ldx && e->ldy == ldy && e->accumulate == accumulate) return *e;
    auto e = std::make_unique<Entry>();
    e->n = n;
    e->ldx = ldx;
    e->ldy = ldy;
    e->accumulate = accumulate;
    e->pd = make_pd(n, ldx, ldy, accumulate, w_desc);
    e->prim = dnnl::matmul(e->pd);
    e->src = memory(e->pd.src_desc(), engine, DNNL_MEMORY_NONE);
    e->dst = memory(e->pd.dst_desc(), engine, DNNL_MEMORY_NONE);
    e->scratch = memory(e->pd.scratchpad_desc(), engine);
    e->args[0] = {DNNL_ARG_SRC, e->src.get()};
    e->args[1] = {DNNL_ARG_WEIGHTS, w_mem.get()};
    e->args[2] = {DNNL_ARG_DST, e->dst.get()};
    e->args[3] = {DNNL_ARG_SCRATCHPAD, e->scratch.get()};
    cache.push_back(std::move(e));
    return *cache.back();
  }
};

DnnlMatmul::DnnlMatmul() = default;
DnnlMatmul::~DnnlMatmul() = default;
DnnlMatmul::DnnlMatmul(DnnlMatmul&&) noexcept = default;
DnnlMatmul& DnnlMatmul::operator=(DnnlMatmul&&) noexcept = default;

DnnlMatmul::DnnlMatmul(const float* w, int32_t m, int32_t k) : impl_(new Impl) {
  Impl& d = *impl_;
  d.m = m;
  d.k = k;
  // Ask for the layout with weights `any` at a decode batch size; the brgemm
  // layout it picks is the same for every n (checked at n = 1..512).
  const memory::desc any({k, m}, dt::f32, memory::format_tag::any);
  d.w_desc = d.make_pd(32, k, m, false, any).weights_desc();
  d.w_data = alloc_weights(d.w_desc.get_size());
  d.w_mem = memory(d.w_desc, d.engine, d.w_data.get());
  // W [m, k] row-major is the [k, m] weights matrix in `ba` order.
  const memory::desc plain({k, m}, dt::f32, memory::format_tag::ba);
  memory src(plain, d.engine, const_cast<float*>(w));
  dnnl::reorder(src, d.w_mem).execute(d.stream, src, d.w_mem);
  d.stream.wait();
}

int32_t DnnlMatmul::rows() const { return impl_->m; }
int32_t DnnlMatmul::cols() const { return impl_->k; }
size_t DnnlMatmul::packed_bytes() const { return impl_->w_desc.get_size(); }

const char* DnnlMatmul::implementation(int32_t n) {
  return impl_->entry(n, impl_->k, impl_->m, false).pd.impl_info_str();
}

void DnnlMatmul::run(const float* x, int64_t ldx, int32_t n, float* y, int64_t ldy,
                     bool accumulate) {
  if (n <= 0) return;
  Impl& d = *impl_;
  Impl::Entry& e = d.entry(n, ldx, ldy, accumulate);
  // The C API: set the handles and execute with the stored argument array
  // (the C++ execute() takes an unordered_map, one allocation per call).
  dnnl_memory_set_data_handle(e.src.get(), const_cast<float*>(x));
  dnnl_memory_set_data_handle(e.dst.get(), y);
  const dnnl_status_t s = dnnl_primitive_execute(e.prim.get(), d.stream.get(), 4, e.args);
  if (s != dnnl_success) throw std::runtime_error("dnnl matmul failed");
}

}  // namespace conveyor::kernels
