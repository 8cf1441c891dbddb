"""Sealed values are bound to (table, column, row id, user id): a ciphertext moved in the SQLite file
to another user's row, another row of the same user or another column does not open there
(SealedValueMismatch naming the place), never the other text. Every sealed table of the schema is
listed in the registry and tested here; m014 re-seals a store sealed before associated data."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import apsw
import numpy as np
import pytest

from assistant.agents.planner import SubTaskSpec
from assistant.agents.profiles import ProfileDraft, ProfileStore
from assistant.agents.task_store import SubAgentStatus, TaskEventType, TaskStatus, TaskStore
from assistant.catalog.approvals import ApprovalStatus, ApprovalStore
from assistant.catalog.audit import AuditAction, AuditLog
from assistant.catalog.executions import ExecutionStore
from assistant.catalog.executor import RunOutcome
from assistant.chat.conversations import ConversationStore
from assistant.chat.tool_loop import ToolRecord
from assistant.chat.tool_runs import ToolRunStore
from assistant.config import MemorySettings
from assistant.crypto import SealContext, SealedValueMismatch, Sealer
from assistant.dream.store import DreamStore
from assistant.dream.types import EntryStatus, InsightType, Operation, Phase
from assistant.embeddings.hashing import HashingEmbedder
from assistant.graph.store import GraphStore
from assistant.graph.types import NodeKind
from assistant.llm.base import ToolCall
from assistant.memory.store import MemoryStore
from assistant.sanitation.store import SanitationStore, new_result_id
from assistant.sanitation.types import SanitationResult
from assistant.snippets import SnippetStore
from assistant.storage import sealed
from assistant.storage.db import Database
from assistant.storage.memory_key import open_store_sealer
from assistant.storage.sealed import SEALED, finish_pending_reseal
from assistant.tools.reminders import SqliteReminderStore
from assistant.voice.speakers import SpeakerStore

DIM = 64
ALICE, BOB = str(uuid4()), str(uuid4())


@dataclass
class Stores:
    db: Database
    sealer: Sealer

    def __post_init__(self) -> None:
        self.memory = MemoryStore(self.db, self.sealer, HashingEmbedder(DIM),
                                  MemorySettings(embedding_backend="hashing", embedding_dimension=DIM))
        self.conversations = ConversationStore(self.db, self.sealer)
        self.reminders = SqliteReminderStore(self.db, self.sealer)
        self.tool_runs = ToolRunStore(self.db, self.sealer)
        self.snippets = SnippetStore(self.db, self.sealer)
        self.tasks = TaskStore(self.db, self.sealer)
        self.speakers = SpeakerStore(self.db, self.sealer)
        self.profiles = ProfileStore(self.db, self.sealer)
        self.executions = ExecutionStore(self.db, self.sealer)
        self.approvals = ApprovalStore(self.db, self.sealer)
        self.audit = AuditLog(self.db, self.sealer)
        self.graph = GraphStore(self.db, self.sealer)
        self.dream = DreamStore(self.db, self.sealer)
        self.sanitation = SanitationStore(self.db, self.sealer)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def open_stores(data: Path) -> Iterator[Callable[[], Stores]]:
    opened: list[Database] = []

    def make() -> Stores:
        db = Database(data / "assistant.db")
        opened.append(db)
        return Stores(db, open_store_sealer(db, data / "memory.key"))

    yield make
    for db in opened:
        db.close()


def vector(text: str) -> np.ndarray:
    return HashingEmbedder(DIM).embed([text])[0]


# --- one writer and one reader per sealed column --------------------------------------------------
# write(stores, user, text) -> the row id the registry gives that row; read(stores, user, row id) -> what
# the owner sees of it (as text).


def _message_row(s: Stores, user: str, text: str) -> str:
    conversation, _, _ = s.conversations.record_exchange(user_id=user, conversation_id=None, user_message=text,
                                                         reply="noted", model="m", prompt_tokens=1, completion_tokens=1)
    return s.db.scalar("SELECT id FROM messages WHERE conversation_id = ? AND role = 'user'", (conversation,))


def _message_read(s: Stores, user: str, row_id: str) -> str:
    conversation = s.db.scalar("SELECT conversation_id FROM messages WHERE id = ?", (row_id,))
    s.conversations.get(user, conversation)
    return " ".join(m.content for m in s.conversations.messages(conversation))


def _tool_run(s: Stores, user: str, text: str, result: bool) -> str:
    record = ToolRecord(1, ToolCall("c1", "lookup", {"q": text}), {"found": text} if result else None, None, 1.0)
    return s.tool_runs.record(user, "conv", "msg", [record])[0].id


def _task(s: Stores, user: str, text: str) -> str:
    return s.tasks.create(user, text, False).id


def _plan(s: Stores, user: str, text: str, column: str) -> str:
    task = _task(s, user, "plan holder")
    sub = s.tasks.save_plan(task, text if column == "plan" else "summary", [SubTaskSpec(text)])[0]
    return task if column == "plan" else sub.id


def _sub_result(s: Stores, user: str, text: str) -> str:
    sub = s.tasks.save_plan(_task(s, user, "holder"), "summary", [SubTaskSpec("step")])[0]
    s.tasks.finish_sub_agent(sub.id, SubAgentStatus.COMPLETED, result=text)
    return sub.id


def _task_result(s: Stores, user: str, text: str) -> str:
    task = _task(s, user, "holder")
    assert s.tasks.transition(task, TaskStatus.COMPLETED, result=text)
    return task


def _event(s: Stores, user: str, text: str) -> str:
    task = _task(s, user, "event holder")
    event = s.tasks.append_event(task, TaskEventType.TASK_STARTED, {"description": text})
    return f"{task}:{event.seq}"


def _task_of_sub(s: Stores, row_id: str) -> str:
    return s.db.scalar("SELECT task_id FROM agentic_sub_agents WHERE id = ?", (row_id,))


def _speaker(s: Stores, user: str, text: str) -> str:
    profile, _ = s.speakers.add_sample(user, f"voice {uuid4().hex[:6]}", vector(text))
    return s.db.scalar("SELECT id FROM voice_embeddings WHERE speaker_id = ?", (profile.id,))


def _approval(s: Stores, user: str, text: str, column: str) -> str:
    approval = s.approvals.request_tool_call(user, "lookup", {"q": text if column == "arguments" else "x"}, None, None)
    if column == "reason":
        s.approvals.decide(approval.id, "an admin", ApprovalStatus.DENIED, text)
    elif column == "result":
        s.approvals.decide(approval.id, "an admin", ApprovalStatus.APPROVED)
        s.approvals.tool_executed(approval.id, None, {"found": text}, None)
    return approval.id


def _approval_read(s: Stores, user: str, row_id: str) -> str:
    a = s.approvals.get(row_id, user)
    return f"{a.arguments} {a.reason} {a.result}"


def _node(s: Stores, user: str, name: str) -> str:
    with s.db.transaction() as db:
        return s.graph.insert_node(db, user, name, NodeKind.THING, 0.0, 1.0)


def _alias(s: Stores, user: str, text: str) -> str:
    node_id = _node(s, user, f"holder {uuid4().hex[:6]}")
    with s.db.transaction() as db:
        s.graph.add_alias(db, s.graph.node(user, node_id), text)
    return node_id


def _relation(s: Stores, user: str, text: str) -> str:
    a, b = _node(s, user, f"a {uuid4().hex[:6]}"), _node(s, user, f"b {uuid4().hex[:6]}")
    with s.db.transaction() as db:
        edge = s.graph.insert_edge(db, user, a, text, b, weight=1.0, valid_at=0.0, now=0.0, stability=1.0)
    return edge


def _graph_event(s: Stores, user: str, text: str) -> str:
    with s.db.transaction() as db:
        seq = s.graph.append_event(db, user, "NodeCreated", {"name": text}, 0.0, 100)
    return f"{user}:{seq}"


def _relation_read(s: Stores, user: str, edge_id: str) -> str:
    subject = s.db.scalar("SELECT subject_id FROM kg_edges WHERE id = ?", (edge_id,))
    return " ".join(e.relation for e in s.graph.edges_of(user, subject))


def _journal(s: Stores, user: str, text: str, column: str) -> str:
    session = s.dream.create_session(user, 1, "manual")
    entry = s.dream.begin_entry(session, 1, Phase.NREM, Operation.DECAY_APPLIED, f"k {uuid4().hex[:6]}",
                                {"note": text} if column == "details" else {}, before={"text": text}
                                if column == "before" else None)
    s.dream.finish_entry(entry, EntryStatus.APPLIED, after={"text": text} if column == "after" else None)
    return entry.id


def _journal_read(s: Stores, user: str, entry_id: str) -> str:
    e = s.dream.entry(user, entry_id)
    return str([e.details, e.before_snapshot, e.after_snapshot])


def _insight(s: Stores, user: str, text: str, column: str) -> str:
    insight, _ = s.dream.add_insight(user, InsightType.PATTERN, text if column == "title" else "t",
                                     text if column == "content" else "c", 0.5, [], f"k {uuid4().hex[:6]}")
    return insight.id


def _purge(s: Stores, user: str, text: str) -> str:
    memory_id = str(uuid4())
    with s.db.transaction() as db:
        s.sanitation.record_purges(db, user, [{"id": memory_id, "quarantined_at": None, "quarantine_reason": text}])
    return memory_id


def _sanitation(s: Stores, user: str, text: str) -> str:
    result = SanitationResult(id=new_result_id(), user_id=user, session_id=None, cycle=None, trigger="manual",
                              status="completed", started_at="2026-11-25T10:00:00Z", error=text)
    s.sanitation.save_result(result)
    return result.id


def _explanation(s: Stores, user: str, text: str) -> str:
    """An answer's explanation (assistant/extended/explain_store.py), its summary holding ``text``."""
    from assistant.extended.explain import Explanation
    from assistant.extended.explain_store import ExplanationStore

    conversation, message, created = s.conversations.record_exchange(
        user_id=user, conversation_id=None, user_message="q", reply="a", model="m", prompt_tokens=1,
        completion_tokens=1)
    ExplanationStore(s.db, s.sealer).save(user, Explanation(message, conversation, created, "e", "m", {}, {}, (),
                                                            (text,)))
    return message


