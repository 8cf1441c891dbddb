"""The cold-start objective: LoCoMo recall, while the user has too few answers of their own.

Every turn of the data set's conversations (``optimization.dataset_path``, e.g.
``../shared/benchmarks/locomo/locomo_dev5.json``, read in place) is stored as a memory of its
conversation in a throw-away store with the service's embedder, as
:mod:`assistant.memory.evaluation` stores it ("On <day>, <speaker> said: <text>", one store
conversation per session), but **on its session's date**: each session is stored with the clock at
that date, and the questions are asked one day after the last session. So freshness and the decay of
importance (0.5 at storage, a Context memory never accessed) depend on the parameters as they would for
a user who had chatted over those months; stored all at once, relevance weights and decay would change
nothing. Positives are the evidence turns of each question (categories 1-4); a case's group is its
conversation, so the validation split holds out whole conversations. Embedding (about a minute for the
five dev conversations on two cores) happens once; the store is then discarded, only the features stay.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from assistant.learning.optimize_score import Case
from assistant.memory.candidates import features
from assistant.memory.evaluation import Conversation, day_of, load, memory_text

CATEGORIES = (1, 2, 3, 4)
DAY = 86_400.0
_WHEN = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)", re.IGNORECASE)


def session_time(session_date: str) -> float | None:
    """``'1:56 pm on 8 May, 2023'`` -> epoch seconds (UTC); None when it has no date."""
    try:
        day = datetime.strptime(day_of(session_date), "%d %B %Y").replace(tzinfo=UTC)
    except ValueError:
        return None
    m = _WHEN.search(session_date)
    if m:
        hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "pm" else 0)
        day = day.replace(hour=hour, minute=int(m.group(2)))
    return day.timestamp()


def conversation_cases(store: Any, conv: Conversation, *, categories: Sequence[int] = CATEGORIES) -> list[Case]:
    """Store ``conv`` session by session at its dates (user ``conv.sample_id``) and build its cases."""
    user = conv.sample_id
    sessions: dict[int, list] = {}
    for turn in conv.turns:
        sessions.setdefault(turn.session, []).append(turn)
    from assistant.memory.records import NewMemory

    dia_to_id: dict[str, str] = {}
    last = 0.0
    original = store.clock
    try:
        for number in sorted(sessions):
            turns = sessions[number]
            stamp = session_time(turns[0].session_date) or last + DAY
            last = max(last, stamp)
            store.clock = lambda stamp=stamp: stamp
            items = [NewMemory(memory_text(t), conversation_id=f"{user}/session-{t.session}") for t in turns]
            ids = store.add_many(user, items)
            dia_to_id.update(zip((t.dia_id for t in turns), ids, strict=True))
    finally:
        store.clock = original
    asked = last + DAY
    questions = [q for q in conv.questions if q.category in categories and q.evidence]
    if not questions:
        return []
    vectors = np.asarray(store.embedder.embed([q.question for q in questions]), dtype=np.float32)
    cases = []
    for n, (question, vector) in enumerate(zip(questions, vectors, strict=True)):
        found = features(store, user, question.question, vector, now=asked, pool=250)
        positives = frozenset(dia_to_id[d] for d in question.evidence if d in dia_to_id)
        if positives:
            cases.append(Case(f"{user}/q{n}", user, found, positives))
    return cases


def locomo_cases(path: Path | str, embedder: Any, *, conversations: int | None = None,
                 select: Iterable[str] | None = None, categories: Sequence[int] = CATEGORIES,
                 progress: Callable[[Iterable], Iterable] = lambda it: it, memory_settings: Any = None) -> list[Case]:
    """The cases of the data set at ``path`` (its first ``conversations``, or those whose sample ids are in
    ``select``), embedded with ``embedder`` in a temporary store that is removed afterwards."""
    from assistant.config import MemorySettings
    from assistant.crypto import Sealer
    from assistant.memory.store import MemoryStore
    from assistant.storage.db import Database

    convs = load(path, conversations=conversations)
    if select is not None:
        wanted = set(select)
        convs = [c for c in convs if c.sample_id in wanted]
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="optimize-locomo-") as tmp:
        db = Database(Path(tmp) / "locomo.db")
        try:
            store = MemoryStore(db, Sealer(None), embedder, memory_settings or MemorySettings())
            for conv in progress(convs):
                cases += conversation_cases(store, conv, categories=categories)
        finally:
            db.close()
    return cases


def locomo_slice(source: Path | str, out: Path | str, *, conversations: int = 2, sessions: int = 3) -> Path:
    """A smaller LoCoMo file for quick studies (notebook, tests): the first ``conversations`` of ``source``
    with their first ``sessions`` sessions and only the questions whose evidence lies in them; written to
    ``out`` (a scratch path: the data set's licence forbids shipping it) and returned."""
    import json

    data = json.loads(Path(source).read_text(encoding="utf-8"))[:conversations]
    for sample in data:
        conv = sample["conversation"]
        for name in [k for k in conv if re.fullmatch(r"session_\d+(_date_time)?", k)
                     and int(k.split("_")[1]) > sessions]:
            del conv[name]
        kept = {t["dia_id"] for n in range(1, sessions + 1) for t in conv.get(f"session_{n}", [])}
        sample["qa"] = [q for q in sample["qa"] if q.get("evidence") and all(e in kept for e in q["evidence"])]
    out = Path(out)
    out.write_text(json.dumps(data), encoding="utf-8")
    return out
