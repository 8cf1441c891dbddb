"""Fakes of distillation's teacher and training pipeline (unit and API tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from uuid import uuid4

from assistant.learning.distill_teacher import Outcome, TeacherAnswer, TeacherIdentity
from assistant.learning.types import RunState, TrainingSample

TEACHER = TeacherIdentity("openai_compatible", "big-teacher", "http://gpu-box:8000")


class FakeTeacher:
    """Answers ``A: <prompt>``; prompts in ``fail`` fail, in ``flag`` are flagged; ``gate`` (if set) is waited on
    before each answer, so a test can look at a run mid-way."""

    def __init__(self, fail: set[str] | None = None, flag: set[str] | None = None,
                 gate: threading.Semaphore | None = None):
        self.identity = TEACHER
        self.fail, self.flag, self.gate = fail or set(), flag or set(), gate
        self.asked: list[str] = []
        self.closed = False

    def answer(self, prompt: str, cancelled: Callable[[], bool]) -> TeacherAnswer:
        if self.gate is not None:
            while not self.gate.acquire(timeout=0.01):
                if cancelled():
                    return TeacherAnswer(Outcome.CANCELLED)
        self.asked.append(prompt)
        if prompt in self.fail or "*" in self.fail:
            return TeacherAnswer(Outcome.FAILED, reason="the teacher answered HTTP 500")
        if prompt in self.flag:
            return TeacherAnswer(Outcome.FLAGGED, reason="the defence flagged the teacher's answer")
        return TeacherAnswer(Outcome.ANSWERED, f"A: {prompt}")

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeRun:
    id: str
    state: str = RunState.PREPARING.value
    fraction: float = 0.0
    error: str | None = None


class FakeTraining:
    """The training service's face to distillation: ``start`` records the samples; the test moves the run."""

    def __init__(self) -> None:
        self.started: list[tuple[str, list[TrainingSample]]] = []
        self.runs: dict[str, FakeRun] = {}
        self.owner: dict[str, str] = {}
        self.busy: dict[str, FakeRun] = {}
        self.cancelled: list[str] = []
        self.refuse: Exception | None = None

    def start(self, user_id: str, samples: list[TrainingSample]) -> FakeRun:
        if self.refuse is not None:
            raise self.refuse
        run = FakeRun(str(uuid4()))
        self.started.append((user_id, list(samples)))
        self.runs[run.id], self.owner[run.id] = run, user_id
        return run

    def get(self, user_id: str, run_id: str) -> FakeRun | None:
        return self.runs.get(run_id) if self.owner.get(run_id) == user_id else None

    def running(self, user_id: str) -> FakeRun | None:
        return self.busy.get(user_id)

    def cancel(self, user_id: str, run_id: str) -> None:
        self.cancelled.append(run_id)
        self.runs[run_id].state = RunState.CANCELLED.value

    def finish(self, state: RunState, reason: str | None = None) -> None:
        for run in self.runs.values():
            run.state, run.fraction, run.error = state.value, 1.0, reason
