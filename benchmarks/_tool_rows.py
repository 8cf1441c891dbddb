"""The rows of benchmarks/tool_calling.py (one configuration of the tool loop each) and its table.

Rows are cumulative: each turns on one more of issue 20's switches of
:class:`~assistant.config.ToolCallingSettings` on top of the row before, so the table reads as
what each change adds. Every row has the same loop budget (:data:`LOOP_BUDGET`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from assistant.config import ToolCallingSettings

# Three model turns: room for a prerequisite call or one repair round before the scored call runs.
LOOP_BUDGET: dict[str, Any] = {"max_iterations": 3, "iteration_timeout_secs": 300, "total_timeout_secs": 900}
BEFORE: dict[str, Any] = {"decoding": "free", "ground_dates": False, "prerequisites": False,
                          "argument_hygiene": False, "repair_rounds": 0}
ROWS: list[tuple[str, dict[str, Any]]] = [
    ("before", {}),
    ("+constrained", {"decoding": "constrained"}),
    ("+dates", {"ground_dates": True}),
    ("+prerequisites", {"prerequisites": True}),
    ("+hygiene", {"argument_hygiene": True, "repair_rounds": 1}),
]
DEFAULT_ROW = "default"  # a single run: the settings' defaults (every switch as shipped)


def row_settings(rows: bool) -> list[tuple[str, ToolCallingSettings]]:
    """The configurations to run: the cumulative rows, or the defaults alone."""
    if not rows:
        return [(DEFAULT_ROW, ToolCallingSettings(**LOOP_BUDGET))]
    out, switches = [], dict(BEFORE)
    for name, change in ROWS:
        switches.update(change)
        out.append((name, ToolCallingSettings(**LOOP_BUDGET, **switches)))
    return out


@dataclass
class Outcome:
    dataset: str  # apibank | bfcl
    id: str  # the API-Bank dialogue file / the BFCL case id
    expected: dict[str, Any]
    called: dict[str, Any] | None  # the scored call (see tool_calling.run_task); None: no call at all
    ran: bool  # the scored call ran (an "ok" tool run), rather than being only attempted
    name_ok: bool
    args_exact: bool  # API-Bank: exactly the annotated arguments; BFCL: passes the AST check
    args_lenient: bool  # API-Bank: up to case and spaces; BFCL: the AST check (already lenient)
    generation_ms: float
    overhead_ms: float
    completion_tokens: int = 0
    model_turns: int = 0
    reason: str = ""  # BFCL: why the AST check failed
    row: str = DEFAULT_ROW
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """Accuracy, time and speed of one group of outcomes."""
    n = len(outcomes) or 1
    generation = sum(o.generation_ms for o in outcomes)
    overhead = sum(o.overhead_ms for o in outcomes)
    tokens = sum(o.completion_tokens for o in outcomes)
    return {
        "samples": len(outcomes),
        "dialogues": len({o.id for o in outcomes}),
        "tool_name_accuracy": round(sum(o.name_ok for o in outcomes) / n, 3),
        "exact_arguments": round(sum(o.args_exact for o in outcomes) / n, 3),
        "lenient_arguments": round(sum(o.args_lenient for o in outcomes) / n, 3),
        "scored_call_ran": round(sum(o.ran for o in outcomes) / n, 3),
        "mean_generation_ms": round(statistics.fmean(o.generation_ms for o in outcomes), 1) if outcomes else 0.0,
        "mean_loop_overhead_ms": round(statistics.fmean(o.overhead_ms for o in outcomes), 2) if outcomes else 0.0,
        "overhead_ratio": round(overhead / generation, 5) if generation else None,
        "completion_tokens": tokens,
        "tokens_per_second": round(tokens / (generation / 1000), 2) if generation else None,
    }


def groups(outcomes: Iterable[Outcome]) -> dict[tuple[str, str, str], list[Outcome]]:
    """Outcomes by (model, row, dataset), in the order they were run."""
    out: dict[tuple[str, str, str], list[Outcome]] = {}
    for o in outcomes:
        out.setdefault((o.model, o.row, o.dataset), []).append(o)
    return out


def table(outcomes: list[Outcome]) -> str:
    """One line per (model, row, dataset), then each model's generation speed over all its rows."""
    head = (f"{'model':<30} {'row':<15} {'dataset':<8} {'samples':>7} {'tool name':>9} {'args':>6} "
            f"{'lenient':>7} {'gen ms':>8} {'overhead':>9}")
    lines = [head, "-" * len(head)]
    for (model, row, dataset), group in groups(outcomes).items():
        s = summary(group)
        lenient = f"{s['lenient_arguments']:.1%}" if dataset == "apibank" else "-"
        ratio = f"{s['overhead_ratio']:.4f}" if s["overhead_ratio"] is not None else "-"
        lines.append(f"{model[:30]:<30} {row:<15} {dataset:<8} {s['samples']:>7} {s['tool_name_accuracy']:>9.1%} "
                     f"{s['exact_arguments']:>6.1%} {lenient:>7} {s['mean_generation_ms']:>8.0f} {ratio:>9}")
    lines.append("args: exactly the annotated arguments (API-Bank) / BFCL's AST check (BFCL); "
                 "overhead: loop time / generation time")
    for model in dict.fromkeys(o.model for o in outcomes):
        s = summary([o for o in outcomes if o.model == model])
        speed = f"{s['tokens_per_second']:.1f}" if s["tokens_per_second"] is not None else "-"
        lines.append(f"{model}: {speed} tokens/s of generation ({s['completion_tokens']} completion tokens "
                     f"in {s['samples']} samples)")
    return "\n".join(lines)
