"""Memory hygiene: which of the user's memories a run looks at, in batches, and the verdicts that
need no other memory (``poisoned``: the injection defence flags it; ``stale``: a plan whose time has
passed, :mod:`assistant.sanitation.stale`). ``contradicted`` compares memories with each other and
lives in :mod:`assistant.sanitation.contradictions`.

Everything here reads: the run applies the verdicts later, in its one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from assistant.defence.types import Layer, Source, Verdict
from assistant.defence.wrap import VerdictCache, content_hash
from assistant.memory.types import Memory, MemoryType
from assistant.sanitation.stale import stale_reason
from assistant.sanitation.types import Judgement, MemoryVerdict

# Quarantine takes a memory away, neutralising a span in a prompt only hides a sentence: a memory
# the classifier alone suspects is quarantined only from this probability on (a pattern, hidden
# characters or an encoded instruction suffice). The shipped model's threshold for indirect content
# (0.91, chosen by cross-validation) is above it already; this floor holds when a user configures a
# lower [defence] threshold (at 0.5, 0.9 % of LoCoMo dev's clean turns were quarantined as poisoned).
CLASSIFIER_QUARANTINE = 0.9

# Never judged: already set aside, or the dream's own tentative output (it has its own expiry).
SKIPPED = (MemoryType.QUARANTINED.value, MemoryType.HYPOTHESIS.value, MemoryType.DREAM_INSIGHT.value)


def batches(memory_store: Any, user_id: str, size: int) -> Iterator[list[tuple[int, Memory]]]:
    """The user's memories to judge (Archived ones too; not those the user restored from quarantine,
    until their text changes), oldest first, ``size`` at a time: the
    rowids are read once (a covering index), then each batch's rows by rowid; a memory written
    during the run waits for the next run, one deleted meanwhile is skipped."""
    marks = ",".join("?" * len(SKIPPED))
    rowids = [r["rowid"] for r in memory_store.db.query(
        f"SELECT rowid FROM memories m WHERE user_id = ? AND memory_type NOT IN ({marks}) AND NOT EXISTS "
        "(SELECT 1 FROM memory_restores r WHERE r.memory_id = m.id AND r.updated_at IS m.updated_at) ORDER BY rowid",
        (str(user_id), *SKIPPED))]
    for start in range(0, len(rowids), max(1, int(size))):
        chunk = rowids[start:start + max(1, int(size))]
        rows = memory_store.db.query(
            f"SELECT * FROM memory_rows WHERE rowid IN ({','.join('?' * len(chunk))}) AND memory_type NOT IN ({marks}) "
            "ORDER BY rowid", (*chunk, *SKIPPED))
        if rows:
            yield [(r["rowid"], memory_store._memory(r)) for r in rows]


def judge(memory: Memory, detector: Any, user_id: str, now: datetime, verdict: Verdict | None = None) -> Judgement:
    """``poisoned`` (the detector's reason), else ``stale`` (the passed time phrase), else ``ok``;
    ``verdict``: the detector's, when the caller already has it (a batch, the cache)."""
    if verdict is None:
        verdict = detector.inspect(memory.content, Source.MEMORY, user_id)
    if verdict.flagged and (any(h.layer is not Layer.CLASSIFIER for h in verdict.hits)
                            or verdict.score >= CLASSIFIER_QUARANTINE):
        layers = ",".join(x.value for x in verdict.layers) or "detector"
        reason = verdict.reason or "the injection defence flagged it"
        return Judgement(memory.id, MemoryVerdict.POISONED, f"poisoned: {reason}", by=f"defence:{layers}")
    reason = stale_reason(memory, now)
    if reason is not None:
        return Judgement(memory.id, MemoryVerdict.STALE, reason, by="temporal")
    return Judgement(memory.id, MemoryVerdict.OK)


def verdicts(memories: list[Memory], detector: Any, user_id: str, cache: VerdictCache | None = None,
             version: str = "") -> list[Verdict]:
    """The detector's verdicts on a batch: one ``inspect_many`` call for those the cache does not
    hold (keyed by the memory, its text and ``version``: the user's active patterns), cached after."""
    keys = [(str(user_id), f"{m.id}:{version}", content_hash(m.content)) for m in memories]
    found: list[Verdict | None] = [cache.get(k) if cache is not None else None for k in keys]
    todo = [i for i, v in enumerate(found) if v is None]
    if todo:
        texts = [memories[i].content for i in todo]
        many = getattr(detector, "inspect_many", None)
        fresh = many(texts, Source.MEMORY, user_id) if many is not None else \
            [detector.inspect(t, Source.MEMORY, user_id) for t in texts]
        for i, verdict in zip(todo, fresh, strict=True):
            found[i] = verdict
            if cache is not None:
                cache.put(keys[i], verdict)
    return [v for v in found if v is not None]


def scan(memory_store: Any, detector: Any, user_id: str, size: int, now: datetime,
         checkpoint: Callable[[], Any] | None = None, cache: VerdictCache | None = None,
         version: str = "") -> tuple[list[tuple[int, Memory]], list[Judgement]]:
    """Every memory judged (in batches of ``size``, ``checkpoint()`` between them: it may block
    while a dream is paused, or raise to stop): the (rowid, memory) pairs and the judgements, in
    the same order. With ``cache``, a memory whose text and the user's patterns did not change since
    it was last inspected is not inspected again (the cycles of one night judge the same memories)."""
    memories: list[tuple[int, Memory]] = []
    judgements: list[Judgement] = []
    for n, batch in enumerate(batches(memory_store, user_id, size)):
        if n and checkpoint is not None:
            checkpoint()
        found = verdicts([m for _, m in batch], detector, user_id, cache, version)
        for (rowid, memory), verdict in zip(batch, found, strict=True):
            memories.append((rowid, memory))
            judgements.append(judge(memory, detector, user_id, now, verdict))
    return memories, judgements
