#!/usr/bin/env bash
# The network layer's cost: `conveyor bench` against `conveyor serve`, next to
# the engine's in-process throughput on the same workload (128-token prompts,
# 128 new tokens, ignore_eos, closed loop at concurrency 1, 16 and 32).
# Target: the server delivers >= 90% of the in-process throughput at 32.
#
#   bench/serve_vs_inprocess.sh [BUILD_DIR] [MODEL...]
set -euo pipefail
build=${1:-build}
shift || true
models=("$@")
((${#models[@]})) || models=(dummy:llama-15m dummy:llama-110m)
port=${PORT:-18231}
out=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$out"' EXIT

printf '%-18s %5s %16s %16s %7s\n' model conc "server tok/s" "in-proc tok/s" ratio
for model in "${models[@]}"; do
  "$build/conveyor" serve --model "$model" --port "$port" >"$out/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
  for c in 1 16 32; do
    n=$((c < 4 ? 8 : 2 * c))
    "$build/conveyor" bench --url "http://127.0.0.1:$port" --concurrency "$c" --num-requests "$n" \
      --input-len 128 --output-len 128 --quiet --json "$out/r.json" >/dev/null 2>&1
    served=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['output_throughput'])" "$out/r.json")
    inproc=$("$build/bench/engine_bench" --model "$model" --closed-loop "$c" --requests "$n" | tail -n 1 | awk '{print $(NF-2)}')
    printf '%-18s %5d %16.1f %16.1f %6.0f%%\n' "$model" "$c" "$served" "$inproc" \
      "$(python3 -c "print(100*$served/$inproc)")"
  done
  kill "$server"
  wait "$server" 2>/dev/null || true
done
