"""BFCL-style AST accuracy of function calling through the OpenAI-compatible endpoint, for each packaged model.

Every case of BFCL v4 ``live_simple`` (Apache-2.0, read in place from
``../shared/benchmarks/tool_calling/bfcl_live_simple/``: user-contributed single calls; see
:mod:`benchmarks._bfcl` for the data and the AST scoring rules) is sent as a client would send it: the
official ``openai`` SDK posts the case's chat turns to ``POST /v1/chat/completions`` of an
``assistant serve`` started here (a temporary data directory, a key made with the CLI) with the case's
function in ``tools`` and ``tool_choice: "auto"``, temperature 0; the first returned ``tool_calls``
entry is scored with BFCL's AST rules (function name, required parameters, types, accepted values). The
assistant's memory is switched off per request (the endpoint's ``memory`` extension field): each case
stands alone, as in BFCL, and the cases would otherwise be learned as memories of the key's user.

The baseline, in the same run: the same cases given to the same engine directly in this process
(``ChatModel.stream`` with the same tools, ``tool_choice`` and decoding options, no HTTP, no memory
step). The endpoint should lose nothing against it; the printed ratios are endpoint / direct for AST
accuracy and for the time per case (the endpoint's overhead: HTTP, JSON, the request's memory switch
and message conversion).

    .venv/bin/python benchmarks/bfcl.py [--limit N] [--models qwen2.5-coder-0.5b-instruct,smollm2-135m-instruct]
        [--base-url URL --key KEY] [--json]

``--base-url``/``--key`` measure a server already running (any OpenAI-compatible one: the direct baseline
is then skipped). This is development data (it was used while building issue 20's calling path), not a
held-out set: report it as such.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tqdm import tqdm

from assistant.llm.base import ChatMessage, GenerationOptions, ToolCall, ToolSpec, collect
from benchmarks import _bfcl
from benchmarks._served import ServedApp

PACKAGED = ("qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct")
MAX_TOKENS = 256  # a call's arguments fit; an answer in text is cut short (it scores as "no call" either way)


@dataclass
class Outcome:
    model: str
    path: str  # "endpoint" or "direct"
    case: str
    name_ok: bool
    ast_ok: bool
    why: str
    called: dict[str, Any] | None
    seconds: float


def _openai_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def _call(name: str, arguments: str) -> ToolCall:
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        parsed = {"__unparsed__": arguments}
    return ToolCall("call", name, parsed if isinstance(parsed, dict) else {"__value__": parsed})


def openai_named(case: _bfcl.Case) -> tuple[tuple[ToolSpec, ...], dict[str, str]]:
    """The case's functions under names OpenAI's API accepts (``^[a-zA-Z0-9_-]{1,64}$``: BFCL's
    ``uber.ride`` becomes ``uber_ride``, as BFCL's own OpenAI handler renames them), and the map back."""
    specs = tuple(replace(s, name=re.sub(r"[^a-zA-Z0-9_-]", "_", s.name)[:64]) for s in case.specs)
    return specs, {new.name: old.name for new, old in zip(specs, case.specs, strict=True)}


def _scored(case: _bfcl.Case, call: ToolCall | None, back: dict[str, str]) -> tuple[bool, bool, str]:
    if call is not None:
        call = replace(call, name=back.get(call.name, call.name))
    return _bfcl.check(call, case.specs[0], case.answer)


def ask_endpoint(client: Any, model: str, case: _bfcl.Case) -> Outcome:
    """One case through ``POST /v1/chat/completions`` (the openai SDK), scored."""
    specs, back = openai_named(case)
    start = time.perf_counter()
    reply = client.chat.completions.create(
        model=model, messages=_openai_messages(case.messages), tools=[s.openai() for s in specs],
        tool_choice="auto", temperature=0.0, max_tokens=MAX_TOKENS,
        extra_body={"memory": {"retrieve": False, "learn": False}})
    seconds = time.perf_counter() - start
    calls = reply.choices[0].message.tool_calls or []
    call = _call(calls[0].function.name, calls[0].function.arguments) if calls else None
    return _outcome(model, "endpoint", case, call, back, seconds)


def ask_direct(engine: Any, model: str, case: _bfcl.Case, options: dict[str, Any]) -> Outcome:
    """The same case given to the engine in this process (the baseline), scored."""
    specs, back = openai_named(case)
    start = time.perf_counter()
    result = collect(engine.stream(list(case.messages), GenerationOptions(
        model=model, temperature=0.0, max_tokens=MAX_TOKENS, tools=specs, tool_choice="auto", **options)))
    seconds = time.perf_counter() - start
    return _outcome(model, "direct", case, result.tool_calls[0] if result.tool_calls else None, back, seconds)


def _outcome(model: str, path: str, case: _bfcl.Case, call: ToolCall | None, back: dict[str, str],
             seconds: float) -> Outcome:
    name_ok, ok, why = _scored(case, call, back)
    return Outcome(model, path, case.id, name_ok, ok, why,
                   None if call is None else {"name": back.get(call.name, call.name), "arguments": call.arguments},
                   seconds)


def run_endpoint(client: Any, model: str, cases: list[_bfcl.Case]) -> list[Outcome]:
    return [ask_endpoint(client, model, case) for case in tqdm(cases, desc=f"{model} endpoint", unit="case")]


def run_both(client: Any, engine: Any, model: str, cases: list[_bfcl.Case],
             options: dict[str, Any]) -> tuple[list[Outcome], list[Outcome]]:
    """Endpoint and direct, case by case in turn: both see the same load on a shared machine."""
    endpoint, direct = [], []
    for case in tqdm(cases, desc=f"{model} endpoint+direct", unit="case"):
        endpoint.append(ask_endpoint(client, model, case))
        direct.append(ask_direct(engine, model, case, options))
    return endpoint, direct


def link_models(installed: Path, into: Path) -> None:
    """The installed GGUF files, linked into the temporary data directory (never copied: ~560 MB)."""
    into.mkdir(parents=True, exist_ok=True)
    for gguf in installed.glob("*.gguf"):
        if not (into / gguf.name).exists():
            (into / gguf.name).symlink_to(gguf)


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    n = len(outcomes)
    return {"cases": n, "ast_pct": 100 * sum(o.ast_ok for o in outcomes) / n,
            "name_pct": 100 * sum(o.name_ok for o in outcomes) / n,
            "no_call_pct": 100 * sum(o.called is None for o in outcomes) / n,
            "s_per_case": statistics.fmean(o.seconds for o in outcomes),
            "s_median": statistics.median(o.seconds for o in outcomes)}


def table(groups: dict[tuple[str, str], list[Outcome]]) -> str:
    lines = [f"{'model':<30} {'path':<9} {'cases':>5} {'AST %':>6} {'name %':>7} {'no call %':>9} {'s/case':>7}"]
    for (model, path), outcomes in groups.items():
        s = summary(outcomes)
        lines.append(f"{model:<30} {path:<9} {s['cases']:>5} {s['ast_pct']:>6.1f} {s['name_pct']:>7.1f} "
                     f"{s['no_call_pct']:>9.1f} {s['s_per_case']:>7.2f}")
    for model in dict.fromkeys(m for m, _ in groups):
        if (model, "endpoint") in groups and (model, "direct") in groups:
            e, d = summary(groups[model, "endpoint"]), summary(groups[model, "direct"])
            acc = e["ast_pct"] / d["ast_pct"] if d["ast_pct"] else float("nan")
            lines.append(f"{model}: endpoint/direct AST accuracy ratio {acc:.3f}, "
                         f"time per case ratio {e['s_per_case'] / d['s_per_case']:.3f} "
                         f"(median {e['s_median'] / d['s_median']:.3f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N cases (258 in all)")
    parser.add_argument("--models", default=",".join(PACKAGED), help="comma-separated model ids")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server already running (.../v1)")
    parser.add_argument("--key", default=None, help="its API key (with --base-url)")
    parser.add_argument("--no-direct", action="store_true", help="skip the in-process baseline")
    parser.add_argument("--json", action="store_true", help="print the summaries and every outcome as JSON")
    args = parser.parse_args(argv)
    import openai

    from assistant.config import Settings

    cases = _bfcl.load_cases()[: args.limit]
    models = [m for m in args.models.split(",") if m]
    tools = Settings.load().tool_calling  # the endpoint decodes "auto" as the tool loop does
    direct_options = {"call_threshold": tools.call_threshold} if tools.decoding == "constrained" else {}
    groups: dict[tuple[str, str], list[Outcome]] = {}
    with tempfile.TemporaryDirectory(prefix="bfcl-") as tmp:
        served = None
        if args.base_url:
            base_url, key = args.base_url, args.key or ""
        else:
            served = ServedApp(Path(tmp), {"inference": {"backend": "llama-cpp", "request_timeout_secs": 600}},
                               start_timeout_secs=300)
            link_models(Settings.load().data_dir / "models", served.data_dir / "models")
            served.start()
            base_url, key = served.url("/v1"), served.key
        try:
            client = openai.OpenAI(base_url=base_url, api_key=key, timeout=900, max_retries=0)
            for model in models:
                if args.base_url or args.no_direct:
                    groups[model, "endpoint"] = run_endpoint(client, model, cases)
                    continue
                from assistant.llm.registry import create_chat_model

                settings = Settings.load(inference={"model": model, "temperature": 0.0})
                engine = create_chat_model(settings.inference, settings.data_dir)
                groups[model, "endpoint"], groups[model, "direct"] = run_both(client, engine, model, cases,
                                                                              direct_options)
        finally:
            if served is not None:
                served.stop()
    if args.json:
        print(json.dumps({"summaries": {f"{m} | {p}": summary(o) for (m, p), o in groups.items()},
                          "outcomes": [asdict(o) for v in groups.values() for o in v]}, indent=1))
    else:
        print(table(groups))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
