"""benchmarks/tool_decision.py: the decision points read from API-Bank, and the threshold sweep."""

from __future__ import annotations

from benchmarks import tool_decision as bench
from benchmarks.tool_decision import Point


def test_every_recorded_call_is_a_call_point_and_answers_without_a_following_call_are_answer_points() -> None:
    points = bench.decision_points()
    calls = [p for p in points if p[3]]
    answers = [p for p in points if not p[3]]
    assert len(calls) == 172  # the samples of benchmarks/tool_calling.py
    assert len(answers) > 100
    dialogue, messages, apis, _ = next(p for p in answers if p[0] == "DeleteAccount-level-1-1.jsonl")
    assert messages[-1].content == "Can you delete my account?" and apis == ["DeleteAccount", "GetUserToken"]
    # "One moment while I authenticate your account." comes right before a call: not an answer point
    assert not any(p[1][-1].content.startswith("My username is user3") for p in answers if p[0] == dialogue)


def test_rates_and_the_best_threshold() -> None:
    points = [Point("a", True, 0.9), Point("a", True, 0.6), Point("b", False, 0.3), Point("b", False, 0.7)]
    assert bench.rates(points, 0.5) == {"threshold": 0.5, "recall": 1.0, "false_calls": 0.5, "balanced_accuracy": 0.75}
    assert bench.rates(points, 0.8)["balanced_accuracy"] == 0.75  # one call missed, no false call
    assert bench.rates(points, 0.3)["balanced_accuracy"] == 0.5  # both answers call
    assert bench.best(points) == 0.5  # 0.35 ... 0.6, 0.8 and 0.9 tie at 0.75: the one nearest 0.5 wins
