"""The prediction itself (pure functions): grouping, the estimator with the spec's numbers, slots, the cap."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from assistant.extended.precache_predict import (
    GROUP_COSINE,
    HOUR_OF_DAY,
    HOUR_OF_WEEK,
    Asked,
    Slot,
    ToolPlan,
    canonical,
    group_queries,
    guard_terms,
    predict,
    rank,
    slots_ahead,
)

NOW = datetime(2026, 3, 11, 7, 55, tzinfo=UTC)  # a Wednesday; the check interval of 15 minutes reaches 08:10
HORIZON = timedelta(minutes=15)  # precache_prediction.check_interval_minutes
MIN_P = 0.7  # precache_prediction.min_probability


def day(n: int, hour: int = 8, minute: int = 5) -> datetime:
    """``n`` days before NOW, at ``hour:minute``."""
    return (NOW - timedelta(days=n)).replace(hour=hour, minute=minute)


def history(query: str, asked_on: int, days: int = 10, hour: int = 8) -> list[Asked]:
    """``days`` active days; ``query`` at ``hour``:05 on the first ``asked_on`` of them, something else at noon
    on every day."""
    found = [Asked(f"noon-{n}", f"note number {n}", day(n, 12)) for n in range(1, days + 1)]
    found += [Asked(f"q-{n}", query, day(n, hour)) for n in range(1, asked_on + 1)]
    return found


def test_canonical_form_and_guard_terms() -> None:
    assert canonical("What's the  Weather in BERLIN?") == "whats the weather in berlin"
    assert canonical("what’s the weather in Berlin") == "whats the weather in berlin"
    assert guard_terms(canonical("My calendar for tomorrow at 8")) == {"tomorrow", "8"}
    assert guard_terms(canonical("What is the weather in Berlin?")) == frozenset()


@pytest.mark.parametrize(("asked_on", "predicted", "probability"), [(8, True, 0.8), (7, True, 0.7), (6, False, 0.6)])
def test_the_spec_numbers_8_of_10_days_is_predicted_6_of_10_is_not(asked_on: int, predicted: bool,
                                                                     probability: float) -> None:
    found = predict("u", history("What is the weather?", asked_on), NOW, HORIZON, MIN_P)
    weather = [p for p in found if p.text == "What is the weather?"]
    assert bool(weather) is predicted
    if predicted:
        (p,) = weather
        assert p.probability == probability  # k / n, the plain fraction with 10 active days
        assert (p.days_asked, p.active_days) == (asked_on, 10)
        assert p.slot == Slot(HOUR_OF_DAY, 8) and p.slot.label == "08:00-09:00 daily"


def test_small_samples_are_corrected() -> None:
    """Two active days, asked on both: p = 2 / max(2, 7), not 1."""
    found = predict("u", history("Weather?", 2, days=2), NOW, HORIZON, 0.0)
    (p,) = [p for p in found if p.text == "Weather?"]
    assert p.probability == pytest.approx(2 / 7)
    assert predict("u", history("Weather?", 2, days=2), NOW, HORIZON, MIN_P) == []


def test_only_complete_days_count() -> None:
    """Today's messages are not evidence (today's 08:00 slot may still be ahead)."""
    today = [Asked("today", "Weather?", NOW.replace(hour=7, minute=1))]
    assert predict("u", history("Weather?", 6) + today, NOW, HORIZON, MIN_P) == []  # still 6 of 10
    assert [p.probability for p in predict("u", history("Weather?", 7) + today, NOW, HORIZON, MIN_P)] == [0.7]


def test_the_slot_is_the_hour_up_to_the_next_check() -> None:
    assert slots_ahead(NOW, HORIZON) == [(NOW.date(), 7), (NOW.date(), 8)]
    assert slots_ahead(NOW.replace(minute=30), HORIZON) == [(NOW.date(), 7)]
    assert predict("u", history("Weather?", 8), NOW.replace(minute=30), HORIZON, MIN_P) == []
    late = NOW.replace(hour=23, minute=50)
    assert slots_ahead(late, HORIZON) == [(late.date(), 23), (late.date() + timedelta(days=1), 0)]


def test_a_weekly_habit_is_predicted_by_hour_of_week_with_four_weeks() -> None:
    """Every day active for four weeks; on the four Wednesdays the same question at 08:xx."""
    asked = [Asked(f"noon-{n}", f"note {n}", day(n, 12)) for n in range(1, 29)]
    wednesdays = [n for n in range(1, 29) if day(n).weekday() == NOW.weekday()]
    assert len(wednesdays) == 4
    asked += [Asked(f"w-{n}", "Team standup agenda?", day(n)) for n in wednesdays]
    (p,) = predict("u", asked, NOW, HORIZON, MIN_P)
    assert p.slot == Slot(HOUR_OF_WEEK, 8, NOW.weekday()) and p.slot.label == "Wed 08:00-09:00"
    assert (p.probability, p.days_asked, p.active_days) == (1.0, 4, 4)
    # with only three Wednesdays of history, 3 / max(3, 4) = 0.75 still passes; two give 0.5
    two = [a for a in asked if a.at >= day(14, 0)]
    assert predict("u", two, NOW, HORIZON, MIN_P) == []


def test_the_cap_keeps_the_most_probable() -> None:
    found = []
    for n in range(25):  # 25 users, each with one query asked on 7 + (n % 4) of 10 days
        found += predict(f"user-{n}", history(f"query {n}", 7 + n % 4), NOW, HORIZON, MIN_P)
    assert len(found) == 25
    top = rank(found, 20)  # precache_prediction.max_precached_queries
    assert len(top) == 20
    assert [p.probability for p in top] == sorted((p.probability for p in found), reverse=True)[:20]
    assert rank(found, 0) == []


class WordEmbedder:
    """A deterministic stand-in: texts sharing their first three words embed close together."""

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = []
        for text in texts:
            base = np.random.default_rng(zlib.crc32(" ".join(canonical(text).split()[:3]).encode())).normal(size=16)
            noise = np.random.default_rng(len(text)).normal(size=16) * 0.05
            v = base / np.linalg.norm(base) + noise
            out.append(v / np.linalg.norm(v))
        return np.asarray(out)


def test_near_duplicates_are_one_query_unless_their_time_words_differ() -> None:
    t = NOW - timedelta(days=1)
    asked = [Asked("1", "What is the weather in Berlin?", t), Asked("2", "what is the weather like in berlin", t),
             Asked("3", "What is the weather tomorrow?", t), Asked("4", "Remind me to buy milk", t)]
    embed = WordEmbedder()
    sims = embed([a.text for a in asked]) @ embed([asked[0].text])[0]
    assert sims[1] >= GROUP_COSINE and sims[2] >= GROUP_COSINE and sims[3] < GROUP_COSINE
    groups = group_queries(asked, embed)
    assert sorted(sorted(a.message_id for a in g.asked) for g in groups) == [["1", "2"], ["3"], ["4"]]
    assert len(group_queries(asked)) == 4  # without an embedder, canonical forms only


def test_grouped_wordings_count_together() -> None:
    """Four days one wording, four days another: 8 of 10 days for the query; the latest wording is shown."""
    asked = [Asked(f"noon-{n}", f"note {n}", day(n, 12)) for n in range(1, 11)]
    asked += [Asked(f"a-{n}", "What is the weather in Berlin?", day(n)) for n in range(5, 9)]
    asked += [Asked(f"b-{n}", "what is the weather like in berlin", day(n)) for n in range(1, 5)]
    (p,) = predict("u", asked, NOW, HORIZON, MIN_P, WordEmbedder())
    assert (p.probability, p.text) == (0.8, "what is the weather like in berlin")
    assert p.vector is not None
    assert predict("u", asked, NOW, HORIZON, MIN_P) == []  # apart, each is 4 of 10


def test_the_tool_calls_usually_made_are_planned() -> None:
    weather = ToolPlan("get_weather", '{"days": 1, "location": "berlin"}', '{"location": "Berlin"}')
    search = ToolPlan("search_web", '{"limit": 5, "query": "berlin news"}', '{"query": "Berlin news"}')
    asked = history("Weather?", 0)
    asked += [Asked(f"q-{n}", "Weather?", day(n), (weather, search) if n == 1 else (weather,)) for n in range(1, 9)]
    (p,) = predict("u", asked, NOW, HORIZON, MIN_P)
    assert p.tools == (weather,)  # made for 8 of 8 askings; the search for 1 of 8 is not planned
