"""Tool calls through the tool loop: does the model call the right tool with the right arguments?

Two datasets, read in place from ``../shared/benchmarks/tool_calling/`` (never copied):

- **API-Bank level-1** (Apache-2.0): every annotated API call of the level-1 dialogues is one
  sample: the dialogue up to that call (earlier calls and their results included, as tool messages)
  with the dialogue's APIs as tools — name, description, parameters and (as ``ToolSpec.produces``)
  output fields from ``all_apis.csv``. **The table's parameter lists are not the interface the
  dialogues were recorded against** for 117 of the 172 calls (CancelTimedSwitch takes ``switch_time``
  in the table and ``time`` in every recorded call; Calculator ``infix_expression`` / ``formula``), so
  with the table alone no model can get those arguments right. ``--schemas recorded`` (the default)
  takes each API's parameter names from its recorded calls in all the given-desc dialogues (levels 1
  and 2): required = present in every recorded call; type and description from the table where the
  name agrees, else the type of the recorded values and, for values all shaped like
  ``2023-03-19 09:30:00``, the description "Format: %Y-%m-%d %H:%M:%S" (the table's own wording for
  its time parameters). Only names, types and formats are taken, never a value. ``--schemas table``
  is the table as it is (the figures before issue 20 were measured so). Scored: tool name; arguments exactly the annotated
  ``param_dict`` (values compared as strings); arguments right up to case and surrounding spaces.
  "Now" is the conversation's date where the dialogue states one ("Today is 2021-10-13", anywhere in
  it: a real assistant always knows the date) at the time of day of ``--now``, else ``--now``
  (default :data:`DEFAULT_NOW`).
- **BFCL v4 live_simple** (Apache-2.0): each case's question with its function as the only tool,
  scored with BFCL's AST rules (:mod:`benchmarks._bfcl`); "now" is ``--now``.

Both go through :class:`ToolLoop` with the same system prompt (:data:`SYSTEM`) and stub tools (API-Bank's
recorded output, or ``{"status": "ok"}``), so a run costs only generation. **The scored call is what
the assistant would actually execute first**: the first tool run whose status is "ok" (it ran). A call
the loop refused (a missing prerequisite: the loop runs the producer first) or that failed
validation and went to a repair round is not it; the run stops as soon as one call has run. When no
call ran within the loop's three model turns, the first attempted call is scored (a wrong call still
counts as wrong); no call at all is a miss.

Rows (``--rows``): the cumulative configurations of :mod:`benchmarks._tool_rows` on the same samples,
before issue 20's switches and with each one added; without it, one row with the settings' defaults.
Per row and dataset: tool name %, arguments % (exact / AST), lenient %, generation time per sample,
and the loop's own time (wall time minus the time spent waiting for the model) against it; per model,
tokens/s of generation in the same run (completion tokens over the time spent waiting for the model,
prompt processing included: the speed a user waits through), so accuracy can be set against speed.

    .venv/bin/python benchmarks/tool_calling.py [--dataset apibank|bfcl|both] [--limit N] [--rows]
        [--model ID | --models A,B] [--now 2023-01-02T09:00:00] [--json]

The embedded 0.5B model (llama.cpp, 2 threads) takes roughly 5-15 minutes per row and dataset.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import csv
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pydantic import ConfigDict, Field, create_model  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from assistant.chat.arguments import warm_up  # noqa: E402
from assistant.chat.tool_loop import LoopEventType, ToolLoop  # noqa: E402
from assistant.config import Settings, ToolCallingSettings  # noqa: E402
from assistant.llm.base import ChatMessage, ChatModel, Finished, GenerationOptions, ToolCall, ToolSpec  # noqa: E402
from assistant.llm.queue import InferenceQueue  # noqa: E402
from assistant.tools.base import Tool, ToolContext, ToolRegistry  # noqa: E402
from benchmarks import _bfcl  # noqa: E402
from benchmarks._tool_rows import DEFAULT_ROW, LOOP_BUDGET, Outcome, row_settings, summary, table  # noqa: E402

DATA = _bfcl.SHARED / "api-bank"
SAMPLES = DATA / "lv1-lv2-samples" / "level-1-given-desc"
SYSTEM = ("You are a helpful assistant. Use the tools when the user's request needs one; call a tool "
          "with exactly the values the conversation gives.")
# "Now" when a dialogue states no date (all of BFCL): a fixed Monday morning, so runs compare.
DEFAULT_NOW = datetime(2023, 1, 2, 9, 0, tzinfo=UTC)
MAX_TOKENS = 256  # a call with a long list argument (BFCL) fits; a rambling answer stops there
TYPES: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict,
                         "datetime": str, "date": str, "time": str}
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}
STATED_DATE = re.compile(r"\b(?:today is|today's date is|current date is)\s+(\d{4}-\d{2}-\d{2})", re.IGNORECASE)
Score = tuple[bool, bool, bool, str]  # name right, arguments right, arguments right leniently, why not


@dataclass(frozen=True)
class Api:
    name: str
    description: str
    parameters: dict[str, dict[str, str]]
    produces: tuple[str, ...] = ()  # the names of its output fields
    required: tuple[str, ...] | None = None  # None: every parameter

    def spec(self) -> ToolSpec:
        properties = {
            name: {"type": JSON_TYPES[TYPES.get(p.get("type", "str"), str)], "description": p.get("description", "")}
            for name, p in self.parameters.items()
        }
        required = list(properties) if self.required is None else list(self.required)
        return ToolSpec(self.name, self.description, {"type": "object", "properties": properties,
                                                      "required": required, "additionalProperties": False},
                        produces=self.produces)


@dataclass
class Sample:
    file: str
    history: list[ChatMessage]
    apis: list[str]
    expected: ToolCall
    recorded: dict[tuple[str, str], Any] = field(default_factory=dict)  # (api, args json) -> output
    date: date | None = None  # the date the dialogue states, if any


@dataclass
class Task:
    """One sample of either dataset, ready for the loop."""

    dataset: str
    id: str
    messages: list[ChatMessage]
    tools: list[Tool]
    expected: ToolCall
    score: Callable[[ToolCall | None], Score]
    now: datetime
    conversation_date: datetime | None = None  # the day the dialogue states, if it states one


def _fields(value: Any) -> dict[str, dict[str, str]]:
    if isinstance(value, dict):
        return value
    return {str(p): {"type": "str", "description": ""} for p in value or ()}  # a few rows list bare names


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
            apis[name] = Api(name, values.get("description", name), _fields(values.get("input_parameters")),
                             tuple(_fields(values.get("output_parameters"))))
    return apis


DIALOGUES = SAMPLES.parent  # level-1-given-desc and level-2-toolsearcher
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def recorded_calls(directory: Path = DIALOGUES) -> dict[str, list[dict[str, Any]]]:
    """API name -> the ``param_dict`` of every recorded call of it, in every dialogue under ``directory``."""
    calls: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(directory.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            turn = json.loads(line) if line.strip() else {}
            if turn.get("role") == "API" and isinstance(turn.get("param_dict"), dict):
                calls.setdefault(turn["api_name"], []).append(turn["param_dict"])
    return calls


def _value_type(values: list[Any]) -> str:
    for name, kind in (("bool", bool), ("int", int), ("float", (int, float)), ("list", list), ("dict", dict)):
        if all(isinstance(v, kind) for v in values) and (name == "bool" or not any(isinstance(v, bool) for v in values)):
            return name
    return "str"


def _value_format(values: list[Any]) -> str:
    if values and all(isinstance(v, str) and _DATETIME.match(v) for v in values):
        return "Format: %Y-%m-%d %H:%M:%S"
    if values and all(isinstance(v, str) and _DATE.match(v) for v in values):
        return "Format: %Y-%m-%d"
    return ""


def recorded_interface(api: Api, calls: list[dict[str, Any]]) -> Api:
    """``api`` with the parameter names its recorded calls use (see the module docstring)."""
    if not calls:
        return api
    names = list(dict.fromkeys(k for c in calls for k in c))
    parameters: dict[str, dict[str, str]] = {}
    for name in names:
        if name in api.parameters:
            parameters[name] = api.parameters[name]
        else:
            values = [c[name] for c in calls if name in c]
            parameters[name] = {"type": _value_type(values), "description": _value_format(values)}
    required = tuple(n for n in names if all(n in c for c in calls))
    return Api(api.name, api.description, parameters, api.produces, required)


def _key(name: str, arguments: dict[str, Any]) -> tuple[str, str]:
    return name, json.dumps({k: str(v) for k, v in sorted(arguments.items())})


def stated_date(texts: list[str]) -> date | None:
    """The first date a dialogue states as today's ("Today is 2021-10-13")."""
    for text in texts:
        if match := STATED_DATE.search(text):
            with contextlib.suppress(ValueError):
                return date.fromisoformat(match.group(1))
    return None


