"""benchmarks/locomo_recall.py --cv end to end on five tiny synthetic conversations written here (the
real data set is CC BY-NC and is not read by tests), with the hashing embedder: seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import locomo_methods, locomo_recall


def _sample(n: int) -> dict:
    return {
        "sample_id": f"conv-{n}",
        "conversation": {
            "speaker_a": "Ada", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ada", "dia_id": "D1:1", "text": f"I adopted a kitten called Pixel{n} yesterday."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Which vet will you take her to?"},
                {"speaker": "Ada", "dia_id": "D1:3", "text": "The clinic on Harbour Street."},
            ],
            "session_2_date_time": "10:00 am on 2 June, 2023",
            "session_2": [
                {"speaker": "Ben", "dia_id": "D2:1", "text": "I ran the Riverside marathon last weekend."},
                {"speaker": "Ada", "dia_id": "D2:2", "text": "My trumpet exam went well too."},
                {"speaker": "Ben", "dia_id": "D2:3", "text": "Great news all round."},
            ],
        },
        "qa": [
            {"question": f"What is the name of Ada's kitten Pixel{n}?", "answer": "x", "evidence": ["D1:1"],
             "category": 4},
            {"question": "When did Ben run the Riverside marathon?", "answer": "x", "evidence": ["D2:1"],
             "category": 2},
            {"question": "Which pets and exams does Ada have?", "answer": "x", "evidence": ["D1:1", "D2:2"],
             "category": 1},
        ],
    }


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_synthetic.json"
    path.write_text(json.dumps([_sample(n) for n in range(5)]))
    return path


def test_cv_reports_held_out_recall_per_method(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = locomo_recall.main(["--cv", "--data", str(data), "--embedder", "hashing", "--json",
                               "--methods", "hybrid@defaults,temporal,keyword"])
    assert code == 0
    out = capsys.readouterr().out
    assert "held-out (CV)" in out and "tuned on all 5" in out
    report = json.loads(out.strip().splitlines()[-1])
    assert report["benchmark"] == "locomo_recall_cv" and report["splits"] == 10 and report["tune"] == 3
    assert set(report["methods"]) == {"hybrid@defaults", "temporal", "keyword"}
    for figures in report["methods"].values():
        held = figures["held_out"]
        assert set(held) == {"1 multi-hop", "2 temporal", "4 single-hop", "all"}
        assert all(0.0 <= v <= 1.0 for v in held.values())
        assert len(figures["chosen"]) == 10
    temporal = report["methods"]["temporal"]
    assert {"date", "when"} <= set(temporal["best_on_all"])


def test_cv_rejects_unknown_methods_and_too_few_conversations(data: Path) -> None:
    assert locomo_recall.main(["--cv", "--data", str(data), "--embedder", "hashing", "--methods", "nope"]) == 2
    assert locomo_recall.main(["--cv", "--data", str(data), "--embedder", "hashing", "--conversations", "3"]) == 2


def test_every_method_has_a_grid() -> None:
    for name, make in locomo_methods.methods().items():
        method = make()
        assert method.name == name and len(method.grid) >= 1


def test_plain_run_reports_the_chosen_modes(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert locomo_recall.main(["--data", str(data), "--embedder", "hashing", "--modes", "dense,hybrid", "--json",
                               "--conversations", "2"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(report["overall"]) == {"dense", "hybrid"} and report["conversations"] == 2
    assert locomo_recall.main(["--data", str(data), "--embedder", "hashing", "--modes", "graph"]) == 2
