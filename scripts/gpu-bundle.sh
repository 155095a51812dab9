#!/usr/bin/env bash
# scripts/gpu-check.sh for a GPU machine that cannot build this project: one
# with the NVIDIA driver, the CUDA toolkit and CMake but not our Debian
# packages (CAF, Boost, OpenBLAS, ICU...) and no network, such as the device
# machines lent to sessions (/work/.library/device). This script builds, on a
# Debian 12 machine with the packages and the toolkit (tools/bootstrap.sh
# installs them; no GPU needed), what gpu-check.sh runs, and packs it with
# the shared libraries it loads and the model files its tests read.
#
#   scripts/gpu-bundle.sh             # the device's architecture: 90 (H100, H200)
#   ARCH=80 scripts/gpu-bundle.sh     # A100
#
# It writes .gpu/ (ignored by git), in parts that each fit, with the working
# tree, one transfer of LIMIT_MIB (default 64):
#   part-1/bundle.tar.xz  build-gpu/'s binaries and ctest files, and
#                         build-gpu/lib/: the shared libraries they load
#                         beyond glibc, libstdc++ and CUDA's (CAF, ICU,
#                         OpenBLAS, toml++, libgomp...), and libcudart as a
#                         fallback in build-gpu/lib-cuda/
#   part-N/*.gguf, *.bin  ../shared/models's files the tests read
#   part-1/source         this checkout's absolute path, which ctest's files
#                         and the binaries name
# Then, on the GPU machine, with every part copied into .gpu/ there:
#   PREBUILT=1 scripts/gpu-check.sh
# unpacks the bundle, links this checkout's path and ../shared/models to
# where they are there, and runs the check without building. A part that did
# not arrive leaves its models' tests skipped, not failed.
#
# With the device tool: one `run` per part, each carrying `.gpu/part-N`, back
# to back so the machine stays warm and keeps the earlier parts; the last
# one runs the check:
#   run(command="true", carry=[".gpu/part-1"])
#   run(command="true", carry=[".gpu/part-2"])   ... and so on
#   run(command="PREBUILT=1 scripts/gpu-check.sh", carry=[".gpu/part-N"], timeout_s=600)
#
# The build is portable across x86-64 hosts with AVX2 (-march=x86-64-v3, not
# -march=native), for this architecture alone.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${ARCH:-90}
BUILD=build-gpu
OUT=.gpu
JOBS=${JOBS:-$(nproc)}
LIMIT_MIB=${LIMIT_MIB:-64}
MODELS=../shared/models
# The files the tests gpu-check.sh runs read (tests/backends/cuda_runner_test.cpp).
model_files=(stories260K.bin tiny-random-llama-f32.gguf tiny-llama2-q4_k_m.gguf tiny-llama3-q4_k_m.gguf
             tiny-qwen2-q4_k_m.gguf)
# gpu-check.sh's targets.
targets=(conveyor_kernels_cuda_device_test conveyor_kernels_cuda_math_test backend_test cuda_runner_test
         host_sampling_test runner_bench swap_overlap_bench conveyor_kernels_cpu_test decode_bench
         quant_matmul_bench)

command -v nvcc > /dev/null || { echo "gpu-bundle: nvcc is not on the PATH" >&2; exit 1; }
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVEYOR_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  -DCONVEYOR_BUILD_TESTS=ON -DCONVEYOR_BUILD_BENCH=ON -DCONVEYOR_CUDA_EMULATOR=OFF -DCONVEYOR_NATIVE=OFF \
  -DCMAKE_CXX_FLAGS=-march=x86-64-v3 > /dev/null
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}"

# What goes in the tar: the targets' binaries, and ctest's files for the
# test folders gpu-check.sh runs (CTestTestfile.cmake, and each test
# program's include file with the list gtest_discover_tests wrote when it
# was built; a program not built here is a test ctest calls NOT_BUILT).
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
binaries=()
for t in "${targets[@]}"; do
  f=$(find "$BUILD" -type f -name "$t" -perm -u+x | head -1)
  [ -n "$f" ] || { echo "gpu-bundle: $t was not built" >&2; exit 1; }
  binaries+=("$f")
done
files=("${binaries[@]}")
for d in "$BUILD" "$BUILD/tests" "$BUILD/tests/kernels" "$BUILD/tests/kernels/cuda" "$BUILD/tests/kernels/cpu" \
         "$BUILD/tests/backends"; do
  [ -f "$d/CTestTestfile.cmake" ] && files+=("$d/CTestTestfile.cmake")
done
while IFS= read -r f; do files+=("$f"); done < <(find "$BUILD/tests/kernels/cuda" "$BUILD/tests/kernels/cpu" "$BUILD/tests/backends" -maxdepth 1 \
  \( -name '*_include.cmake' -o -name '*_tests.cmake' \))

# The libraries: whatever the binaries load that a GPU machine's image may
# lack. The C library, libstdc++ and libgcc_s are the host's (a newer one
# serves these binaries; an older one put first would break the host's own
# programs), the driver and cuBLAS are the machine's (cuBLAS is too large to
# carry); libcudart is carried as a fallback only.
mkdir -p "$stage/$BUILD/lib" "$stage/$BUILD/lib-cuda"
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt)\.so'
for b in "${binaries[@]}"; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  if [[ "$name" == libcudart.so* ]]; then cp -L "$path" "$stage/$BUILD/lib-cuda/$name"
  else cp -L "$path" "$stage/$BUILD/lib/$name"; fi
done

rm -rf "$OUT"
mkdir -p "$OUT/part-1"
tar -C . -cf - "${files[@]}" | tar -C "$stage" -xf -
XZ_OPT=-6T0 tar -C "$stage" -cJf "$OUT/part-1/bundle.tar.xz" "$BUILD"
pwd -P > "$OUT/part-1/source"

# The models, first fit by size into parts; each part plus the working tree
# (what a transfer sends besides it) stays under the limit.
tree_bytes=$( (git ls-files -z; git ls-files -z -o --exclude-standard) | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
capacity=$(( LIMIT_MIB * 1048576 - tree_bytes - 1048576 ))
declare -a used
used[1]=$(du -cb "$OUT/part-1" | tail -1 | cut -f1)
parts=1
while read -r size name; do
  placed=0
  for ((p = 1; p <= parts; ++p)); do
    if (( used[p] + size <= capacity )); then placed=$p; break; fi
  done
  if (( placed == 0 )); then
    parts=$((parts + 1)); placed=$parts; used[placed]=0; mkdir -p "$OUT/part-$placed"
  fi
  (( size <= capacity )) || { echo "gpu-bundle: $name alone is over the transfer limit" >&2; exit 1; }
  cp "$MODELS/$name" "$OUT/part-$placed/"
  used[placed]=$(( used[placed] + size ))
done < <(for m in "${model_files[@]}"; do
           [ -f "$MODELS/$m" ] && echo "$(stat -c %s "$MODELS/$m") $m"
           [ -f "$MODELS/$m" ] || echo "gpu-bundle: $MODELS/$m is missing; its tests will skip" >&2
         done | sort -rn)

echo "gpu-bundle: $OUT for sm_$ARCH, $parts parts (working tree $((tree_bytes / 1048576)) MiB per transfer):"
for ((p = 1; p <= parts; ++p)); do
  echo "  part-$p: $((used[p] / 1048576)) MiB: $(ls "$OUT/part-$p" | tr '\n' ' ')"
done