def load_samples(directory: Path = SAMPLES) -> Iterator[Sample]:
    """One sample per annotated API call of every level-1 dialogue."""
    for path in sorted(directory.glob("*-level-1-*.jsonl")):
        turns = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        apis = sorted({t["api_name"] for t in turns if t["role"] == "API"})
        recorded = {_key(t["api_name"], t["param_dict"]): t["result"]["output"] for t in turns if t["role"] == "API"}
        day = stated_date([t["text"] for t in turns if t["role"] != "API"])
        history: list[ChatMessage] = [ChatMessage("system", SYSTEM)]
        for n, turn in enumerate(turns):
            if turn["role"] == "User":
                history.append(ChatMessage("user", turn["text"]))
            elif turn["role"] == "AI":
                history.append(ChatMessage("assistant", turn["text"]))
            else:
                call = ToolCall(f"call_{n}", turn["api_name"], turn["param_dict"])
                yield Sample(path.name, list(history), apis, call, recorded, day)
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


def apibank_tasks(samples: list[Sample], apis: dict[str, Api], now: datetime = DEFAULT_NOW) -> list[Task]:
    """API-Bank samples as tasks: "now" on the dialogue's stated date, at ``now``'s time of day."""
    out = []
    for s in samples:
        when = now.replace(year=s.date.year, month=s.date.month, day=s.date.day) if s.date else now
        out.append(Task("apibank", s.file, s.history, [stub_tool(apis[n], s.recorded) for n in s.apis if n in apis],
                        s.expected, lambda called, want=s.expected: (*score(want, called), ""), when,
                        when if s.date else None))
    return out


