"""Named, append-only schema migrations. Never edit one that has shipped: add the next.

Each migration is a function ``mNNN_name(db)`` registered in order with :func:`migration`.
Applied names are recorded in ``_migrations``; :func:`migrate` applies the rest in a transaction
each, so a failure leaves the database at the last good migration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import uuid4


class Connection(Protocol):
    """What a migration is given: :class:`assistant.storage.db.Database` satisfies it. Migrations
    depend on this, not on the database module, so the dependency runs one way (db -> migrations)."""

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> None: ...

    def executescript(self, sql: str) -> None: ...

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]: ...

    def transaction(self) -> AbstractContextManager[Any]: ...


Migration = Callable[[Connection], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


def applied(db: Connection) -> list[str]:
    db.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    return [r["name"] for r in db.query("SELECT name FROM _migrations ORDER BY rowid")]


def migrate(db: Connection) -> list[str]:
    """Apply every migration not yet applied; returns the names applied now."""
    done = set(applied(db))
    now_applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        with db.transaction():
            fn(db)
            db.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (fn.__name__, datetime.now(UTC).isoformat()),
            )
        now_applied.append(fn.__name__)
    return now_applied


@migration
def m001_initial(db: Connection) -> None:
    db.executescript(
        """
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE api_keys (
            key_hash TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            name TEXT NOT NULL,
            scope TEXT NOT NULL DEFAULT 'full' CHECK (scope IN ('full', 'read')),
            created_at TEXT NOT NULL,
            last_used_at TEXT
        );
        CREATE INDEX api_keys_name ON api_keys(name);
        CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX conversations_user ON conversations(user_id, updated_at);
        CREATE TABLE messages (
            id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            content TEXT NOT NULL,
            model TEXT,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            seq INTEGER NOT NULL
        );
        CREATE INDEX messages_conversation ON messages(conversation_id, seq);
        """
    )


@migration
def m002_memories(db: Connection) -> None:
    """Memories (content, summary and tags sealed), their embeddings and keyword tokens."""
    db.executescript(
        """
        CREATE TABLE memories (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            user_id TEXT NOT NULL,
            conversation_id TEXT,
            content BLOB NOT NULL,
            summary BLOB NOT NULL,
            tags BLOB NOT NULL,
            memory_type TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            accessed_at TEXT NOT NULL,
            embedding BLOB NOT NULL,
            term_count INTEGER NOT NULL DEFAULT 0,
            original_memory_type TEXT,
            archived_at TEXT,
            archived_by_session TEXT,
            quarantined_at TEXT,
            quarantine_reason TEXT
        );
        CREATE INDEX memories_user ON memories(user_id, created_at);
        CREATE INDEX memories_user_type ON memories(user_id, memory_type);
        -- What decay and ranking change, in rows of ~50 bytes: a decay cycle rewrites only these,
        -- not the ~2 KB memory rows (1M memories: 0.5 s instead of 35 s, benchmarks/decay.py).
        -- decay_type is the type whose parameters apply (an Archived memory's original type).
        CREATE TABLE memory_scores (
            memory_rowid INTEGER PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            decay_type TEXT NOT NULL,
            importance REAL NOT NULL CHECK (importance >= 0.0 AND importance <= 1.0),
            access_count INTEGER NOT NULL DEFAULT 0,
            accessed_ts REAL NOT NULL,
            decay_ts REAL NOT NULL
        );
        CREATE INDEX memory_scores_user ON memory_scores(user_id);
        CREATE VIEW memory_rows AS
            SELECT m.*, s.decay_type, s.importance, s.access_count, s.accessed_ts, s.decay_ts
            FROM memories m JOIN memory_scores s ON s.memory_rowid = m.rowid;
        CREATE TABLE memory_terms (
            token BLOB NOT NULL,
            user_id TEXT NOT NULL,
            memory_rowid INTEGER NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
            tf INTEGER NOT NULL,
            PRIMARY KEY (user_id, token, memory_rowid)
        ) WITHOUT ROWID;
        CREATE INDEX memory_terms_memory ON memory_terms(memory_rowid);
        """
    )


@migration
def m003_memories_by_conversation(db: Connection) -> None:
    """Hybrid search looks up each candidate's neighbours in its conversation."""
    db.execute("CREATE INDEX memories_user_conversation ON memories(user_id, conversation_id)")


@migration
def m004_reminders(db: Connection) -> None:
    """Reminders (text sealed), found by the scheduler through (fired_at, due_at); due_at is UTC ISO."""
    db.executescript(
        """
        CREATE TABLE reminders (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            text_sealed BLOB NOT NULL,
            due_at TEXT NOT NULL,
            created_at TEXT NOT NULL,
            fired_at TEXT,
            delivered_via TEXT,
            delivery_detail TEXT
        );
        CREATE INDEX reminders_due ON reminders(fired_at, due_at);
        CREATE INDEX reminders_user ON reminders(user_id, due_at);
        """
    )


@migration
def m005_tool_runs(db: Connection) -> None:
    """What the tool loop did for an answer (arguments and results sealed), for explanation."""
    db.executescript(
        """
        CREATE TABLE tool_runs (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            iteration INTEGER NOT NULL,
            position INTEGER NOT NULL,
            tool TEXT NOT NULL,
            status TEXT NOT NULL,
            arguments_sealed BLOB NOT NULL,
            result_sealed BLOB,
            error TEXT,
            duration_ms REAL NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX tool_runs_message ON tool_runs(message_id, iteration, position);
        CREATE INDEX tool_runs_user ON tool_runs(user_id, created_at);
        """
    )


@migration
def m007_command_catalog(db: Connection) -> None:
    """The shell-command catalog (server-wide), its executions (outputs sealed), approval requests
    and the audit log (details sealed). Executions, approvals and audit rows keep the catalog id
    of an entry deleted later, so they have no foreign key to it."""
    db.executescript(
        """
        CREATE TABLE command_catalog (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL COLLATE NOCASE UNIQUE,
            description TEXT NOT NULL,
            command TEXT NOT NULL,
            category TEXT NOT NULL,
            risk_level TEXT NOT NULL,
            os TEXT NOT NULL,
            requires_approval INTEGER NOT NULL
                CHECK (requires_approval = 1 OR risk_level NOT IN ('high', 'critical')),
            is_default INTEGER NOT NULL DEFAULT 0,
            created_by TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE command_executions (
            id TEXT PRIMARY KEY,
            catalog_id TEXT NOT NULL,
            approval_id TEXT,
            user_id TEXT,
            command TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('completed', 'failed', 'timed_out')),
            exit_code INTEGER,
            stdout_sealed BLOB NOT NULL,
            stderr_sealed BLOB NOT NULL,
            duration_ms INTEGER NOT NULL,
            timed_out INTEGER NOT NULL,
            truncated INTEGER NOT NULL,
            executed_at TEXT NOT NULL
        );
        CREATE INDEX command_executions_at ON command_executions(executed_at);
        CREATE INDEX command_executions_catalog ON command_executions(catalog_id, executed_at);
        CREATE TABLE command_approvals (
            id TEXT PRIMARY KEY,
            catalog_id TEXT NOT NULL,
            catalog_name TEXT NOT NULL,
            command TEXT NOT NULL,
            risk_level TEXT NOT NULL,
            requested_by TEXT,
            status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'executed')),
            reason_sealed BLOB,
            decided_by TEXT,
            decided_at TEXT,
            execution_id TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX command_approvals_status ON command_approvals(status, created_at);
        CREATE INDEX command_approvals_catalog ON command_approvals(catalog_id, status);
        CREATE TABLE command_audit (
            id TEXT PRIMARY KEY,
            action TEXT NOT NULL CHECK (action IN ('created', 'deleted', 'execute', 'approval_requested',
                                                   'approved', 'denied')),
            catalog_id TEXT,
            approval_id TEXT,
            execution_id TEXT,
            user_id TEXT,
            detail_sealed BLOB NOT NULL,
            at TEXT NOT NULL
        );
        CREATE INDEX command_audit_at ON command_audit(at);
        CREATE INDEX command_audit_catalog ON command_audit(catalog_id, at);
        """
    )


@migration
def m006_snippets(db: Connection) -> None:
    """Snippets: title and content sealed; title_key is a keyed token of (user, normalised title)
    that makes titles unique per user ignoring case without storing them (assistant/snippets.py)."""
    db.executescript(
        """
        CREATE TABLE snippets (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            title_sealed BLOB NOT NULL,
            title_key BLOB NOT NULL,
            content_sealed BLOB NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (user_id, title_key)
        );
        """
    )


@migration
def m009_agentic_tasks(db: Connection) -> None:
    """Agentic tasks, their sub-agents and each task's event log (descriptions, plans, results and
    event data sealed), so a task and its history outlive a restart."""
    db.executescript(
        """
        CREATE TABLE agentic_tasks (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('planning', 'awaiting_approval', 'running', 'completed',
                                                   'failed', 'cancelled', 'timed_out')),
            description_sealed BLOB NOT NULL,
            require_approval INTEGER NOT NULL,
            plan_summary_sealed BLOB,
            result_sealed BLOB,
            error TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            finished_at TEXT
        );
        CREATE INDEX agentic_tasks_user ON agentic_tasks(user_id, created_at);
        CREATE INDEX agentic_tasks_status ON agentic_tasks(status);
        CREATE TABLE agentic_sub_agents (
            id TEXT PRIMARY KEY,
            task_id TEXT NOT NULL REFERENCES agentic_tasks(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            description_sealed BLOB NOT NULL,
            profile TEXT,
            tools TEXT,
            status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled',
                                                   'timed_out')),
            result_sealed BLOB,
            error TEXT,
            started_at TEXT,
            finished_at TEXT
        );
        CREATE INDEX agentic_sub_agents_task ON agentic_sub_agents(task_id, position);
        CREATE TABLE agentic_events (
            task_id TEXT NOT NULL REFERENCES agentic_tasks(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            event TEXT NOT NULL,
            data_sealed BLOB NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (task_id, seq)
        ) WITHOUT ROWID;
        """
    )


@migration
def m008_agent_profiles(db: Connection) -> None:
    """Agent profiles, sealed whole; the name is unique per user ignoring case through a keyed
    token of the lower-cased name (also how ``@name`` mentions are looked up)."""
    db.executescript(
        """
        CREATE TABLE agent_profiles (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            name_token BLOB NOT NULL,
            profile_sealed BLOB NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (user_id, name_token)
        );
        CREATE INDEX agent_profiles_user ON agent_profiles(user_id, created_at);
        """
    )


@migration
def m010_webhook_messages(db: Connection) -> None:
    """Messaging webhook: every inbound message id once (dedupe, inserted before processing) with its
    outcome, and the one conversation kept per sender and user. No message text is stored here."""
    db.executescript(
        """
        CREATE TABLE webhook_messages (
            platform TEXT NOT NULL,
            message_id TEXT NOT NULL,
            sender_id TEXT NOT NULL,
            user_id TEXT,
            message_type TEXT NOT NULL,
            status TEXT NOT NULL,
            detail TEXT,
            conversation_id TEXT,
            reply_ids TEXT,
            received_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (platform, message_id)
        );
        CREATE INDEX webhook_messages_status ON webhook_messages(status, received_at);
        CREATE INDEX webhook_messages_received ON webhook_messages(received_at);
        CREATE TABLE webhook_conversations (
            platform TEXT NOT NULL,
            sender_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (platform, sender_id, user_id)
        );
        """
    )


@migration
def m011_voice_rooms(db: Connection) -> None:
    """Voice rooms and their presence (one satellite per room). Names are labels, unique ignoring case."""
    db.executescript(
        """
        CREATE TABLE voice_rooms (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL COLLATE NOCASE UNIQUE,
            is_online INTEGER NOT NULL DEFAULT 0,
            volume INTEGER NOT NULL,
            muted INTEGER NOT NULL DEFAULT 0,
            last_seen TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        """
    )


@migration
def m012_voice_speakers(db: Connection) -> None:
    """Speaker profiles (a name unique per user, ignoring case) and their voice embeddings, sealed
    like memory content (biometric data); deleting a profile deletes its embeddings."""
    db.executescript(
        """
        CREATE TABLE voice_speakers (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            name TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (user_id, name COLLATE NOCASE)
        );
        CREATE TABLE voice_embeddings (
            id TEXT PRIMARY KEY,
            speaker_id TEXT NOT NULL REFERENCES voice_speakers(id) ON DELETE CASCADE,
            embedding BLOB NOT NULL,
            dim INTEGER NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX voice_embeddings_speaker ON voice_embeddings(speaker_id, created_at);
        """
    )


@migration
def m013_roles_and_approvals(db: Connection) -> None:
    """Key roles, the catalog's ``network`` flag, and approvals of tool calls.

    ``api_keys.role`` (admin | user | read-only) replaces ``scope`` (full | read). A ``read`` key
    becomes ``read-only``. A ``full`` key of the installation's owner (``meta.owner_user_id``, the
    user of keys made without ``--user``, among them the one ``make run`` and ``assistant serve``
    created) becomes ``admin``: that person ran the server and had full power before, and someone
    must be able to manage the catalog and decide approvals after the upgrade. Every other
    ``full`` key (made with ``--user`` for another person) becomes ``user``: such keys were handed
    out to use the assistant, and the admin powers are exactly what must no longer come with them.

    ``command_catalog.network`` (0/1, default 0): whether the entry's command may use the network
    in its sandbox.

    ``command_approvals`` is rebuilt so one table holds both kinds of request: ``kind`` is
    ``command`` (a catalog entry: ``catalog_id``, ``catalog_name``, ``command``, ``risk_level``) or
    ``tool_call`` (a call of the tool-calling loop: ``tool_name``, ``arguments_sealed``, the chat's
    ``conversation_id`` and ``message_id``; once decided, ``result_sealed`` and ``tool_run_id``).
    Existing rows are commands and keep their order.
    """
    db.executescript(
        """
        ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'user'
            CHECK (role IN ('admin', 'user', 'read-only'));
        UPDATE api_keys SET role = CASE
            WHEN scope = 'read' THEN 'read-only'
            WHEN user_id = (SELECT value FROM meta WHERE key = 'owner_user_id') THEN 'admin'
            ELSE 'user' END;
        ALTER TABLE api_keys DROP COLUMN scope;

        ALTER TABLE command_catalog ADD COLUMN network INTEGER NOT NULL DEFAULT 0 CHECK (network IN (0, 1));

        CREATE TABLE command_approvals_new (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL DEFAULT 'command' CHECK (kind IN ('command', 'tool_call')),
            catalog_id TEXT,
            catalog_name TEXT,
            command TEXT,
            risk_level TEXT,
            tool_name TEXT,
            arguments_sealed BLOB,
            conversation_id TEXT,
            message_id TEXT,
            result_sealed BLOB,
            tool_run_id TEXT,
            requested_by TEXT,
            status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'executed')),
            reason_sealed BLOB,
            decided_by TEXT,
            decided_at TEXT,
            execution_id TEXT,
            created_at TEXT NOT NULL,
            CHECK (kind != 'command' OR (catalog_id IS NOT NULL AND catalog_name IS NOT NULL
                                         AND command IS NOT NULL AND risk_level IS NOT NULL)),
            CHECK (kind != 'tool_call' OR (tool_name IS NOT NULL AND arguments_sealed IS NOT NULL))
        );
        INSERT INTO command_approvals_new (id, kind, catalog_id, catalog_name, command, risk_level, requested_by,
                                           status, reason_sealed, decided_by, decided_at, execution_id, created_at)
            SELECT id, 'command', catalog_id, catalog_name, command, risk_level, requested_by, status,
                   reason_sealed, decided_by, decided_at, execution_id, created_at
            FROM command_approvals ORDER BY rowid;
        DROP TABLE command_approvals;
        ALTER TABLE command_approvals_new RENAME TO command_approvals;
        CREATE INDEX command_approvals_status ON command_approvals(status, created_at);
        CREATE INDEX command_approvals_catalog ON command_approvals(catalog_id, status);
        CREATE INDEX command_approvals_requester ON command_approvals(requested_by, created_at);
        CREATE INDEX command_executions_user ON command_executions(user_id, executed_at);
        """
    )


@migration
def m015_voice_room_owner(db: Connection) -> None:
    """Rooms get an owner (the user of the key that created them; rooms that existed before belong to
    the installation owner, ``meta.owner_user_id``, created here when rooms exist and no key made it yet).
    Names become unique per owner ignoring case, so a taken name never reveals another user's room.
    SQLite cannot change a column's UNIQUE constraint: the table is rebuilt."""
    db.execute("INSERT OR IGNORE INTO meta (key, value) SELECT 'owner_user_id', ? "
               "WHERE EXISTS (SELECT 1 FROM voice_rooms)", (str(uuid4()),))
    db.executescript(
        """
        CREATE TABLE voice_rooms_new (
            id TEXT PRIMARY KEY,
            owner_user_id TEXT NOT NULL,
            name TEXT NOT NULL,
            is_online INTEGER NOT NULL DEFAULT 0,
            volume INTEGER NOT NULL,
            muted INTEGER NOT NULL DEFAULT 0,
            last_seen TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (owner_user_id, name COLLATE NOCASE)
        );
        INSERT INTO voice_rooms_new (id, owner_user_id, name, is_online, volume, muted, last_seen, created_at,
                                     updated_at)
            SELECT id, (SELECT value FROM meta WHERE key = 'owner_user_id'), name, is_online, volume, muted,
                   last_seen, created_at, updated_at
            FROM voice_rooms;
        DROP TABLE voice_rooms;
        ALTER TABLE voice_rooms_new RENAME TO voice_rooms;
        """
    )


@migration
def m016_memory_low_since(db: Connection) -> None:
    """Decay clean-up (assistant/memory/decay.py): since when a memory's importance has been at or
    below memory.min_importance (epoch seconds; NULL while above). Existing memories start with
    NULL: their clock starts at the next decay run."""
    db.execute("ALTER TABLE memory_scores ADD COLUMN low_since REAL")


@migration
def m014_sealed_associated_data(db: Connection) -> None:
    """Sealed values get associated data (table, column, row id, user id), so a ciphertext copied
    to another row or user no longer opens there. Re-sealing needs the key, which migrations do not
    have: an encrypted store is marked here and re-sealed in one transaction right after its key is
    opened (assistant/storage/sealed.py ``finish_pending_reseal``); a plain store has nothing to do."""
    if db.scalar("SELECT value FROM meta WHERE key = 'memory_encryption'") == "xchacha20poly1305":
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('sealed_aad_pending', '1')")
