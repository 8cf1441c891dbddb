"""Migrations m013-: key roles and tool approvals, room owners, decay clean-up, sealed associated data."""

from __future__ import annotations

from uuid import uuid4

from assistant.storage.migrations.registry import Connection, migration


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


@migration
def m017_voice_embedding_engine(db: Connection) -> None:
    """Which speaker engine made each voice embedding: two engines of the same dimension (d-vector and
    ge2e are both 256) give incomparable vectors, so identification compares only the configured engine's.
    Every embedding stored before this migration came from the d-vector encoder, then the only
    in-process engine (the remote companion runs it too)."""
    db.execute("ALTER TABLE voice_embeddings ADD COLUMN engine TEXT NOT NULL DEFAULT 'd-vector'")


@migration
def m018_knowledge_graph(db: Connection) -> None:
    """The knowledge graph (assistant/graph/): per user, nodes (entities, topics) and bi-temporal edges
    (facts) extracted from memories. Names, aliases, relations and event payloads are sealed like memory
    text; ``kg_names`` holds keyed digests of normalised names and aliases (entity resolution without
    plaintext), ``kg_edges.relation_token`` the digest of the relation (contradiction checks). What a
    memory contributed (``kg_mentions``, ``kg_edge_sources``) goes with it when it is deleted. An edge's
    ``origin`` is ``extraction`` (it lives while a source memory does) or ``dream`` (made by consolidation)."""
    db.executescript(
        """
        CREATE TABLE kg_nodes (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            name_sealed BLOB NOT NULL,
            aliases_sealed BLOB NOT NULL,
            kind TEXT NOT NULL,
            embedding BLOB,
            created_ts REAL NOT NULL,
            last_seen_ts REAL NOT NULL,
            mention_count INTEGER NOT NULL DEFAULT 0,
            recalls INTEGER NOT NULL DEFAULT 0,
            stability REAL NOT NULL,
            decayed_ts REAL
        );
        CREATE INDEX kg_nodes_user ON kg_nodes (user_id);
        CREATE TABLE kg_names (
            user_id TEXT NOT NULL,
            token BLOB NOT NULL,
            node_id TEXT NOT NULL REFERENCES kg_nodes (id) ON DELETE CASCADE,
            PRIMARY KEY (user_id, token, node_id)
        );
        CREATE INDEX kg_names_node ON kg_names (node_id);
        CREATE TABLE kg_edges (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            subject_id TEXT NOT NULL REFERENCES kg_nodes (id) ON DELETE CASCADE,
            object_id TEXT NOT NULL REFERENCES kg_nodes (id) ON DELETE CASCADE,
            relation_sealed BLOB NOT NULL,
            relation_token BLOB NOT NULL,
            weight REAL NOT NULL,
            valid_ts REAL NOT NULL,
            invalid_ts REAL,
            invalidated_by TEXT,
            created_ts REAL NOT NULL,
            last_seen_ts REAL NOT NULL,
            recalls INTEGER NOT NULL DEFAULT 0,
            stability REAL NOT NULL,
            origin TEXT NOT NULL DEFAULT 'extraction'
        );
        CREATE INDEX kg_edges_user ON kg_edges (user_id);
        CREATE INDEX kg_edges_subject ON kg_edges (subject_id, relation_token);
        CREATE INDEX kg_edges_object ON kg_edges (object_id);
        CREATE TABLE kg_edge_sources (
            edge_id TEXT NOT NULL REFERENCES kg_edges (id) ON DELETE CASCADE,
            memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
            PRIMARY KEY (edge_id, memory_id)
        );
        CREATE INDEX kg_edge_sources_memory ON kg_edge_sources (memory_id);
        CREATE TABLE kg_mentions (
            node_id TEXT NOT NULL REFERENCES kg_nodes (id) ON DELETE CASCADE,
            memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            PRIMARY KEY (node_id, memory_id)
        );
        CREATE INDEX kg_mentions_memory ON kg_mentions (memory_id);
        CREATE TABLE kg_extracted (
            memory_id TEXT PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            extractor TEXT NOT NULL,
            extracted_ts REAL NOT NULL
        );
        CREATE INDEX kg_extracted_user ON kg_extracted (user_id);
        CREATE TABLE kg_events (
            user_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            data_sealed BLOB NOT NULL,
            created_ts REAL NOT NULL,
            PRIMARY KEY (user_id, seq)
        );
        """
    )


