"""Schema migrations: a blank database gets every table; migrating again applies nothing."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from assistant.storage import migrations
from assistant.storage.db import Database
from assistant.storage.migrations import MIGRATIONS, applied, migrate

EXPECTED_COLUMNS = {
    "meta": ["key", "value"],
    "api_keys": ["key_hash", "user_id", "name", "created_at", "last_used_at", "role"],
    "conversations": ["id", "user_id", "title", "created_at", "updated_at"],
    "messages": [
        "id", "conversation_id", "role", "content", "model", "prompt_tokens", "completion_tokens", "created_at", "seq",
    ],
    "_migrations": ["name", "applied_at"],
    "webhook_messages": ["platform", "message_id", "sender_id", "user_id", "message_type", "status", "detail",
                         "conversation_id", "reply_ids", "received_at", "updated_at"],
    "webhook_conversations": ["platform", "sender_id", "user_id", "conversation_id", "created_at", "updated_at"],
    "agent_profiles": ["id", "user_id", "name_token", "profile_sealed", "created_at", "updated_at"],
    "snippets": ["id", "user_id", "title_sealed", "title_key", "content_sealed", "created_at", "updated_at"],
    "reminders": ["id", "user_id", "text_sealed", "due_at", "created_at", "fired_at", "delivered_via",
                  "delivery_detail"],
    "tool_runs": ["id", "user_id", "conversation_id", "message_id", "iteration", "position", "tool", "status",
                  "arguments_sealed", "result_sealed", "error", "duration_ms", "created_at"],
    "agentic_tasks": ["id", "user_id", "status", "description_sealed", "require_approval", "plan_summary_sealed",
                      "result_sealed", "error", "created_at", "updated_at", "finished_at"],
    "agentic_sub_agents": ["id", "task_id", "position", "description_sealed", "profile", "tools", "status",
                           "result_sealed", "error", "started_at", "finished_at"],
    "agentic_events": ["task_id", "seq", "event", "data_sealed", "created_at"],
    "command_catalog": ["id", "name", "description", "command", "category", "risk_level", "os",
                        "requires_approval", "is_default", "created_by", "created_at", "updated_at", "network"],
    "command_executions": ["id", "catalog_id", "approval_id", "user_id", "command", "status", "exit_code",
                           "stdout_sealed", "stderr_sealed", "duration_ms", "timed_out", "truncated", "executed_at"],
    "command_approvals": ["id", "kind", "catalog_id", "catalog_name", "command", "risk_level", "tool_name",
                          "arguments_sealed", "conversation_id", "message_id", "result_sealed", "tool_run_id",
                          "requested_by", "status", "reason_sealed", "decided_by", "decided_at", "execution_id",
                          "created_at"],
    "command_audit": ["id", "action", "catalog_id", "approval_id", "execution_id", "user_id", "detail_sealed",
                      "at"],
    "voice_rooms": ["id", "owner_user_id", "name", "is_online", "volume", "muted", "last_seen", "created_at", "updated_at"],
}


@pytest.fixture
def blank(tmp_path: Path) -> Database:
    db = Database(tmp_path / "blank.db", migrate=False)
    yield db
    db.close()


def test_blank_database_has_no_tables(blank: Database) -> None:
    assert blank.tables() == []


def test_migrating_a_blank_database_creates_the_tables(blank: Database) -> None:
    names = migrate(blank)
    assert names == [fn.__name__ for fn in MIGRATIONS]
    assert "m001_initial" in names
    for table, columns in EXPECTED_COLUMNS.items():
        assert blank.columns(table) == columns, table
    assert set(EXPECTED_COLUMNS) <= set(blank.tables())


def test_migrating_twice_applies_nothing(blank: Database) -> None:
    first = migrate(blank)
    assert first
    assert migrate(blank) == []
    assert applied(blank) == first
    assert blank.scalar("SELECT count(*) FROM _migrations") == len(first)


def test_reopening_an_existing_database_applies_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    Database(path).close()
    db = Database(path, migrate=False)
    try:
        assert migrate(db) == []
    finally:
        db.close()


def test_applied_migrations_are_recorded_with_a_time(blank: Database) -> None:
    migrate(blank)
    rows = blank.query("SELECT name, applied_at FROM _migrations")
    assert [r["name"] for r in rows] == [fn.__name__ for fn in MIGRATIONS]
    assert all(r["applied_at"] for r in rows)


def test_a_failing_migration_leaves_the_last_good_state(blank: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    migrate(blank)

    def m999_broken(db: Database) -> None:
        db.execute("CREATE TABLE half_done (x INTEGER)")
        db.execute("INSERT INTO no_such_table VALUES (1)")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, m999_broken])
    with pytest.raises(apsw.SQLError):
        migrations.migrate(blank)
    assert "half_done" not in blank.tables()
    assert "m999_broken" not in applied(blank)


def test_constraints_of_the_schema(tmp_path: Path) -> None:
    db = Database(tmp_path / "c.db")
    try:
        now = "2024-01-01T00:00:00.000Z"
        with pytest.raises(apsw.ConstraintError):  # foreign keys are enforced
            db.execute(
                "INSERT INTO messages (id, conversation_id, role, content, created_at, seq) VALUES (?, ?, ?, ?, ?, ?)",
                ("m1", "missing", "user", "hi", now, 1),
            )
        db.execute("INSERT INTO conversations (id, user_id, created_at, updated_at) VALUES ('c1', 'u1', ?, ?)",
                   (now, now))
        with pytest.raises(apsw.ConstraintError):  # role is checked
            db.execute(
                "INSERT INTO messages (id, conversation_id, role, content, created_at, seq) VALUES (?, ?, ?, ?, ?, ?)",
                ("m1", "c1", "robot", "hi", now, 1),
            )
        with pytest.raises(apsw.ConstraintError):  # role is checked
            db.execute(
                "INSERT INTO api_keys (key_hash, user_id, name, role, created_at) VALUES ('h', 'u', 'n', 'full', ?)",
                (now,),
            )
        db.execute(
            "INSERT INTO messages (id, conversation_id, role, content, created_at, seq) VALUES (?, ?, ?, ?, ?, ?)",
            ("m1", "c1", "user", "hi", now, 1),
        )
        db.execute("DELETE FROM conversations WHERE id = 'c1'")  # messages go with their conversation
        assert db.scalar("SELECT count(*) FROM messages") == 0
    finally:
        db.close()


def test_m016_adds_low_since_null_for_existing_memories(blank: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [fn.__name__ for fn in MIGRATIONS]
    before = MIGRATIONS[:names.index("m016_memory_low_since")]
    monkeypatch.setattr(migrations, "MIGRATIONS", before)
    migrate(blank)
    blank.execute("INSERT INTO memories (rowid, id, user_id, content, summary, tags, memory_type, created_at, "
                  "updated_at, accessed_at, embedding) VALUES (1, 'm1', 'u', x'', x'', x'', 'Context', '', '', '', x'')")
    blank.execute("INSERT INTO memory_scores (memory_rowid, user_id, decay_type, importance, accessed_ts, decay_ts) "
                  "VALUES (1, 'u', 'Context', 0.1, 0, 0)")
    monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS)
    assert "m016_memory_low_since" in migrate(blank)
    assert blank.one("SELECT low_since FROM memory_scores WHERE memory_rowid = 1") == {"low_since": None}
