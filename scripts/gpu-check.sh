#!/usr/bin/env bash
# The one-command GPU check (issue 13): on a machine with an NVIDIA GPU and
# the CUDA toolkit, build for this device's architecture only, run the GPU
# tests, and print one summary. Meant to finish in under 8 minutes.
#
#   scripts/gpu-check.sh            # build in build-gpu/
#   BUILD=/tmp/b scripts/gpu-check.sh
#   ARCH=90 scripts/gpu-check.sh   # a fixed architecture (the default, native, needs a GPU)
#
# What it runs today: the CUDA kernels against their CPU twins
# (tests/kernels/cuda/device_test.cpp), the kernels' math on the host
# (math_test.cpp) and the backend tests (--device cuda must pass the device
# check). Not yet: the decode throughput sweep and the GPU executor's greedy
# ids against the CPU executor's, which need the CUDA runner (planned, not
# built; docs/DESIGN.md). The summary says so.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
ARCH=${ARCH:-native}
LOG=$BUILD/gpu-check.log
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

mkdir -p "$BUILD"
: > "$LOG"
if command -v nvidia-smi > /dev/null; then
  gpu=$(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader | head -1)
else
  gpu="no nvidia-smi"
fi
echo "gpu-check: $gpu" | tee -a "$LOG"

# "native": the architecture of the GPUs present (CMake 3.24+), so nvcc
# compiles once, not for sm_80 and sm_90.
if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVEYOR_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DCONVEYOR_BUILD_TESTS=ON -DCONVEYOR_BUILD_BENCH=OFF >> "$LOG" 2>&1; then
  echo "gpu-check: FAILED to configure after $(elapsed) s (see $LOG)"; exit 1
fi
targets=(conveyor_kernels_cuda_device_test conveyor_kernels_cuda_math_test backend_test)
if ! cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}" >> "$LOG" 2>&1; then
  echo "gpu-check: FAILED to build after $(elapsed) s (see $LOG)"; exit 1
fi
build_s=$(elapsed)

passed=0; failed=0; skipped=0; failures=""
run_suite() {  # ctest directory, optional -R filter
  local out
  out=$(timeout 300 ctest --test-dir "$BUILD/$1" -j1 --output-on-failure ${2:+-R "$2"} 2>&1)
  echo "$out" >> "$LOG"
  local total fail skip
  total=$(echo "$out" | sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' | tail -1)
  fail=$(echo "$out" | sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' | tail -1)
  skip=$(echo "$out" | grep -c '(Skipped)')
  total=${total:-0}; fail=${fail:-0}
  passed=$((passed + total - fail - skip)); failed=$((failed + fail)); skipped=$((skipped + skip))
  failures+=$(echo "$out" | grep -E '\(Failed\)|\(Timeout\)|\(SEGFAULT\)' | sed 's/^/  /')
}
run_suite tests/kernels/cuda
run_suite tests/actors "ParseDevice|CudaBackend|CpuBackend"

echo "gpu-check: build ${build_s} s, tests $passed passed, $failed failed, $skipped skipped; total $(elapsed) s"
[ -n "$failures" ] && echo "$failures"
if [ "$skipped" -gt 0 ]; then
  why=$("$BUILD/tests/kernels/cuda/conveyor_kernels_cuda_device_test" --gtest_filter='CudaKernels.RmsNorm*' 2>&1 |
        grep -A1 ': Skipped' | tail -1)
  echo "gpu-check: skipped because: ${why:-see $LOG}"
fi
echo "gpu-check: decode sweep and GPU-vs-CPU executor ids: not run (the CUDA runner is not built yet)"
echo "gpu-check: log in $LOG"
[ "$failed" -eq 0 ]
