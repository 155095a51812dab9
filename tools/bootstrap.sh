#!/usr/bin/env bash
# One command from a fresh Debian 12 machine (as root) to a running conveyor
# or a tested one:
#   tools/bootstrap.sh run    install what is missing, build, serve the embedded default model
#   tools/bootstrap.sh test   install what is missing, build, run the whole test suite
# Environment: BUILD_DIR (default build), JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-run}
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}

packages=(
  build-essential cmake ninja-build ccache pkg-config git curl
  libcaf-dev libboost1.81-dev libboost-json1.81-dev libsimdjson-dev libicu-dev
  libcli11-dev libtomlplusplus-dev libspdlog-dev libopenblas-openmp-dev
  libgtest-dev libgmock-dev
  python3-jinja2
  clang libclang-rt-14-dev
  prometheus
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
    configure_and_build -DCONVEYOR_BUILD_TESTS=ON
    # The fuzz targets must keep building (clang + libFuzzer); each runs
    # briefly from a generated seed corpus. Longer runs: tests/fuzz/CMakeLists.txt.
    cmake -S . -B "$build_dir-fuzz" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER=clang++ -DCONVEYOR_BUILD_FUZZ=ON -DCONVEYOR_BUILD_TESTS=ON \
      -DCONVEYOR_BUILD_BENCH=OFF
    cmake --build "$build_dir-fuzz" -j "$jobs" --target conveyor_fuzzers
    corpus="$build_dir-fuzz/corpus"
    "$build_dir-fuzz/tests/fuzz/fuzz_seeds" "$corpus" >/dev/null
    for f in gguf llama2c tokenizer http; do
      mkdir -p "$corpus/$f"  # http starts from an empty corpus
      "$build_dir-fuzz/tests/fuzz/${f}_fuzz" "$corpus/$f" -max_total_time=5 2>&1 | tail -n 1
    done
    # Last, so that its summary closes the output.
    ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
    ;;
  *)
    echo "usage: tools/bootstrap.sh run|test" >&2
    exit 2
    ;;
esac