def bfcl_tool(spec: ToolSpec) -> Tool:
    """A BFCL function as a stub tool: its JSON schema validated by a pydantic model."""
    return Tool(spec, "bfcl", lambda ctx, **arguments: {"status": "ok"}, _bfcl.arguments_model(spec.parameters,
                                                                                               spec.name))


def bfcl_tasks(cases: list[_bfcl.Case], now: datetime = DEFAULT_NOW) -> list[Task]:
    """BFCL cases as tasks: our system prompt (a case's own system turns appended to it), the question."""
    out = []
    for case in cases:
        own = [m.content for m in case.messages if m.role == "system"]
        system = ChatMessage("system", "\n\n".join([SYSTEM, *own]))
        messages = [system, *(m for m in case.messages if m.role != "system")]

        def scorer(called: ToolCall | None, case: _bfcl.Case = case) -> Score:
            name_ok, ok, why = _bfcl.check(called, case.specs[0], case.answer)
            return name_ok, ok, ok, why

        out.append(Task("bfcl", case.id, messages, [bfcl_tool(s) for s in case.specs], case.expected, scorer, now))
    return out


class MeteredQueue(InferenceQueue):
    """The inference queue, counting the completion tokens of every generation (for tokens/s)."""

    completion_tokens = 0

    async def stream(self, messages: list[ChatMessage], options: GenerationOptions):  # type: ignore[override]
        async with contextlib.aclosing(super().stream(messages, options)) as events:
            async for event in events:
                if isinstance(event, Finished):
                    self.completion_tokens += event.usage.completion
                yield event


def make_loop(queue: InferenceQueue, registry: ToolRegistry, settings: ToolCallingSettings, task: Task) -> ToolLoop:
    """The loop with the task's "now" (and the conversation's date, when the dialogue gives one)."""
    dated: dict[str, Any] = {"conversation_date": task.conversation_date} if task.conversation_date else {}
    try:
        return ToolLoop(queue, registry, settings, now=lambda: task.now, **dated)
    except TypeError:  # a loop without `now` (before issue 20's wiring): it uses the clock
        return ToolLoop(queue, registry, settings)


async def run_task(queue: MeteredQueue, task: Task, settings: ToolCallingSettings,
                   options: GenerationOptions) -> Outcome:
    """Run the loop until the first call that ran (see the module's docstring) and score that call."""
    loop = make_loop(queue, ToolRegistry(task.tools), settings, task)
    tokens_before = queue.completion_tokens
    started = time.perf_counter()
    generation = 0.0
    turns = 0
    model_started: float | None = None
    started_calls: dict[str, ToolCall] = {}  # the latest call the loop started under each id
    written: ToolCall | None = None  # the first call the model wrote (the first attempted one)
    malformed: ToolCall | None = None  # a reply that looked like a call but was none
    scored: ToolCall | None = None
    async with contextlib.aclosing(loop.stream(task.messages, options, ToolContext("benchmark"))) as events:
        async for event in events:
            data = event.data
            if event.type is LoopEventType.MODEL_START:
                model_started, turns = event.at, turns + 1
            elif event.type is LoopEventType.MODEL_END:
                if model_started is not None:
                    generation += (event.at - model_started) * 1000
                    model_started = None
                if written is None and data.get("tool_calls"):
                    first = data["tool_calls"][0]
                    written = ToolCall("written", first["name"], dict(first.get("arguments") or {}))
            elif event.type is LoopEventType.TOOL_START:
                call = ToolCall(data["id"], data["name"], dict(data.get("arguments") or {}))  # as reviewed
                started_calls[call.id] = call
            elif event.type is LoopEventType.TOOL_END:
                malformed = malformed or ToolCall(data["id"], data["name"], {})
                if not data.get("error") and data.get("status", "ok") == "ok" and data["id"] in started_calls:
                    ran = started_calls[data["id"]]
                    arguments = data.get("arguments")  # what ran, where the loop reports it
                    scored = ToolCall(ran.id, ran.name, dict(arguments)) if isinstance(arguments, dict) else ran
                    break
    wall_ms = (time.perf_counter() - started) * 1000
    called = scored or written or malformed
    name_ok, exact, lenient, why = task.score(called)
    return Outcome(task.dataset, task.id, {"name": task.expected.name, "arguments": task.expected.arguments},
                   {"name": called.name, "arguments": called.arguments} if called else None, scored is not None,
                   name_ok, exact, lenient, generation, max(wall_ms - generation, 0.0),
                   queue.completion_tokens - tokens_before, turns, why)


