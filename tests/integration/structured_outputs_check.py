#!/usr/bin/env python3
"""Constrained decoding end to end, judged by an oracle that is not ours.

Starts `conveyor serve` on a random-weight model with a real vocabulary
(Llama 3's 128k, Qwen 2's 152k tokens: the hard case for masks), sends
schema-, regex-, choice- and GBNF-constrained requests at temperature 1 through
every request field that asks for one, and checks that each request finishes
on its own (finish_reason "stop", not "length") with output that Python's
`jsonschema` (Debian's python3-jsonschema) accepts, or that matches the regex
by Python's `re`. Random weights know nothing of JSON: the constraint does all
the work. Exits 0 when every request passed, 77 (skip) when the models or
jsonschema are missing, 1 otherwise, printing what failed.

usage: structured_outputs_check.py CONVEYOR_BINARY MODELS_DIR [--requests N]
"""
import argparse
import concurrent.futures
import datetime
import ipaddress
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

SKIP = 77

SCHEMAS = {
    "nested": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 10},
                               "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["city", "zip"],
                "additionalProperties": False,
            },
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
        },
        "required": ["name", "age", "address"],
        "additionalProperties": False,
    },
    "enum_anyof": {
        "type": "object",
        "properties": {
            "status": {"enum": ["ok", "error", 3, None]},
            "value": {"anyOf": [{"type": "integer", "minimum": -5, "maximum": 5}, {"type": "boolean"},
                                {"type": "string", "maxLength": 4}]},
            "kind": {"const": "event"},
        },
        "required": ["status", "value", "kind"],
        "additionalProperties": False,
    },
    "recursive": {
        "$defs": {"node": {"type": "object",
                           "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99},
                                          "children": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                       "maxItems": 2}},
                           "required": ["id"], "additionalProperties": False}},
        "$ref": "#/$defs/node",
    },
    "formats": {
        "type": "object",
        "properties": {"day": {"type": "string", "format": "date"},
                       "at": {"type": "string", "format": "date-time"},
                       "id": {"type": "string", "format": "uuid"},
                       "clock": {"type": "string", "format": "time"},
                       "ip": {"type": "string", "format": "ipv4"}},
        "required": ["day", "at", "id", "clock", "ip"],
        "additionalProperties": False,
    },
    "bounded_patterns": {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$", "maxLength": 8},
                       "mail": {"type": "string", "format": "email", "minLength": 6, "maxLength": 24},
                       "word": {"type": "string", "pattern": "q", "minLength": 3, "maxLength": 5}},
        "required": ["code", "mail", "word"],
        "additionalProperties": False,
    },
    "array_prefix": {
        "type": "array",
        "prefixItems": [{"type": "number", "minimum": 0}, {"type": "string", "maxLength": 5}],
        "items": {"type": "boolean"},
        "minItems": 2, "maxItems": 4,
    },
}

