#!/usr/bin/env bash
# The server's single-stream inter-token gap against the engine's own decode
# step on the same file: the cost of the path from the executor to the
# client (scheduler, request actor, HTTP, SSE) at batch 1.
#
#   bench/itl_vs_step.sh [BUILD_DIR] [MODEL...]
#
# Without a MODEL it measures the issue's condition: dummy:llama-110m stored
# as Q8_0 (`conveyor convert` writes the file into a temporary directory).
#
# For each model, ROUNDS (3) alternating rounds of
#   - decode_bench at batch 1, context 192, the server's KV cache type (bf16
#     where the CPU has AVX512-BF16, else f16: KV=... overrides), 2 threads;
#   - `conveyor serve` on that model, `conveyor bench` at concurrency 1:
#     REQUESTS (4) greedy requests of 128 prompt tokens and 128 new tokens
#     (contexts 128..256, 192 on average, as decode_bench's), EOS ignored.
# Prints each round's step, the inter-token gap's p50 and mean, and p50 over
# the step. Target (issue 26): p50 within 1.15x of the step.
set -euo pipefail
build=${1:-build}
shift || true
models=("$@")
rounds=${ROUNDS:-3}
requests=${REQUESTS:-4}
port=${PORT:-18241}
kv=${KV:-$(grep -q avx512_bf16 /proc/cpuinfo && echo bf16 || echo f16)}
out=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$out"' EXIT
if ((${#models[@]} == 0)); then
  "$build/conveyor" convert --model dummy:llama-110m --type q8_0 --out "$out/llama-110m-q8_0.gguf" >/dev/null
  models=("$out/llama-110m-q8_0.gguf")
fi

printf '%-28s %5s %9s %11s %11s %8s\n' model round "step ms" "ITL p50 ms" "ITL mean" "p50/step"
for model in "${models[@]}"; do
  for round in $(seq "$rounds"); do
    step=$("$build/bench/decode_bench" --models "$model" --batches 1 --steps 32 --repeats 3 --context 192 \
             --kv-cache-dtype "$kv" --threads 2 | awk '$1 == "1" {print $2}' | tail -n 1)
    "$build/conveyor" serve --model "$model" --port "$port" --kv-cache-dtype "$kv" --threads 2 \
      >"$out/serve.log" 2>&1 &
    server=$!
    up=
    for _ in $(seq 300); do
      if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then up=1; break; fi
      sleep 0.2
    done
    [ -n "$up" ] || { echo "the server did not start:" >&2; cat "$out/serve.log" >&2; exit 1; }
    # One short request first: the first request pays page faults and caches.
    "$build/conveyor" bench --url "http://127.0.0.1:$port" --concurrency 1 --num-requests 1 \
      --input-len 128 --output-len 8 --ignore-eos --quiet >/dev/null 2>&1 || { echo "conveyor bench failed" >&2; exit 1; }
    "$build/conveyor" bench --url "http://127.0.0.1:$port" --concurrency 1 --num-requests "$requests" \
      --input-len 128 --output-len 128 --ignore-eos --quiet --json "$out/r.json" >/dev/null 2>&1 || { echo "conveyor bench failed" >&2; exit 1; }
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
    python3 - "$out/r.json" "$model" "$round" "$step" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
step = float(sys.argv[4])
p50, mean = s["itl_ms"]["p50"], s["itl_ms"]["mean"]
print(f"{sys.argv[2].rsplit('/', 1)[-1]:<28} {sys.argv[3]:>5} {step:9.3f} {p50:11.3f} {mean:11.3f} {p50 / step:7.2f}x")
EOF
  done
done
