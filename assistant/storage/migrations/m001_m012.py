"""Migrations m001-m012: the day half (memories, tools, catalog, snippets, agents, webhook, voice)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


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
