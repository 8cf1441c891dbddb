"""Rooms in SQLite: defaults, presence with a short heartbeat timeout, control messages, owners."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from assistant.config import RoomSettings
from assistant.errors import ConflictError, NotFoundError, ValidationFailed
from assistant.security import KeyStore
from assistant.storage import migrations
from assistant.storage.db import Database
from assistant.storage.migrations import MIGRATIONS
from assistant.voice.messages import ControlAction, ControlMessage
from assistant.voice.rooms import RoomStore

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class Recorder:
    def __init__(self) -> None:
        self.sent: list[ControlMessage] = []

    def publish_control(self, message: ControlMessage) -> None:
        self.sent.append(message)


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "rooms.db")
    yield database
    database.close()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def store(db: Database, recorder: Recorder) -> RoomStore:
    now = [T0]
    store = RoomStore(db, RoomSettings(heartbeat_timeout_ms=500), recorder, clock=lambda: now[0])
    store.now = now  # type: ignore[attr-defined]
    return store


def test_a_new_room_is_offline_at_default_volume(store: RoomStore) -> None:
    room = store.create("  Kitchen ")
    assert (room.name, room.is_online, room.volume, room.muted, room.last_seen) == ("Kitchen", False, 80, False, None)
    assert room.created_at == "2024-05-01T12:00:00.000Z"
    assert store.list() == [room] and store.get(room.id) == room


def test_names_are_validated_and_unique_ignoring_case(store: RoomStore) -> None:
    store.create("Kitchen")
    with pytest.raises(ConflictError, match="already exists"):
        store.create("kitchen")
    for bad in ("", "   ", "a\nb", "x" * 101):
        with pytest.raises(ValidationFailed):
            store.create(bad)


def test_heartbeat_then_stale_check(store: RoomStore) -> None:
    room = store.create("Hall")
    seen = store.heartbeat(room.id, T0)
    assert seen.is_online and seen.last_seen == "2024-05-01T12:00:00.000Z"
    assert store.online_count() == 1
    assert store.check_stale(T0 + timedelta(milliseconds=499)) == []
    store.heartbeat(room.id, T0 + timedelta(milliseconds=400))
    assert store.check_stale(T0 + timedelta(milliseconds=899)) == []
    assert store.check_stale(T0 + timedelta(milliseconds=900)) == [room.id]
    gone = store.get(room.id)
    assert not gone.is_online and gone.last_seen == "2024-05-01T12:00:00.400Z"
    assert store.online_count() == 0
    assert store.heartbeat(room.id, T0 + timedelta(seconds=5)).is_online  # back online


def test_stale_check_uses_the_clock_by_default(store: RoomStore) -> None:
    room = store.create("Hall")
    store.heartbeat(room.id)
    store.now[0] = T0 + timedelta(seconds=1)  # type: ignore[attr-defined]
    assert store.check_stale() == [room.id]


def test_heartbeat_of_an_unknown_room(store: RoomStore) -> None:
    with pytest.raises(NotFoundError):
        store.heartbeat("00000000-0000-4000-8000-000000000000")


def test_volume_and_mute_changes_publish_control_messages(store: RoomStore, recorder: Recorder) -> None:
    room = store.create("Den")
    assert store.update(room.id, volume=40).volume == 40
    assert store.update(room.id, muted=True).muted
    store.update(room.id, volume=40, muted=True)  # no change: nothing sent
    store.update(room.id, volume=55, muted=False)  # both: two messages
    assert [(m.room_id, m.action, m.value) for m in recorder.sent] == [
        (room.id, ControlAction.VOLUME, 40), (room.id, ControlAction.MUTE, None),
        (room.id, ControlAction.VOLUME, 55), (room.id, ControlAction.UNMUTE, None)]
    assert recorder.sent[0].to_bytes() == (b'{"v":1,"room_id":"%s","action":"volume","value":40,'
                                           b'"at":"2024-05-01T12:00:00.000Z","origin":"server"}' % room.id.encode())
    with pytest.raises(ValidationFailed, match="volume"):
        store.update(room.id, volume=101)


def test_delete(store: RoomStore) -> None:
    room = store.create("Den")
    store.delete(room.id)
    with pytest.raises(NotFoundError):
        store.get(room.id)
    with pytest.raises(NotFoundError):
        store.delete(room.id)


ALICE, BOB = "0b0e5a35-0000-4000-8000-00000000000a", "0b0e5a35-0000-4000-8000-00000000000b"


def test_rooms_belong_to_their_owner(store: RoomStore, recorder: Recorder) -> None:
    kitchen = store.create("Kitchen", ALICE)
    assert kitchen.owner_user_id == ALICE
    bobs = store.create("kitchen", BOB)  # names are unique per owner, not across owners
    assert store.list(ALICE) == [kitchen] and store.list(BOB) == [bobs]
    assert store.list() == [kitchen, bobs]  # no owner: every room (admins, the pipeline)
    assert store.get(kitchen.id, ALICE) == kitchen == store.get(kitchen.id)
    for act in (lambda: store.get(kitchen.id, BOB), lambda: store.update(kitchen.id, volume=3, owner=BOB),
                lambda: store.delete(kitchen.id, BOB)):
        with pytest.raises(NotFoundError, match="not found"):  # the same answer as for a missing room
            act()
    assert recorder.sent == []  # nothing reached Alice's satellite
    assert store.get(kitchen.id) == kitchen
    store.delete(kitchen.id, ALICE)
    assert store.list() == [bobs]
    with pytest.raises(ConflictError):
        store.create("KITCHEN", BOB)


def test_a_room_made_without_an_owner_belongs_to_the_installation_owner(store: RoomStore, db: Database) -> None:
    room = store.create("Satellite room")
    assert room.owner_user_id == str(KeyStore(db).owner_user_id())


def test_m015_gives_existing_rooms_to_the_installation_owner(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    db = Database(tmp_path / "old.db", migrate=False)
    try:
        upto = next(i for i, fn in enumerate(MIGRATIONS) if fn.__name__ == "m015_voice_room_owner")
        monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS[:upto])
        migrations.migrate(db)
        now = "2024-05-01T12:00:00.000Z"
        db.executemany("INSERT INTO voice_rooms (id, name, is_online, volume, muted, last_seen, created_at, updated_at)"
                       " VALUES (?, ?, 1, 40, 1, ?, ?, ?)", [("r1", "Kitchen", now, now, now),
                                                               ("r2", "Hall", None, now, now)])
        monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS)
        assert "m015_voice_room_owner" in migrations.migrate(db)
        owner = str(KeyStore(db).owner_user_id())  # made by the migration; the keys' default user from now on
        rooms = RoomStore(db).list(owner)
        assert [(r.id, r.name, r.volume, r.muted, r.last_seen) for r in rooms] == [
            ("r2", "Hall", 40, True, None), ("r1", "Kitchen", 40, True, now)]  # same created_at: by name
        assert RoomStore(db).list("someone else") == []
    finally:
        db.close()
