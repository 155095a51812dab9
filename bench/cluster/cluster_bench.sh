#!/usr/bin/env bash
# Placement policies of `conveyor router` under a multi-tenant workload.
#
# For each of round_robin, least_loaded and prefix_affinity: three engine
# nodes (`conveyor serve --node-port --no-http`, one compute thread each) and
# a router in front of them, started on free loopback ports, and
# `conveyor bench` sending them the same requests (same dataset, same order):
# TENANTS tenants, each with its own SYSTEM_LEN-token system prompt; each
# request is its tenant's system prompt followed by USER_LEN tokens of its
# own, the tenants interleaved at random (seeded). Each node's KV cache
# (KV_TOKENS) holds about a third of all the system prompts plus its share of
# the running requests, so a node's prefix cache keeps a tenant only if that
# tenant's requests keep coming to it.
#
# Every run starts fresh nodes (cold caches); 6 short warm-up requests with
# unrelated prompts go first and are left out of every figure. ROUNDS rounds
# alternate the order of the policies (A B C, then C B A) so that a slow spell
# on a shared machine does not fall on one policy only; the table pools them.
# Printed per policy:
#   requests       completed requests, all rounds
#   out tok/s      output tokens / seconds of load (client side, conveyor bench)
#   req/s          completed requests / seconds of load
#   TTFT           mean, p50, p90 of time to first token (client side)
#   hit rate       prompt tokens found in the nodes' prefix caches / prompt
#                  tokens looked up, summed over the nodes: the router's
#                  conveyor:router_node_prefix_cache_{hit,query}_tokens_total,
#                  after minus before each run
#   expected       prefix_affinity only: the blocks the router expected the
#                  chosen node to hold / all full prompt blocks
#                  (conveyor:router_prefix_expected_hit_blocks_total /
#                  router_prompt_blocks_total); above the hit rate when nodes
#                  evicted prefixes the router's index still credits them with
#   per round      hit rate and mean TTFT of each round
#   n1/n2/n3       requests the router sent to each node
# and prefix_affinity's hit rate over round_robin's (target: >= 2x) and its
# mean TTFT against round_robin's (target: lower).
# With the defaults: 2.5 minutes on 2 cores, 3.7 while another build shared them.
#
#   bench/cluster/cluster_bench.sh [BUILD_DIR]         # default build
#   REQUESTS=1024 ROUNDS=1 CONCURRENCY=16 bench/cluster/cluster_bench.sh
#   KEEP=dir bench/cluster/cluster_bench.sh             # keep the logs, JSON and dataset in dir
#
# Settings (environment, defaults in brackets): MODEL [dummy:llama-15m],
# KV_TOKENS per node [4608], TENANTS [64], SYSTEM_LEN [192], USER_LEN [16],
# OUTPUT_LEN [16], REQUESTS per run [768], ROUNDS [2], CONCURRENCY [8],
# SEED [1], POLICIES ["round_robin least_loaded prefix_affinity"].
# Prompts are token ids from 100 to 31000 (the completions API), so the model
# needs a vocabulary that large; dummy:llama-15m's context is 256 tokens, so
# SYSTEM_LEN + USER_LEN + OUTPUT_LEN must stay within it.
set -euo pipefail
build=${1:-build}
model=${MODEL:-dummy:llama-15m}
kv_tokens=${KV_TOKENS:-4608}
tenants=${TENANTS:-64}
system_len=${SYSTEM_LEN:-192}
user_len=${USER_LEN:-16}
output_len=${OUTPUT_LEN:-16}
requests=${REQUESTS:-768}
rounds=${ROUNDS:-2}
concurrency=${CONCURRENCY:-8}
seed=${SEED:-1}
read -r -a policies <<<"${POLICIES:-round_robin least_loaded prefix_affinity}"
exe=$build/conveyor
[ -x "$exe" ] || { echo "cluster_bench: $exe is not built" >&2; exit 2; }
for tool in curl python3; do
  command -v "$tool" >/dev/null || { echo "cluster_bench: needs $tool" >&2; exit 2; }
done

