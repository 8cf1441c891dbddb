"""Retrieval evaluation on LoCoMo: store every turn as a memory, search each question, and
measure recall@k against the evidence turns (LoCoMo's ``recall_acc``).

Used by ``benchmarks/locomo_recall.py`` (all five conversations) and the memory notebook (a
subset). The data set is read from ``../shared/benchmarks/locomo/`` and never copied.

How a turn becomes a memory is what a chat log holds: who said it, when, and what was said
(:func:`memory_text`), and each session of the conversation is one conversation of the store
(``conversation_id``), in the order it was said. The evidence ids (``dia_id``) are used only to
score the ranking, never to build or search the store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
MODES = ("dense", "keyword", "hybrid")
GRAPH_MODES = (*MODES, "hybrid+graph")  # hybrid+graph needs a knowledge graph (evaluate's ``setup``)


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    session_date: str
    session: int = 0  # the session (1, 2, ...) the turn was said in


@dataclass(frozen=True)
class Question:
    question: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def default_path() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent.parent / "shared" / "benchmarks" / "locomo" / "locomo_dev5.json"
        if candidate.exists():
            return candidate
    return Path("../shared/benchmarks/locomo/locomo_dev5.json")


_EVIDENCE = re.compile(r"D(\d+):(\d+)")


def normalise_evidence(raw: Iterable[str]) -> tuple[str, ...]:
    """``'D8:6; D9:17'`` -> (D8:6, D9:17); ``'D:11:26'`` -> D11:26; ``'D30:05'`` -> D30:5."""
    out: list[str] = []
    for item in raw:
        fixed = item.replace("D:", "D")
        out += [f"D{int(s)}:{int(t)}" for s, t in _EVIDENCE.findall(fixed)]
    return tuple(dict.fromkeys(out))


def load(path: Path | str | None = None, conversations: int | None = None) -> list[Conversation]:
    data = json.loads(Path(path or default_path()).read_text())
    result = []
    for sample in data[:conversations]:
        conv = sample["conversation"]
        turns = []
        n = 1
        while f"session_{n}" in conv:
            date = conv.get(f"session_{n}_date_time", "")
            turns += [Turn(t["dia_id"], t["speaker"], t["text"], date, n) for t in conv[f"session_{n}"]]
            n += 1
        questions = tuple(
            Question(q["question"], normalise_evidence(q.get("evidence", [])), int(q["category"]))
            for q in sample["qa"]
        )
        result.append(Conversation(sample["sample_id"], tuple(turns), questions))
    return result


_DATE = re.compile(r"(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})")


def day_of(session_date: str) -> str:
    """``'1:56 pm on 8 May, 2023'`` -> ``'8 May 2023'`` (the day; the time of day is dropped).
    A date in another form is kept as it is."""
    m = _DATE.search(session_date)
    return f"{int(m.group(1))} {m.group(2)} {m.group(3)}" if m else session_date.strip()


def memory_text(turn: Turn, *, dated: bool = True) -> str:
    """How a turn is stored as a memory: ``'On 8 May 2023, Caroline said: <text>'``, or
    ``'Caroline: <text>'`` with ``dated=False`` (or when the session has no date).

    The date is part of what was said in a chat log. Written as a sentence it helps both
    retrievers (LoCoMo, 5 conversations, categories 1-4, recall@5): dense .416 -> .461 (MiniLM
    reads "On <day>, <name> said:" better than "<name>:"; "[<day>] <name>: " gave .426),
    keyword .556 -> .578 (questions name months and years), hybrid without the neighbour
    context .586 -> .609."""
    day = day_of(turn.session_date) if dated else ""
    return f"On {day}, {turn.speaker} said: {turn.text}" if day else f"{turn.speaker}: {turn.text}"


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    if not evidence:
        return 0.0
    return len(set(ranked[:k]) & set(evidence)) / len(set(evidence))


@dataclass
class Prepared:
    """A conversation stored once for retrieval experiments: its store and user, which turn each
    memory is (``dia_of``: memory id -> dia_id), and its questions (with evidence, in the chosen
    categories) with their query vectors."""

    sample_id: str
    store: object
    user: str
    dia_of: dict[str, str]
    questions: list[Question]
    vectors: object  # numpy array, one row per question


def prepare(
    store: object,
    conv: Conversation,
    *,
    categories: Sequence[int] = (1, 2, 3, 4),
    text: Callable[[Turn], str] = memory_text,
    sessions_as_conversations: bool = True,
) -> Prepared:
    """Store every turn of ``conv`` as a memory of user ``conv.sample_id`` in ``store`` (a fresh
    :class:`assistant.memory.store.MemoryStore`) and embed its questions."""
    from assistant.memory.store import NewMemory

    user = conv.sample_id
    items = [
        NewMemory(text(t), conversation_id=f"{conv.sample_id}/session-{t.session}" if sessions_as_conversations
                  else None)
        for t in conv.turns
    ]
    ids = store.add_many(user, items)
    dia_of = dict(zip(ids, (t.dia_id for t in conv.turns), strict=True))
    questions = [q for q in conv.questions if q.category in categories and q.evidence]
    vectors = store.embedder.embed([q.question for q in questions])
    return Prepared(conv.sample_id, store, user, dia_of, questions, vectors)


def evaluate(
    store_factory: Callable[[], object],
    conversations: Sequence[Conversation],
    *,
    modes: Sequence[str] = MODES,
    ks: Sequence[int] = (1, 5, 10),
    categories: Sequence[int] = (1, 2, 3, 4),
    progress: Callable[[Iterable], Iterable] = lambda it: it,
    text: Callable[[Turn], str] = memory_text,
    sessions_as_conversations: bool = True,
    details: bool = False,
    setup: Callable[[Prepared], object] | None = None,
):
    """Recall@k per mode and category, as a pandas DataFrame (rows: mode x category, plus 'all').

    ``store_factory()`` returns a fresh :class:`assistant.memory.store.MemoryStore`; each
    conversation is stored for its own user through ``add_many`` and searched through ``search``
    (ranked by similarity). ``text`` renders a turn as a memory; with
    ``sessions_as_conversations`` each session is stored as one conversation (its
    ``conversation_id``), as a chat would store it. ``progress`` wraps the conversations (tqdm).
    ``details=True`` returns ``(summary, per_question)`` instead, the second with one row per
    question and mode. ``setup(prepared)`` runs once per conversation after it is stored (e.g.
    builds its knowledge graph and attaches the expander for mode ``hybrid+graph``).
    """
    rows = []
    for conv in progress(conversations):
        p = prepare(store_factory(), conv, categories=categories, text=text,
                    sessions_as_conversations=sessions_as_conversations)
        if setup is not None:
            setup(p)
        rows += score(p, modes, ks)
    return summarise(rows, ks, categories, details=details)


def dias_of(prepared: Prepared, memory_id: str) -> tuple[str, ...]:
    """The turns a memory stands for: its own, or (a memory a dream merged, see :func:`add_merged`)
    all its sources'."""
    found = prepared.dia_of.get(memory_id, ())
    return (found,) if isinstance(found, str) else tuple(found)