def _explanation_read(s: Stores, user: str, row_id: str) -> str:
    from assistant.extended.explain_store import ExplanationStore

    return str(ExplanationStore(s.db, s.sealer).get(user, row_id).summary)


def _red_team(s: Stores, user: str, text: str) -> str:
    """A red-team report (assistant/extended/red_team_report.py) whose note holds ``text``."""
    from assistant.extended.red_team_report import RedTeamReport, RedTeamStore

    report = RedTeamReport(id=str(uuid4()), user_id=user, status="completed", mode="defence", seed=1, requested=1,
                           requested_families=[], started_at="2026-11-25T10:00:00Z", notes=[text])
    RedTeamStore(s.db, s.sealer).save(report)
    return report.id


def _red_team_read(s: Stores, user: str, row_id: str) -> str:
    from assistant.extended.red_team_report import RedTeamStore

    return str(RedTeamStore(s.db, s.sealer).get(user, row_id).notes)


def _prediction(s: Stores, user: str, text: str) -> str:
    """A predicted query of the precache (assistant/extended/precache_stats.py), worded ``text``."""
    from assistant.extended.precache_predict import HOUR_OF_DAY, Prediction, Slot
    from assistant.extended.precache_stats import PrecacheStats

    stats = PrecacheStats(s.db, s.sealer)
    stats.record_predictions([Prediction(user, text.lower(), text, 0.8, Slot(HOUR_OF_DAY, 8), 8, 10,
                                         datetime.now(UTC))], {}, {})
    return s.db.one("SELECT id FROM precache_predictions WHERE user_id = ? AND query_hash = ?",
                    (user, stats.query_hash(user, text.lower())))["id"]


