#!/usr/bin/env python3
"""Schema-constrained streaming throughput of OpenAI-compatible servers, side by side.

Drives each target with CONCURRENCY streaming chat requests at once, all under
structured_throughput.py's schema, and prints per round: completion tokens/s
(all requests' completion tokens over the round's wall time), time to first
token and inter-token latency (p50, p99), the mean completion length, how
many requests stopped on max_tokens, and the share of outputs that parse as
JSON and validate against the schema (Python's jsonschema).

A target is NAME=URL (a server already running at that base URL) or
NAME=cmd:COMMAND, a command that starts a server on the port written as
{port} in it. Each target is warmed with one unmeasured round; a started
server is then stopped with SIGSTOP and continued only for its own rounds,
so that servers sharing a small machine never compute together. Rounds
alternate between the targets (A B A B ...), and every target sees the same
prompts and seeds.

The schema goes as response_format {"type": "json_object", "schema": ...}
(what llama.cpp's server reads; its b4748 ignores the schema given as
{"type": "json_schema", "json_schema": {...}}) unless --format json_schema.
Sampling is temperature 1 with top_p 1, top_k 0 and min_p 0, so that servers
with different default truncation draw from the same distribution (top_k 0
costs llama.cpp a sort of the whole vocabulary per token and slot: see
docs/benchmarks/history.md); --server-sampling sends temperature alone. --format none sends no schema
(and ignore_eos), the unconstrained reference. Conditions (machine, load, server
versions and flags) are the caller's to report.

usage: bench/structured_side_by_side.py TARGET [TARGET ...] [--concurrency 32] [--rounds 3]
  e.g. conveyor='cmd:build/conveyor serve --model M --port {port}'
       llama='cmd:llama-server -m M -c 32768 -np 32 -t 2 --port {port}'
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import jsonschema

sys.dont_write_bytecode = True  # importing the schema leaves no __pycache__ in bench/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from structured_throughput import SCHEMA  # noqa: E402  (the same schema as the single-server comparison)


def percentile(values, q):
    """The q-th percentile (0-100) by linear interpolation; NaN when empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def request_body(i, seed, max_tokens, fmt, server_sampling):
    body = {"messages": [{"role": "user", "content": f"Describe person {i} as JSON."}],
            "temperature": 1.0, "seed": seed, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True}  # conveyor's: tokens per chunk, for inter-token gaps; others ignore it
    if not server_sampling:
        body.update({"top_p": 1.0, "top_k": 0, "min_p": 0.0})
    if fmt == "none":  # the unconstrained reference: as many tokens, no schema
        body["ignore_eos"] = True
    elif fmt == "json_object":
        body["response_format"] = {"type": "json_object", "schema": SCHEMA}
    else:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}}
    return body


