"""Relevance scoring, prompt order and the memory context block (spec: Retrieval and learning for chat).

relevance = similarity x 0.50 + importance x 0.20 + freshness x 0.30, freshness = e^(-0.01 x hours);
order Correction, Fact, Preference, Context, ToolResult; whole memories within 2,000 characters,
after a preamble that tells the model to treat them as known facts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from assistant.memory.scoring import (
    CONTEXT_BUDGET_CHARS,
    DEFAULT_WEIGHTS,
    PREAMBLE,
    TYPE_PRIORITY,
    build_context,
    cosine,
    freshness,
    hours_between,
    order_for_prompt,
    relevance,
    type_rank,
)
from assistant.memory.types import MemoryType

# --- relevance --------------------------------------------------------------------------------------


def test_weights_are_the_spec_numbers() -> None:
    assert (DEFAULT_WEIGHTS.similarity, DEFAULT_WEIGHTS.importance, DEFAULT_WEIGHTS.freshness) == (0.50, 0.20, 0.30)


@pytest.mark.parametrize(
    ("hours", "expected"),
    [(0.0, 1.0), (1.0, 0.9900498337491681), (24.0, 0.7866278610665535), (100.0, 0.36787944117144233),
     (168.0, 0.18637397603940997)],
)
def test_freshness_is_e_to_minus_0_01_per_hour(hours: float, expected: float) -> None:
    assert float(freshness(hours)) == pytest.approx(expected, abs=1e-12)
    assert float(freshness(hours)) == pytest.approx(math.exp(-0.01 * hours), abs=1e-12)


@pytest.mark.parametrize(
    ("similarity", "importance", "hours", "expected"),
    [
        # 0.8 x 0.5 + 0.6 x 0.2 + 0.3 x e^(-0.05) = 0.4 + 0.12 + 0.285368 = 0.805368
        (0.8, 0.6, 5.0, 0.4 + 0.12 + 0.3 * math.exp(-0.05)),
        # just touched: 0.5 x 1 + 0.2 x 1 + 0.3 x 1 = 1.0
        (1.0, 1.0, 0.0, 1.0),
        # nothing similar, unimportant, touched 100 h ago: 0.3 x e^-1 = 0.110364
        (0.0, 0.0, 100.0, 0.3 * math.exp(-1.0)),
        # 0.25 x 0.5 + 0.9 x 0.2 + 0.3 x e^(-0.48) = 0.125 + 0.18 + 0.185635 = 0.490635
        (0.25, 0.9, 48.0, 0.125 + 0.18 + 0.3 * math.exp(-0.48)),
    ],
)
def test_relevance_on_concrete_numbers(similarity, importance, hours, expected) -> None:
    assert float(relevance(similarity, importance, hours)) == pytest.approx(expected, abs=1e-12)


def test_relevance_literal_value() -> None:
    assert float(relevance(0.8, 0.6, 5.0)) == pytest.approx(0.805368, abs=1e-6)
    assert float(relevance(0.25, 0.9, 48.0)) == pytest.approx(0.490635, abs=1e-6)


def test_relevance_vectorised_equals_scalar() -> None:
    sims = np.array([0.1, 0.5, 0.9])
    imps = np.array([0.3, 0.7, 0.2])
    hours = np.array([0.0, 12.0, 300.0])
    got = relevance(sims, imps, hours)
    assert got.tolist() == pytest.approx(
        [s * 0.5 + i * 0.2 + 0.3 * math.exp(-0.01 * h) for s, i, h in zip(sims, imps, hours, strict=True)], abs=1e-12
    )


def test_each_term_moves_relevance_by_its_weight() -> None:
    base = float(relevance(0.4, 0.4, 10.0))
    assert float(relevance(0.5, 0.4, 10.0)) - base == pytest.approx(0.05, abs=1e-12)
    assert float(relevance(0.4, 0.5, 10.0)) - base == pytest.approx(0.02, abs=1e-12)
    assert float(relevance(0.4, 0.4, 110.0)) < base


def test_hours_between_and_cosine() -> None:
    assert hours_between("2024-01-01T00:00:00Z", 1704067200.0 + 5 * 3600) == pytest.approx(5.0)
    assert hours_between("2024-01-01T00:00:00.000Z", 1704067200.0 - 60) == 0.0
    a = np.array([1.0, 0.0, 0.0])
    b = np.array([1.0, 1.0, 0.0])
    assert cosine(a, b) == pytest.approx(1 / math.sqrt(2))
    assert cosine(a, np.zeros(3)) == 0.0


# --- type priority -----------------------------------------------------------------------------------


def test_type_priority_is_the_spec_order() -> None:
    assert TYPE_PRIORITY == (
        MemoryType.CORRECTION, MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.CONTEXT, MemoryType.TOOL_RESULT,
    )
    ranks = [type_rank(t) for t in TYPE_PRIORITY]
    assert ranks == sorted(ranks)
    assert len(set(ranks)) == 5
    assert type_rank(MemoryType.ARCHIVED) > type_rank(MemoryType.TOOL_RESULT)


@dataclass
class Item:
    name: str
    memory_type: MemoryType
    relevance: float


def test_order_for_prompt_sorts_by_type_then_relevance() -> None:
    items = [
        Item("tool", MemoryType.TOOL_RESULT, 0.99),
        Item("context-low", MemoryType.CONTEXT, 0.2),
        Item("pref", MemoryType.PREFERENCE, 0.9),
        Item("fact", MemoryType.FACT, 0.5),
        Item("context-high", MemoryType.CONTEXT, 0.8),
        Item("correction", MemoryType.CORRECTION, 0.1),
    ]
    ordered = order_for_prompt(items, key_relevance=lambda i: i.relevance)
    assert [i.name for i in ordered] == ["correction", "fact", "pref", "context-high", "context-low", "tool"]


# --- build_context --------------------------------------------------------------------------------


def test_preamble_tells_the_model_to_treat_memories_as_known_facts() -> None:
    text = PREAMBLE.lower()
    assert "known facts" in text
    assert "treat them as true" in text
    context = build_context(["The user's name is Alice."])
    assert context.startswith(PREAMBLE)
    assert "The user's name is Alice." in context


def test_no_memories_give_no_context() -> None:
    assert build_context([]) == ""


def test_order_of_the_given_memories_is_kept() -> None:
    context = build_context(["first memory", "second memory", "third memory"])
    assert context.index("first memory") < context.index("second memory") < context.index("third memory")


def test_budget_is_2000_characters_of_whole_memories() -> None:
    assert CONTEXT_BUDGET_CHARS == 2000
    contents = [f"memory {n:03d} " + "x" * 89 for n in range(30)]  # 100 characters each
    assert all(len(c) == 100 for c in contents)
    context = build_context(contents)
    body = context[len(PREAMBLE):]
    assert len(body) <= 2000 + 1  # the newline after the preamble
    included = [c for c in contents if c in context]
    # whole memories only: a memory is in the block entirely or not at all
    for c in contents:
        if c not in included:
            assert c[:20] not in context
    # per-memory overhead (marker, newline) is a few characters: 19 or 20 memories of 100 fit
    assert 19 <= len(included) <= 20
    assert included == contents[: len(included)]


def test_a_memory_too_long_for_the_budget_is_left_out_whole_and_shorter_ones_still_fit() -> None:
    long = "L" * 1500
    longer = "M" * 2500
    short = "The user prefers green tea."
    context = build_context([longer, long, short])
    assert "M" not in context.replace(PREAMBLE, "")
    assert long in context
    assert short in context
    # the 1,500 + 27 characters fit; another 1,500 would not
    context2 = build_context([long, "K" * 1500, short])
    assert "K" not in context2.replace(PREAMBLE, "")
    assert short in context2


def test_only_oversized_memories_give_no_context() -> None:
    assert build_context(["z" * 2001]) == ""


def test_whitespace_inside_a_memory_is_collapsed_not_cut() -> None:
    context = build_context(["Alice\n lives   in\tBerlin"])
    assert "Alice lives in Berlin" in context