@migration
def m019_dream_mode(db: Connection) -> None:
    """Dream mode (assistant/dream/): sessions, their journal, and insights. Journal details and
    before/after snapshots, and insight titles and contents, are sealed like memory text; affected ids,
    counts and states are not (they say which rows changed, not what they say). ``op_key`` makes an
    operation idempotent per user: a planned change already applied is skipped on replay."""
    db.executescript(
        """
        CREATE TABLE dream_sessions (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            status TEXT NOT NULL,
            current_cycle INTEGER NOT NULL DEFAULT 0,
            total_cycles INTEGER NOT NULL,
            phase TEXT NOT NULL DEFAULT 'nrem',
            trigger TEXT NOT NULL DEFAULT 'schedule',
            paused_reason TEXT,
            reason TEXT,
            counts TEXT NOT NULL DEFAULT '{}',
            created_ts REAL NOT NULL,
            started_ts REAL,
            completed_ts REAL,
            updated_ts REAL NOT NULL
        );
        CREATE INDEX dream_sessions_user ON dream_sessions (user_id, created_ts);
        CREATE TABLE dream_journal (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES dream_sessions (id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            cycle_number INTEGER NOT NULL,
            phase TEXT NOT NULL,
            operation TEXT NOT NULL,
            status TEXT NOT NULL,
            op_key TEXT NOT NULL,
            details_sealed BLOB NOT NULL,
            memory_ids TEXT NOT NULL DEFAULT '[]',
            node_ids TEXT NOT NULL DEFAULT '[]',
            edge_ids TEXT NOT NULL DEFAULT '[]',
            before_sealed BLOB,
            after_sealed BLOB,
            error TEXT,
            created_ts REAL NOT NULL
        );
        CREATE UNIQUE INDEX dream_journal_seq ON dream_journal (session_id, seq);
        CREATE INDEX dream_journal_key ON dream_journal (user_id, op_key);
        CREATE INDEX dream_journal_created ON dream_journal (created_ts);
        CREATE TABLE dream_insights (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            session_id TEXT,
            insight_type TEXT NOT NULL,
            title_sealed BLOB NOT NULL,
            content_sealed BLOB NOT NULL,
            confidence REAL NOT NULL,
            status TEXT NOT NULL,
            evidence_count INTEGER NOT NULL DEFAULT 0,
            source_memory_ids TEXT NOT NULL DEFAULT '[]',
            embedding BLOB,
            insight_key TEXT NOT NULL,
            memory_id TEXT,
            created_ts REAL NOT NULL,
            updated_ts REAL NOT NULL,
            last_evidence_ts REAL
        );
        CREATE UNIQUE INDEX dream_insights_key ON dream_insights (user_id, insight_key);
        CREATE INDEX dream_insights_user ON dream_insights (user_id, status);
        """
    )


@migration
def m020_memory_position(db: Connection) -> None:
    """Where a memory stands in its conversation, when that is not where its row is: a memory that
    dream mode consolidated stands where its first source stood (hybrid search's neighbour context
    reads a conversation in this order, ``coalesce(position, rowid)``). NULL: its rowid."""
    db.execute("ALTER TABLE memories ADD COLUMN position INTEGER")


@migration
def m021_sanitation(db: Connection) -> None:
    """Sanitation (issue 15): one result record per run (its body sealed: it names memories and
    reasons), the dynamic defence patterns per user (deduplicated by hash; deactivated, never
    deleted), and a tombstone per purged quarantined memory (so a restore can say why it is gone)."""
    db.executescript(
        """
        CREATE TABLE sanitation_results (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            session_id TEXT,
            cycle INTEGER,
            trigger TEXT NOT NULL,
            status TEXT NOT NULL,
            quality_score REAL,
            body_sealed BLOB NOT NULL,
            started_ts REAL NOT NULL,
            completed_ts REAL
        );
        CREATE INDEX sanitation_results_user ON sanitation_results (user_id, started_ts);
        CREATE INDEX sanitation_results_session ON sanitation_results (session_id);
        CREATE TABLE defense_patterns (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            pattern TEXT NOT NULL,
            hash TEXT NOT NULL,
            active INTEGER NOT NULL DEFAULT 1,
            source TEXT NOT NULL,
            family TEXT NOT NULL DEFAULT '',
            hits INTEGER NOT NULL DEFAULT 0,
            session_id TEXT,
            created_ts REAL NOT NULL,
            deactivated_ts REAL
        );
        CREATE UNIQUE INDEX defense_patterns_hash ON defense_patterns (user_id, hash);
        CREATE TABLE memory_purges (
            memory_id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            quarantined_at TEXT,
            quarantine_reason TEXT,
            purged_ts REAL NOT NULL
        );
        CREATE INDEX memory_purges_user ON memory_purges (user_id);
        """
    )


@migration
def m022_memory_restores(db: Connection) -> None:
    """The memories a user restored from quarantine, with the ``updated_at`` they had then:
    sanitation leaves them alone until their text changes (the user's decision stands)."""
    db.executescript(
        """
        CREATE TABLE memory_restores (
            memory_id TEXT PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            updated_at TEXT,
            restored_at TEXT NOT NULL
        );
        """
    )