def evaluate(model: ChatModel, tasks: list[Task], settings: ToolCallingSettings | None = None, *,
             row: str = DEFAULT_ROW, progress: Callable[[Any], Any] = lambda it: it) -> list[Outcome]:
    """Every task through the loop with ``settings`` (default: the settings' defaults), in order."""
    settings = settings or ToolCallingSettings(**LOOP_BUDGET)
    options = GenerationOptions(temperature=0.0, max_tokens=MAX_TOKENS)
    warm_up()  # the schema checker's one-time import is start-up, not the loop's time per call

    async def go() -> list[Outcome]:
        queue = MeteredQueue(model, request_timeout_secs=600)
        try:
            return [await run_task(queue, t, settings, options) for t in progress(tasks)]
        finally:
            queue.close()

    outcomes = asyncio.run(go())
    name = getattr(model, "model", None) or getattr(model, "id", "")
    for o in outcomes:
        o.row, o.model = row, str(name)
    return outcomes


def load_tasks(dataset: str, limit: int | None, now: datetime, schemas: str = "recorded") -> list[Task]:
    """The tasks of ``dataset`` (apibank, bfcl or both), the first ``limit`` of each; API-Bank's tools
    with the ``schemas`` of the module docstring (recorded or table)."""
    tasks: list[Task] = []
    if dataset in ("apibank", "both"):
        apis = load_apis()
        if schemas == "recorded":
            calls = recorded_calls()
            apis = {name: recorded_interface(api, calls.get(name, [])) for name, api in apis.items()}
        tasks += apibank_tasks(list(load_samples())[:limit], apis, now)
    if dataset in ("bfcl", "both"):
        tasks += bfcl_tasks(_bfcl.load_cases()[:limit], now)
    return tasks


def _now(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=("apibank", "bfcl", "both"), default="both")
    parser.add_argument("--limit", type=int, default=None, help="only the first N samples of each dataset")
    parser.add_argument("--model", default=None, help="a packaged model id (default: the configured default)")
    parser.add_argument("--models", default=None, help="comma-separated model ids, each run in turn")
    parser.add_argument("--rows", action="store_true", help="the cumulative rows before/+constrained/.../+hygiene")
    parser.add_argument("--now", type=_now, default=DEFAULT_NOW,
                        help=f"ISO date-time of 'now' where the dialogue states no date (default {DEFAULT_NOW:%Y-%m-%dT%H:%M})")
    parser.add_argument("--schemas", choices=("recorded", "table"), default="recorded",
                        help="API-Bank's parameter lists: from the recorded calls (default) or all_apis.csv as it is")
    parser.add_argument("--json", action="store_true", help="print the summaries and every outcome as JSON")
    args = parser.parse_args(argv)
    from assistant.llm.registry import create_chat_model

    models = args.models.split(",") if args.models else [args.model]
    tasks = load_tasks(args.dataset, args.limit, args.now, args.schemas)
    outcomes: list[Outcome] = []
    for model_id in models:
        settings = Settings.load(inference={"temperature": 0.0, **({"model": model_id} if model_id else {})})
        model = create_chat_model(settings.inference, settings.data_dir)
        for row, loop_settings in row_settings(args.rows):
            for dataset in dict.fromkeys(t.dataset for t in tasks):
                part = [t for t in tasks if t.dataset == dataset]
                done = evaluate(model, part, loop_settings, row=row, progress=lambda it, d=dataset, r=row, m=settings:
                                tqdm(it, desc=f"{m.inference.model} {r} {d}", unit="call"))
                for o in done:
                    o.model = settings.inference.model
                outcomes += done
    if args.json:
        groups: dict[str, Any] = {}
        for o in outcomes:
            groups.setdefault(f"{o.model} | {o.row} | {o.dataset}", []).append(o)
        print(json.dumps({"summaries": {k: summary(v) for k, v in groups.items()},
                          "outcomes": [asdict(o) for o in outcomes]}, indent=1, default=str))
        return 0
    print(table(outcomes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
