"""The daily decay job: scheduled at 03:00 every day, and it runs one cycle over every user."""

from __future__ import annotations

from assistant.scheduler import DECAY_CRON, run_decay, start_scheduler


def test_the_decay_job_is_daily_at_three(make_settings, make_services) -> None:
    services = make_services(make_settings())
    services.start_background()
    job = services.scheduler.get_job("memory-decay")
    assert job is not None
    fields = {f.name: str(f) for f in job.trigger.fields}
    assert fields["hour"] == "3" and fields["minute"] == "0" and fields["day"] == "*"
    assert DECAY_CRON == {"hour": 3, "minute": 0}


def test_run_decay_decays_every_users_memories(make_settings, make_services) -> None:
    services = make_services(make_settings())
    memory = services.memory
    t = [1_000_000.0]
    memory.clock = lambda: t[0]
    a = memory.add("user-a", "I like green tea", importance=0.8)
    b = memory.add("user-b", "The bus leaves at nine", importance=0.8)
    t[0] += 5 * 86400
    run_decay(memory)
    assert memory.get("user-a", a.id).importance < 0.8
    assert memory.get("user-b", b.id).importance < 0.8


def test_no_memory_store_no_job(make_settings, make_services) -> None:
    scheduler = start_scheduler(None)
    try:
        assert scheduler.get_jobs() == []
    finally:
        scheduler.shutdown(wait=False)
