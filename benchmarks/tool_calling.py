"""API-Bank level-1 through the tool loop: does the model call the right API with the right arguments?

Every API call of the level-1 dialogues of ``../shared/benchmarks/tool_calling/api-bank``
(Apache-2.0; read in place, never copied) becomes one sample: the dialogue up to that call (earlier
calls and their results included, as tool messages) goes through :class:`ToolLoop` with the
dialogue's APIs as tools — their name, description and parameter schema from API-Bank's
``all_apis.csv`` — and the first call the model makes is compared with the annotated one. The
tools are stubs that return API-Bank's recorded output, so a run costs only generation.

Figures: the share of samples whose tool name is right, whose arguments are exactly right
(the annotated ``param_dict``, values compared as strings) and right up to case and surrounding
whitespace; and the loop's own time per sample — wall time minus the time spent waiting for the
model — against the generation time measured in the same run (the ratio is the overhead).

    .venv/bin/python benchmarks/tool_calling.py [--limit N] [--model qwen2.5-coder-0.5b-instruct] [--json]

The embedded model (llama.cpp, 2 threads) takes about 5-15 minutes for all samples on two cores.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import csv
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pydantic import ConfigDict, Field, create_model  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from assistant.chat.tool_loop import ToolLoop  # noqa: E402
from assistant.config import Settings, ToolCallingSettings  # noqa: E402
from assistant.llm.base import ChatMessage, ChatModel, GenerationOptions, ToolCall, ToolSpec  # noqa: E402
from assistant.llm.queue import InferenceQueue  # noqa: E402
from assistant.tools.base import Tool, ToolContext, ToolRegistry  # noqa: E402

DATA = ROOT.parent / "shared" / "benchmarks" / "tool_calling" / "api-bank"
SAMPLES = DATA / "lv1-lv2-samples" / "level-1-given-desc"
SYSTEM = ("You are a helpful assistant. Use the tools when the user's request needs one; call a tool "
          "with exactly the values the conversation gives.")
TYPES: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict,
                         "datetime": str, "date": str, "time": str}
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


@dataclass(frozen=True)
class Api:
    name: str
    description: str
    parameters: dict[str, dict[str, str]]

    def spec(self) -> ToolSpec:
        properties = {
            name: {"type": JSON_TYPES[TYPES.get(p.get("type", "str"), str)], "description": p.get("description", "")}
            for name, p in self.parameters.items()
        }
        return ToolSpec(self.name, self.description, {"type": "object", "properties": properties,
                                                      "required": list(properties)})


@dataclass
class Sample:
    file: str
    history: list[ChatMessage]
    apis: list[str]
    expected: ToolCall
    recorded: dict[tuple[str, str], Any] = field(default_factory=dict)  # (api, args json) -> output


@dataclass
class Outcome:
    file: str
    expected: dict[str, Any]
    called: dict[str, Any] | None
    name_ok: bool
    args_exact: bool
    args_lenient: bool
    generation_ms: float
    overhead_ms: float


def load_apis(path: Path = DATA / "data" / "all_apis.csv") -> dict[str, Api]:
    """API-Bank's API table: its ``api_info`` column is Python assignments (description = ...)."""
    apis = {}
    with path.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            values: dict[str, Any] = {}
            try:
                body = ast.parse(row["api_info"]).body
            except SyntaxError:  # a few rows have no description ("."): not level-1 APIs
                continue
            for node in body:
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    values[node.targets[0].id] = ast.literal_eval(node.value)
            name = row["类名"].strip()
            parameters = values.get("input_parameters", {})
            if not isinstance(parameters, dict):  # a few rows list bare names, or none
                parameters = {str(p): {"type": "str", "description": ""} for p in parameters or ()}
            apis[name] = Api(name, values.get("description", name), parameters)
    return apis


def _key(name: str, arguments: dict[str, Any]) -> tuple[str, str]:
    return name, json.dumps({k: str(v) for k, v in sorted(arguments.items())})


def load_samples(directory: Path = SAMPLES) -> Iterator[Sample]:
    """One sample per annotated API call of every level-1 dialogue."""
    for path in sorted(directory.glob("*-level-1-*.jsonl")):
        turns = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        apis = sorted({t["api_name"] for t in turns if t["role"] == "API"})
        recorded = {_key(t["api_name"], t["param_dict"]): t["result"]["output"] for t in turns if t["role"] == "API"}
        history: list[ChatMessage] = [ChatMessage("system", SYSTEM)]
        for n, turn in enumerate(turns):
            if turn["role"] == "User":
                history.append(ChatMessage("user", turn["text"]))
            elif turn["role"] == "AI":
                history.append(ChatMessage("assistant", turn["text"]))
            else:
                call = ToolCall(f"call_{n}", turn["api_name"], turn["param_dict"])
                yield Sample(path.name, list(history), apis, call, recorded)
                result = turn["result"]
                payload = {"error": result["exception"]} if result.get("exception") else {"result": result["output"]}
                history += [ChatMessage("assistant", "", tool_calls=(call,)),
                            ChatMessage("tool", json.dumps(payload, default=str), tool_call_id=call.id, name=call.name)]


