"""Temporal grounding (assistant/memory/temporal.py) and its use by hybrid search
(HybridWeights.date / when), and session diversity (HybridWeights.diversity)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from assistant.config import MemorySettings
from assistant.crypto import open_sealer
from assistant.embeddings.hashing import HashingEmbedder
from assistant.memory.records import HybridWeights
from assistant.memory.store import MemoryStore, NewMemory
from assistant.memory.temporal import asks_when, in_window, memory_day, mentions_time, question_window
from assistant.storage.db import Database


@pytest.mark.parametrize(
    ("question", "window"),
    [
        ("What dish did Nate make on 9 November, 2022?", (date(2022, 11, 6), date(2022, 11, 16))),
        ("What movie did Nate watch on October 6, 2022?", (date(2022, 10, 3), date(2022, 10, 13))),
        ("What book did Tim finish on 8th December, 2023?", (date(2023, 12, 5), date(2023, 12, 15))),
        ("Where was John between August 11 and August 15 2023?", (date(2023, 8, 8), date(2023, 8, 22))),
        ("What inspired Joanna in July 2022?", (date(2022, 7, 1), date(2022, 8, 7))),
        ("What did she learn in December 2023?", (date(2023, 12, 1), date(2024, 1, 7))),
        ("What kind of deal did John get in December?", (12, None)),
        ("What might Melanie do next?", None),
        ("Who may come to the party?", None),
        ("", None),
    ],
)
def test_question_window(question: str, window: object) -> None:
    assert question_window(question) == window


def test_memory_day_reads_the_opening_date_or_the_creation_day() -> None:
    assert memory_day("On 8 May 2023, Caroline said: hi") == date(2023, 5, 8)
    assert memory_day("On 31 February 2023, X said: hi") is None  # no such day
    assert memory_day("I live in Berlin", "2024-06-01T10:00:00Z") == date(2024, 6, 1)
    assert memory_day("I live in Berlin", "not a date") is None
    assert memory_day("I live in Berlin") is None


def test_in_window() -> None:
    window = (date(2023, 5, 1), date(2023, 5, 31))
    assert in_window(date(2023, 5, 8), window) and not in_window(date(2023, 6, 8), window)
    assert in_window(date(2021, 12, 3), (12, None)) and not in_window(date(2021, 11, 3), (12, None))
    assert not in_window(None, window) and not in_window(date(2023, 5, 8), None)


def test_asks_when_and_mentions_time() -> None:
    assert asks_when("When did Caroline go to the support group?")
    assert asks_when("How long ago was Caroline's 18th birthday?")
    assert asks_when("What year did John start surfing?")
    assert not asks_when("What did Caroline do when she was young?")
    assert mentions_time("On 8 May 2023, Caroline said: I went to a support group yesterday.")
    assert mentions_time("We went camping two weeks ago")
    assert mentions_time("That roadtrip last weekend was insane")
    assert not mentions_time("On 8 May 2023, Caroline said: I love painting.")  # the opening date is not it


# --- in hybrid search ------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path):  # noqa: ANN201
    db = Database(tmp_path / "memory.db")
    yield MemoryStore(db, open_sealer(db, tmp_path / "k"), HashingEmbedder(384),
                      MemorySettings(embedding_backend="hashing"))
    db.close()


def _ids(found) -> list[str]:  # noqa: ANN001
    return [s.memory.content for s in found]


def test_date_weight_lifts_the_memories_of_the_named_days(store: MemoryStore) -> None:
    store.add_many("u", [NewMemory("On 9 November 2023, Ada said: I baked a lemon cake for the party."),
                         NewMemory("On 12 November 2022, Ada said: I baked a cake last week.")])
    question = "What cake did Ada bake on 9 November, 2022?"
    store.hybrid = HybridWeights(date=0.0, when=0.0)
    plain = {s.memory.content: s for s in store.search("u", question, 2, mode="hybrid", rank_by="similarity")}
    store.hybrid = HybridWeights(date=0.5)
    found = store.search("u", question, 2, mode="hybrid", rank_by="similarity")
    assert found[0].memory.content.startswith("On 12 November 2022")  # in the window 6-16 November 2022
    for hit in found:
        bonus = 0.5 if hit.memory.content.startswith("On 12 November 2022") else 0.0
        assert hit.score == pytest.approx(plain[hit.memory.content].score + bonus)
        assert hit.fused == pytest.approx(plain[hit.memory.content].fused)  # the memory's own match


def test_grounding_is_on_by_default() -> None:
    assert HybridWeights().date > 0 and HybridWeights().when > 0 and HybridWeights().diversity == 0


def test_when_weight_lifts_a_memory_that_places_the_event_in_time(store: MemoryStore) -> None:
    store.add_many("u", [NewMemory("On 2 March 2023, Ben said: the marathon was a great marathon experience."),
                         NewMemory("On 9 March 2023, Ben said: I ran the marathon last weekend.")])
    question = "When did Ben run the marathon?"
    store.hybrid = HybridWeights(when=0.0)
    assert _ids(store.search("u", question, 2, mode="hybrid", rank_by="similarity"))[0].startswith("On 2 March")
    store.hybrid = HybridWeights(when=0.5)
    assert _ids(store.search("u", question, 2, mode="hybrid", rank_by="similarity"))[0].startswith("On 9 March")
    # not a "when" question: no change
    other = store.search("u", "Did Ben like the marathon?", 2, mode="hybrid", rank_by="similarity")
    assert all(s.score == pytest.approx(s.fused) or s.score > s.fused for s in other)


def test_diversity_spreads_the_top_over_conversations(store: MemoryStore) -> None:
    store.add_many("u", [NewMemory("violin lessons violin", conversation_id="s1"),
                         NewMemory("violin practice violin", conversation_id="s1"),
                         NewMemory("violin concert", conversation_id="s2")])
    store.hybrid = HybridWeights(context=0.0)
    plain = [s.memory.conversation_id for s in store.search("u", "violin", 3, mode="hybrid", rank_by="similarity")]
    assert plain[:2] == ["s1", "s1"]
    store.hybrid = HybridWeights(context=0.0, diversity=0.5)
    spread = [s.memory.conversation_id for s in store.search("u", "violin", 3, mode="hybrid", rank_by="similarity")]
    assert spread[:2] == ["s1", "s2"]
