#!/usr/bin/env bash
# One command from a fresh Debian 12 machine (as root) to a running conveyor
# or a tested one:
#   tools/bootstrap.sh run    install what is missing, build, serve the embedded default model
#   tools/bootstrap.sh test   install what is missing, build, run the whole test suite,
#                             the unit and actor tests under ASan+UBSan, the actor and
#                             server tests under ThreadSanitizer, and the fuzzers briefly
#   tools/bootstrap.sh tsan   only the ThreadSanitizer part of `test`
# Environment: BUILD_DIR (default build), JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-run}
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}

packages=(
  build-essential cmake ninja-build ccache pkg-config git curl
  libcaf-dev libboost1.81-dev libboost-json1.81-dev libsimdjson-dev libicu-dev
  libcli11-dev libtomlplusplus-dev libspdlog-dev libopenblas-openmp-dev libssl-dev openssl
  libgtest-dev libgmock-dev
  python3-jinja2
  json-schema-test-suite python3-jsonschema
  clang libclang-rt-14-dev
  prometheus
  chromium
)
# tests/integration runs the official openai npm client. A nodesource nodejs
# ships its own npm (and conflicts with Debian's), so ask apt only when the
# commands are missing.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "bootstrap: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

configure_and_build() {
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$build_dir" -j "$jobs"
}