def stub_tool(api: Api, recorded: dict[tuple[str, str], Any]) -> Tool:
    """A tool with the API's schema that answers with API-Bank's recorded output."""
    fields = {name: (TYPES.get(p.get("type", "str"), str) | None, Field(None, description=p.get("description")))
              for name, p in api.parameters.items()}
    model = create_model(f"{api.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)

    def run(ctx: ToolContext, **arguments: Any) -> Any:
        return recorded.get(_key(api.name, {k: v for k, v in arguments.items() if v is not None}), "success")

    return Tool(api.spec(), "api-bank", run, model)


def _lenient(value: Any) -> str:
    return " ".join(str(value).split()).lower()


def score(expected: ToolCall, called: ToolCall | None) -> tuple[bool, bool, bool]:
    if called is None or called.name != expected.name:
        return False, False, False
    want = {k: str(v) for k, v in expected.arguments.items()}
    got = {k: str(v) for k, v in called.arguments.items() if v is not None}
    lenient = {k: _lenient(v) for k, v in want.items()} == {k: _lenient(v) for k, v in got.items()}
    return True, want == got, lenient


async def run_sample(queue: InferenceQueue, apis: dict[str, Api], sample: Sample,
                     options: GenerationOptions) -> Outcome:
    registry = ToolRegistry(stub_tool(apis[name], sample.recorded) for name in sample.apis if name in apis)
    loop = ToolLoop(queue, registry, ToolCallingSettings(max_iterations=1, iteration_timeout_secs=300,
                                                         total_timeout_secs=600))
    started = time.perf_counter()
    result = await loop.run(sample.history, options, ToolContext("benchmark"))
    wall_ms = (time.perf_counter() - started) * 1000
    called = result.records[0].call if result.records else None
    name_ok, exact, lenient = score(sample.expected, called)
    return Outcome(sample.file, {"name": sample.expected.name, "arguments": sample.expected.arguments},
                   {"name": called.name, "arguments": called.arguments} if called else None,
                   name_ok, exact, lenient, result.generation_ms, max(wall_ms - result.generation_ms, 0.0))


def evaluate(model: ChatModel, samples: list[Sample], apis: dict[str, Api], *,
             progress: Callable[[Any], Any] = lambda it: it) -> list[Outcome]:
    options = GenerationOptions(temperature=0.0, max_tokens=160)

    async def go() -> list[Outcome]:
        queue = InferenceQueue(model, request_timeout_secs=600)
        try:
            return [await run_sample(queue, apis, s, options) for s in progress(samples)]
        finally:
            queue.close()

    return asyncio.run(go())


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    n = len(outcomes) or 1
    generation = statistics.fmean(o.generation_ms for o in outcomes) if outcomes else 0.0
    overhead = statistics.fmean(o.overhead_ms for o in outcomes) if outcomes else 0.0
    return {
        "samples": len(outcomes),
        "dialogues": len({o.file for o in outcomes}),
        "tool_name_accuracy": round(sum(o.name_ok for o in outcomes) / n, 3),
        "exact_arguments": round(sum(o.args_exact for o in outcomes) / n, 3),
        "lenient_arguments": round(sum(o.args_lenient for o in outcomes) / n, 3),
        "mean_generation_ms": round(generation, 1),
        "mean_loop_overhead_ms": round(overhead, 2),
        "overhead_ratio": round(overhead / generation, 5) if generation else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N samples")
    parser.add_argument("--model", default=None, help="a packaged model id (default: the configured default)")
    parser.add_argument("--json", action="store_true", help="print the summary and every outcome as JSON")
    args = parser.parse_args(argv)
    from assistant.llm.registry import create_chat_model

    settings = Settings.load(inference={"temperature": 0.0, **({"model": args.model} if args.model else {})})
    model = create_chat_model(settings.inference, settings.data_dir)
    apis = load_apis()
    samples = list(load_samples())[: args.limit]
    outcomes = evaluate(model, samples, apis, progress=lambda it: tqdm(it, desc="api-bank level-1", unit="call"))
    result = summary(outcomes)
    if args.json:
        print(json.dumps({"summary": result, "outcomes": [asdict(o) for o in outcomes]}, indent=1, default=str))
        return 0
    print(f"API-Bank level-1, {result['samples']} calls in {result['dialogues']} dialogues, "
          f"model {settings.inference.model}")
    print(f"  correct tool name        {result['tool_name_accuracy']:.1%}")
    print(f"  exactly right arguments  {result['exact_arguments']:.1%}")
    print(f"  right up to case/spaces  {result['lenient_arguments']:.1%}")
    print(f"  generation per sample    {result['mean_generation_ms']:.0f} ms")
    print(f"  loop overhead per sample {result['mean_loop_overhead_ms']:.2f} ms "
          f"(ratio to generation {result['overhead_ratio']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
