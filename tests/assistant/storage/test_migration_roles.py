"""m013: key scopes become roles (the owner's full keys admin, others' user, read keys read-only);
catalog entries get ``network``; approvals keep their rows and gain tool-call columns."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from assistant.storage import migrations
from assistant.storage.db import Database
from assistant.storage.migrations import MIGRATIONS, migrate

NOW = "2024-01-01T00:00:00.000Z"


def before_m013(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Database:
    db = Database(tmp_path / "old.db", migrate=False)
    upto = [fn for fn in MIGRATIONS if fn.__name__ < "m013"]
    monkeypatch.setattr(migrations, "MIGRATIONS", upto)
    migrations.migrate(db)
    monkeypatch.undo()
    return db


def test_scopes_become_roles_and_approvals_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = before_m013(tmp_path, monkeypatch)
    try:
        db.execute("INSERT INTO meta (key, value) VALUES ('owner_user_id', 'owner')")
        for key, user, scope in (("h1", "owner", "full"), ("h2", "owner", "read"), ("h3", "other", "full"),
                                 ("h4", "other", "read")):
            db.execute("INSERT INTO api_keys (key_hash, user_id, name, scope, created_at) VALUES (?, ?, ?, ?, ?)",
                       (key, user, key, scope, NOW))
        db.execute("INSERT INTO command_catalog (id, name, description, command, category, risk_level, os, "
                   "requires_approval, created_at, updated_at) VALUES ('c1', 'Up', '', 'uptime', 'system', 'low', "
                   "'any', 0, ?, ?)", (NOW, NOW))
        for n in range(3):
            db.execute("INSERT INTO command_approvals (id, catalog_id, catalog_name, command, risk_level, "
                       "requested_by, status, created_at) VALUES (?, 'c1', 'Up', 'uptime', 'low', 'other', "
                       "'pending', ?)", (f"a{n}", NOW))
        assert "m013_roles_and_approvals" in migrate(db)
        roles = {r["key_hash"]: r["role"] for r in db.query("SELECT key_hash, role FROM api_keys")}
        assert roles == {"h1": "admin", "h2": "read-only", "h3": "user", "h4": "read-only"}
        assert db.scalar("SELECT network FROM command_catalog WHERE id = 'c1'") == 0
        rows = db.query("SELECT id, kind, catalog_id, requested_by FROM command_approvals ORDER BY rowid")
        assert [(r["id"], r["kind"], r["catalog_id"], r["requested_by"]) for r in rows] == [
            (f"a{n}", "command", "c1", "other") for n in range(3)]
        with pytest.raises(apsw.ConstraintError):  # a command request names its entry
            db.execute("INSERT INTO command_approvals (id, kind, status, created_at) VALUES "
                       "('x', 'command', 'pending', ?)", (NOW,))
        with pytest.raises(apsw.ConstraintError):  # a tool-call request names its tool and arguments
            db.execute("INSERT INTO command_approvals (id, kind, tool_name, status, created_at) VALUES "
                       "('x', 'tool_call', 'send_email', 'pending', ?)", (NOW,))
        with pytest.raises(apsw.ConstraintError):
            db.execute("INSERT INTO api_keys (key_hash, user_id, name, role, created_at) "
                       "VALUES ('h9', 'u', 'n', 'root', ?)", (NOW,))
    finally:
        db.close()