def stream_one(base_url, body):
    """One streaming chat request. Returns a dict: ttft, chunk times, text, usage tokens, finish, error."""
    url = urllib.parse.urlparse(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    out = {"chunks": [], "text": "", "tokens": None, "finish": None, "error": None}
    start = time.perf_counter()
    try:
        conn.request("POST", url.path.rstrip("/") + "/v1/chat/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            out["error"] = f"http {resp.status}: {resp.read()[:200]!r}"
            return out
        for raw in resp:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            event = json.loads(data)
            now = time.perf_counter() - start
            if event.get("usage"):
                out["tokens"] = event["usage"]["completion_tokens"]
            for choice in event.get("choices", []):
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    out["text"] += piece
                    # conveyor may carry several tokens in a chunk; llama.cpp sends one per chunk
                    ids = choice.get("token_ids") or (choice.get("delta") or {}).get("token_ids")
                    out["chunks"].append((now, len(ids) if ids else 1))
                if choice.get("finish_reason"):
                    out["finish"] = choice["finish_reason"]
    except Exception as e:  # a failed request is counted, not fatal to the run
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    out["e2e"] = time.perf_counter() - start
    return out


def run_round(base_url, concurrency, seed_base, max_tokens, fmt, server_sampling):
    bodies = [request_body(i, seed_base + i, max_tokens, fmt, server_sampling) for i in range(concurrency)]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda b: stream_one(base_url, b), bodies))
    wall = time.perf_counter() - start
    ok = [r for r in results if r["error"] is None]
    tokens = [r["tokens"] if r["tokens"] is not None else sum(n for _, n in r["chunks"]) for r in ok]
    ttft = [r["chunks"][0][0] for r in ok if r["chunks"]]
    itl = []  # a chunk's gap since the previous one, split evenly among its tokens
    for r in ok:
        for (t0, _), (t1, n) in zip(r["chunks"], r["chunks"][1:]):
            itl.extend([(t1 - t0) / n] * n)
    valid, invalid = 0, []
    for r in ok:
        try:
            jsonschema.validate(json.loads(r["text"]), SCHEMA)
            valid += 1
        except (ValueError, jsonschema.ValidationError) as e:
            invalid.append({"text": r["text"], "why": str(e).split("\n")[0], "finish": r["finish"]})
    return {"tok_s": sum(tokens) / wall, "wall_s": wall, "requests": len(results),
            "errors": [r["error"] for r in results if r["error"]],
            "mean_tokens": statistics.mean(tokens) if tokens else 0.0,
            "truncated": sum(1 for r in ok if r["finish"] == "length"),
            "valid": valid, "ttft_p50": percentile(ttft, 50), "ttft_p99": percentile(ttft, 99),
            "itl_p50": percentile(itl, 50), "itl_p99": percentile(itl, 99),
            "sample": ok[0]["text"][:200] if ok else "", "invalid": invalid,
            "outputs": [r["text"] for r in ok]}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base_url, proc, seconds=300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(base_url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass  # not listening yet, or llama.cpp's 503 while loading
        time.sleep(0.2)
    raise RuntimeError(f"{base_url} not healthy after {seconds} s")


class Target:
    def __init__(self, spec, log_dir):
        self.name, _, where = spec.partition("=")
        if not where:
            raise SystemExit(f"target {spec!r}: expected NAME=URL or NAME=cmd:COMMAND")
        self.command = where[4:] if where.startswith("cmd:") else None
        self.url = None if self.command else where.rstrip("/")
        self.log_dir = log_dir
        self.proc = None

    def start(self):
        if self.command is None:
            wait_healthy(self.url, None)
            return
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = open(os.path.join(self.log_dir, f"{self.name}.log"), "w")
        self.proc = subprocess.Popen(shlex.split(self.command.replace("{port}", str(port))),
                                     stdout=log, stderr=subprocess.STDOUT)
        wait_healthy(self.url, self.proc)

    def pause(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("targets", nargs="+", help="NAME=URL or NAME=cmd:COMMAND (with {port})")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--format", choices=["json_object", "json_schema", "none"], default="json_object",
                    help="none: no schema and ignore_eos, every request making --max-tokens tokens")
    ap.add_argument("--server-sampling", action="store_true",
                    help="send temperature alone, leaving top_p, top_k and min_p to each server")
    ap.add_argument("--log-dir", default=".", help="where started servers' output goes")
    ap.add_argument("--json", help="write every round's figures to this file")
    args = ap.parse_args()
    targets = [Target(spec, args.log_dir) for spec in args.targets]
    rounds = {t.name: [] for t in targets}
    try:
        for t in targets:
            t.start()
            warm = run_round(t.url, args.concurrency, 1, args.max_tokens, args.format, args.server_sampling)
            print(f"warm-up {t.name:>10}: {warm['wall_s']:.0f} s, {warm['tok_s']:.1f} tok/s", flush=True)
            t.pause()
        measure(targets, rounds, args)
    finally:
        for t in targets:
            t.stop()
    report(rounds, targets, args)


def measure(targets, rounds, args):
    for r in range(args.rounds):
        for t in targets:
            t.resume()
            try:
                m = run_round(t.url, args.concurrency, 1000 * (r + 1), args.max_tokens, args.format,
                              args.server_sampling)
            finally:
                t.pause()
            rounds[t.name].append(m)
            print(f"round {r} {t.name:>10}: {m['tok_s']:7.1f} tok/s  TTFT p50 {m['ttft_p50'] * 1e3:7.0f} ms "
                  f"p99 {m['ttft_p99'] * 1e3:7.0f} ms  ITL p50 {m['itl_p50'] * 1e3:6.1f} ms "
                  f"p99 {m['itl_p99'] * 1e3:6.1f} ms  mean {m['mean_tokens']:5.1f} tokens  "
                  f"valid {m['valid']}/{m['requests']}  max_tokens hit {m['truncated']}  "
                  f"errors {len(m['errors'])}", flush=True)
            for e in m["errors"][:3]:
                print(f"    error: {e}", flush=True)


def report(rounds, targets, args):
    print(f"\nmedians over {args.rounds} rounds, {args.concurrency} streams:")
    med = {}
    for name, ms in rounds.items():
        med[name] = {k: statistics.median(m[k] for m in ms)
                     for k in ("tok_s", "ttft_p50", "ttft_p99", "itl_p50", "itl_p99", "mean_tokens")}
        valid = sum(m["valid"] for m in ms)
        total = sum(m["requests"] for m in ms)
        print(f"  {name:>10}: {med[name]['tok_s']:7.1f} tok/s  TTFT p50 {med[name]['ttft_p50'] * 1e3:.0f} ms "
              f"p99 {med[name]['ttft_p99'] * 1e3:.0f} ms  ITL p50 {med[name]['itl_p50'] * 1e3:.1f} ms "
              f"p99 {med[name]['itl_p99'] * 1e3:.1f} ms  valid {valid}/{total}")
        print(f"  {'':>10}  sample: {ms[0]['sample']!r}")
    if len(targets) >= 2:
        a, b = targets[0].name, targets[1].name
        print(f"  {a}/{b}: throughput {med[a]['tok_s'] / med[b]['tok_s']:.2f}, "
              f"TTFT p50 {med[a]['ttft_p50'] / med[b]['ttft_p50']:.2f}, "
              f"ITL p50 {med[a]['itl_p50'] / med[b]['itl_p50']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rounds": rounds, "medians": med}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
