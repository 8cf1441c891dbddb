"""Call or answer? The constrained decoder's decision, measured where a dialogue must call and where it must not.

The tool datasets only hold turns that must call a tool, so on them alone "always call" looks best,
and a chat where every "thanks!" calls a tool is broken. API-Bank's level-1 dialogues (Apache-2.0,
read in place) have both: every recorded API call is a *call point* (the 172 samples of
benchmarks/tool_calling.py), and a user turn the assistant answers in its own words — asking for a
missing detail, confirming, answering — with no call right after them is an *answer point* ("One
moment while I check" before a call is neither). At each point the prompt is what the tool loop sends (the same system prompt, the date line,
the dialogue's APIs with their recorded parameter names and the producers named, see
:mod:`benchmarks.tool_calling`) and the embedded model's probability that its reply opens a call
and whether its likeliest first token opens one (:meth:`LlamaCppChatModel.call_odds`, one prompt
evaluation, no generation) are recorded.

Printed: for thresholds 0.05 ... 0.9, the share of call points that call (recall), of answer points
that call (false calls), and balanced accuracy; the threshold with the best balanced accuracy, chosen
on one half of the dialogues and measured on the other (both ways: the held-out figure is the one to
believe), and on all of them.

    .venv/bin/python benchmarks/tool_decision.py [--limit N] [--model ID] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tqdm.auto import tqdm  # noqa: E402

from assistant.chat.call_review import CallReviewer  # noqa: E402
from assistant.config import Settings, ToolCallingSettings  # noqa: E402
from assistant.llm.base import ChatMessage, GenerationOptions, ToolCall  # noqa: E402
from benchmarks.tool_calling import (  # noqa: E402
    DEFAULT_NOW,
    SAMPLES,
    SYSTEM,
    load_apis,
    recorded_calls,
    recorded_interface,
    stated_date,
)

THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass
class Point:
    dialogue: str
    must_call: bool
    p_call: float = 0.0
    top_is_call: bool = False  # the likeliest first token opens a call (greedy decoding would call)


def decision_points(directory: Path = SAMPLES) -> list[tuple[str, list[ChatMessage], list[str], bool]]:
    """(dialogue, messages up to the point, the dialogue's APIs, must call) after every user turn."""
    points = []
    for path in sorted(directory.glob("*-level-1-*.jsonl")):
        turns = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        apis = sorted({t["api_name"] for t in turns if t["role"] == "API"})
        history = [ChatMessage("system", SYSTEM)]
        for n, turn in enumerate(turns):
            if turn["role"] == "API":  # a call point: what the tool benchmark scores
                points.append((path.name, list(history), apis, True))
            if turn["role"] == "User":
                history.append(ChatMessage("user", turn["text"]))
                following = [t["role"] for t in turns[n + 1:n + 3]]
                if following[:1] == ["AI"] and following[1:2] != ["API"]:
                    # an answer point: the assistant answers in text and no call follows its words
                    # ("Sure, what is your username?"); "One moment..." before a call is neither
                    points.append((path.name, list(history), apis, False))
            elif turn["role"] == "AI":
                history.append(ChatMessage("assistant", turn["text"]))
            else:
                call = ToolCall(f"call_{n}", turn["api_name"], turn["param_dict"])
                result = turn["result"]
                payload = {"error": result["exception"]} if result.get("exception") else {"result": result["output"]}
                history += [ChatMessage("assistant", "", tool_calls=(call,)),
                            ChatMessage("tool", json.dumps(payload, default=str), tool_call_id=call.id, name=call.name)]
    return points


def rates(points: list[Point], threshold: float, greedy: bool = False) -> dict[str, float]:
    """Recall, false calls and balanced accuracy of "call when p_call >= threshold" (with ``greedy``:
    "... or when the likeliest first token opens a call", the engine's rule)."""
    calls = [p.p_call >= threshold or (greedy and p.top_is_call) for p in points if p.must_call]
    answers = [p.p_call >= threshold or (greedy and p.top_is_call) for p in points if not p.must_call]
    recall = sum(calls) / len(calls) if calls else 0.0
    false_calls = sum(answers) / len(answers) if answers else 0.0
    return {"threshold": threshold, "recall": round(recall, 3), "false_calls": round(false_calls, 3),
            "balanced_accuracy": round((recall + 1 - false_calls) / 2, 3)}


def best(points: list[Point]) -> float:
    return max(THRESHOLDS, key=lambda t: (rates(points, t)["balanced_accuracy"], -abs(t - 0.5)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N decision points")
    parser.add_argument("--model", default=None, help="a packaged model id (default: the configured default)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from assistant.llm.registry import create_chat_model

    settings = Settings.load(inference={"temperature": 0.0, **({"model": args.model} if args.model else {})})
    model = create_chat_model(settings.inference, settings.data_dir)
    apis, calls = load_apis(), recorded_calls()
    apis = {name: recorded_interface(api, calls.get(name, [])) for name, api in apis.items()}
    loop = ToolCallingSettings()
    points: list[Point] = []
    for dialogue, messages, names, must_call in tqdm(decision_points()[: args.limit], desc="decision points"):
        specs = [apis[n].spec() for n in names if n in apis]
        day = stated_date([m.content for m in messages])
        now = DEFAULT_NOW.replace(year=day.year, month=day.month, day=day.day) if day else DEFAULT_NOW
        reviewer = CallReviewer(specs, loop, now)
        options = GenerationOptions(temperature=0.0, tools=reviewer.shown)
        p, top = model.call_odds(reviewer.prompt_messages(messages), options)
        points.append(Point(dialogue, must_call, p, top))
    dialogues = sorted({p.dialogue for p in points})
    half = set(dialogues[::2])
    a = [p for p in points if p.dialogue in half]
    b = [p for p in points if p.dialogue not in half]
    held_out = [rates(b, best(a)), rates(a, best(b))]
    result = {
        "model": settings.inference.model,
        "points": {"call": sum(p.must_call for p in points), "answer": sum(not p.must_call for p in points)},
        "mean_p_call": {"call": round(statistics.fmean([p.p_call for p in points if p.must_call] or [0]), 3),
                        "answer": round(statistics.fmean([p.p_call for p in points if not p.must_call] or [0]), 3)},
        "sweep": [rates(points, t) for t in THRESHOLDS],
        "engine_rule": [rates(points, t, greedy=True) for t in (0.2, 0.5, 0.9)],
        "greedy_only": rates(points, 1.01, greedy=True),
        "held_out": held_out,
        "best_on_all": best(points),
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{result['model']}: {result['points']['call']} call points, {result['points']['answer']} answer points; "
          f"mean p_call {result['mean_p_call']['call']} vs {result['mean_p_call']['answer']}")
    print(f"{'threshold':>9} {'recall':>7} {'false calls':>11} {'balanced':>8}")
    for r in result["sweep"]:
        print(f"{r['threshold']:>9} {r['recall']:>7.1%} {r['false_calls']:>11.1%} {r['balanced_accuracy']:>8.1%}")
    for r in held_out:
        print(f"held out: threshold {r['threshold']} chosen on the other half -> recall {r['recall']:.1%}, "
              f"false calls {r['false_calls']:.1%}, balanced {r['balanced_accuracy']:.1%}")
    print(f"best on all points: {result['best_on_all']}")
    g = result["greedy_only"]
    print(f"greedy (the likeliest first token opens a call): recall {g['recall']:.1%}, false calls "
          f"{g['false_calls']:.1%}, balanced {g['balanced_accuracy']:.1%}")
    for r in result["engine_rule"]:
        print(f"engine rule at {r['threshold']} (threshold or greedy): recall {r['recall']:.1%}, "
              f"false calls {r['false_calls']:.1%}, balanced {r['balanced_accuracy']:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
