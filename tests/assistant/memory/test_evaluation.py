"""The LoCoMo evaluation module on a tiny synthetic conversation written here (the real data set is
CC BY-NC and is never read by the unit tests): loading, evidence normalisation, how a turn is
stored, recall@k, and ``evaluate`` end to end on real SQLite with the hashing embedder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from assistant.config import MemorySettings
from assistant.crypto import open_sealer
from assistant.embeddings.hashing import HashingEmbedder
from assistant.memory import evaluation
from assistant.memory.evaluation import Turn, day_of, memory_text, normalise_evidence, recall_at
from assistant.memory.store import MemoryStore
from assistant.storage.db import Database

SAMPLE = {
    "sample_id": "conv-test",
    "conversation": {
        "speaker_a": "Ada",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ada", "dia_id": "D1:1", "text": "Hi Ben! I adopted a grey kitten called Pixel yesterday."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! Which vet will you take her to?"},
            {"speaker": "Ada", "dia_id": "D1:3", "text": "The clinic on Harbour Street, they are very kind."},
        ],
        "session_2_date_time": "10:00 am on 2 June, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "I finally ran the Riverside marathon in four hours."},
            {"speaker": "Ada", "dia_id": "D2:2", "text": "Amazing, and my trumpet exam went well too."},
        ],
    },
    "qa": [
        {"question": "What is the name of Ada's kitten?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
        {"question": "When did Ben run the Riverside marathon?", "answer": "June 2023", "evidence": ["D2:1"],
         "category": 2},
        {"question": "Which pets and exams does Ada have?", "answer": "a kitten; trumpet",
         "evidence": ["D1:1; D2:2"], "category": 1},
        {"question": "What instrument does Ada play?", "answer": "trumpet", "evidence": ["D:2:02"], "category": 3},
        {"question": "What did Ada say about the dog?", "adversarial_answer": "nothing", "evidence": ["D1:3"],
         "category": 5},
        {"question": "A question without evidence?", "answer": "-", "evidence": [], "category": 4},
    ],
}


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_synthetic.json"
    path.write_text(json.dumps([SAMPLE, {**SAMPLE, "sample_id": "conv-two"}]))
    return path


@pytest.fixture
def stores() -> Iterator[list[MemoryStore]]:
    made: list[MemoryStore] = []
    yield made
    for store in made:
        store.db.close()


def factory(tmp_path: Path, made: list[MemoryStore]):  # noqa: ANN201
    def make() -> MemoryStore:
        path = tmp_path / f"store-{len(made)}"
        path.mkdir()
        db = Database(path / "memory.db")
        store = MemoryStore(db, open_sealer(db, path / "memory.key"), HashingEmbedder(384),
                            MemorySettings(embedding_backend="hashing"))
        made.append(store)
        return store

    return make


# --- evidence, loading, memory text ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (["D8:6; D9:17"], ("D8:6", "D9:17")),
        (["D:11:26"], ("D11:26",)),
        (["D30:05"], ("D30:5",)),
        (["D1:3", "D1:3", "D2:1"], ("D1:3", "D2:1")),
        ([], ()),
    ],
)
def test_normalise_evidence(raw: list[str], expected: tuple[str, ...]) -> None:
    assert normalise_evidence(raw) == expected


def test_load_reads_sessions_in_order_with_their_dates(data_file: Path) -> None:
    conversations = evaluation.load(data_file)
    assert [c.sample_id for c in conversations] == ["conv-test", "conv-two"]
    assert evaluation.load(data_file, conversations=1)[0].sample_id == "conv-test"
    turns = conversations[0].turns
    assert [t.dia_id for t in turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert [t.session for t in turns] == [1, 1, 1, 2, 2]
    assert turns[0].session_date == "1:56 pm on 8 May, 2023"
    assert turns[3].speaker == "Ben"
    questions = conversations[0].questions
    assert len(questions) == 6
    assert questions[2].evidence == ("D1:1", "D2:2")
    assert questions[3].evidence == ("D2:2",)
    assert questions[5].evidence == ()
    assert [q.category for q in questions] == [4, 2, 1, 3, 5, 4]


def test_day_of_drops_the_time_of_day() -> None:
    assert day_of("1:56 pm on 8 May, 2023") == "8 May 2023"
    assert day_of("10:00 am on 02 June, 2023") == "2 June 2023"
    assert day_of("last Tuesday") == "last Tuesday"
    assert day_of("") == ""


def test_memory_text_has_speaker_and_day() -> None:
    turn = Turn("D1:1", "Ada", "I adopted a kitten.", "1:56 pm on 8 May, 2023", 1)
    assert memory_text(turn) == "On 8 May 2023, Ada said: I adopted a kitten."
    assert memory_text(turn, dated=False) == "Ada: I adopted a kitten."
    assert memory_text(Turn("D1:1", "Ada", "Hi.", "")) == "Ada: Hi."
    assert "D1:1" not in memory_text(turn)  # the evidence id never reaches the store


def test_recall_at() -> None:
    assert recall_at(["a", "b", "c"], ["b"], 1) == 0.0
    assert recall_at(["a", "b", "c"], ["b"], 2) == 1.0
    assert recall_at(["a", "b", "c"], ["a", "z"], 5) == 0.5
    assert recall_at(["a"], [], 5) == 0.0


# --- evaluate end to end ---------------------------------------------------------------------------------


def test_evaluate_returns_recall_per_mode_and_category(data_file: Path, tmp_path: Path,
                                                       stores: list[MemoryStore]) -> None:
    conversations = evaluation.load(data_file, conversations=1)
    seen = []
    table = evaluation.evaluate(factory(tmp_path, stores), conversations,
                                progress=lambda it: (seen.append(1), it)[1])
    assert seen == [1]
    assert isinstance(table, pd.DataFrame)
    assert list(table.columns) == ["mode", "category", "R@1", "R@5", "R@10"]
    assert set(table["mode"]) == set(evaluation.MODES)
    # categories 1-4 (5 left out by default) plus the overall row, per mode
    for mode in evaluation.MODES:
        cats = table[table["mode"] == mode]["category"].tolist()
        assert sorted(cats) == ["1 multi-hop", "2 temporal", "3 open-domain", "4 single-hop", "all 1-2-3-4"]
    values = table[["R@1", "R@5", "R@10"]].to_numpy()
    assert ((values >= 0) & (values <= 1)).all()
    # with five memories every evidence turn is in the top 5 and top 10
    assert (table["R@5"] == 1.0).all() and (table["R@10"] == 1.0).all()
    # the marathon question names its words: the keyword search puts its turn first
    row = table[(table["mode"] == "keyword") & (table["category"] == "2 temporal")]
    assert row["R@1"].item() == 1.0
    # the overall row is the mean over the four questions with evidence
    overall = table[(table["mode"] == "keyword") & (table["category"] == "all 1-2-3-4")]
    per_question = table[(table["mode"] == "keyword") & (table["category"] != "all 1-2-3-4")]["R@1"]
    assert overall["R@1"].item() == pytest.approx(per_question.mean())


def test_evaluate_stores_each_turn_with_its_session_as_the_conversation(data_file: Path, tmp_path: Path,
                                                                         stores: list[MemoryStore]) -> None:
    conversations = evaluation.load(data_file)
    evaluation.evaluate(factory(tmp_path, stores), conversations, modes=("hybrid",))
    assert len(stores) == 2  # a fresh store per conversation
    store = stores[0]
    memories = sorted(store.list("conv-test"), key=lambda m: m.content)
    assert len(memories) == 5
    contents = {m.content for m in memories}
    assert "On 8 May 2023, Ada said: Hi Ben! I adopted a grey kitten called Pixel yesterday." in contents
    assert "On 2 June 2023, Ben said: I finally ran the Riverside marathon in four hours." in contents
    by_text = {m.content.split(": ", 1)[1]: m.conversation_id for m in memories}
    assert by_text["The clinic on Harbour Street, they are very kind."] == "conv-test/session-1"
    assert by_text["Amazing, and my trumpet exam went well too."] == "conv-test/session-2"


def test_evaluate_options(data_file: Path, tmp_path: Path, stores: list[MemoryStore]) -> None:
    conversations = evaluation.load(data_file, conversations=1)
    summary, per_question = evaluation.evaluate(
        factory(tmp_path, stores), conversations, modes=("dense", "keyword"), ks=(1, 3), categories=(4, 5),
        text=lambda t: f"{t.speaker}: {t.text}", sessions_as_conversations=False, details=True,
    )
    assert list(summary.columns) == ["mode", "category", "R@1", "R@3"]
    assert set(summary["category"]) == {"4 single-hop", "5 adversarial", "all 4-5"}
    assert set(per_question["mode"]) == {"dense", "keyword"}
    assert len(per_question) == 2 * 2  # two questions with evidence in categories 4 and 5, two modes
    memories = stores[0].list("conv-test")
    assert all(m.conversation_id is None for m in memories)
    assert all(not m.content.startswith("On ") for m in memories)


def test_evaluate_runs_setup_once_per_stored_conversation(data_file: Path, tmp_path: Path,
                                                          stores: list[MemoryStore]) -> None:
    seen: list[evaluation.Prepared] = []
    evaluation.evaluate(factory(tmp_path, stores), evaluation.load(data_file), modes=("hybrid",), setup=seen.append)
    assert [p.sample_id for p in seen] == ["conv-test", "conv-two"]
    assert all(p.store.count(p.user) == 5 and len(p.questions) == 4 for p in seen)


def test_a_merged_memory_counts_for_all_its_sources_turns(data_file: Path, tmp_path: Path,
                                                          stores: list[MemoryStore]) -> None:
    [conv] = evaluation.load(data_file, conversations=1)
    p = evaluation.prepare(factory(tmp_path, stores)(), conv)
    by_dia = {d: m for m, d in p.dia_of.items()}
    merged = p.store.add(p.user, "Ada adopted a kitten called Pixel; her trumpet exam went well.")
    evaluation.add_merged(p, {merged.id: [by_dia["D1:1"], by_dia["D2:2"]]})
    assert evaluation.dias_of(p, merged.id) == ("D1:1", "D2:2")
    assert evaluation.dias_of(p, by_dia["D1:3"]) == ("D1:3",)
    p.store.delete(p.user, by_dia["D1:1"])
    p.store.delete(p.user, by_dia["D2:2"])
    rows = evaluation.score(p, ("keyword",), (1,))
    multi = next(r for r in rows if r["category"] == 1)
    assert multi["R@1"] == 1.0  # the one merged memory holds both evidence turns
    summary = evaluation.summarise(rows, (1,))
    assert set(summary["mode"]) == {"keyword"}
