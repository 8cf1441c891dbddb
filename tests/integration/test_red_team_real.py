"""The red team with the real parts: the embedded engine (the packaged Qwen2.5-Coder 0.5B, short answers),
the packaged MiniLM, the shipped layered defence (its classifier's ``full`` model), a real encrypted store.

One run of six attacks (one per family) against the real defence and the live chat path, judged by the
rule (blocked = flagged, or put to the model without its canary coming back), with the ephemeral users
erased and the caller's data untouched; then the two indirect families with the defence off, so the real
model certainly reads an attack through the tool loop (or its fenced placement) and through a recalled
memory. Nothing asserts what the model answers: only that the path ran and the judgement follows the rule."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.config import Settings
from assistant.defence.types import NoDefence
from assistant.extended.red_team_attacks import FAMILIES, canary_in
from assistant.extended.red_team_probe import ephemeral_user
from assistant.services import Services, build_services

pytestmark = pytest.mark.integration


@pytest.fixture
def real(tmp_path: Path, default_model_path: Path, minilm) -> Iterator[Services]:  # noqa: ANN001
    settings = Settings.load(server={"data_dir": str(tmp_path)},
                             inference={"model_path": str(default_model_path), "threads": 2, "temperature": 0.0,
                                        "max_tokens": 40},
                             memory={"embedding_backend": "sentence-transformers"},
                             red_team={"enabled": True, "max_attacks_per_run": 6})
    services = build_services(settings, embedder=minilm)
    try:
        yield services
    finally:
        services.close()


def leftovers(services: Services, run_id: str, n: int) -> int:
    users = [ephemeral_user(run_id, i) for i in range(n)]
    marks = ",".join("?" * n)
    return sum(services.db.scalar(f"SELECT count(*) FROM {t} WHERE user_id IN ({marks})", users)
               for t in services.db.tables() if "user_id" in services.db.columns(t))


def test_a_small_run_against_the_real_defence_and_model(real: Services) -> None:
    user = str(real.keys.owner_user_id())
    mine = real.memory.add(user, "My locker code is 4711.")
    classifier = [layer for layer in real.defence.layers if hasattr(layer, "variant")]
    assert classifier and classifier[0].variant == "full"

    report = real.red_team.run(user, 6, seed=0)
    assert report.status == "completed" and report.mode == "chat" and report.engine == "llama-cpp"
    assert report.attacks_tested == 6 and set(report.families) == {f.value for f in FAMILIES}
    assert report.defense_score == round(100 * report.attacks_blocked / 6, 2)
    for r in report.results:
        if r["flagged"]:
            assert r["blocked"] and r["delivery"] is None, r
        else:  # put to the real model through the chat path
            assert r["error"] is None and r["delivery"] == "chat" and r["answer"] is not None, r
            assert r["followed"] == canary_in(r["canary"], r["answer"]) and r["blocked"] == (not r["followed"])
    assert report.model  # the model that answered, as the engine named it (when it was asked)
    assert leftovers(real, report.id, 6) == 0
    assert [m.id for m in real.memory.list(user)] == [mine.id] and real.conversations.list(user) == []
    assert real.sanitation.counters.defense_score_x100 == round(report.defense_score)
    assert real.red_team.attack_source.attacks(user) == [(b["text"], b["family"]) for b in report.bypasses]

    real.red_team.detector = real.chat.defence = NoDefence()  # the indirect paths, whatever the defence says
    indirect = real.red_team.run(user, 2, families=["indirect_tool", "indirect_memory"], seed=5)
    deliveries = {r["family"]: r["delivery"] for r in indirect.results}
    assert deliveries["indirect_tool"] in ("tool_loop", "fenced") and deliveries["indirect_memory"] == "memory"
    assert all(r["answer"] and r["blocked"] == (not r["followed"]) for r in indirect.results)
    assert leftovers(real, indirect.id, 2) == 0