def _prediction_read(s: Stores, user: str, row_id: str) -> str:
    from assistant.extended.precache_stats import PrecacheStats

    return next(r.query for r in PrecacheStats(s.db, s.sealer).history(user) if r.id == row_id)


def _feedback(s: Stores, user: str, text: str) -> str:
    """Training feedback (assistant/learning/feedback.py) whose correction is ``text``."""
    from assistant.learning.feedback import FeedbackStore

    _, reply, _ = s.conversations.record_exchange(user_id=user, conversation_id=None, user_message="question",
                                                  reply="answer", model="m", prompt_tokens=1, completion_tokens=1)
    return FeedbackStore(s.db, s.sealer, s.conversations).submit(user, reply, -1, correction=text).id


def _feedback_read(s: Stores, user: str, row_id: str) -> str:
    from assistant.learning.feedback import FeedbackStore

    return str(FeedbackStore(s.db, s.sealer, s.conversations).get(user, row_id).correction)


DUE = datetime.now(UTC) + timedelta(days=1)

CASES: dict[tuple[str, str], tuple[Callable[[Stores, str, str], str], Callable[[Stores, str, str], str]]] = {
    ("memories", "content"): (lambda s, u, t: s.memory.add(u, t).id, lambda s, u, r: s.memory.get(u, r).content),
    ("memories", "summary"): (lambda s, u, t: s.memory.add(u, "same content", summary=t).id,
                              lambda s, u, r: s.memory.get(u, r).summary),
    ("memories", "tags"): (lambda s, u, t: s.memory.add(u, "tagged", tags=[t]).id,
                           lambda s, u, r: str(s.memory.get(u, r).tags)),
    ("conversations", "title"): (lambda s, u, t: s.conversations.record_exchange(
        user_id=u, conversation_id=None, user_message=t, reply="ok", model="m", prompt_tokens=1,
        completion_tokens=1)[0], lambda s, u, r: s.conversations.get(u, r).title),
    ("messages", "content"): (_message_row, _message_read),
    ("reminders", "text_sealed"): (lambda s, u, t: s.reminders.add(u, t, DUE).id,
                                   lambda s, u, r: " ".join(x.text for x in s.reminders.list_for_user(u))),
    ("tool_runs", "arguments_sealed"): (lambda s, u, t: _tool_run(s, u, t, False),
                                        lambda s, u, r: str([x.arguments for x in s.tool_runs.list(u)])),
    ("tool_runs", "result_sealed"): (lambda s, u, t: _tool_run(s, u, t, True),
                                     lambda s, u, r: str([x.result for x in s.tool_runs.list(u)])),
    ("snippets", "title_sealed"): (lambda s, u, t: s.snippets.create(u, t, "body").id,
                                   lambda s, u, r: s.snippets.get(u, r).title),
    ("snippets", "content_sealed"): (lambda s, u, t: s.snippets.create(u, f"title {uuid4().hex[:6]}", t).id,
                                     lambda s, u, r: s.snippets.get(u, r).content),
    ("agentic_tasks", "description_sealed"): (_task, lambda s, u, r: s.tasks.get(r, u).description),
    ("agentic_tasks", "plan_summary_sealed"): (lambda s, u, t: _plan(s, u, t, "plan"),
                                               lambda s, u, r: str(s.tasks.get(r, u).plan_summary)),
    ("agentic_tasks", "result_sealed"): (_task_result, lambda s, u, r: str(s.tasks.get(r, u).result)),
    ("agentic_sub_agents", "description_sealed"): (
        lambda s, u, t: _plan(s, u, t, "sub"),
        lambda s, u, r: " ".join(x.description for x in s.tasks.get(_task_of_sub(s, r), u).sub_agents)),
    ("agentic_sub_agents", "result_sealed"): (
        _sub_result, lambda s, u, r: " ".join(str(x.result) for x in s.tasks.get(_task_of_sub(s, r), u).sub_agents)),
    ("agentic_events", "data_sealed"): (_event, lambda s, u, r: str([e.data for e in s.tasks.events(r.split(":")[0])])),
    ("kg_nodes", "name_sealed"): (_node, lambda s, u, r: s.graph.node(u, r).name),
    ("kg_nodes", "aliases_sealed"): (_alias, lambda s, u, r: str(s.graph.node(u, r).aliases)),
    ("kg_edges", "relation_sealed"): (_relation, _relation_read),
    ("kg_events", "data_sealed"): (_graph_event, lambda s, u, r: str([e[2] for e in s.graph.events(u)])),
    ("dream_journal", "details_sealed"): (lambda s, u, t: _journal(s, u, t, "details"), _journal_read),
    ("dream_journal", "before_sealed"): (lambda s, u, t: _journal(s, u, t, "before"), _journal_read),
    ("dream_journal", "after_sealed"): (lambda s, u, t: _journal(s, u, t, "after"), _journal_read),
    ("dream_insights", "title_sealed"): (lambda s, u, t: _insight(s, u, t, "title"),
                                         lambda s, u, r: s.dream.insight(u, r).title),
    ("dream_insights", "content_sealed"): (lambda s, u, t: _insight(s, u, t, "content"),
                                           lambda s, u, r: s.dream.insight(u, r).content),
    ("memories", "quarantine_reason"): (
        lambda s, u, t: s.memory.quarantine(u, s.memory.add(u, f"quarantined {uuid4().hex[:6]}").id, t).id,
        lambda s, u, r: str(s.memory.get(u, r).quarantine_reason)),
    ("memory_purges", "quarantine_reason"): (_purge, lambda s, u, r: str(s.sanitation.purged(u, r)["quarantine_reason"])),
    ("sanitation_results", "body_sealed"): (_sanitation, lambda s, u, r: str(s.sanitation.result(u, r).error)),
    ("red_team_runs", "body_sealed"): (_red_team, _red_team_read),
    ("explanations", "body_sealed"): (_explanation, _explanation_read),
    ("precache_predictions", "query_sealed"): (_prediction, _prediction_read),
    ("training_feedback", "body_sealed"): (_feedback, _feedback_read),
    ("voice_embeddings", "embedding"): (_speaker, lambda s, u, r: str(s.speakers.embeddings(DIM))),
    ("agent_profiles", "profile_sealed"): (
        lambda s, u, t: s.profiles.create(u, ProfileDraft(name=f"P{uuid4().hex[:6]}", role=t)).id,
        lambda s, u, r: s.profiles.get(u, r).role),
    ("command_executions", "stdout_sealed"): (
        lambda s, u, t: s.executions.record("cat-1", "echo", u, RunOutcome(0, t, "", 1)).id,
        lambda s, u, r: s.executions.get(r, u).stdout),
    ("command_executions", "stderr_sealed"): (
        lambda s, u, t: s.executions.record("cat-1", "echo", u, RunOutcome(1, "", t, 1)).id,
        lambda s, u, r: s.executions.get(r, u).stderr),
    ("command_approvals", "arguments_sealed"): (lambda s, u, t: _approval(s, u, t, "arguments"), _approval_read),
    ("command_approvals", "reason_sealed"): (lambda s, u, t: _approval(s, u, t, "reason"), _approval_read),
    ("command_approvals", "result_sealed"): (lambda s, u, t: _approval(s, u, t, "result"), _approval_read),
    ("command_audit", "detail_sealed"): (
        lambda s, u, t: s.audit.record(AuditAction.EXECUTE, u, t).id,
        lambda s, u, r: " ".join(e.detail for e in s.audit.list(user_id=u))),
}