REGEX = r"(yes|no), [a-z]{2,6} [0-9]{1,3}"
CHOICES = ["red", "green", "blue", "light blue"]
GBNF = r'''root ::= "move " dir " " num
dir ::= "north" | "south" | "east" | "west"
num ::= [1-9] [0-9]?'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body, timeout=300):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def check_formats(instance, schema):
    """python3-jsonschema checks formats only with optional packages; these
    are checked here, by the standard library, wherever a schema names one."""
    if isinstance(schema, dict) and "format" in schema and isinstance(instance, str):
        f = schema["format"]
        if f == "date":
            datetime.date.fromisoformat(instance)
        elif f == "date-time":
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", instance):
                raise ValueError(f"not an RFC 3339 date-time: {instance!r}")
            # RFC 3339 allows a leap second (:60), which Python's parser does not.
            datetime.datetime.fromisoformat(instance.replace("Z", "+00:00").replace("z", "+00:00")
                                            .replace("t", "T").replace(":60", ":59"))
        elif f == "time":
            if not re.fullmatch(r"\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", instance):
                raise ValueError(f"not an RFC 3339 full-time: {instance!r}")
            datetime.time.fromisoformat(instance.replace("Z", "+00:00").replace("z", "+00:00")
                                        .replace(":60", ":59"))
        elif f == "uuid":
            uuid.UUID(instance)
            if not re.fullmatch(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}", instance):
                raise ValueError(f"not a hyphenated UUID: {instance!r}")
        elif f == "ipv4":
            ipaddress.IPv4Address(instance)
        elif f == "email":
            if not re.fullmatch(r"[^@\s]+@[^@\s]+", instance):
                raise ValueError(f"not an email: {instance!r}")
    if isinstance(schema, dict) and isinstance(instance, dict):
        for k, v in instance.items():
            sub = schema.get("properties", {}).get(k)
            if sub is not None:
                check_formats(v, sub)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("conveyor")
    ap.add_argument("models")
    ap.add_argument("--requests", type=int, default=3, help="requests per case and model")
    args = ap.parse_args()
    try:
        import jsonschema
    except ImportError:
        print("SKIP: python3-jsonschema is not installed")
        return SKIP
    models = [m for m in ("tiny-llama3-q4_k_m.gguf", "tiny-qwen2-q4_k_m.gguf")
              if os.path.exists(os.path.join(args.models, m))]
    if not models:
        print(f"SKIP: no tiny-llama3/qwen2 model in {args.models}")
        return SKIP
    failures = []
    total = 0
    # The second setup is short of KV blocks: with n = 3 samples per request
    # (copy-on-write forks) sequences are preempted and swapped out and in,
    # and their matchers must come back where they were.
    # The third has its forward pass and a KV allocation fail (step 40, then allocation 90): the engine
    # restarts and recomputes the running requests, whose samplers replay
    # their tokens through their matchers.
    setups = [(m, ["--kv-cache-tokens", "65536"], 1, {}) for m in models]
    setups.append((models[0], ["--kv-cache-tokens", "1024", "--block-size", "16", "--preemption", "swap",
                               "--swap-space-tokens", "16384", "--max-num-seqs", "64"], 3, {}))
    setups.append((models[-1], ["--kv-cache-tokens", "65536", "--debug-fault-injection"], 1,
                   {"CONVEYOR_FAULTS": "executor=40,alloc=90"}))
    for model, flags, n, env in setups:
        port = free_port()
        server = subprocess.Popen([args.conveyor, "serve", "--model", os.path.join(args.models, model),
                                   "--port", str(port), "--log-level", "warn"] + flags,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ, **env))
        try:
            for _ in range(600):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                    break
                except Exception:
                    if server.poll() is not None:
                        print(server.stderr.read().decode())
                        return 1
                    time.sleep(0.1)
            cases = []
            for name, schema in SCHEMAS.items():
                strict = name != "recursive"
                cases.append((f"{name} response_format", "/v1/chat/completions", {
                    "messages": [{"role": "user", "content": "Answer in JSON."}],
                    "response_format": {"type": "json_schema",
                                        "json_schema": {"name": name, "schema": schema, "strict": strict}}},
                    ("schema", schema)))
                cases.append((f"{name} structured_outputs", "/v1/completions", {
                    "prompt": "JSON:", "structured_outputs": {"json": schema}}, ("schema", schema)))
            cases.append(("json_object", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 400,
                "response_format": {"type": "json_object"}}, ("schema", {"type": "object"})))
            # An email's local part has no bound (format cannot be combined
            # with maxLength), so, as with json_object, max_tokens may end it.
            cases.append(("email", "/v1/completions", {
                "prompt": "mail:", "max_tokens": 60, "json_schema": {"type": "string", "format": "email"}},
                ("schema", {"type": "string", "format": "email"})))
            cases.append(("llama.cpp json_schema", "/v1/completions", {
                "prompt": "x", "json_schema": SCHEMAS["enum_anyof"]}, ("schema", SCHEMAS["enum_anyof"])))
            cases.append(("regex", "/v1/completions", {"prompt": "x", "structured_outputs": {"regex": REGEX}},
                          ("regex", REGEX)))
            cases.append(("choice", "/v1/completions", {"prompt": "x", "structured_outputs": {"choice": CHOICES}},
                          ("choice", CHOICES)))
            cases.append(("gbnf", "/v1/completions", {"prompt": "x", "grammar": GBNF},
                          ("regex", r"move (north|south|east|west) [1-9][0-9]?")))

            def run(case, i):
                label, path, body, (kind, want) = case
                body = dict(body, temperature=1.0, seed=1000 + i, n=n)
                body.setdefault("max_tokens", 1500)
                status, reply = post(port, path, body)
                if status != 200:
                    return f"{model} {label}: HTTP {status} {reply}"
                if len(reply["choices"]) != n:
                    return f"{model} {label}: {len(reply['choices'])} choices, asked for {n}"
                for choice in reply["choices"]:
                    problem = judge(label, i, kind, want, choice)
                    if problem:
                        return problem
                return None

            def judge(label, i, kind, want, choice):
                text = choice["message"]["content"] if "message" in choice else choice["text"]
                # json_object bounds no string: random weights may never close
                # one, and then max_tokens ends the text. Only then is
                # "length" accepted, and the text must still open an object.
                if kind == "schema" and want.get("type") in ("object", "string") and len(want) <= 2 \
                        and choice["finish_reason"] == "length":
                    return None if text[:1] in '{"' else f"{model} {label}: {text[:100]!r}"
                if choice["finish_reason"] != "stop":
                    return f"{model} {label} seed {1000 + i}: finish_reason {choice['finish_reason']}: {text[:200]!r}"
                try:
                    if kind == "schema":
                        value = json.loads(text)
                        jsonschema.validate(value, want)
                        check_formats(value, want)
                    elif kind == "regex":
                        if not re.fullmatch(want, text):
                            raise ValueError(f"does not match {want!r}")
                    elif text not in want:
                        raise ValueError("not one of the choices")
                except Exception as e:  # noqa: BLE001 - any failure is a finding
                    return f"{model} {label} seed {1000 + i}: {type(e).__name__}: {e}: {text[:300]!r}"
                return None

            jobs = [(c, i) for c in cases for i in range(args.requests)]
            if n > 1:
                jobs = [(c, i) for c, i in jobs if "structured_outputs" in c[0] or c[0] == "regex"]
            total += len(jobs)
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                for result in pool.map(lambda j: run(*j), jobs):
                    if result:
                        failures.append(result)
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            if env:  # the engine must really have restarted, or the setup proved nothing
                restarts = sum(float(line.split()[-1]) for line in metrics.splitlines()
                               if line.startswith("conveyor:engine_restarts_total"))
                print(f"{model}, faults {env['CONVEYOR_FAULTS']}: {restarts:.0f} engine restarts")
                if restarts == 0:
                    failures.append(f"{model}: the fault-injection setup restarted nothing")
            if n > 1:  # the setup must really have preempted, or it proved nothing
                swaps = sum(float(line.split()[-1]) for line in metrics.splitlines()
                            if line.startswith("conveyor:num_preemptions_total"))
                print(f"{model}, n = {n}: {swaps:.0f} preemptions")
                if swaps == 0:
                    failures.append(f"{model}: the short-of-KV setup preempted nothing")
            # Refusals name what is wrong.
            status, reply = post(port, "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "x"}],
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": "n", "schema": {"type": "integer", "multipleOf": 3}}}})
            if status != 400 or "multipleOf" not in reply.get("error", {}).get("message", ""):
                failures.append(f"{model}: multipleOf not refused by name: {status} {reply}")
        finally:
            server.terminate()
            server.wait(timeout=60)
    for f in failures:
        print("FAIL:", f)
    print(f"{total - len(failures)} of {total} constrained requests finished with valid output on "
          f"{', '.join(models)}, with n = 3 under swap preemption on {models[0]}, and across engine restarts "
          f"on {models[-1]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
