// The fiber scheduler behind simt.hpp: each block's threads are fibers on
// the stream's thread, run in index order until each finishes or waits at a
// barrier; a barrier opens once every thread it waits for is there. On
// x86-64 a fiber switch is a few instructions (below); elsewhere ucontext's,
// which costs a system call each.
//
// Built with CONVEYOR_SIMT_RACECHECK (the TSan build: this file itself
// uninstrumented, the kernels instrumented), each thread is also a TSan
// fiber, switched to without synchronising, and the only order between the
// threads of a block is the one the device guarantees: __syncthreads orders
// what each thread did before it before what any did after it. A shuffle
// exchanges its values and orders no memory, as on a device (that takes
// __syncwarp, which the kernels do not use). So ThreadSanitizer reports two
// threads of a block touching the same memory, one of them writing, with no
// __syncthreads between, whatever order the fibers happen to run in. Blocks,
// and the stream's work before and after each, stay ordered one after
// another: races between blocks are not checked.
#include "tests/cuda_emulator/simt.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/cuda_emulator/emulator.hpp"

#ifndef CONVEYOR_SIMT_RACECHECK
#define CONVEYOR_SIMT_RACECHECK 0
#endif
#if CONVEYOR_SIMT_RACECHECK
#include <sanitizer/tsan_interface.h>
#endif

#if defined(__x86_64__)
// conveyor_simt_switch(&from, to): saves the callee-saved registers on the
// current stack, stores its pointer in *from, and resumes the stack `to`
// saved the same way. The floating-point control words are the thread's, the
// same for every fiber (no kernel changes them), so they stay where they are.
asm(R"(
  .text
  .globl conveyor_simt_switch
  .type conveyor_simt_switch, @function
conveyor_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size conveyor_simt_switch, .-conveyor_simt_switch
  .section .note.GNU-stack, "", @progbits
  .text
)");
extern "C" void conveyor_simt_switch(void** from, void* to);
#endif

namespace conveyor::cuda_emulator::simt {

thread_local uint3 thread_index, block_index;
thread_local dim3 block_size, grid_size;

namespace {

constexpr int kWarp = 32;
constexpr size_t kStackBytes = size_t(256) << 10;  // touched pages only; a guard page below

enum class State { ready, at_block, at_warp, done };

#if defined(__x86_64__)
struct Context {
  void* sp = nullptr;
};

// A context that starts `entry` on [stack, stack + bytes); `entry` never returns.
void prepare(Context& c, const Context&, char* stack, size_t bytes, void (*entry)()) {
  auto* top = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t(15));
  top[-1] = 0;                                   // entry's return address: none
  top[-2] = reinterpret_cast<uint64_t>(entry);   // where the switch's `ret` goes
  for (int r = 3; r <= 8; ++r) top[-r] = 0;      // rbp, rbx, r12-r15
  c.sp = &top[-8];
}

void jump(Context& from, Context& to) { conveyor_simt_switch(&from.sp, to.sp); }
#else
struct Context {
  ucontext_t uc;
};

void prepare(Context& c, const Context& scheduler, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = const_cast<ucontext_t*>(&scheduler.uc);
  makecontext(&c.uc, entry, 0);
}

void jump(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
#endif

// A fiber's stack, mapped once per stream thread and reused; its lowest
// page is a guard, so an overflow faults instead of corrupting.
class Stack {
 public:
  Stack() : page_(size_t(sysconf(_SC_PAGESIZE))) {
    base_ = static_cast<char*>(mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) {
      std::perror("simt: mmap");
      std::abort();
    }
    mprotect(base_, page_, PROT_NONE);
  }
  ~Stack() { munmap(base_, kStackBytes); }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  char* usable() const { return base_ + page_; }
  size_t usable_bytes() const { return kStackBytes - page_; }

 private:
  size_t page_;
  char* base_;
};

#if CONVEYOR_SIMT_RACECHECK
void* race_fiber_create() { return __tsan_create_fiber(0); }
void race_fiber_destroy(void* fiber) { __tsan_destroy_fiber(fiber); }
void* race_current_fiber() { return __tsan_get_current_fiber(); }
void race_switch(void* fiber) { __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync); }
void race_release(const void* key) { __tsan_release(const_cast<void*>(key)); }
void race_acquire(const void* key) { __tsan_acquire(const_cast<void*>(key)); }
// A report names the two threads: "kernel K, block (x, y, z), thread (x, y, z)".
void race_name(void* fiber, const char* kernel, uint3 block, uint3 thread) {
  char name[256];
  std::snprintf(name, sizeof name, "kernel %s, block (%u, %u, %u), thread (%u, %u, %u)", kernel, block.x, block.y,
                block.z, thread.x, thread.y, thread.z);
  __tsan_set_fiber_name(fiber, name);
}
#else
void* race_fiber_create() { return nullptr; }
void race_fiber_destroy(void*) {}
void* race_current_fiber() { return nullptr; }
void race_switch(void*) {}
void race_release(const void*) {}
void race_acquire(const void*) {}
void race_name(void*, const char*, uint3, uint3) {}
#endif

// One block's run; one per stream thread, reused across blocks.
struct Block {
  Context scheduler;
  std::vector<std::unique_ptr<Stack>> stacks;
  std::vector<Context> fibers;
  std::vector<State> state;
  std::vector<uint64_t> exchange[2];  // shuffles' values, by thread, for alternate shuffles
  std::vector<uint8_t> parity;         // which of them each thread's next shuffle uses
  const std::function<void()>* body = nullptr;
  int current = 0, n = 0;
  int step = 1;  // the order threads run in between barriers: 1 by index, -1 the reverse

