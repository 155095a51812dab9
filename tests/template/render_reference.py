#!/usr/bin/env python3
"""Renders Jinja templates the way Hugging Face transformers renders chat
templates, as the reference for conveyor's interpreter (template/jinja/).

Usage: render_reference.py CASES.json
CASES.json is a list of {"template": str, "context": {...}, "tcontext": {...},
"now": epoch_seconds}; "context" and "tcontext" are merged into the render
variables (tcontext wins). Prints a JSON list with, for each case,
{"ok": true, "text": str} or {"ok": false, "error": str}.
Exits 3 when jinja2 cannot be imported.

The environment is transformers' _compile_jinja_template:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
loopcontrols extension and the {% generation %} tag, the globals
raise_exception and strftime_now, and tojson as json.dumps(ensure_ascii=False).
"""

import datetime
import json
import sys

try:
    import jinja2
    from jinja2.exceptions import TemplateError
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as e:
    print(f"jinja2 is not importable: {e}", file=sys.stderr)
    sys.exit(3)


class Generation(Extension):
    """transformers' AssistantTracker, less the tracking: the body renders as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_generation_support")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def make_environment(now):
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        moment = datetime.datetime.fromtimestamp(now) if now is not None else datetime.datetime.now()
        return moment.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(case):
    try:
        env = make_environment(case.get("now"))
        template = env.from_string(case["template"])
        variables = {**case.get("context", {}), **case.get("tcontext", {})}
        return {"ok": True, "text": template.render(**variables)}
    except Exception as e:  # noqa: BLE001 - every failure is an answer here
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    json.dump([render(c) for c in cases], sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
