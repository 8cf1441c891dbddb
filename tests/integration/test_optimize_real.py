"""Retrieval-parameter optimisation with the real MiniLM on a slice of LoCoMo (the cold start), the optuna
study in its SQLite file, and optuna's plots of it (plotly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.config import MemorySettings
from assistant.config.extended import OptimizationSettings
from assistant.config.night import SanitationSettings
from assistant.crypto import Sealer
from assistant.learning.optimize import Optimizer
from assistant.learning.optimize_locomo import locomo_slice as slice_dataset
from assistant.learning.optimize_store import OptimizationStore
from assistant.memory.evaluation import default_path
from assistant.memory.store import MemoryStore
from assistant.storage.db import Database

SESSIONS = 3  # per conversation: a small slice keeps the embedding short


def locomo_slice(tmp_path: Path) -> Path:
    source = default_path()  # ../shared/benchmarks, next to the clone in CI: missing is a failure, not a skip
    assert source.exists(), f"the LoCoMo dev set is not here ({source}): ../shared/benchmarks is missing"
    return slice_dataset(source, tmp_path / "locomo_slice.json", conversations=2, sessions=SESSIONS)


def test_a_cold_start_study_with_minilm_and_its_plots(tmp_path: Path, minilm) -> None:  # noqa: ANN001
    db = Database(tmp_path / "assistant.db")
    try:
        memory = MemoryStore(db, Sealer(None), minilm, MemorySettings())
        optimizer = Optimizer(OptimizationSettings(enabled=True, dataset_path=locomo_slice(tmp_path), seed=11,
                                                   max_iterations=12), tmp_path, OptimizationStore(db), memory,
                              sanitation=SanitationSettings())
        memory.tuning = optimizer
        status = optimizer.run("researcher")
        run = status["run"]
        assert run["state"] == "completed" and run["source"] == "locomo" and run["trials_done"] == 12
        assert run["cases_tuning"] > 0 and run["cases_validation"] > 0
        assert 0.0 < run["baseline_score"] <= 1.0  # MiniLM finds some evidence with the defaults
        total, trials = optimizer.history("researcher", limit=100)
        assert total == 12
        if status["applied"] is not None:  # applied only when better on the held-out conversation
            assert status["applied"]["validation_score"] > run["baseline_validation"]
            assert memory.params_for("researcher").flat() == pytest.approx(status["current"])
        assert memory.params_for("someone else") == optimizer.defaults()
        assert (tmp_path / "optuna.db").exists()

        import optuna

        study = optimizer.study("researcher")
        assert len(study.trials) == 12
        history = optuna.visualization.plot_optimization_history(study)
        importances = optuna.visualization.plot_param_importances(study)
        assert history.data and importances.data
        assert set(importances.data[0].y) <= {"rag_threshold", "rag_limit", "similarity_weight", "importance_weight",
                                              "freshness_weight", "dense_weight", "context_weight", "decay_factor"}
    finally:
        db.close()
