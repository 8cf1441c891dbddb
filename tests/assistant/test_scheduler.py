"""The daily decay job: scheduled at 03:00 every day, and it runs one cycle over every user.
The reminder job: every ``reminder_interval_secs``, coalesced, one instance, firing due reminders."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from assistant.clock import utcnow
from assistant.crypto import Sealer
from assistant.scheduler import DECAY_CRON, run_decay, start_scheduler
from assistant.storage.db import Database
from assistant.tools.reminders import LogDelivery, ReminderRunner, SqliteReminderStore


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


def reminder_runner(tmp_path: Path) -> tuple[Database, ReminderRunner]:
    db = Database(tmp_path / "reminders.db")
    return db, ReminderRunner(SqliteReminderStore(db, Sealer(None)), LogDelivery())


def test_the_reminder_job_runs_at_the_interval_and_fires_due_reminders(tmp_path: Path) -> None:
    db, runner = reminder_runner(tmp_path)
    scheduler = start_scheduler(None, runner, reminder_interval_secs=45)
    try:
        job = scheduler.get_job("reminders")
        assert job is not None and scheduler.get_job("memory-decay") is None
        assert job.trigger.interval == timedelta(seconds=45)
        assert job.coalesce is True and job.max_instances == 1
        made = runner.store.add("user-a", "stretch", utcnow() - timedelta(seconds=1))
        job.func(*job.args, **job.kwargs)  # what the scheduler runs every 45 s
        stored = runner.store.get(made.id)
        assert stored.fired_at is not None and stored.delivered_via == "log"
    finally:
        scheduler.shutdown(wait=True)
        db.close()


def test_both_jobs_when_both_are_given(make_settings, make_services, tmp_path: Path) -> None:
    services = make_services(make_settings())
    db, runner = reminder_runner(tmp_path)
    scheduler = start_scheduler(services.memory, runner)
    try:
        assert {job.id for job in scheduler.get_jobs()} == {"memory-decay", "reminders"}
        assert scheduler.get_job("reminders").trigger.interval.total_seconds() == 30
    finally:
        scheduler.shutdown(wait=True)
        db.close()