def raw_swap(path: Path, table: str, column: str, first: str, second: str | None = None, *,
             other_column: str | None = None) -> None:
    """Swap two stored ciphertexts in the SQLite file, behind the service's back: ``column`` of rows
    ``first`` and ``second``, or ``column`` and ``other_column`` of row ``first``."""
    entry = next(t for t in SEALED if t.table == table)
    conn = apsw.Connection(str(path))
    try:
        get = f"SELECT {{c}} FROM {table} WHERE {entry.row_id} = ?"
        if other_column is None:  # the same column of two rows
            a = conn.execute(get.format(c=column), (first,)).fetchone()[0]
            b = conn.execute(get.format(c=column), (second,)).fetchone()[0]
            with conn:
                conn.execute(f"UPDATE {table} SET {column} = ? WHERE {entry.row_id} = ?", (b, first))
                conn.execute(f"UPDATE {table} SET {column} = ? WHERE {entry.row_id} = ?", (a, second))
        else:  # two columns of one row
            a = conn.execute(get.format(c=column), (first,)).fetchone()[0]
            b = conn.execute(get.format(c=other_column), (first,)).fetchone()[0]
            with conn:
                conn.execute(f"UPDATE {table} SET {column} = ?, {other_column} = ? WHERE {entry.row_id} = ?",
                             (b, a, first))
    finally:
        conn.close()