  // Race checking (CONVEYOR_SIMT_RACECHECK; otherwise unused): the TSan
  // fiber of each thread and of the scheduler, and the addresses that stand
  // for the orders the device guarantees. `begun` is released by the
  // scheduler before a block and acquired by its threads as they start,
  // `ended` the reverse. A __syncthreads' arrivals release one of the two
  // `block_keys` and its departures acquire it, the other at the next
  // barrier: no thread acquires what another did after the barrier it is
  // leaving (the scheduler runs a thread on past it before the others leave).
  std::vector<void*> race_fibers;
  void* race_scheduler = nullptr;
  std::vector<uint8_t> block_parity;  // by thread: which address its next __syncthreads uses
  char begun = 0, ended = 0, block_keys[2] = {};

  Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() {
    for (void* fiber : race_fibers) race_fiber_destroy(fiber);
  }
};

thread_local Block* t_block = nullptr;
thread_local const char* t_kernel = nullptr;  // the kernel this stream thread runs

// A kernel touching memory outside its allocations hits a guard page
// (runtime.cpp): say which kernel, block and thread before the process dies.
void on_fault(int signal) {
  if (t_kernel != nullptr) {
    char line[512];
    const int n = std::snprintf(line, sizeof line,
                                "simt: kernel %s, block (%u, %u, %u), thread (%u, %u, %u): memory fault (outside "
                                "its allocations?)\n",
                                t_kernel, block_index.x, block_index.y, block_index.z, thread_index.x,
                                thread_index.y, thread_index.z);
    if (n > 0) (void)!write(2, line, size_t(std::min(n, int(sizeof line) - 1)));
  }
  ::signal(signal, SIG_DFL);
  raise(signal);
}

// Runs thread `to` of the block (or, with -1, the scheduler) instead of the
// caller, `from`'s context keeping where the caller stopped.
void switch_to(Block& b, Context& from, int to) {
  race_switch(to < 0 ? b.race_scheduler : b.race_fibers[to]);
  jump(from, to < 0 ? b.scheduler : b.fibers[to]);
}

void set_position(int i) {
  thread_index = uint3{unsigned(i) % block_size.x, unsigned(i) / block_size.x % block_size.y,
                       unsigned(i) / (block_size.x * block_size.y)};
}

// The first ready thread from `from` on, in the block's order; -1 if none.
int next_ready(const Block& b, int from) {
  for (int i = from; i >= 0 && i < b.n; i += b.step)
    if (b.state[i] == State::ready) return i;
  return -1;
}

// The running fiber stops (at a barrier, or done): on to the next ready
// thread in the block's order, or back to the scheduler after the last.
void yield(State at) {
  Block& b = *t_block;
  const int me = b.current;
  b.state[me] = at;
  const int next = next_ready(b, me + b.step);
  if (next < 0) {
    switch_to(b, b.fibers[me], -1);
    return;
  }
  b.current = next;
  set_position(next);
  switch_to(b, b.fibers[me], next);
}

void fiber_entry() {
  race_acquire(&t_block->begun);
  (*t_block->body)();
  race_release(&t_block->ended);
  yield(State::done);  // never resumed
  std::abort();
}

[[noreturn]] void fault(const char* kernel, const char* what) {
  std::fprintf(stderr, "simt: kernel %s, block (%u, %u, %u): %s\n", kernel, block_index.x, block_index.y,
               block_index.z, what);
  std::abort();
}

// Opens whatever barrier every thread it waits for has reached; false when
// none can open (a thread waits where others never will).
bool open_barriers(Block& b) {
  bool any_block = false, opened = false;
  for (int i = 0; i < b.n; ++i) any_block |= b.state[i] == State::at_block;
  for (int w = 0; w * kWarp < b.n; ++w) {
    const int begin = w * kWarp, end = std::min(b.n, begin + kWarp);
    int waiting = 0, others = 0;
    for (int i = begin; i < end; ++i) (b.state[i] == State::at_warp ? waiting : others) += 1;
    if (waiting == 0) continue;
    if (others != 0) return false;  // a lane finished, or waits at __syncthreads
    for (int i = begin; i < end; ++i) b.state[i] = State::ready;
    opened = true;
  }
  if (opened || !any_block) return opened;
  // __syncthreads: every thread still running is there (finished ones count
  // as arrived, as on the device).
  for (int i = 0; i < b.n; ++i)
    if (b.state[i] == State::at_block) b.state[i] = State::ready;
  return true;
}

void run_block(Block& b, const char* kernel) {
  for (int i = 0; i < b.n; ++i) {
    prepare(b.fibers[i], b.scheduler, b.stacks[i]->usable(), b.stacks[i]->usable_bytes(), fiber_entry);
    b.state[i] = State::ready;
    b.parity[i] = 0;
    b.block_parity[i] = 0;
    if (CONVEYOR_SIMT_RACECHECK) {
      set_position(i);
      race_name(b.race_fibers[i], kernel, block_index, thread_index);
    }
  }
  race_release(&b.begun);
  for (;;) {
    // A round: the first ready thread runs, and each passes on to the next.
    const int first = next_ready(b, b.step > 0 ? 0 : b.n - 1);
    if (first >= 0) {
      b.current = first;
      set_position(first);
      switch_to(b, b.scheduler, first);
    }
    bool all_done = true;
    for (int i = 0; i < b.n; ++i) all_done &= b.state[i] == State::done;
    if (all_done) {
      race_acquire(&b.ended);
      return;
    }
    if (!open_barriers(b)) fault(kernel, "threads wait at a barrier or shuffle the others never reach");
  }
}

void run_grid(const Config& c, const char* kernel, const std::function<void()>& body) {
  static thread_local Block block;
  Block& b = block;
  t_block = &b;
  b.body = &body;
  b.n = int(c.block.x * c.block.y * c.block.z);
  while (b.stacks.size() < size_t(b.n)) {
    b.stacks.push_back(std::make_unique<Stack>());
    if (CONVEYOR_SIMT_RACECHECK) b.race_fibers.push_back(race_fiber_create());
  }
  b.race_scheduler = race_current_fiber();
  b.fibers.resize(b.n);
  b.block_parity.resize(b.n);
  b.state.resize(b.n);
  b.exchange[0].resize(b.n);
  b.exchange[1].resize(b.n);
  b.parity.resize(b.n);
  block_size = c.block;
  grid_size = c.grid;
  t_kernel = kernel;
  for (unsigned z = 0; z < c.grid.z; ++z)
    for (unsigned y = 0; y < c.grid.y; ++y)
      for (unsigned x = 0; x < c.grid.x; ++x) {
        block_index = uint3{x, y, z};
        // Alternate blocks run their threads in reverse: a thread reading
        // what another writes with no barrier between reads it too early in
        // one order or the other.
        b.step = (x + y + z) % 2 == 0 ? 1 : -1;
        run_block(b, kernel);
      }
  t_block = nullptr;
  t_kernel = nullptr;
}

}  // namespace

