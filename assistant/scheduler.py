"""Background jobs (APScheduler): the daily memory decay cycle.

APScheduler was chosen for cron-style schedules in-process, with no broker to run.
"""

from __future__ import annotations

import logging

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

from assistant.memory.store import MemoryStore

log = logging.getLogger("assistant.scheduler")
DECAY_CRON = {"hour": 3, "minute": 0}  # daily, 03:00 local time


def run_decay(memory: MemoryStore) -> None:
    report = memory.decay(collect_changes=False)
    log.info("memory decay: %d processed, %d cleaned up", report.processed, report.cleaned_up)


def start_scheduler(memory: MemoryStore | None) -> BackgroundScheduler:
    scheduler = BackgroundScheduler(daemon=True)
    if memory is not None:
        scheduler.add_job(run_decay, CronTrigger(**DECAY_CRON), args=[memory], id="memory-decay",
                          coalesce=True, max_instances=1, misfire_grace_time=3600)
    scheduler.start()
    return scheduler
