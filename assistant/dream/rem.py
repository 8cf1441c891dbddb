"""REM: synthesis over the last ``rem.pattern_window_days``. Steps, in order (each insight a journaled
operation whose applier stores it, see :mod:`journal`):

1. **evidence** (:class:`EvidenceStep`): each active hypothesis meets the memories written since its
   last evidence (or its creation), its own sources excepted. A memory whose embedding has cosine
   >= ``EVIDENCE_THRESHOLD`` with the hypothesis supports it: ``evidence_count`` grows by the number
   ``k`` of supporting memories and confidence rises ``c -> 1 - (1 - c) x (1 - EVIDENCE_GAIN)^k``
   (each supporting memory removes a quarter of the remaining doubt: 0.3 -> 0.475 -> 0.606 ->
   0.705). Journaled as ``HypothesisGenerated`` with ``details.evidence`` (the memories, their
   cosines, confidence and count before and after: the applier *sets* the after values, so a replay
   changes nothing twice). 0.55, from MiniLM's cosines with "You may be planning to move to Porto.
   You have been looking at flats in Porto.": "I am thinking about moving to Porto next year." .73,
   "I viewed two apartments in Porto today." .68, "The estate agent in Porto called about the
   flat." .61, but "Porto won the football match." (a shared name) .38, "Dinner with Sam" .14. It
   is conservative: indirect support ("Ran 25 km this morning" for a marathon hypothesis, .45)
   does not count.
2. **patterns** (:class:`PatternStep`): the statistical detectors of :mod:`patterns` (recurring
   items, times, co-occurrences; no model) over the knowledge-graph nodes the window's memories
   mention (not the user themself, nor dates: a date comes up in the memories of its own day), or,
   without a graph (or before it has read them), over the words of their text (opened in memory
   only). Each finding: a ``pattern`` insight (``PatternDetected``; the statistic in the
   details).
3. **connections** (:class:`ConnectionStep`, graph only): two entities (people, places,
   organisations, events, things: not keyphrase topics or dates, which link everything) linked
   through a third in different memories that no memory links directly: a ``connection`` insight (``PatternDetected``
   with ``insight_type`` connection). No ``EdgeCreated``: graph-aware retrieval already follows two
   hops (``knowledge_graph.max_hops``), so an edge would reach nothing new, while it would put into
   the graph, among the facts memories state, a relation no memory states; the insight keeps the
   inference visible and for the user to confirm.
4. **hypotheses and suggestions** (:class:`EngineStep`): the configured engine reads up to
   ``engine.MAX_MEMORIES`` of the window's memories (newest first; cycle ``n`` reads the ``n``-th
   batch, so later cycles see other memories and no batch is sent twice in a session) and answers
   JSON of a schema (:mod:`engine`: grounded, memories as data). A hypothesis below
   ``hypothesis_confidence_threshold`` is not stored; the others become ``HypothesisGenerated`` /
   ``SuggestionCreated``. No engine (``deps.queue`` None, or its circuit breaker open): this step
   does nothing. An engine that fails (down, busy, unusable twice) is journaled as a failed
   ``HypothesisGenerated`` (:meth:`PhaseContext.fail`) and the session goes on.

Insights are embedded with the memory store's embedder (title and content) and their text is sealed
by the store. Their keys (and the journal's) are keyed digests (:meth:`Sealer.token`: no text of a
memory in a plain column) of the insight type and what makes the insight the same: the finding's
kind, bucket and items for patterns and connections (so the same pattern is not reported again next
night with new counts), the sorted sources and normalised title for the engine's; a replay or a
later cycle adds nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from assistant.clock import epoch_of, iso_at
from assistant.dream import patterns as P
from assistant.dream.engine import MAX_MEMORIES, EngineFailed, Proposal, engine_for
from assistant.dream.journal import Applied, applier
from assistant.dream.session import PhaseContext, Step
from assistant.dream.types import InsightStatus, InsightType, JournalEntry, Operation
from assistant.graph.types import ME, NodeKind
from assistant.memory.types import MemoryType

if TYPE_CHECKING:
    from assistant.dream.deps import DreamDeps

log = logging.getLogger("assistant.dream")

DAY = 86_400.0
EVIDENCE_THRESHOLD = 0.55
EVIDENCE_GAIN = 0.25
MAX_WINDOW_MEMORIES = 5000  # newest memories of a window the detectors read
MAX_SOURCES = 20  # source memory ids kept on a pattern insight (the newest)
CONNECTION_EXCLUDED_KINDS = {NodeKind.TOPIC.value, NodeKind.DATE.value}  # keyphrases and dates connect everything
MIN_ENGINE_MEMORIES = 3  # fewer memories in a batch: no engine call
# Not the user's own memories of the period: what dream mode made, and what was set aside.
EXCLUDED_TYPES = (MemoryType.ARCHIVED.value, MemoryType.QUARANTINED.value, MemoryType.DREAM_INSIGHT.value,
                  MemoryType.HYPOTHESIS.value)
_NOT_EXCLUDED = f"memory_type NOT IN ({','.join('?' * len(EXCLUDED_TYPES))})"


def insight_key(deps: DreamDeps, insight_type: InsightType, *parts: str) -> str:
    """``rem:<type>:<keyed digest of the parts>`` (no plaintext in the key columns)."""
    text = "\x1f".join(" ".join(p.lower().split()) for p in parts)
    return f"rem:{insight_type.value}:{deps.store.sealer.token(text).hex()}"


# --- the window ---------------------------------------------------------------------------------


@dataclass
class Window:
    occurrences: P.Occurrences
    source: str  # "graph" or "terms"
    created: dict[str, float] = field(default_factory=dict)  # memory id -> epoch seconds


def _memories_between(deps: DreamDeps, user: str, start: float, end: float, limit: int) -> list[dict]:
    return deps.memory.db.query(
        f"SELECT id, created_at FROM memories WHERE user_id = ? AND created_at >= ? AND created_at < ? AND "
        f"{_NOT_EXCLUDED} ORDER BY created_at DESC LIMIT ?",
        (user, iso_at(start), iso_at(end), *EXCLUDED_TYPES, limit))


def _shares(deps: DreamDeps, user: str) -> tuple[np.ndarray, np.ndarray]:
    rows = deps.memory.db.query(f"SELECT created_at FROM memories WHERE user_id = ? AND {_NOT_EXCLUDED} "
                                "ORDER BY created_at DESC LIMIT 20000", (user, *EXCLUDED_TYPES))
    return P.shares(np.array([epoch_of(r["created_at"]) for r in rows], dtype=np.float64))


def window(deps: DreamDeps, user_id: str) -> Window | None:
    """The memories of the last ``pattern_window_days`` and what they mention (None: none)."""
    user, now = str(user_id), deps.clock()
    span = deps.settings.rem.pattern_window_days * DAY
    start = now - span
    rows = _memories_between(deps, user, start, now + 1.0, MAX_WINDOW_MEMORIES)
    if not rows:
        return None
    rows.reverse()  # oldest first
    ids = [r["id"] for r in rows]
    created = {r["id"]: epoch_of(r["created_at"]) for r in rows}
    base = _memories_between(deps, user, start - P.BASELINE_WINDOWS * span, start, MAX_WINDOW_MEMORIES)
    part_share, day_share = _shares(deps, user)
    common = {"memory_ids": ids, "times": np.array([created[i] for i in ids]), "day_part_share": part_share,
              "weekday_share": day_share, "baseline_memories": len(base)}
    if deps.graph is not None:
        mentioned = _mentions(deps, user, ids)
        if any(mentioned.values()):
            snap = deps.graph.views.snapshot(user)
            names = dict(zip(snap.ids, snap.names, strict=True))
            # the user themself, and dates (a date "keeps coming up" in the memories of its own day)
            me = {n for n, name, kind in zip(snap.ids, snap.names, snap.kinds, strict=True)
                  if name == ME or kind == NodeKind.DATE.value}
            base_counts: dict[str, int] = {}
            for nodes in _mentions(deps, user, [r["id"] for r in base]).values():
                for node in nodes:
                    base_counts[node] = base_counts.get(node, 0) + 1
            items = [frozenset(n for n in mentioned.get(i, ()) if n not in me and n in names) for i in ids]
            occ = P.Occurrences(items=items, names=names, baseline_counts=base_counts, **common)
            return Window(occ, "graph", created)
    texts = {i: deps.memory.get(user, i).content for i in ids}
    items = [frozenset(P.terms_of(texts[i])) for i in ids]
    base_counts = {}
    for r in base:
        for term in P.terms_of(deps.memory.get(user, r["id"]).content):
            base_counts[term] = base_counts.get(term, 0) + 1
    names = {t: t for its in items for t in its}
    return Window(P.Occurrences(items=items, names=names, baseline_counts=base_counts, **common), "terms", created)


def _mentions(deps: DreamDeps, user: str, memory_ids: list[str]) -> dict[str, list[str]]:
    """memory id -> the graph nodes it mentions (in chunks: SQLite's variable limit)."""
    out: dict[str, list[str]] = {}
    for start in range(0, len(memory_ids), 500):
        out.update(deps.graph.nodes_of_memories(user, memory_ids[start:start + 500]))  # type: ignore[union-attr]
    return out


# --- the steps ----------------------------------------------------------------------------------


def _insight_details(insight_type: InsightType, title: str, content: str, confidence: float,
                     sources: list[str], **more: object) -> dict:
    return {"insight_type": insight_type.value, "title": title, "content": content,
            "confidence": round(float(confidence), 6), "sources": sources, **more}


class EvidenceStep:
    name = "evidence"

    def run(self, ctx: PhaseContext) -> None:
        deps, user = ctx.deps, ctx.user_id
        hypotheses, _ = deps.store.insights(user, insight_type=InsightType.HYPOTHESIS, status=InsightStatus.ACTIVE,
                                            limit=1000)
        ids, vectors = deps.store.insight_vectors(user, InsightStatus.ACTIVE)
        vector_of = dict(zip(ids, vectors, strict=True)) if ids else {}
        hypotheses = [h for h in hypotheses if h.id in vector_of]
        if not hypotheses:
            return
        since = {h.id: epoch_of(h.last_evidence_at or h.created_at) for h in hypotheses}
        rows = deps.memory.db.query(
            f"SELECT id, created_at, embedding FROM memories WHERE user_id = ? AND created_at > ? AND "
            f"{_NOT_EXCLUDED} ORDER BY created_at DESC LIMIT ?",
            (user, iso_at(min(since.values())), *EXCLUDED_TYPES, MAX_WINDOW_MEMORIES))
        if not rows:
            return
        created = np.array([epoch_of(r["created_at"]) for r in rows])
        matrix = np.frombuffer(b"".join(r["embedding"] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        for h in hypotheses:
            sims = matrix @ vector_of[h.id]
            own = set(h.source_memory_ids)
            hits = [i for i in np.flatnonzero((sims >= EVIDENCE_THRESHOLD) & (created > since[h.id]))
                    if rows[i]["id"] not in own]
            if not hits:
                continue
            found = sorted(rows[i]["id"] for i in hits)
            after = 1.0 - (1.0 - h.confidence) * (1.0 - EVIDENCE_GAIN) ** len(found)
            evidence = {"insight_id": h.id, "memory_ids": found,
                        "similarities": {rows[i]["id"]: round(float(sims[i]), 4) for i in hits},
                        "threshold": EVIDENCE_THRESHOLD, "gain": EVIDENCE_GAIN,
                        "confidence_before": round(h.confidence, 6), "confidence_after": round(after, 6),
                        "evidence_count_before": h.evidence_count,
                        "evidence_count_after": h.evidence_count + len(found)}
            key = f"rem:evidence:{h.id}:{deps.store.sealer.token(','.join(found)).hex()}"
            done = ctx.record(Operation.HYPOTHESIS_GENERATED, key, {"insight_type": "hypothesis", "evidence": evidence},
                              memories=found, before={"confidence": h.confidence, "evidence_count": h.evidence_count})
            if done is None and ctx.exhausted:
                return


class PatternStep:
    name = "patterns"

    def run(self, ctx: PhaseContext) -> None:
        win = window(ctx.deps, ctx.user_id)
        if win is None:
            return
        occ = win.occurrences
        for finding in (*P.recurring(occ), *P.times(occ), *P.cooccurrences(occ)):
            if not _record_finding(ctx, finding, InsightType.PATTERN, win):
                return


class ConnectionStep:
    name = "connections"

    def run(self, ctx: PhaseContext) -> None:
        deps, user = ctx.deps, ctx.user_id
        if deps.graph is None:
            return
        win = window(deps, user)
        if win is None or win.source != "graph":
            return
        recent = {n for items in win.occurrences.items for n in items}
        snap = deps.graph.views.snapshot(user)
        if not len(snap.edge_ids) or not recent:
            return
        valid = np.flatnonzero(snap.edges_valid(deps.clock()))
        edges = [(snap.ids[snap.src[e]], snap.ids[snap.dst[e]], float(snap.weight[e]), snap.relations[e])
                 for e in valid]
        involved = set(recent)
        for s, o, _, _ in edges:
            if s in recent or o in recent:
                involved.update((s, o))
        mentions: dict[str, set[str]] = {}
        ordered = sorted(involved)
        for start in range(0, len(ordered), 500):
            for node, mems in deps.graph.memories_of_nodes(user, ordered[start:start + 500]).items():
                mentions[node] = set(mems)
        names = dict(zip(snap.ids, snap.names, strict=True))
        vague = {n for n, name, kind in zip(snap.ids, snap.names, snap.kinds, strict=True)
                 if name == ME or kind in CONNECTION_EXCLUDED_KINDS}
        for finding in P.connections(edges, mentions, recent, names, exclude=vague):
            if not _record_finding(ctx, finding, InsightType.CONNECTION, win):
                return


def _record_finding(ctx: PhaseContext, finding: P.Finding, insight_type: InsightType, win: Window) -> bool:
    """Journal a finding as a PatternDetected insight; False when the phase's budget is used."""
    deps = ctx.deps
    sources = sorted(finding.sources, key=lambda m: win.created.get(m, 0.0), reverse=True)[:MAX_SOURCES]
    key = insight_key(deps, insight_type, finding.kind, finding.bucket, *sorted(finding.subject))
    details = _insight_details(insight_type, finding.title, finding.content, finding.confidence, sorted(sources),
                               kind=finding.kind, items=win.source, statistic=finding.statistic,
                               window_days=deps.settings.rem.pattern_window_days)
    nodes = list(finding.statistic.get("path", finding.subject)) if win.source == "graph" else []
    done = ctx.record(Operation.PATTERN_DETECTED, key, details, memories=sorted(sources), nodes=nodes)
    return not (done is None and ctx.exhausted)


class EngineStep:
    name = "hypotheses"

    def run(self, ctx: PhaseContext) -> None:
        deps, user = ctx.deps, ctx.user_id
        if deps.queue is None:
            return
        engine = engine_for(deps.queue)
        if not engine.available():
            log.info("dream REM: the engine's circuit is open; statistical insights only")
            return
        now = deps.clock()
        rows = _memories_between(deps, user, now - deps.settings.rem.pattern_window_days * DAY, now + 1.0,
                                 MAX_WINDOW_MEMORIES)  # newest first
        batch = rows[(ctx.cycle - 1) * MAX_MEMORIES:ctx.cycle * MAX_MEMORIES]
        if len(batch) < MIN_ENGINE_MEMORIES or not ctx.checkpoint():
            return
        memories = [(r["id"], r["created_at"][:10], deps.memory.get(user, r["id"]).content) for r in reversed(batch)]
        given = [m[0] for m in memories]
        try:
            proposals, dropped = engine.propose(memories, on_call=lambda: ctx.emit("llm_call", calls=1))
        except EngineFailed as exc:
            ctx.fail(Operation.HYPOTHESIS_GENERATED, f"rem:engine:{ctx.session.id}:{ctx.cycle}",
                     {"step": self.name, "memories_given": given}, str(exc))
            return
        threshold = deps.settings.rem.hypothesis_confidence_threshold
        for proposal in proposals:
            if proposal.kind == "hypothesis" and proposal.confidence < threshold:
                log.info("dream REM: a hypothesis at confidence %.2f (< %.2f) is not stored", proposal.confidence,
                         threshold)
                continue
            if not _record_proposal(ctx, proposal, given, dropped):
                return


def _record_proposal(ctx: PhaseContext, proposal: Proposal, given: list[str], dropped: int) -> bool:
    deps = ctx.deps
    itype = InsightType.HYPOTHESIS if proposal.kind == "hypothesis" else InsightType.SUGGESTION
    op = Operation.HYPOTHESIS_GENERATED if itype is InsightType.HYPOTHESIS else Operation.SUGGESTION_CREATED
    key = insight_key(deps, itype, *proposal.sources, proposal.title)
    details = _insight_details(itype, proposal.title, proposal.content, proposal.confidence, list(proposal.sources),
                               engine={"memories_given": given, "items_dropped": dropped})
    done = ctx.record(op, key, details, memories=list(proposal.sources))
    return not (done is None and ctx.exhausted)


REM_STEPS: list[Step] = [EvidenceStep(), PatternStep(), ConnectionStep(), EngineStep()]


# --- appliers -----------------------------------------------------------------------------------


@applier(Operation.PATTERN_DETECTED)
@applier(Operation.HYPOTHESIS_GENERATED)
@applier(Operation.SUGGESTION_CREATED)
def apply_insight(deps: DreamDeps, entry: JournalEntry) -> Applied:
    """Store the insight the entry describes (embedded; idempotent by the entry's key)."""
    d = entry.details
    if "evidence" in d:
        return _apply_evidence(deps, entry)
    itype = InsightType(d["insight_type"])
    vector = deps.memory.embedder.embed([f"{d['title']}. {d['content']}"])[0]
    insight, new = deps.store.add_insight(entry.user_id, itype, d["title"], d["content"], d["confidence"],
                                          d["sources"], entry.key, session_id=entry.session_id, embedding=vector)
    return Applied(after=insight.to_json(), details={**d, "insight_id": insight.id}, count=1 if new else 0,
                   extra={"insight_type": itype.value, "insight_id": insight.id})


def _apply_evidence(deps: DreamDeps, entry: JournalEntry) -> Applied:
    """Set the hypothesis's confidence and evidence count to the entry's after values (a replay sets
    them again: nothing counts twice). A hypothesis that is no longer active is left as it is."""
    ev = entry.details["evidence"]
    insight = deps.store.insight(entry.user_id, ev["insight_id"])
    extra = {"insight_type": InsightType.HYPOTHESIS.value, "insight_id": insight.id, "evidence": 0}
    if insight.status is not InsightStatus.ACTIVE:
        return Applied(after={"status": insight.status.value, "skipped": "not active"}, count=0, extra=extra)
    insight = deps.store.update_insight(insight, confidence=ev["confidence_after"],
                                        evidence_count=ev["evidence_count_after"], evidence=True)
    extra["evidence"] = len(ev["memory_ids"])
    return Applied(after={"confidence": insight.confidence, "evidence_count": insight.evidence_count,
                          "last_evidence_at": insight.last_evidence_at}, count=0, extra=extra)