void sync_block() {
  Block& b = *t_block;
  const int me = b.current;
  const char* key = &b.block_keys[b.block_parity[me]];
  b.block_parity[me] ^= 1;
  race_release(key);
  yield(State::at_block);
  race_acquire(key);
}

void unsupported(const char* what) { fault(t_kernel, (std::string(what) + " is not emulated").c_str()); }

uint64_t shuffle_xor(uint64_t value, unsigned lane_mask) {
  Block& b = *t_block;
  const int me = b.current;
  // The lanes alternate between two sets of values: a lane can write the
  // next shuffle's only once every lane has passed this one's barrier, and
  // the one after that's (this set again) once every lane has read this.
  std::vector<uint64_t>& values = b.exchange[b.parity[me]];
  b.parity[me] ^= 1;
  values[me] = value;
  yield(State::at_warp);
  const int source = me / kWarp * kWarp + int((unsigned(me) % kWarp) ^ (lane_mask % kWarp));
  return source < b.n ? values[source] : value;
}

void launch_grid(const Config& c, const char* name, std::function<void()> body) {
  const unsigned long long threads = 1ull * c.block.x * c.block.y * c.block.z;
  const bool bad = threads == 0 || threads > 1024 || c.block.z > 64 || c.grid.x == 0 || c.grid.y == 0 ||
                   c.grid.z == 0 || c.grid.x > 0x7fffffffu || c.grid.y > 65535 || c.grid.z > 65535;
  if (bad) {
    set_last_error(cudaErrorInvalidConfiguration);
    return;
  }
  if (c.shared != 0) {  // the kernels here have no dynamic shared memory
    set_last_error(cudaErrorInvalidValue);
    return;
  }
  static const bool handler = [] {
    struct sigaction action {};
    action.sa_handler = on_fault;
    sigaction(SIGSEGV, &action, nullptr);
    sigaction(SIGBUS, &action, nullptr);
    return true;
  }();
  (void)handler;
  enqueue(c.stream, [c, name, body = std::move(body)] { run_grid(c, name, body); });
}

}  // namespace conveyor::cuda_emulator::simt
