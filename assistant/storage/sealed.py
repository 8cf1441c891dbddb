"""Every sealed column of the schema, and re-sealing them all (associated data, key rotation).

Each sealed value is bound to its :class:`~assistant.crypto.SealContext` (table, column, row id,
owning user). :data:`SEALED` lists, per table, the sealed columns and the SQL that gives a row's
id and owner, the same values the stores pass when they seal: a test checks every table of the
schema with a ``*_sealed`` column (or one of the memory columns) is listed here.

:func:`reseal` walks every sealed value in primary-key order, in pages, opening each with one
sealer and sealing it again with another (the same key with associated data for m014; a new key
for ``assistant keys rotate-memory-key``). The caller holds the transaction, so a reseal is all
or nothing. Values stored before sealing existed (TEXT) are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nacl.exceptions import CryptoError

from assistant.crypto import SealContext, Sealer
from assistant.errors import StorageError

if TYPE_CHECKING:
    from assistant.storage.db import Database

PAGE = 500
PENDING_KEY = "sealed_aad_pending"  # meta row m014 writes; removed once every value is re-sealed


@dataclass(frozen=True)
class SealedTable:
    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...] = ("rowid",)  # primary-key columns, for paging and updates
    row_id: str = "id"  # SQL: the row id the stores seal with
    user_id: str = "user_id"  # SQL: the owning user the stores seal with
    legacy_aad: Callable[[dict[str, Any]], bytes | None] = lambda row: None  # what sealing bound before m014

    def context(self, column: str, row: dict[str, Any]) -> SealContext:
        return SealContext(self.table, column, str(row["_row_id"]), row["_user_id"] or "")


def _owner(parent: str, fk: str) -> str:
    """SQL: the owner of a row whose table has no user column, through its parent row."""
    return f"(SELECT p.user_id FROM {parent} p WHERE p.id = {fk})"


SEALED: tuple[SealedTable, ...] = (
    SealedTable("memories", ("content", "summary", "tags", "quarantine_reason")),  # reasons quote the memory
    SealedTable("conversations", ("title",)),
    SealedTable("messages", ("content",), user_id=_owner("conversations", "messages.conversation_id")),
    SealedTable("reminders", ("text_sealed",)),
    SealedTable("tool_runs", ("arguments_sealed", "result_sealed")),
    SealedTable("snippets", ("title_sealed", "content_sealed")),
    SealedTable("agent_profiles", ("profile_sealed",)),
    SealedTable("agentic_tasks", ("description_sealed", "plan_summary_sealed", "result_sealed")),
    SealedTable("agentic_sub_agents", ("description_sealed", "result_sealed"),
                user_id=_owner("agentic_tasks", "agentic_sub_agents.task_id")),
    SealedTable("agentic_events", ("data_sealed",), key=("task_id", "seq"), row_id="task_id || ':' || seq",
                user_id=_owner("agentic_tasks", "agentic_events.task_id")),
    SealedTable("command_executions", ("stdout_sealed", "stderr_sealed")),
    SealedTable("command_approvals", ("arguments_sealed", "result_sealed", "reason_sealed"), user_id="requested_by"),
    SealedTable("command_audit", ("detail_sealed",)),
    SealedTable("voice_embeddings", ("embedding",), user_id=_owner("voice_speakers", "voice_embeddings.speaker_id"),
                legacy_aad=lambda row: str(row["_row_id"]).encode()),
    SealedTable("kg_nodes", ("name_sealed", "aliases_sealed")),
    SealedTable("kg_edges", ("relation_sealed",)),
    SealedTable("kg_events", ("data_sealed",), key=("user_id", "seq"), row_id="user_id || ':' || seq"),
    SealedTable("dream_journal", ("details_sealed", "before_sealed", "after_sealed")),
    SealedTable("dream_insights", ("title_sealed", "content_sealed")),
    SealedTable("sanitation_results", ("body_sealed",)),
    SealedTable("red_team_runs", ("body_sealed",)),  # the red team's reports (model answers)
    SealedTable("memory_purges", ("quarantine_reason",), row_id="memory_id"),
    SealedTable("explanations", ("body_sealed",), row_id="message_id"),
    SealedTable("precache_predictions", ("query_sealed",)),  # the wording of a predicted query
    SealedTable("training_feedback", ("body_sealed",)),  # corrections and preferred answers (assistant/learning)
)

# Opens one stored value: (table, column, row, sealed bytes) -> plaintext bytes.
Opener = Callable[[SealedTable, str, dict[str, Any], bytes], bytes]


def open_in_place(sealer: Sealer) -> Opener:
    """Open each value with its SealContext (a store that already binds associated data)."""
    return lambda table, column, row, value: sealer.open_data(value, table.context(column, row))


def open_legacy(sealer: Sealer) -> Opener:
    """Open each value as sealed before m014 (no associated data; speaker embeddings their row id)."""

    def opener(table: SealedTable, column: str, row: dict[str, Any], value: bytes) -> bytes:
        try:
            return sealer.open_bytes(value, table.legacy_aad(row))
        except CryptoError:
            raise StorageError(f"{table.table}.{column} of row {row['_row_id']} does not open with this store's "
                               "key: the database is damaged; restore a backup") from None

    return opener


def _rows(db: Database, table: SealedTable) -> Iterator[list[dict[str, Any]]]:
    """Pages of rows in primary-key order: key columns, row id, owner, sealed columns."""
    key_cols = ", ".join(f"{table.table}.{k} AS _k{i}" for i, k in enumerate(table.key))
    cols = ", ".join(table.columns)
    order = ", ".join(f"_k{i}" for i in range(len(table.key)))
    last: tuple | None = None
    while True:
        after = ""
        if last is not None:
            after = f"WHERE ({', '.join(f'{table.table}.{k}' for k in table.key)}) > ({', '.join('?' * len(last))})"
        rows = db.query(
            f"SELECT {key_cols}, {table.row_id} AS _row_id, {table.user_id} AS _user_id, {cols} "
            f"FROM {table.table} {after} ORDER BY {order} LIMIT {PAGE}", last or ())
        if not rows:
            return
        yield rows
        last = tuple(rows[-1][f"_k{i}"] for i in range(len(table.key)))


def reseal(db: Database, opener: Opener, sealer: Sealer, *,
           after_row: Callable[[int], None] | None = None) -> int:
    """Re-seal every sealed value: ``opener`` opens it, ``sealer`` seals it for its SealContext.

    Returns the number of rows rewritten. Run it inside ``db.transaction()``: it is meant to be
    all or nothing. ``after_row(n)`` is called after each row (tests kill the process there)."""
    present = set(db.tables())
    done = 0
    for table in SEALED:
        if table.table not in present:
            continue
        where = " AND ".join(f"{k} = ?" for k in table.key)
        sets = ", ".join(f"{c} = ?" for c in table.columns)
        for page in _rows(db, table):
            for row in page:
                values = []
                for column in table.columns:
                    value = row[column]
                    if isinstance(value, bytes | memoryview):
                        plain = opener(table, column, row, bytes(value))
                        value = sealer.seal_data(plain, table.context(column, row))
                    values.append(value)
                keys = [row[f"_k{i}"] for i in range(len(table.key))]
                db.execute(f"UPDATE {table.table} SET {sets} WHERE {where}", (*values, *keys))
                done += 1
                if after_row is not None:
                    after_row(done)
    return done


def finish_pending_reseal(db: Database, sealer: Sealer) -> int:
    """Bind associated data to every value of a store sealed before m014, once, in one transaction.

    m014 leaves a meta marker in an encrypted store; this runs when the key is known (right after
    the sealer is opened). Killed half-way, the transaction rolls back and the marker stays, so
    the next start does it again. Returns the number of rows re-sealed."""
    if db.scalar("SELECT value FROM meta WHERE key = ?", (PENDING_KEY,)) is None:
        return 0
    with db.transaction():
        done = reseal(db, open_legacy(sealer), sealer) if sealer.encrypted else 0
        db.execute("DELETE FROM meta WHERE key = ?", (PENDING_KEY,))
    return done