# Test phases print how long they took. A failing test phase does not stop
# the later ones; the command fails at the end, naming them.
phase_start=$SECONDS
phase_done() {
  echo "bootstrap: $1 took $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}
failed=()
# Every ctest run gives a test 300 s unless its folder sets its own TIMEOUT:
# the longest take under 40 s here (docs/testing.md), and a test that hangs
# must fail on its own, not stall the command until CI stops it.
ctest_timeout=300
report_failures() {
  if ((${#failed[@]})); then
    printf 'bootstrap: failed: %s\n' "${failed[@]}" >&2
    exit 1
  fi
}

# ThreadSanitizer: the engine's actors and the server, the code with
# threads of its own. tests/sanitizers/tsan.supp says what TSan cannot
# see (Debian's CAF is not instrumented) and what is suppressed. And the
# CUDA kernels' race check (label racecheck, tests/cuda_emulator/simt.cpp):
# two threads of a block touching the same memory with no __syncthreads
# between.
tsan_phase() {
  tsan_dir="$build_dir-tsan"
  cmake -S . -B "$tsan_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
    -DCONVEYOR_BUILD_TESTS=ON -DCONVEYOR_BUILD_BENCH=OFF -DCONVEYOR_CUDA=OFF -DCONVEYOR_SANITIZE=thread
  # tests/cuda_emulator: the CUDA backend's host code on an emulated device,
  # and the kernels' race check, where the toolkit's headers are.
  emulated=()
  [ -d "$tsan_dir/tests/cuda_emulator" ] && emulated=(tests/cuda_emulator/all)
  cmake --build "$tsan_dir" -j "$jobs" --target tests/engine/all tests/backends/all tests/actors/all tests/http/all "${emulated[@]}"
  phase_done "TSan build (actor and server tests)"
  # OMP_NUM_THREADS=1: libgomp is not instrumented, so TSan cannot see the
  # synchronisation of its thread pool (tests/sanitizers/tsan.supp).
  # Left out: Stories.KvCacheDtypes, whose greedy f32 output must equal a
  # scalar reference model's exactly. Built with TSan, one token of one
  # sequence of 32 differs at a near tie, the same in every run and with any
  # OMP_NUM_THREADS, so it is rounding in the instrumented code, not a race
  # (a race would not repeat exactly). It passes in the release and ASan builds.
  # Also left out: arithmetic-heavy tests whose subject is the numbers, not
  # the threads, and whose products take minutes under TSan (the release
  # phase runs them, the ASan phase those of the actors label): the emulated
  # device's comparisons with the CPU runner, and the tiny Llama 3 file
  # drafted by itself (a near tie in grouped-head tiles; 82 s under TSan,
  # where SpeculativeDraftModel's other tests cover the draft's threads).
  local heavy='^Emulated\.(CudaRunner\.(MatchesTheCpuRunnerOnTheTinyGgufFiles|MatchesTheCpuRunnerWithAnInt8KvCache)|CudaBackend\.PoolSizedFromGpuMemoryUtilization)$'
  heavy+='|^SpeculativeDraftModel\.GroupedHeadsOutputsAreThoseOfPlainDecoding$'
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1 suppressions=$PWD/tests/sanitizers/tsan.supp" \
    OMP_NUM_THREADS=1 ctest --timeout "$ctest_timeout" --test-dir "$tsan_dir" --output-on-failure -j "$jobs" -L 'actors|http|racecheck' \
    -E "^Stories\.KvCacheDtypes\$|$heavy" || failed+=("TSan tests")
  phase_done "TSan tests"
}

install_missing
case "$mode" in
  run)
    configure_and_build -DCONVEYOR_BUILD_TESTS=OFF
    shift || true
    cat <<'EOF'
bootstrap: starting `conveyor serve` on the embedded default model (Ctrl-C stops it).
Stream a completion from another shell:
  curl -N http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \
    -d '{"prompt": "Once upon a time", "max_tokens": 48, "stream": true}'
EOF
    exec "$build_dir/conveyor" serve "$@"
    ;;
  test)
    # Seven phases; each prints how long it took (docs/testing.md has
    # the figures). The sanitizer builds use clang and compile only the
    # tests they run, without benchmarks or CUDA.
    configure_and_build -DCONVEYOR_BUILD_TESTS=ON
    phase_done "release build"

    # libFuzzer targets and the ASan+UBSan unit and actor tests share one
    # clang build: the fuzzers need every library built with ASan anyway.
    fuzz_dir="$build_dir-fuzz"
    cmake -S . -B "$fuzz_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER=clang++ -DCONVEYOR_BUILD_FUZZ=ON -DCONVEYOR_BUILD_TESTS=ON \
      -DCONVEYOR_BUILD_BENCH=OFF -DCONVEYOR_CUDA=OFF -DCONVEYOR_CUDA_EMULATOR=OFF -DCONVEYOR_SANITIZE=address,undefined
    cmake --build "$fuzz_dir" -j "$jobs" --target conveyor_fuzzers \
      tests/kernels/cpu/all tests/kernels/cuda/all tests/model/tokenizer/all tests/model/formats/all \
      tests/backends/cpu/all tests/model/sampling/all tests/policies/all tests/router/all tests/template/all \
      tests/engine/all tests/backends/all tests/actors/all tests/grammar/all
    phase_done "ASan+UBSan build (fuzzers, unit and actor tests)"

    # Each fuzzer runs briefly from a generated seed corpus. Longer runs:
    # tests/fuzz/CMakeLists.txt (ctest -L fuzz-long).
    corpus="$fuzz_dir/corpus"
    "$fuzz_dir/tests/fuzz/fuzz_seeds" "$corpus" >/dev/null
    for f in gguf llama2c tokenizer http ws jinja jinja_chat json_schema regex gbnf; do
      "$fuzz_dir/tests/fuzz/${f}_fuzz" "$corpus/$f" -max_total_time=5 2>&1 | tail -n 1 ||
        failed+=("${f}_fuzz")  # the crashing input is written to the current directory (crash-*)
    done
    phase_done "fuzzers (5 s each)"

    # A sanitizer report fails its test (UBSan does not recover; ASan and
    # LeakSanitizer exit non-zero).
    export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
    export UBSAN_OPTIONS=print_stacktrace=1
    # tests/cuda_emulator is left out here (the TSan phase runs it), to keep
    # the command within CI's time.
    ctest --timeout "$ctest_timeout" --test-dir "$fuzz_dir" --output-on-failure -j "$jobs" -L 'unit|actors' || failed+=("ASan+UBSan tests")
    phase_done "ASan+UBSan tests"

    unset ASAN_OPTIONS UBSAN_OPTIONS

    tsan_phase

    # Last, so that its summary closes the output.
    ctest --timeout "$ctest_timeout" --test-dir "$build_dir" --output-on-failure -j "$jobs" || failed+=("release tests")
    phase_done "release tests"
    ;;
  tsan)
    tsan_phase
    ;;
  *)
    echo "usage: tools/bootstrap.sh run|test|tsan" >&2
    exit 2
    ;;
esac
report_failures
