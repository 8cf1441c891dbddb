"""The precache over the real stores (SQLite, sealed conversations and tool runs, the memory store with the
hashing embedder) with a fake clock, a fake thermal sensor and a fake weather backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from assistant.config.extended import PrecacheSettings
from assistant.extended.precache import PRECACHE_JOB, Precache, build_precache
from assistant.extended.precache_tools import canonical_arguments
from assistant.llm.scripted import ScriptedChatModel
from assistant.observability.signals import SignalKind
from assistant.services import Services
from tests.assistant.extended.precache_support import (
    FakeClock,
    FakeThermal,
    FakeWeather,
    ask,
    seed_days,
    weather_call,
)

USER, OTHER = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"
WEATHER_Q = "What is the weather in Berlin?"
NEWS_Q = "Any news about the Berlin marathon?"


@pytest.fixture
def world(make_settings: Callable[..., Any], make_services: Callable[..., Services]) -> dict[str, Any]:
    """Services with the precache off (each test builds its own with fakes), weather on with a fake backend."""
    services = make_services(make_settings(precache_prediction={"enabled": False}, weather={"enabled": True}),
                             ScriptedChatModel())
    assert services.precache is None and services.tools is not None
    weather = FakeWeather()
    services.tools.backends["weather"] = weather
    return {"services": services, "weather": weather}


def make(services: Services, clock: FakeClock, thermal: FakeThermal, **section: Any) -> Precache:
    settings = services.settings.model_copy(update={"precache_prediction": PrecacheSettings(**section)})
    precache = build_precache(settings, services.db, services.sealer, services.memory, services.tools,
                              services.signals, thermal=thermal, clock=clock)
    assert precache is not None
    services.precache = services.chat.precache = precache
    return precache


def vector(services: Services, text: str) -> np.ndarray:
    return services.memory.embedder.embed([text])[0]


def test_defaults_are_the_spec_numbers() -> None:
    s = PrecacheSettings()
    assert (s.enabled, s.min_probability, s.check_interval_minutes, s.max_precached_queries, s.thermal_pause_celsius) \
        == (True, 0.7, 15, 20, 65.0)


def test_a_query_asked_on_8_of_10_days_is_precached_and_6_of_10_is_not(world: dict[str, Any]) -> None:
    services, clock = world["services"], FakeClock()
    memory = services.memory
    memory.add(USER, "The weather in Berlin makes me take the U-Bahn instead of the bike.", memory_type="fact")
    memory.add(USER, "My marathon training plan has long runs on Sundays.", memory_type="fact")
    seed_days(services, USER, WEATHER_Q, 8, clock.now)
    for n in range(1, 7):  # on 6 of the same 10 active days
        ask(services, USER, NEWS_Q, (clock.now - timedelta(days=n)).replace(hour=8, minute=20))
    precache = make(services, clock, FakeThermal())
    before = {m.id: m.access_count for m in memory.list(USER)}

    report = precache.refresh()
    assert (report.status, report.thermal, report.predicted, report.cached) == ("ran", "ok", 1, 1)
    status = precache.status(USER)
    (predicted,) = status["predictions"]
    assert (predicted["query"], predicted["probability"], predicted["slot"]) == (WEATHER_Q, 0.8, "08:00-09:00 daily")
    assert (predicted["days_asked"], predicted["active_days"], predicted["fresh"]) == (8, 10, True)
    assert {m.id: m.access_count for m in memory.list(USER)} == before  # precomputing is not a recall

    expected = memory.retrieve_for_prompt(USER, WEATHER_Q, vector(services, WEATHER_Q))
    precache.settle()  # that retrieval touched memories (their recency moved): the entry is recomputed
    hit = precache.lookup(USER, "what is the weather in berlin", vector(services, "what is the weather in berlin"))
    assert hit is not None and expected[1]
    assert hit[0] == expected[0] and [m.memory.id for m in hit[1]] == [m.memory.id for m in expected[1]]
    assert [m.memory.content for m in hit[1]] == [m.memory.content for m in expected[1]]
    assert precache.lookup(USER, NEWS_Q, vector(services, NEWS_Q)) is None  # 6 of 10: not predicted
    assert precache.lookup(OTHER, WEATHER_Q, vector(services, WEATHER_Q)) is None  # per user

    status = precache.status(USER)
    assert (status["hits"], status["misses"], status["lookups"], status["hit_rate"]) == (1, 1, 2, 0.5)
    assert status["retrieval_ms_saved"] > 0  # the retrieval time of the entry that answered
    assert status["time_saved_ms"] == pytest.approx(status["retrieval_ms_saved"] - status["lookup_ms"], abs=1e-3)
    precache.settle()  # the hits' signals are published off the chat path
    hits = services.signals.recent(SignalKind.PRECACHE_HIT, user_id=USER)
    assert [s.data["kind"] for s in hits] == ["retrieval"]
    assert hits[0].data["query_hash"] == predicted["id"] and WEATHER_Q not in str(hits[0].data)


def test_the_refresh_retrieval_is_the_prompt_retrieval_without_the_touch(world: dict[str, Any]) -> None:
    from assistant.extended.precache_entries import retrieve_untouched

    services = world["services"]
    memory = services.memory
    added = memory.add(USER, "The weather in Berlin is grey in March.", memory_type="fact")
    untouched = retrieve_untouched(memory, USER, WEATHER_Q, vector(services, WEATHER_Q))
    assert memory.get(USER, added.id).access_count == 0
    touched = memory.retrieve_for_prompt(USER, WEATHER_Q, vector(services, WEATHER_Q))
    assert untouched[0] == touched[0] and [m.memory.id for m in untouched[1]] == [m.memory.id for m in touched[1]]
    assert [m.memory.id for m in touched[1]] == [added.id] and memory.get(USER, added.id).access_count == 1


def test_a_hit_touches_the_memories_as_a_retrieval_would(world: dict[str, Any]) -> None:
    services, clock = world["services"], FakeClock()
    memory = services.memory.add(USER, "The weather in Berlin is grey in March.", memory_type="fact")
    seed_days(services, USER, WEATHER_Q, 8, clock.now)
    precache = make(services, clock, FakeThermal())
    precache.refresh()
    hit = precache.lookup(USER, WEATHER_Q, vector(services, WEATHER_Q))
    assert hit is not None and [m.memory.id for m in hit[1]] == [memory.id]
    assert services.memory.get(USER, memory.id).access_count == 1


def test_the_cap_is_across_users_highest_first(world: dict[str, Any]) -> None:
    services, clock = world["services"], FakeClock()
    users = [f"00000000-0000-0000-0000-{n:012d}" for n in range(22)]
    for n, user in enumerate(users):
        seed_days(services, user, f"Status of project number {n}?", 7 + n % 4, clock.now, days=10)
    precache = make(services, clock, FakeThermal())
    report = precache.refresh()
    assert (report.predicted, report.cached) == (20, 20)  # max_precached_queries: 22 predicted, 20 kept
    kept = [p for user in users for p in precache.status(user)["predictions"]]
    assert len(kept) == 20 and min(p["probability"] for p in kept) >= 0.7
    dropped = [u for u in users if not precache.status(u)["predictions"]]
    assert len(dropped) == 2 and all(int(u[-2:]) % 4 == 0 for u in dropped)  # two of the 0.7 ones


@pytest.mark.parametrize(("celsius", "state", "ran"), [(65.0, "ok", True), (65.1, "paused", False),
                                                        (None, "no sensor", True)])
def test_the_refresh_pauses_strictly_above_65_0(world: dict[str, Any], celsius: float | None, state: str,
                                                ran: bool) -> None:
    services, clock = world["services"], FakeClock()
    seed_days(services, USER, WEATHER_Q, 8, clock.now)
    precache = make(services, clock, FakeThermal(celsius))
    report = precache.refresh()
    assert (report.status, report.thermal, report.temperature_celsius) == ("ran" if ran else "paused", state, celsius)
    status = precache.status(USER)
    assert status["paused"] is (not ran) and status["thermal"]["status"] == state
    assert status["thermal"]["threshold_celsius"] == 65.0 and status["last_refresh"]["status"] == report.status
    assert len(status["predictions"]) == (1 if ran else 0)
    (signal,) = services.signals.recent(SignalKind.THERMAL_UPDATE)
    assert (signal.value, signal.data["status"], signal.data["paused"]) == (celsius, state, not ran)
    assert (precache.lookup(USER, WEATHER_Q, vector(services, WEATHER_Q)) is not None) is ran


def test_entries_are_fresh_for_one_check_interval(world: dict[str, Any]) -> None:
    services, clock = world["services"], FakeClock()
    seed_days(services, USER, WEATHER_Q, 8, clock.now)
    precache = make(services, clock, FakeThermal())
    assert precache.ttl_secs == 15 * 60  # check_interval_minutes
    precache.refresh()
    clock.advance(minutes=14, seconds=59)
    assert precache.lookup(USER, WEATHER_Q) is not None
    clock.advance(seconds=1)
    assert precache.lookup(USER, WEATHER_Q) is None
    assert precache.status(USER)["predictions"][0]["fresh"] is False


def test_near_duplicates_hit_but_other_times_and_numbers_do_not(world: dict[str, Any]) -> None:
    services, clock = world["services"], FakeClock()
    seed_days(services, USER, WEATHER_Q, 8, clock.now)
    precache = make(services, clock, FakeThermal())
    precache.refresh()
    entry_vector = vector(services, WEATHER_Q)
    close = entry_vector + 0.01 * np.random.default_rng(1).normal(size=entry_vector.shape)
    assert precache.lookup(USER, "Weather in Berlin, please?", close) is not None  # cosine >= 0.95
    assert precache.lookup(USER, "What is the weather in Berlin tomorrow?", close) is None  # a time word
    assert precache.lookup(USER, "Weather in Berlin, please?", -entry_vector) is None


def test_a_memory_change_or_recall_makes_the_entries_stale_until_recomputed(world: dict[str, Any]) -> None:
    services, clock = world["services"], FakeClock()
    seed_days(services, USER, WEATHER_Q, 8, clock.now)
    precache = make(services, clock, FakeThermal())
    precache.refresh()
    added = services.memory.add(USER, "Berlin weather: I keep an umbrella at the office.", memory_type="fact")
    precache.settle()
    hit = precache.lookup(USER, WEATHER_Q, vector(services, WEATHER_Q))
    expected = services.memory.retrieve_for_prompt(USER, WEATHER_Q, vector(services, WEATHER_Q))
    assert hit is not None and [m.memory.id for m in hit[1]] == [m.memory.id for m in expected[1]]
    assert added.id in [m.memory.id for m in expected[1]]
    precache.settle()  # the hit and the retrieval touched memories: recomputed again
    assert precache.status(USER)["predictions"][0]["stale"] is False
    services.memory.add(OTHER, "Another user's memory", memory_type="fact")  # not the user's: nothing stale
    assert precache.status(USER)["predictions"][0]["stale"] is False


def test_weather_results_are_precomputed_and_answer_the_tool_call(world: dict[str, Any]) -> None:
    services, clock, weather = world["services"], FakeClock(), world["weather"]
    seed_days(services, USER, WEATHER_Q, 8, clock.now, tool_calls=weather_call())
    precache = make(services, clock, FakeThermal())
    report = precache.refresh()
    assert report.tool_results == 1 and weather.calls == ["geocode Berlin", "forecast Berlin 1"]
    (predicted,) = precache.status(USER)["predictions"]
    assert [(t["tool"], t["fresh"]) for t in predicted["tools"]] == [("get_weather", True)]

    tool = services.tools.registry.get("get_weather")
    result = tool(services.tools.context(USER), {"location": " berlin "})  # the same canonical arguments
    assert result["location"]["name"] == "Berlin" and len(weather.calls) == 2  # from the precache
    tool(services.tools.context(OTHER), {"location": "Berlin"})  # another user: a real call
    tool(services.tools.context(USER), {"location": "Berlin", "days": 3})  # other arguments: a real call
    assert len(weather.calls) == 6
    status = precache.status(USER)
    assert status["tool_hits"] == 1 and status["predictions"][0]["tools"][0]["hits"] == 1
    clock.advance(minutes=15)
    tool(services.tools.context(USER), {"location": "Berlin"})
    assert len(weather.calls) == 8  # stale after the check interval
    assert canonical_arguments({"location": " Berlin ", "days": 1}) == '{"days": 1, "location": "berlin"}'


def test_statistics_persist_without_plaintext(world: dict[str, Any]) -> None:
    services, clock = world["services"], FakeClock()
    seed_days(services, USER, WEATHER_Q, 8, clock.now)
    precache = make(services, clock, FakeThermal())
    precache.refresh()
    precache.lookup(USER, WEATHER_Q)
    precache.lookup(USER, "Something else")
    precache.refresh()  # writes the counters and the per-query statistics (m026)
    (row,) = services.db.query("SELECT * FROM precache_predictions")
    assert row["user_id"] == USER and row["hits"] == 1 and row["times_predicted"] == 2
    assert WEATHER_Q.encode() not in bytes(row["query_sealed"]) and "weather" not in row["query_hash"]
    stats = services.db.one("SELECT * FROM precache_stats WHERE user_id = ?", (USER,))
    assert (stats["hits"], stats["misses"]) == (1, 1)
    (history,) = precache.status(USER)["history"]
    assert (history["query"], history["hits"], history["probability"]) == (WEATHER_Q, 1, 0.8)
    aggregate = [s for s in services.signals.recent(SignalKind.PRECACHE_HIT, user_id=USER)
                 if s.data["kind"] == "aggregate"]
    assert [(s.data["hits"], s.data["misses"], s.value) for s in aggregate] == [(1, 1, 0.5)]
    fresh = make(services, clock, FakeThermal())  # a restart: the counters are read back
    assert (fresh.status(USER)["hits"], fresh.status(USER)["misses"]) == (1, 1)


def test_a_refresh_for_one_user_leaves_the_others(world: dict[str, Any]) -> None:
    services, clock = world["services"], FakeClock()
    seed_days(services, USER, WEATHER_Q, 8, clock.now)
    seed_days(services, OTHER, NEWS_Q, 9, clock.now)
    precache = make(services, clock, FakeThermal())
    assert precache.refresh(OTHER).predicted == 1
    assert precache.status(USER)["predictions"] == [] and precache.lookup(USER, WEATHER_Q) is None
    assert precache.refresh(USER).cached == 1
    assert precache.lookup(OTHER, NEWS_Q) is not None and precache.lookup(USER, WEATHER_Q) is not None
    assert NEWS_Q not in str(precache.status(USER))


def test_the_refresh_runs_every_check_interval(world: dict[str, Any]) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler

    services, clock = world["services"], FakeClock()
    precache = make(services, clock, FakeThermal(), check_interval_minutes=15)
    scheduler = BackgroundScheduler()
    precache.schedule(scheduler)
    job = scheduler.get_job(PRECACHE_JOB)
    assert job.trigger.interval == timedelta(minutes=15)
    assert job.next_run_time > datetime.now(UTC) + timedelta(seconds=30)  # not at start: a minute after
    assert precache.status(USER)["next_refresh_at"] is not None


def test_services_wire_it_and_start_the_job(make_settings: Callable[..., Any],
                                            make_services: Callable[..., Services]) -> None:
    services = make_services(make_settings())
    assert services.precache is not None and services.chat.precache is services.precache
    assert services.precache in services.memory.listeners
    services.start_background()
    job = services.scheduler.get_job(PRECACHE_JOB)
    assert job is not None and job.trigger.interval == timedelta(minutes=15)
    disabled = make_services(make_settings(precache_prediction={"enabled": False}))
    assert disabled.precache is None and getattr(disabled.chat, "precache", None) is None


def test_a_chat_message_is_answered_from_the_precache(world: dict[str, Any]) -> None:
    services, clock = world["services"], FakeClock()
    services.memory.add(USER, "The weather in Berlin makes me take the U-Bahn.", memory_type="fact")
    seed_days(services, USER, WEATHER_Q, 8, clock.now)
    precache = make(services, clock, FakeThermal())
    precache.refresh()
    turn = asyncio.run(services.chat.recall(USER, WEATHER_Q))
    assert precache.status(USER)["hits"] == 1
    expected = services.memory.retrieve_for_prompt(USER, WEATHER_Q)
    assert [m.memory.id for m in turn.used] == [m.memory.id for m in expected[1]]
