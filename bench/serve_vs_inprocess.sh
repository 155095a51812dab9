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
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$out"' EXIT

summary() {  # output tok/s, req/s, TTFT p50, ITL p50, e2e mean from conveyor bench's JSON
  python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print(s["output_throughput"], s["request_throughput"], s["ttft_ms"]["p50"], s["itl_ms"]["p50"], s["e2e_ms"]["mean"])
' "$1"
}

printf '%-17s %4s %7s %13s %13s %6s %9s %9s %9s\n' model conc "req/s" "server tok/s" "in-proc tok/s" ratio \
  "TTFT p50" "ITL p50" "e2e mean"
for model in "${models[@]}"; do
  "$build/conveyor" serve --model "$model" --port "$port" >"$out/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
  for c in 1 16 32; do
    n=$((c < 4 ? 8 : 2 * c))
    "$build/conveyor" bench --url "http://127.0.0.1:$port" --concurrency "$c" --num-requests "$n" \
      --input-len 128 --output-len 128 --quiet --json "$out/r.json" >/dev/null 2>&1
    read -r served rps ttft itl e2e < <(summary "$out/r.json")
    inproc=$("$build/bench/engine_bench" --model "$model" --closed-loop "$c" --requests "$n" |
             tail -n 1 | awk '{print $(NF-2)}')
    printf '%-17s %4d %7.2f %13.1f %13.1f %5.0f%% %7.1fms %7.1fms %7.0fms\n' "$model" "$c" "$rps" \
      "$served" "$inproc" "$(python3 -c "print(100 * $served / $inproc)")" "$ttft" "$itl" "$e2e"
  done
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=
done