def add_merged(prepared: Prepared, merged: dict[str, Sequence[str]]) -> None:
    """Memories written by merging others (merged id -> source ids) count for every source's turn."""
    for memory_id, sources in merged.items():
        prepared.dia_of[memory_id] = tuple(dict.fromkeys(d for s in sources for d in dias_of(prepared, s)))


def score(prepared: Prepared, modes: Sequence[str] = MODES, ks: Sequence[int] = (1, 5, 10)) -> list[dict]:
    """One row per question and mode of a prepared store: recall@k over the turns of the top k
    memories (a merged memory brings all its sources' turns)."""
    p, rows = prepared, []
    for q, vector in zip(p.questions, p.vectors, strict=True):
        for mode in modes:
            found = p.store.search(p.user, q.question, max(ks), query_vector=vector, mode=mode, rank_by="similarity")
            ranked = [dias_of(p, s.memory.id) for s in found]
            wanted = set(q.evidence)
            rows.append({"mode": mode, "category": q.category, "sample_id": p.sample_id, "question": q.question,
                         **{f"R@{k}": len(set().union(*ranked[:k]) & wanted) / len(wanted) if wanted else 0.0
                            for k in ks}})
    return rows


def summarise(rows: list[dict], ks: Sequence[int] = (1, 5, 10), categories: Sequence[int] = (1, 2, 3, 4), *,
              details: bool = False):
    """:func:`score`'s rows as :func:`evaluate`'s table (and the rows, with ``details``)."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    columns = [f"R@{k}" for k in ks]
    per_cat = frame.groupby(["mode", "category"])[columns].mean().reset_index()
    per_cat["category"] = per_cat["category"].map(lambda c: f"{c} {CATEGORIES[c]}")
    overall = frame.groupby("mode")[columns].mean().reset_index()
    overall["category"] = "all " + "-".join(str(c) for c in categories)
    summary = pd.concat([per_cat, overall], ignore_index=True)
    return (summary, frame) if details else summary
