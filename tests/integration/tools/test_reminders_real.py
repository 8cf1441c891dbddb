"""Reminders against a real HTTP server standing in for the Graph Send API, and fired by the real
APScheduler job: the capability is built from settings as the service builds it (SQLite file,
sealed text, MessengerDelivery pointed at the loopback server)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from assistant.clock import utcnow
from assistant.config import Settings
from assistant.crypto import Sealer, load_or_create_key
from assistant.scheduler import start_scheduler
from assistant.storage.db import Database
from assistant.tools.base import CapabilityDeps
from assistant.tools.catalog import Toolbox, build_toolbox
from assistant.tools.reminders import CAPABILITY, MessengerDelivery, ReminderRunner, create_reminder, list_reminders
from tests.integration.tools.graph_api_server import GraphApi, graph_api  # noqa: F401

ALICE, BOB = "7f1c8a52-5d1e-4c8e-9a43-2a1f0e7b9c01", "0b6e2d4f-9c3a-4e21-8f57-6d0a1b2c3d4e"
TOKEN = "page-token-abc"


@pytest.fixture
def toolbox(
    tmp_path: Path, make_settings: Callable[..., Settings], graph_api: GraphApi  # noqa: F811
) -> Iterator[Toolbox]:
    settings = make_settings(messenger={"enabled": True, "access_token": TOKEN, "api_base_url": graph_api.base_url,
                                        "allowed_senders": {"psid-alice": ALICE}})
    db = Database(tmp_path / "assistant.db")
    sealer = Sealer(load_or_create_key(tmp_path / "memory.key"))
    box = build_toolbox(CapabilityDeps(settings, db, sealer, tmp_path), [CAPABILITY])
    yield box
    box.close()
    db.close()


def runner_of(toolbox: Toolbox) -> ReminderRunner:
    runner = toolbox.backends["reminders"]
    assert isinstance(runner.delivery, MessengerDelivery)
    return runner


def test_a_due_reminder_reaches_the_mapped_sender(toolbox: Toolbox, graph_api: GraphApi) -> None:  # noqa: F811
    made = create_reminder(toolbox.context(ALICE), {"text": "take the bins out", "in_minutes": 1})
    fired = runner_of(toolbox).run_once(utcnow() + timedelta(minutes=2))
    assert [(f.reminder.id, f.delivered_via) for f in fired] == [(made["id"], "messenger")]
    (request,) = graph_api.requests
    assert request["path"] == "/me/messages"
    assert request["query"] == {"access_token": [TOKEN]}
    assert request["content_type"] == "application/json"
    assert request["body"] == {
        "recipient": {"id": "psid-alice"}, "messaging_type": "MESSAGE_TAG", "tag": "CONFIRMED_EVENT_UPDATE",
        "message": {"text": "Reminder: take the bins out"},
    }
    (listed,) = list_reminders(toolbox.context(ALICE), {"include_fired": True})
    assert listed["delivered_via"] == "messenger" and listed["fired_at"] is not None
    assert runner_of(toolbox).store.get(made["id"]).delivery_detail == "message_id=m_1"


def test_a_refused_message_is_recorded_and_not_retried(toolbox: Toolbox, graph_api: GraphApi) -> None:  # noqa: F811
    graph_api.refuse_with = 400
    made = create_reminder(toolbox.context(ALICE), {"text": "call mum", "in_minutes": 1})
    runner = runner_of(toolbox)
    (fired,) = runner.run_once(utcnow() + timedelta(minutes=2))
    assert fired.delivered_via == "none"
    assert fired.detail == "messenger API answered HTTP 400: (#100) No matching user found"
    graph_api.refuse_with = None
    assert runner.run_once(utcnow() + timedelta(minutes=5)) == []
    assert len(graph_api.requests) == 1
    stored = runner.store.get(made["id"])
    assert stored.delivered_via == "none" and TOKEN not in stored.delivery_detail


def test_a_user_without_a_sender_id_gets_the_log(toolbox: Toolbox, graph_api: GraphApi) -> None:  # noqa: F811
    create_reminder(toolbox.context(BOB), {"text": "stretch", "in_minutes": 1})
    (fired,) = runner_of(toolbox).run_once(utcnow() + timedelta(minutes=2))
    assert fired.delivered_via == "log"
    assert graph_api.requests == []


def test_the_scheduler_job_fires_a_reminder_soon_due(toolbox: Toolbox, graph_api: GraphApi) -> None:  # noqa: F811
    runner = runner_of(toolbox)
    # Straight into the store: the tool would refuse a time that a stalled machine let slip into the past.
    made = runner.store.add(ALICE, "the kettle", utcnow() + timedelta(seconds=1))
    scheduler = start_scheduler(None, runner, reminder_interval_secs=1)
    try:
        deadline = time.monotonic() + 120  # generous: a shared, busy machine
        while runner.store.get(made.id).fired_at is None:
            assert time.monotonic() < deadline, "the scheduler did not fire the reminder"
            time.sleep(0.2)
    finally:
        scheduler.shutdown(wait=True)
    stored = runner.store.get(made.id)
    assert stored.delivered_via == "messenger"
    assert [r["body"]["message"]["text"] for r in graph_api.requests] == ["Reminder: the kettle"]
    assert graph_api.requests[0]["body"]["recipient"] == {"id": "psid-alice"}