work=${KEEP:-$(mktemp -d)}
mkdir -p "$work"
pids=()
stop_all() {  # the processes this script started, by id
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
# waited COMMAND...: runs it in the background and waits, so that a signal
# stops the script at once (bash runs a trap only after a foreground command).
waited() {
  "$@" &
  pids+=($!)
  wait $!
  unset 'pids[-1]'
}
cleanup() {
  stop_all
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The workload: one JSONL line per request, in sending order (conveyor bench
# sends a dataset's lines in turn).
python3 - "$work/dataset.jsonl" "$tenants" "$system_len" "$user_len" "$output_len" "$requests" "$seed" <<'PY'
import json, random, sys
path, tenants, system_len, user_len, output_len, requests, seed = sys.argv[1], *map(int, sys.argv[2:])
rng = random.Random(seed)
ids = lambda n: [rng.randint(100, 31000) for _ in range(n)]
systems = [ids(system_len) for _ in range(tenants)]
with open(path, "w") as out:
    for _ in range(requests):
        t = rng.randrange(tenants)
        out.write(json.dumps({"prompt": systems[t] + ids(user_len), "max_tokens": output_len}) + "\n")
PY

free_ports() {  # N distinct free loopback ports
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# The router's counters: "hit_tokens query_tokens expected_blocks prompt_blocks routed_n1 routed_n2 routed_n3".
counters() {
  curl -sf "http://127.0.0.1:$http_port/metrics" | python3 -c '
import re, sys
hit = query = expected = blocks = 0
routed = {}
for line in sys.stdin:
    if line.startswith("conveyor:router_prefix_expected_hit_blocks_total "): expected = float(line.split()[1])
    if line.startswith("conveyor:router_prompt_blocks_total "): blocks = float(line.split()[1])
    m = re.match(r"conveyor:router_node_(prefix_cache_hit_tokens|prefix_cache_query_tokens|requests_routed)_total"
                 r"\{node=\"([^\"]+)\",address=\"[^\"]*\"\} (\S+)", line)
    if not m: continue
    v = float(m.group(3))
    if m.group(1) == "prefix_cache_hit_tokens": hit += v
    elif m.group(1) == "prefix_cache_query_tokens": query += v
    else: routed[m.group(2)] = v
print(int(hit), int(query), int(expected), int(blocks), *(int(routed[k]) for k in sorted(routed)))'
}

# start_cluster POLICY ROUND: three nodes and a router; returns once the router sees all three up.
start_cluster() {
  local policy=$1 round=$2 ports node_list="" i
  read -r -a ports <<<"$(free_ports 4)"
  for i in 1 2 3; do
    "$exe" serve --model "$model" --node-port "${ports[$i]}" --no-http --node-name "n$i" \
      --kv-cache-tokens "$kv_tokens" --threads 1 --log-level warn >"$work/$policy-$round-n$i.log" 2>&1 &
    pids+=($!)
    node_list+="${node_list:+,}127.0.0.1:${ports[$i]}"
  done
  http_port=${ports[0]}
  "$exe" router --nodes "$node_list" --port "$http_port" --policy "$policy" --model "$model" \
    --log-level warn >"$work/$policy-$round-router.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    if [ "$(curl -sf "http://127.0.0.1:$http_port/metrics" | grep -c '^conveyor:router_node_up{.*} 1$')" = 3 ]; then
      return 0
    fi
    sleep 0.2
  done
  echo "cluster_bench: the $policy cluster did not come up; logs in $work" >&2
  tail -n 5 "$work/$policy-$round"-*.log >&2
  KEEP=$work
  exit 1
}

# run_policy POLICY ROUND: one run; appends "policy round json <counters after - before>" to runs.txt.
run_policy() {
  local policy=$1 round=$2 i before after line
  echo "[cluster_bench] round $round, $policy: $requests requests at concurrency $concurrency" >&2
  start_cluster "$policy" "$round"
  waited "$exe" bench --url "http://127.0.0.1:$http_port" --concurrency 3 --num-requests 6 --input-len 16 \
    --output-len 4 --seed 999 --quiet >/dev/null 2>&1
  sleep 0.6  # the router polls the nodes' counters every 250 ms
  read -r -a before <<<"$(counters)"
  waited "$exe" bench --url "http://127.0.0.1:$http_port" --dataset "$work/dataset.jsonl" --concurrency "$concurrency" \
    --num-requests "$requests" --metrics-interval 0 --quiet --json "$work/$policy-$round.json" \
    >"$work/$policy-$round-bench.txt" 2>&1
  sleep 0.6
  read -r -a after <<<"$(counters)"
  line="$policy $round $work/$policy-$round.json"
  for i in "${!after[@]}"; do line+=" $((after[i] - before[i]))"; done
  echo "$line" >>"$work/runs.txt"
  stop_all
}

: >"$work/runs.txt"
for round in $(seq "$rounds"); do
  order=("${policies[@]}")
  if ((round % 2 == 0)); then
    order=()
    for ((i = ${#policies[@]} - 1; i >= 0; i--)); do order+=("${policies[i]}"); done
  fi
  for policy in "${order[@]}"; do run_policy "$policy" "$round"; done
done

echo
echo "model $model; 3 nodes, each KV $kv_tokens tokens, --threads 1; $tenants tenants, $system_len-token system" \
  "prompts + $user_len tokens per request, $output_len tokens out (ignore_eos); $requests requests x $rounds" \
  "rounds per policy; concurrency $concurrency; seed $seed; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/runs.txt" "${policies[@]}" <<'PY'
import json, sys
runs = [line.split() for line in open(sys.argv[1]) if line.strip()]
policies = sys.argv[2:]

def pct(xs, p):  # xs sorted; linear interpolation between closest ranks
    if not xs: return 0.0
    k = (len(xs) - 1) * p / 100
    lo = int(k); hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)

print(f"{'policy':<16} {'requests':>8} {'out tok/s':>9} {'req/s':>6} {'TTFT mean':>9} {'p50':>6} {'p90':>6}"
      f" {'hit rate':>8} {'expected':>8}  {'per round: hit rate, TTFT mean':<30} {'n1/n2/n3':>12}")
result = {}
for policy in policies:
    mine = [r for r in runs if r[0] == policy]
    if not mine: continue
    ttft, out_tokens, duration, ok = [], 0, 0.0, 0
    hits = queries = expected = blocks = 0
    routed = [0, 0, 0]
    per_round = []
    for r in mine:
        data = json.load(open(r[2]))
        s = data["summary"]
        duration += s["duration_s"]
        out_tokens += s["total_output_tokens"]
        ok += s["completed"]
        t = [q["ttft_ms"] for q in data["requests"] if q["ok"]]
        ttft += t
        h, q, e, b = map(int, r[3:7])
        hits += h; queries += q; expected += e; blocks += b
        routed = [x + int(y) for x, y in zip(routed, r[7:10])]
        per_round.append(f"{100 * h / max(1, q):.1f}% {sum(t) / max(1, len(t)):.0f} ms")
    ttft.sort()
    mean = sum(ttft) / max(1, len(ttft))
    rate = hits / max(1, queries)
    result[policy] = (rate, mean)
    exp = f"{100 * expected / max(1, blocks):.1f}%" if policy == "prefix_affinity" else "-"
    print(f"{policy:<16} {ok:>8} {out_tokens / duration:>9.1f} {ok / duration:>6.2f} {mean:>9.1f} {pct(ttft, 50):>6.1f}"
          f" {pct(ttft, 90):>6.1f} {100 * rate:>7.1f}% {exp:>8}  {' | '.join(per_round):<30} {'/'.join(map(str, routed)):>12}")
if "round_robin" in result and "prefix_affinity" in result:
    (rr, ttft_rr), (pa, ttft_pa) = result["round_robin"], result["prefix_affinity"]
    ratio = pa / rr if rr else float("inf")
    met = "met" if ratio >= 2 else "NOT met"
    lower = "lower" if ttft_pa < ttft_rr else "NOT lower"
    print(f"prefix_affinity / round_robin: hit rate x{ratio:.2f} (target >= 2: {met}); "
          f"mean TTFT {ttft_pa:.1f} ms vs {ttft_rr:.1f} ms, x{ttft_pa / ttft_rr:.2f} ({lower})")
PY
