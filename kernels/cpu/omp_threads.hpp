// The OpenMP thread teams of the CPU kernels (libgomp).
//
// libgomp gives every thread that starts a parallel region a team of its
// own, kept asleep between uses. Its workers spin between regions (a few
// hundred microseconds) only while libgomp manages no more threads than the
// machine has cores; past that they sleep at once and each region pays a
// futex wake-up. One idle team left on another thread (the weights packed
// in parallel on the loading thread) is enough, on a small machine, to push
// the executor's team over: a 110M-parameter step with some hundred regions
// went from 4.8 to 8-9 ms in the engine. So a thread that ran parallel work
// and will run none for a while lets its team go.
#pragma once

namespace conveyor::kernels {

// Ends the calling thread's OpenMP team (its worker threads exit); the
// next parallel region on this thread starts a new one. Call outside any
// parallel region. With libgomp (GCC builds) only; a no-op with LLVM's
// libomp (clang builds, the sanitizer ones), whose pause is global.
void release_openmp_threads();

}  // namespace conveyor::kernels