# --- the registry ----------------------------------------------------------------------------------


def test_every_sealed_column_of_the_schema_is_registered_and_tested(tmp_path: Path) -> None:
    db = Database(tmp_path / "schema.db")
    try:
        found = {(t, c) for t in db.tables() for c in db.columns(t) if c.endswith("_sealed")}
    finally:
        db.close()
    registered = {(t.table, c) for t in SEALED for c in t.columns}
    assert found <= registered
    assert set(CASES) == registered
    assert ("voice_embeddings", "embedding") in registered and ("memories", "content") in registered


# --- swapping ciphertexts in the file --------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: f"{c[0]}.{c[1]}")
@pytest.mark.parametrize("who", ["two users", "one user"])
def test_a_ciphertext_moved_to_another_row_does_not_open(case, who: str, open_stores, data: Path) -> None:  # noqa: ANN001
    table, column = case
    write, read = CASES[case]
    stores = open_stores()
    second_user = BOB if who == "two users" else ALICE
    first = write(stores, ALICE, "alpha secret of Alice")
    second = write(stores, second_user, "bravo secret of the other row")
    assert "alpha" in read(stores, ALICE, first) or table == "voice_embeddings"
    stores.db.close()
    raw_swap(data / "assistant.db", table, column, first, second)
    reopened = open_stores()
    with pytest.raises(SealedValueMismatch) as caught:
        read(reopened, ALICE, first)
    error = caught.value
    assert error.code == "INTERNAL_ERROR"
    assert f"{table}.{column}" in error.message
    assert "bravo" not in error.message and "alpha" not in error.message
    assert error.details["table"] == table and error.details["column"] == column
    with pytest.raises(SealedValueMismatch):
        read(reopened, second_user, second)


