#!/usr/bin/env bash
# The standard benchmark sweep, drawn as one report (`conveyor bench --report`):
#   1. continuous against static batching (one server each, same workload,
#      output lengths exponential so that a static batch waits for its longest);
#   2. preemption under memory pressure: recompute, swap and cost, each on a
#      server with a small KV cache (and host swap space for swap and cost);
#   3. the agent swarm (examples/agent_swarm, in-process) with and without
#      prefix waits, its figures added with --add-figures;
#   4. a concurrency sweep, 1 to 32 requests in flight, continuous and static.
# Each server is `conveyor serve` on a free loopback port, started and stopped
# here, and warmed up with 8 requests that the report leaves out. The run
# takes a few minutes on 2 cores with the default model.
#
#   bench/report.sh [BUILD_DIR] [OUT_DIR]      # defaults: build, docs/benchmarks
#   MODEL=dummy:llama-110m bench/report.sh     # another model for the servers
#
# OUT_DIR gets index.html, results.json and conditions.txt (the machine, its
# load, the commit, the servers' flags and preemption counters). Its
# README.md is written by a person reading one run and is left alone.
set -euo pipefail
build=${1:-build}
out=${2:-docs/benchmarks}
model=${MODEL:-dummy:llama-15m}
for exe in "$build/conveyor" "$build/examples/agent_swarm"; do
  [ -x "$exe" ] || { echo "bench/report.sh: $exe is not built" >&2; exit 2; }
done

work=$(mktemp -d)
report=$work/report
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
conditions=$work/conditions.txt

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server FLAGS...: `conveyor serve --model $model FLAGS` on a free port.
start_server() {
  port=$(free_port)
  serve_flags="--model $model $*"
  "$build/conveyor" serve --model "$model" --port "$port" --log-level warn "$@" >"$work/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
      # A few requests first, left out of the report: the first steps of a
      # fresh server (page faults, thread start-up) are not what it does after.
      "$build/conveyor" bench --url "http://127.0.0.1:$port" --concurrency 4 --num-requests 8 --input-len 16 \
        --output-len 16 --quiet >/dev/null
      return 0
    fi
    kill -0 "$server" 2>/dev/null || break
    sleep 0.2
  done
  echo "bench/report.sh: conveyor serve $serve_flags did not start:" >&2
  cat "$work/serve.log" >&2
  exit 1
}

stop_server() {
  # The server's preemption counters: the one figure of a run the client cannot see.
  echo "  serve $serve_flags: $(curl -sf "http://127.0.0.1:$port/metrics" |
    grep '^conveyor:num_preemptions_total' | tr '\n' ' ')" >>"$conditions"
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=
}

# bench GROUP LABEL ARGS...: one `conveyor bench` run into the report.
bench() {
  local group=$1 label=$2
  shift 2
  echo "[report] $group / $label: conveyor bench $*" >&2
  "$build/conveyor" bench --url "http://127.0.0.1:$port" --report "$report" --group "$group" --label "$label" \
    --note "serve $serve_flags" --quiet "$@" >"$work/bench.out"
}

{
  echo "bench/report.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB"
  echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "model: $model; build: $build"
  echo "servers (and their preemption counters at the end of their runs):"
} >"$conditions"
t0=$SECONDS

# 1. Continuous against static batching: 64 requests, 16 in flight,
#    64-token prompts, outputs exponential with mean 64 (capped at 256).
for mode in continuous static; do
  start_server --batching "$mode"
  bench "1. continuous vs static batching" "$mode" --concurrency 16 --num-requests 64 \
    --input-len 64 --output-dist exponential:64:256 --seed 1
  stop_server
done

# 2. Preemption under memory pressure: a 1024-token KV cache (64 blocks) for
#    16 requests of 16 + 192 tokens each (3,328 tokens if all ran at once).
for mode in recompute swap cost; do
  start_server --preemption "$mode" --kv-cache-tokens 1024 --swap-space-tokens 4096
  bench "2. preemption under memory pressure" "$mode" --concurrency 16 --num-requests 48 \
    --input-len 16 --output-len 192 --seed 2
  stop_server
done

# 3. The agent swarm, in-process on its default (embedded) model.
for wait in true false; do
  echo "[report] agent_swarm --prefix-wait $wait" >&2
  "$build/examples/agent_swarm" --agents 128 --turns 3 --tool-choice off --prefix-wait "$wait" --json "$work/swarm.json" \
    >"$work/swarm.out"
  "$build/conveyor" bench --report "$report" --add-figures "$work/swarm.json" \
    --group "3. agent swarm (128 agents x 3 turns, in-process)" --label "prefix wait $wait" \
    --note "examples/agent_swarm --agents 128 --turns 3 --tool-choice off --prefix-wait $wait"
done

# 4. Concurrency sweep: 64-token prompts and outputs, max(16, 4c) requests.
for mode in continuous static; do
  start_server --batching "$mode"
  for c in 1 2 4 8 16 32; do
    n=$((4 * c > 16 ? 4 * c : 16))
    bench "4. concurrency sweep" "$mode" --concurrency "$c" --num-requests "$n" --input-len 64 --output-len 64 --seed 4
  done
  stop_server
done

{
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "took $((SECONDS - t0)) s"
} >>"$conditions"
mkdir -p "$out"
cp "$report/index.html" "$report/results.json" "$conditions" "$out/"
echo "bench/report.sh: $out/index.html ($((SECONDS - t0)) s)" >&2
