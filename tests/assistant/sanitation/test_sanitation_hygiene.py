"""Memory hygiene: which memories are judged, in batches, and the poisoned / stale / ok verdicts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from assistant.memory.types import MemoryType
from assistant.sanitation import hygiene
from assistant.sanitation.types import MemoryVerdict
from tests.assistant.sanitation.run_fakes import INJECTION, USER, make_world


def test_batches_skip_quarantined_and_dream_output_and_keep_archived(tmp_path: Path, monkeypatch) -> None:
    world = make_world(tmp_path, monkeypatch)
    ids = [world.add(f"Note {n}") for n in range(7)]
    world.add("A hypothesis", kind=MemoryType.HYPOTHESIS)
    world.add("An insight", kind=MemoryType.DREAM_INSIGHT)
    world.memory.quarantine(USER, ids[0], "poisoned: test")
    world.db.execute("UPDATE memories SET original_memory_type = memory_type, memory_type = 'Archived' WHERE id = ?",
                     (ids[1],))
    world.add("Bob's note", user="bob")
    batches = list(hygiene.batches(world.memory, USER, 5))
    assert [len(b) for b in batches] == [5, 1]
    assert [m.id for b in batches for _, m in b] == ids[1:]


def test_poisoned_before_stale_and_the_checkpoint_between_batches(tmp_path: Path, monkeypatch) -> None:
    world = make_world(tmp_path, monkeypatch)
    world.add(f"Meeting tomorrow at 9: {INJECTION}", days_ago=5)
    world.add("Meeting tomorrow at 9", days_ago=5)
    for n in range(9):
        world.add(f"Plain note number {n}")
    calls: list[int] = []
    now = datetime.fromtimestamp(world.clock.t, UTC)
    memories, judgements = hygiene.scan(world.memory, world.detector, USER, 5, now, lambda: calls.append(1))
    assert len(memories) == 11 and len(calls) == 2 and world.detector.calls == 11
    assert [j.verdict for j in judgements[:3]] == [MemoryVerdict.POISONED, MemoryVerdict.STALE, MemoryVerdict.OK]
    assert judgements[0].by == "defence:static" and judgements[1].by == "temporal"
    assert judgements[0].reason == "poisoned: static: an instruction to ignore previous instructions"


class _Scored:
    def __init__(self, layer, score: float) -> None:  # noqa: ANN001
        self.layer, self.score = layer, score

    def inspect(self, text, source=None, user_id=None):  # noqa: ANN001, ANN201
        from assistant.defence.types import Hit, Verdict

        return Verdict(True, self.score, (Hit(self.layer, "r", "why"),))


@pytest.mark.parametrize(("layer", "score", "verdict"), [
    ("classifier", 0.8, "ok"), ("classifier", 0.95, "poisoned"), ("static", 0.6, "poisoned"),
    ("normalisation", 0.7, "poisoned")])
def test_the_classifier_alone_quarantines_only_when_it_is_sure(layer: str, score: float, verdict: str) -> None:
    from datetime import UTC, datetime

    from assistant.defence.types import Layer
    from assistant.memory.types import Memory, MemoryType
    from assistant.sanitation.hygiene import judge

    memory = Memory("m1", "u", "Find an adoption agency or lawyer.", "s", MemoryType.CONTEXT, 0.5,
                    created_at="2026-11-25T10:00:00Z")
    got = judge(memory, _Scored(Layer(layer), score), "u", datetime(2026, 11, 25, 12, tzinfo=UTC))
    assert got.verdict.value == verdict
