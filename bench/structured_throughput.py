#!/usr/bin/env python3
"""Throughput of schema-constrained streams against unconstrained ones.

Starts `conveyor serve` on MODEL and runs, alternately (ROUNDS times each),
CONCURRENCY requests at once that generate under a JSON schema
(response_format json_schema, strict) and the same requests without it
(ignore_eos, max_tokens set to the constrained round's mean length, so both
make about as many tokens per request). Prints each round's completion
tokens per second and the ratio of the medians. Conditions (model, threads,
machine) are the caller's to report.

usage: bench/structured_throughput.py CONVEYOR MODEL [--concurrency 32] [--rounds 3]
"""
import argparse
import concurrent.futures
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 6},
        "address": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                     "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                    "required": ["city", "zip"], "additionalProperties": False},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "tags", "address", "active"],
    "additionalProperties": False,
}


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def round_of(port, concurrency, constrained, max_tokens, seed):
    def one(i):
        body = {"messages": [{"role": "user", "content": f"Describe person {i} as JSON."}],
                "temperature": 1.0, "seed": seed + i, "max_tokens": max_tokens}
        if constrained:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}}
        else:
            body["ignore_eos"] = True
        return post(port, body)["usage"]["completion_tokens"]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        tokens = list(pool.map(one, range(concurrency)))
    seconds = time.perf_counter() - start
    return sum(tokens) / seconds, sum(tokens) / len(tokens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("conveyor")
    ap.add_argument("model")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([args.conveyor, "serve", "--model", args.model, "--port", str(port),
                               "--kv-cache-tokens", "131072", "--log-level", "warn"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        round_of(port, args.concurrency, True, 400, 1)  # warm: compile, mask caches, pages
        constrained, free = [], []
        for r in range(args.rounds):
            tps, mean_len = round_of(port, args.concurrency, True, 400, 100 * r)
            constrained.append(tps)
            ftps, _ = round_of(port, args.concurrency, False, max(1, round(mean_len)), 100 * r)
            free.append(ftps)
            print(f"round {r}: constrained {tps:8.1f} tok/s (mean {mean_len:.0f} tokens), "
                  f"unconstrained {ftps:8.1f} tok/s", flush=True)
        ratio = statistics.median(constrained) / statistics.median(free)
        print(f"{args.concurrency} streams on {os.path.basename(args.model)}: constrained/unconstrained "
              f"throughput {ratio:.2f} (medians {statistics.median(constrained):.1f} / {statistics.median(free):.1f} tok/s)")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
