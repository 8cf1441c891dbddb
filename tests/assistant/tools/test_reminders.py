"""Reminders: create/list validation and time zones, per-user isolation, sealing at rest, firing at
most once (failed deliveries recorded), and the capability's wiring from settings.

The store is real (SQLite in ``tmp_path`` with the migrations); the delivery channel is a fake that
records what it was given. The clock is injected so no test depends on the wall clock's value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from assistant.crypto import Sealer
from assistant.errors import ConfigError
from assistant.storage.db import Database
from assistant.tools.base import CapabilityDeps, ToolContext, ToolError
from assistant.tools.catalog import build_toolbox
from assistant.tools.reminders import (
    CAPABILITY,
    PENDING,
    DeliveryReceipt,
    LogDelivery,
    MessengerDelivery,
    Reminder,
    ReminderRunner,
    SqliteReminderStore,
    create_reminder,
    fire_due_reminders,
    list_reminders,
)

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
ALICE, BOB = "7f1c8a52-5d1e-4c8e-9a43-2a1f0e7b9c01", "0b6e2d4f-9c3a-4e21-8f57-6d0a1b2c3d4e"


class RecordingDelivery:
    """A delivery channel that records each reminder; ``fail`` makes it raise instead."""

    def __init__(self, fail: Exception | None = None):
        self.delivered: list[Reminder] = []
        self.fail = fail

    def deliver(self, reminder: Reminder) -> DeliveryReceipt:
        if self.fail is not None:
            raise self.fail
        self.delivered.append(reminder)
        return DeliveryReceipt("fake", f"to {reminder.user_id}")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "assistant.db")
    yield database
    database.close()


@pytest.fixture
def store(db: Database) -> SqliteReminderStore:
    return SqliteReminderStore(db, Sealer(bytes(range(32))))


@pytest.fixture
def delivery() -> RecordingDelivery:
    return RecordingDelivery()


@pytest.fixture
def runner(store: SqliteReminderStore, delivery: RecordingDelivery) -> ReminderRunner:
    return ReminderRunner(store, delivery, UTC, clock=lambda: NOW)


def ctx(runner: ReminderRunner, user: str = ALICE) -> ToolContext:
    return ToolContext(user, {"reminders": runner})


def create(runner: ReminderRunner, user: str = ALICE, **arguments: object) -> dict:
    return create_reminder(ctx(runner, user), {"text": "water the plants", **arguments})


# --- creating and listing ------------------------------------------------------------------------


def test_create_in_minutes(runner: ReminderRunner, store: SqliteReminderStore) -> None:
    made = create(runner, in_minutes=90)
    assert made["text"] == "water the plants"
    assert made["due_at"] == "2025-03-01T13:30:00+00:00"
    assert store.list_for_user(ALICE)[0].due_at == NOW + timedelta(minutes=90)


def test_naive_at_is_read_in_the_configured_zone(runner: ReminderRunner, store: SqliteReminderStore) -> None:
    runner.zone = ZoneInfo("Europe/Berlin")
    winter = create(runner, at="2025-03-02T09:30")
    summer = create(runner, at="2025-07-01 09:30")
    assert winter["due_at"] == "2025-03-02T09:30:00+01:00"
    assert summer["due_at"] == "2025-07-01T09:30:00+02:00"
    assert [r.due_at for r in store.list_for_user(ALICE)] == [
        datetime(2025, 3, 2, 8, 30, tzinfo=UTC), datetime(2025, 7, 1, 7, 30, tzinfo=UTC),
    ]


def test_an_explicit_offset_wins_over_the_zone(runner: ReminderRunner, store: SqliteReminderStore) -> None:
    runner.zone = ZoneInfo("America/New_York")
    assert create(runner, at="2025-03-01T18:00:00Z")["due_at"] == "2025-03-01T13:00:00-05:00"
    create(runner, at="2025-03-01T20:00:00+05:30")
    assert [r.due_at.isoformat() for r in store.list_for_user(ALICE)] == [
        "2025-03-01T14:30:00+00:00", "2025-03-01T18:00:00+00:00",
    ]


@pytest.mark.parametrize(("arguments", "message"), [
    ({}, "exactly one of at"),
    ({"at": "2025-03-02T09:00", "in_minutes": 5}, "exactly one of at"),
    ({"at": "tomorrow at nine"}, "ISO 8601"),
    ({"at": "2025-03-02"}, "time of day"),
    ({"at": "2025-03-01T11:59"}, "in the past"),
    ({"at": "2025-03-01T12:00:00Z"}, "in the past"),
    ({"in_minutes": 0}, "greater than or equal to 1"),
    ({"in_minutes": 10, "text": "   "}, "must not be empty"),
    ({"in_minutes": 10, "text": ""}, "at least 1 character"),
])
def test_invalid_requests_are_tool_errors(runner: ReminderRunner, store: SqliteReminderStore,
                                          arguments: dict, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        create(runner, **arguments)
    assert store.list_for_user(ALICE, include_fired=True) == []


def test_the_past_error_shows_the_current_time_in_the_zone(runner: ReminderRunner) -> None:
    runner.zone = ZoneInfo("Europe/Berlin")
    with pytest.raises(ToolError, match=r"it is now 2025-03-01T13:00:00\+01:00"):
        create(runner, at="2025-03-01T12:30")


def test_list_is_ordered_by_due_time_and_hides_fired(runner: ReminderRunner) -> None:
    late = create(runner, in_minutes=120, text="late")
    soon = create(runner, in_minutes=5, text="soon")
    middle = create(runner, at="2025-03-01T13:00:00Z", text="middle")
    listed = list_reminders(ctx(runner), {})
    assert [r["id"] for r in listed] == [soon["id"], middle["id"], late["id"]]
    assert listed[0] == {"id": soon["id"], "text": "soon", "due_at": "2025-03-01T12:05:00+00:00",
                         "fired_at": None, "delivered_via": None}
    runner.run_once(NOW + timedelta(minutes=10))
    assert [r["text"] for r in list_reminders(ctx(runner), {})] == ["middle", "late"]
    everything = list_reminders(ctx(runner), {"include_fired": True})
    assert [r["text"] for r in everything] == ["soon", "middle", "late"]
    assert everything[0]["fired_at"] == "2025-03-01T12:10:00+00:00"
    assert everything[0]["delivered_via"] == "fake"


def test_users_see_only_their_own_reminders(runner: ReminderRunner) -> None:
    create(runner, ALICE, in_minutes=5, text="alice's")
    create(runner, BOB, in_minutes=6, text="bob's")
    assert [r["text"] for r in list_reminders(ctx(runner, ALICE), {"include_fired": True})] == ["alice's"]
    assert [r["text"] for r in list_reminders(ctx(runner, BOB), {"include_fired": True})] == ["bob's"]
    assert list_reminders(ctx(runner, "someone-else"), {"include_fired": True}) == []


def test_without_the_capability_the_tools_say_so() -> None:
    with pytest.raises(ToolError, match="reminders capability is not configured"):
        list_reminders(ToolContext(ALICE), {})


# --- sealing -------------------------------------------------------------------------------------


def test_the_text_is_sealed_on_disk(runner: ReminderRunner, db: Database, tmp_path: Path) -> None:
    secret = "call the oncologist about the biopsy"
    create(runner, in_minutes=5, text=secret)
    row = db.one("SELECT * FROM reminders")
    assert secret.encode() not in bytes(row["text_sealed"])
    assert all(secret not in str(value) for value in row.values())
    on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("assistant.db*"))
    assert secret.encode() not in on_disk
    assert list_reminders(ctx(runner), {})[0]["text"] == secret


def test_the_table_and_its_indexes(db: Database) -> None:
    assert db.columns("reminders") == [
        "id", "user_id", "text_sealed", "due_at", "created_at", "fired_at", "delivered_via", "delivery_detail",
    ]
    rows = db.query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'reminders'")
    indexes = {r["name"] for r in rows}
    assert {"reminders_due", "reminders_user"} <= indexes


# --- firing --------------------------------------------------------------------------------------


def test_fire_due_fires_only_due_reminders_once(runner: ReminderRunner, store: SqliteReminderStore,
                                                delivery: RecordingDelivery) -> None:
    first = create(runner, in_minutes=5, text="first")
    second = create(runner, BOB, in_minutes=10, text="second")
    create(runner, in_minutes=60, text="later")
    at = NOW + timedelta(minutes=10)
    fired = fire_due_reminders(store, delivery, now=at)
    assert [(f.reminder.id, f.delivered_via, f.fired_at) for f in fired] == [
        (first["id"], "fake", at), (second["id"], "fake", at),
    ]
    assert [(r.text, r.user_id) for r in delivery.delivered] == [("first", ALICE), ("second", BOB)]
    assert fire_due_reminders(store, delivery, now=at + timedelta(minutes=1)) == []
    assert len(delivery.delivered) == 2
    stored = store.get(first["id"])
    assert (stored.fired_at, stored.delivered_via, stored.delivery_detail) == (at, "fake", f"to {ALICE}")
    assert [r.text for r in store.due(NOW + timedelta(days=1))] == ["later"]


def test_a_failed_delivery_is_recorded_and_not_retried(runner: ReminderRunner, store: SqliteReminderStore) -> None:
    made = create(runner, in_minutes=1)
    broken = RecordingDelivery(fail=RuntimeError("the channel is down"))
    fired = fire_due_reminders(store, broken, now=NOW + timedelta(minutes=1))
    assert [(f.delivered_via, f.detail) for f in fired] == [("none", "the channel is down")]
    stored = store.get(made["id"])
    assert (stored.delivered_via, stored.delivery_detail) == ("none", "the channel is down")
    assert stored.fired_at == NOW + timedelta(minutes=1)
    working = RecordingDelivery()
    assert fire_due_reminders(store, working, now=NOW + timedelta(hours=1)) == []
    assert working.delivered == []


def test_a_crash_after_claiming_never_fires_twice(runner: ReminderRunner, store: SqliteReminderStore) -> None:
    """The claim is committed before delivery: a process dying mid-delivery leaves it pending."""
    made = create(runner, in_minutes=1)

    class Crash(BaseException):
        pass

    with pytest.raises(Crash):
        fire_due_reminders(store, RecordingDelivery(fail=Crash()), now=NOW + timedelta(minutes=2))
    assert store.get(made["id"]).delivered_via == PENDING
    after_restart = RecordingDelivery()
    assert fire_due_reminders(store, after_restart, now=NOW + timedelta(minutes=3)) == []
    assert after_restart.delivered == []


def test_a_reminder_claimed_elsewhere_is_skipped(runner: ReminderRunner, store: SqliteReminderStore,
                                                 delivery: RecordingDelivery) -> None:
    made = create(runner, in_minutes=1)
    due = store.due(NOW + timedelta(minutes=1))
    assert store.claim(made["id"], NOW + timedelta(minutes=1)) is True
    assert store.claim(made["id"], NOW + timedelta(minutes=1)) is False

    class StaleStore:  # answers `due` from before the other run's claim
        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

        def due(self, now: datetime) -> list[Reminder]:
            return due

    assert fire_due_reminders(StaleStore(), delivery, now=NOW + timedelta(minutes=1)) == []
    assert delivery.delivered == []


def test_run_once_uses_the_runners_clock(runner: ReminderRunner, delivery: RecordingDelivery) -> None:
    create(runner, in_minutes=1)
    assert runner.run_once() == []
    runner.clock = lambda: NOW + timedelta(minutes=1)
    assert [f.reminder.text for f in runner.run_once()] == ["water the plants"]


# --- delivery channels ---------------------------------------------------------------------------


def reminder(user: str = ALICE, text: str = "stretch") -> Reminder:
    return Reminder("r1", user, text, NOW, NOW)


def test_log_delivery_logs_without_the_text(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="assistant.reminders")
    receipt = LogDelivery().deliver(reminder(text="a private matter"))
    assert receipt.channel == "log"
    assert "r1" in caplog.text and "a private matter" not in caplog.text


def messenger(handler: Callable[[httpx.Request], httpx.Response], **kwargs: object) -> MessengerDelivery:
    return MessengerDelivery("http://graph.test/v19.0/", "tok-123", {"psid-9": ALICE},
                             client=httpx.Client(transport=httpx.MockTransport(handler)), **kwargs)


def test_messenger_delivery_posts_a_tagged_message_to_the_mapped_sender() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"recipient_id": "psid-9", "message_id": "m_1"})

    receipt = messenger(handler).deliver(reminder())
    assert receipt == DeliveryReceipt("messenger", "message_id=m_1")
    (request,) = seen
    assert request.method == "POST" and request.url.path == "/v19.0/me/messages"
    assert request.url.params["access_token"] == "tok-123"
    assert json.loads(request.content) == {
        "recipient": {"id": "psid-9"}, "messaging_type": "MESSAGE_TAG", "tag": "CONFIRMED_EVENT_UPDATE",
        "message": {"text": "Reminder: stretch"},
    }


def test_messenger_refusal_is_a_failed_delivery_without_the_token(store: SqliteReminderStore) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": "(#100) No matching user found", "code": 100}})

    made = store.add(ALICE, "stretch", NOW)
    (fired,) = fire_due_reminders(store, messenger(handler), now=NOW)
    assert fired.delivered_via == "none"
    assert fired.detail == "messenger API answered HTTP 400: (#100) No matching user found"
    assert "tok-123" not in store.get(made.id).delivery_detail


def test_an_unmapped_user_falls_back_to_the_log() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request expected")

    assert messenger(handler).deliver(reminder(user=BOB)).channel == "log"


def test_an_unreachable_api_is_a_delivery_error(store: SqliteReminderStore) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    store.add(ALICE, "stretch", NOW)
    (fired,) = fire_due_reminders(store, messenger(handler), now=NOW)
    assert fired.delivered_via == "none" and "unreachable" in fired.detail


# --- the capability ------------------------------------------------------------------------------


def test_capability_builds_a_runner_from_settings(make_settings, db: Database) -> None:
    settings = make_settings(reminders={"timezone": "Europe/Oslo"})
    toolbox = build_toolbox(CapabilityDeps(settings, db, Sealer(None)), [CAPABILITY])
    runner = toolbox.backends["reminders"]
    assert isinstance(runner, ReminderRunner) and isinstance(runner.delivery, LogDelivery)
    assert runner.zone == ZoneInfo("Europe/Oslo")
    assert toolbox.registry.names() == ["create_reminder", "list_reminders"]
    made = create_reminder(toolbox.context(ALICE), {"text": "tea", "in_minutes": 3})
    assert made["due_at"].endswith(("+01:00", "+02:00"))
    toolbox.close()


def test_messenger_settings_choose_messenger_delivery(make_settings, db: Database) -> None:
    settings = make_settings(messenger={"enabled": True, "access_token": "tok", "allowed_senders": {"psid-1": ALICE}})
    runner = CAPABILITY.create(CapabilityDeps(settings, db, Sealer(None)))
    try:
        assert isinstance(runner.delivery, MessengerDelivery)
    finally:
        runner.close()
    no_token = make_settings(messenger={"enabled": True})
    assert isinstance(CAPABILITY.create(CapabilityDeps(no_token, db, Sealer(None))).delivery, LogDelivery)


def test_disabled_or_misconfigured(make_settings, db: Database) -> None:
    assert CAPABILITY.configured(make_settings()) is True
    assert CAPABILITY.configured(make_settings(reminders={"enabled": False})) is False
    with pytest.raises(ConfigError, match="unknown time zone"):
        CAPABILITY.create(CapabilityDeps(make_settings(reminders={"timezone": "Mars/Olympus"}), db))
    with pytest.raises(ConfigError, match="reminders.backend"):
        CAPABILITY.create(CapabilityDeps(make_settings(reminders={"backend": "redis"}), db))
    status = build_toolbox(CapabilityDeps(make_settings()), [CAPABILITY]).status[0]
    assert (status.configured, status.available) == (True, False)