def test_memory_columns_swapped_within_a_row_do_not_open(open_stores, data: Path) -> None:  # noqa: ANN001
    stores = open_stores()
    memory = stores.memory.add(ALICE, "the content", summary="the summary")
    stores.db.close()
    raw_swap(data / "assistant.db", "memories", "content", memory.id, other_column="summary")
    with pytest.raises(SealedValueMismatch, match=f"memories.content of row {memory.id}"):
        open_stores().memory.get(ALICE, memory.id)


def test_the_integrity_error_is_logged(open_stores, data: Path, caplog) -> None:  # noqa: ANN001
    stores = open_stores()
    a, b = stores.memory.add(ALICE, "mine"), stores.memory.add(BOB, "theirs")
    stores.db.close()
    raw_swap(data / "assistant.db", "memories", "content", a.id, b.id)
    with pytest.raises(SealedValueMismatch):
        open_stores().memory.list(ALICE)
    assert any(f"memories.content of row {a.id}" in r.getMessage() for r in caplog.records)


# --- m014: a store sealed before associated data --------------------------------------------------


class NoAssociatedData(Sealer):
    """Seals as the code before m014 did: no associated data (speaker embeddings: their row id)."""

    def seal_data(self, data: bytes, at: SealContext | None) -> bytes:
        legacy = at.row_id.encode() if at is not None and at.table == "voice_embeddings" else None
        return self.seal_bytes(data, legacy)


