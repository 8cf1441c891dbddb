"""Background jobs (APScheduler): the daily memory decay cycle and the reminder check.

The decay job also runs the clean-up: a memory at or below ``memory.min_importance`` for
``memory.cleanup_after_days`` days in a row is archived (:mod:`assistant.memory.decay`).

APScheduler was chosen for cron-style schedules in-process, with no broker to run. Importing this
module starts nothing; :func:`start_scheduler` builds and starts the scheduler. The reminder job
runs every ``reminder_interval_secs`` with ``coalesce`` and one instance at most: checks missed
while the process was busy collapse into one, and firing itself is at most once per reminder
(see :mod:`assistant.tools.reminders`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from assistant.memory.store import MemoryStore

if TYPE_CHECKING:
    from assistant.dream.service import DreamService
    from assistant.graph.service import KnowledgeGraph
    from assistant.tools.reminders import ReminderRunner

log = logging.getLogger("assistant.scheduler")
DECAY_CRON = {"hour": 3, "minute": 0}  # daily, 03:00 local time
REMINDER_JOB = "reminders"
GRAPH_SWEEP_JOB = "graph-sweep"
GRAPH_BACKFILL_JOB = "graph-backfill"
DREAM_SCHEDULE_JOB = "dream-schedule"
DREAM_WATCH_JOB = "dream-watch"


def run_decay(memory: MemoryStore) -> None:
    report = memory.decay(collect_changes=False)
    log.info("memory decay: %d processed, %d archived by the clean-up (at or below min_importance for "
             "cleanup_after_days)", report.processed, report.cleaned_up)


def run_graph_sweep(graph: KnowledgeGraph) -> None:
    events = graph.sweep()
    if events:
        log.info("knowledge graph: %d node(s) decayed under the retention threshold", len(events))


def run_graph_backfill(graph: KnowledgeGraph) -> None:
    """At start and daily: memories written while the graph was off (or before it existed, or whose
    batch failed) are extracted."""
    users = [r["user_id"] for r in graph.db.query("SELECT DISTINCT user_id FROM memories")]
    done = sum(graph.backfill(user).memories for user in users)
    if done:
        log.info("knowledge graph: backfilled %d memories of %d user(s)", done, len(users))


def dream_trigger(schedule: str) -> CronTrigger:
    """The 6-field cron of ``dream.schedule`` (second minute hour day month weekday), local time."""
    second, minute, hour, day, month, weekday = schedule.split()
    return CronTrigger(second=second, minute=minute, hour=hour, day=day, month=month, day_of_week=weekday)


def run_dream_schedule(dream: DreamService) -> None:
    created = dream.schedule_tick()
    if created:
        log.info("dream mode: %d session(s) pending until their user is idle", len(created))


def run_dream_watch(dream: DreamService) -> None:
    started = dream.watch()
    if started:
        log.info("dream mode: %d session(s) started (idle gate passed)", len(started))


def run_reminders(reminders: ReminderRunner) -> None:
    fired = reminders.run_once()
    if fired:
        log.info("reminders: %d fired", len(fired))


def start_scheduler(memory: MemoryStore | None, reminders: ReminderRunner | None = None,
                    reminder_interval_secs: float = 30, graph: KnowledgeGraph | None = None,
                    dream: DreamService | None = None) -> BackgroundScheduler:
    scheduler = BackgroundScheduler(daemon=True)
    if dream is not None:
        from assistant.dream.service import WATCH_SECS

        scheduler.add_job(run_dream_schedule, dream_trigger(dream.settings.schedule), args=[dream],
                          id=DREAM_SCHEDULE_JOB, coalesce=True, max_instances=1, misfire_grace_time=3600)
        scheduler.add_job(run_dream_watch, IntervalTrigger(seconds=WATCH_SECS), args=[dream], id=DREAM_WATCH_JOB,
                          coalesce=True, max_instances=1)
    if graph is not None:
        scheduler.add_job(run_graph_sweep, IntervalTrigger(minutes=graph.settings.sweep_interval_minutes),
                          args=[graph], id=GRAPH_SWEEP_JOB, coalesce=True, max_instances=1)
        # at start, then daily (memories a failed batch left behind): an interval job, never removed, so
        # a shutdown racing a one-shot job's removal cannot raise JobLookupError in the scheduler thread
        scheduler.add_job(run_graph_backfill, IntervalTrigger(hours=24), args=[graph], id=GRAPH_BACKFILL_JOB,
                          next_run_time=datetime.now(UTC), coalesce=True, max_instances=1)
    if memory is not None:
        scheduler.add_job(run_decay, CronTrigger(**DECAY_CRON), args=[memory], id="memory-decay",
                          coalesce=True, max_instances=1, misfire_grace_time=3600)
    if reminders is not None:
        scheduler.add_job(run_reminders, IntervalTrigger(seconds=reminder_interval_secs), args=[reminders],
                          id=REMINDER_JOB, coalesce=True, max_instances=1,
                          misfire_grace_time=max(60, int(reminder_interval_secs)))
    scheduler.start()
    return scheduler
