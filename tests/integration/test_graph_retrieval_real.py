"""Graph-aware retrieval with the real parts: the packaged MiniLM embedder, a real SQLite file with
encryption on, the knowledge graph service wired by ``build_graph`` with ``memory.retrieval =
"hybrid+graph"``, and ``retrieve_for_prompt`` as chat calls it. The extractor is the scripted one
(capitalised words; the speaker of a turn added here) so that the graph is known exactly."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from assistant.config import Settings
from assistant.crypto import open_sealer
from assistant.embeddings.sentence_transformers import SentenceTransformerEmbedder
from assistant.graph.build import build_graph
from assistant.graph.retrieval import GraphExpander
from assistant.graph.types import Entity, Extraction, NodeKind, Passage
from assistant.memory.store import MemoryStore, NewMemory
from assistant.storage.db import Database
from assistant.testing.graph import ScriptedExtractor

pytestmark = pytest.mark.integration

USER = "caroline-and-melanie"
CHAT = [
    "On 25 May 2023, Caroline said: Do you play any instruments, Melanie?",
    "On 25 May 2023, Caroline said: I love the sound of instruments at concerts.",
    "On 25 May 2023, Melanie said: I carve out me-time each day: running, reading, or playing my violin.",
    "On 28 August 2023, Melanie said: Yeah, I play clarinet! Started when I was young.",
    "On 28 August 2023, Caroline said: Cool! What music do you play?",
    "On 2 September 2023, Melanie said: We went camping at the beach last weekend.",
]


class SpeakerExtractor(ScriptedExtractor):
    """The scripted extractor, plus the speaker of each turn as a person (as ``rules`` does)."""

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        out = super().extract(passages)
        return [Extraction(((Entity(p.speaker, NodeKind.PERSON),) if p.speaker else ()) + x.entities, x.facts)
                for p, x in zip(passages, out, strict=True)]


@pytest.fixture
def wired(tmp_path: Path) -> Iterator[tuple[MemoryStore, object]]:
    settings = Settings(memory={"retrieval": "hybrid+graph", "rag_threshold": 0.2})
    db = Database(tmp_path / "assistant.db")
    sealer = open_sealer(db, tmp_path / "memory.key")
    memory = MemoryStore(db, sealer, SentenceTransformerEmbedder(), settings.memory)
    graph = build_graph(settings, db, sealer, memory, None, extractor=SpeakerExtractor())  # type: ignore[arg-type]
    assert graph is not None and isinstance(memory.expander, GraphExpander)
    memory.add_many(USER, [NewMemory(t, conversation_id=f"s-{t[3:15]}") for t in CHAT])
    assert graph.wait_idle()
    yield memory, graph
    graph.close()
    db.close()


def test_what_the_named_person_said_ranks_first(wired) -> None:  # noqa: ANN001
    memory, graph = wired
    question = "What instruments does Melanie play?"
    hybrid = [h.memory.content for h in memory.search(USER, question, 3, mode="hybrid", rank_by="similarity")]
    found = memory.search(USER, question, 3, mode="hybrid+graph", rank_by="similarity")
    ranked = [h.memory.content for h in found]
    # hybrid alone prefers Caroline's turns that share the question's words; the graph's speaker term
    # brings up both of Melanie's answers (violin, clarinet)
    assert sum("Melanie said" in t for t in ranked) > sum("Melanie said" in t for t in hybrid), (hybrid, ranked)
    assert any("clarinet" in t for t in ranked) and any("violin" in t for t in ranked)
    assert all(a.score >= b.score for a, b in zip(found, found[1:], strict=False))
    # the nodes were resolved through the real embedder's vectors and the sealed store
    assert {n.name for n, _ in graph.search(USER, "Melanie", 3)} >= {"Melanie"}


def test_retrieve_for_prompt_goes_through_the_graph(wired) -> None:  # noqa: ANN001
    memory, _ = wired
    context, used = memory.retrieve_for_prompt(USER, "Which instruments does Melanie play?")
    assert used and any("clarinet" in m.memory.content for m in used)
    assert "clarinet" in context