def make_legacy_store(open_stores, data: Path) -> dict[tuple[str, str], tuple[str, str]]:  # noqa: ANN001
    """Every case written, then every value re-sealed the pre-m014 way and m014 marked undone."""
    stores = open_stores()
    rows = {case: write(stores, ALICE, f"legacy text {n}") for n, (case, (write, _)) in enumerate(CASES.items())}
    expected = {case: (row, CASES[case][1](stores, ALICE, row)) for case, row in rows.items()}
    key = (data / "memory.key").read_bytes()
    with stores.db.transaction():
        sealed.reseal(stores.db, sealed.open_in_place(stores.sealer), NoAssociatedData(key))
        stores.db.execute("DELETE FROM _migrations WHERE name = 'm014_sealed_associated_data'")
    with pytest.raises(SealedValueMismatch):  # what m014 has to repair
        stores.memory.get(ALICE, expected[("memories", "content")][0])
    stores.db.close()
    return expected


def test_m014_reseals_an_old_store_once(open_stores, data: Path) -> None:  # noqa: ANN001
    expected = make_legacy_store(open_stores, data)
    stores = open_stores()  # m014 runs, marks the store; opening the key re-seals it
    assert stores.db.scalar("SELECT value FROM meta WHERE key = 'sealed_aad_pending'") is None
    for case, (row, text) in expected.items():
        assert CASES[case][1](stores, ALICE, row) == text, case
    assert finish_pending_reseal(stores.db, stores.sealer) == 0  # done once


def test_m014_interrupted_rolls_back_and_finishes_on_the_next_open(open_stores, data: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    expected = make_legacy_store(open_stores, data)
    calls = {"n": 0}
    real = Sealer.seal_data

    def failing(self, data_: bytes, at):  # noqa: ANN001
        calls["n"] += 1
        if calls["n"] == 5:
            raise RuntimeError("killed half-way")
        return real(self, data_, at)

    monkeypatch.setattr(Sealer, "seal_data", failing)
    with pytest.raises(RuntimeError, match="half-way"):
        open_stores()
    monkeypatch.setattr(Sealer, "seal_data", real)
    raw = Database(data / "assistant.db")
    try:  # nothing half-done: the marker is there and the values are still the old ones
        assert raw.scalar("SELECT value FROM meta WHERE key = 'sealed_aad_pending'") == "1"
    finally:
        raw.close()
    stores = open_stores()
    for case, (row, text) in expected.items():
        assert CASES[case][1](stores, ALICE, row) == text, case


def test_m014_has_nothing_to_do_in_a_plain_store(tmp_path: Path) -> None:
    db = Database(tmp_path / "plain.db")
    try:
        sealer = open_store_sealer(db, tmp_path / "memory.key", enabled=False)
        store = SnippetStore(db, sealer)
        snippet = store.create(ALICE, "Plain", "text")
        db.execute("DELETE FROM _migrations WHERE name = 'm014_sealed_associated_data'")
    finally:
        db.close()
    again = Database(tmp_path / "plain.db")
    try:
        assert again.scalar("SELECT value FROM meta WHERE key = 'sealed_aad_pending'") is None
        sealer = open_store_sealer(again, tmp_path / "memory.key", enabled=False)
        assert SnippetStore(again, sealer).get(ALICE, snippet.id).content == "text"
        assert not (tmp_path / "memory.key").exists()
    finally:
        again.close()
