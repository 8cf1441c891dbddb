"""Leave-conversations-out cross-validation (assistant/memory/crossval.py): the grid, the choice on
the tuning side, the held-out average, and scoring a grid on real stores (hashing embedder)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from assistant.config import MemorySettings
from assistant.crypto import open_sealer
from assistant.embeddings.hashing import HashingEmbedder
from assistant.memory import crossval, evaluation
from assistant.memory.crossval import Method, configure_store, cross_validate, grid, score_grid, store_method
from assistant.memory.evaluation import Conversation, Question, Turn
from assistant.memory.records import HybridWeights
from assistant.memory.store import MemoryStore
from assistant.storage.db import Database


def test_grid_is_the_product_of_the_axes() -> None:
    assert grid(a=(1, 2), b=("x",)) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]
    assert len(grid(a=range(3), b=range(4), c=range(2))) == 24
    assert grid() == [{}]


def _rows(recall: dict[tuple[int, str], list[float]], category: int = 4) -> list[dict]:
    return [{"point": p, "sample_id": s, "category": category, "recall": r}
            for (p, s), values in recall.items() for r in values]


def test_the_point_is_chosen_on_the_tuning_side_and_measured_on_the_held_out_side() -> None:
    samples = ["a", "b", "c", "d", "e"]
    # point 0 is good on a, b, c and bad on d, e; point 1 is mediocre everywhere
    good = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.0, "e": 0.0}
    rows = _rows({(0, s): [good[s]] for s in samples} | {(1, s): [0.5] for s in samples})
    method = Method("m", [{"p": 0}, {"p": 1}], rank=lambda *a: [])
    result = cross_validate(rows, method, tune=3)
    splits = list(itertools.combinations(samples, 3))
    assert len(result.chosen) == len(splits) == 10
    expected = []
    for tuning in splits:
        held = [s for s in samples if s not in tuning]
        score0 = sum(good[s] for s in tuning) / 3
        if score0 >= 0.5:  # ties go to the earlier point
            expected.append(sum(good[s] for s in held) / 2)
        else:
            expected.append(0.5)
    assert result.held_out["all"] == pytest.approx(sum(expected) / len(expected))
    assert result.held_out["4 single-hop"] == pytest.approx(result.held_out["all"])
    # tuned on all five, point 0 (3/5 = 0.6) beats point 1 (0.5)
    assert result.best_full == {"p": 0} and result.full["all"] == pytest.approx(0.6)
    # the tuning side always looks at least as good as the held-out side here
    assert result.tuned["all"] >= result.held_out["all"]


def test_held_out_figures_are_per_category_and_questions_weigh_equally() -> None:
    rows = _rows({(0, s): [1.0, 0.0] for s in "abcde"}, category=1) + _rows({(0, s): [1.0] for s in "abcde"},
                                                                             category=2)
    result = cross_validate(rows, Method("m", [{}], rank=lambda *a: []), tune=3, categories=(1, 2))
    assert result.held_out == pytest.approx({"1 multi-hop": 0.5, "2 temporal": 1.0, "all": 2 / 3})
    frame = crossval.table([result])
    assert list(frame.index) == [("m", "held-out (CV)"), ("m", "tuned on all 5")]


# --- on real stores ---------------------------------------------------------------------------------------


def _conversation(n: int) -> Conversation:
    turns = (
        Turn("D1:1", "Ada", f"I adopted a kitten called Pixel{n}.", "1:56 pm on 8 May, 2023", 1),
        Turn("D1:2", "Ben", "Which vet will you use?", "1:56 pm on 8 May, 2023", 1),
        Turn("D2:1", "Ben", f"I ran the Riverside marathon number {n}.", "10:00 am on 2 June, 2023", 2),
    )
    questions = (Question(f"What is the name of Ada's kitten Pixel{n}?", ("D1:1",), 4),
                 Question("When did Ben run the Riverside marathon?", ("D2:1",), 2))
    return Conversation(f"conv-{n}", turns, questions)


@pytest.fixture
def prepared(tmp_path: Path):  # noqa: ANN201
    made = []
    out = []
    for n in range(5):
        path = tmp_path / f"s{n}"
        path.mkdir()
        db = Database(path / "memory.db")
        made.append(db)
        store = MemoryStore(db, open_sealer(db, path / "k"), HashingEmbedder(384),
                            MemorySettings(embedding_backend="hashing"))
        out.append(evaluation.prepare(store, _conversation(n)))
    yield out
    for db in made:
        db.close()


def test_score_grid_ranks_every_question_once_per_point_and_restores_the_store(prepared) -> None:  # noqa: ANN001
    method = store_method("hybrid", "hybrid", grid(context=(0.0, 0.3), b=(0.5, 0.75)))
    seen = []
    rows = score_grid(prepared, method, progress=lambda jobs: (seen.append(len(jobs)), jobs)[1])
    assert seen == [4 * 5]
    assert len(rows) == 4 * 5 * 2
    assert {r["point"] for r in rows} == {0, 1, 2, 3}
    assert all(0.0 <= r["recall"] <= 1.0 for r in rows)
    assert all(r["recall"] == 1.0 for r in rows)  # three memories: everything is in the top 5
    store = prepared[0].store
    assert store.hybrid == HybridWeights() and store.keywords.b == 0.5  # back to what it was
    result = cross_validate(rows, method)
    assert result.held_out["all"] == 1.0 and len(result.chosen) == 10


def test_configure_store_applies_hybrid_and_bm25_fields(prepared) -> None:  # noqa: ANN001
    store = prepared[0].store
    configure_store(store, {"dense": 0.7, "keyword": 0.3, "k1": 2.0, "other": 1})
    assert store.hybrid.dense == 0.7 and store.hybrid.context == HybridWeights().context
    assert store.keywords.k1 == 2.0 and store.keywords.b == 0.5
    configure_store(store, {"context": 0.0})
    assert store.hybrid == HybridWeights(context=0.0) and store.keywords.k1 == 1.2


def test_prepare_stores_the_turns_and_embeds_the_questions(prepared) -> None:  # noqa: ANN001
    p = prepared[0]
    assert p.sample_id == p.user == "conv-0"
    assert sorted(p.dia_of.values()) == ["D1:1", "D1:2", "D2:1"]
    assert len(p.questions) == 2 and p.vectors.shape == (2, 384)
    assert p.store.count("conv-0") == 3
