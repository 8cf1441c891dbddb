"""The training pipeline as distillation sees it: a small Protocol (fakes in unit tests) and the link to the
training service (:class:`assistant.learning.service.TrainingService`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from assistant.errors import ConflictError, NotFoundError
from assistant.learning.types import TrainingSample

if TYPE_CHECKING:
    from assistant.learning.service import TrainingService


class TrainingRunView(Protocol):
    """What distillation reads of a training run."""

    @property
    def id(self) -> str: ...

    @property
    def state(self) -> str: ...  # a RunState value

    @property
    def fraction(self) -> float: ...  # its progress, 0..1

    @property
    def error(self) -> str | None: ...  # why it failed or was rejected


class TrainingRuns(Protocol):
    """The training pipeline as distillation uses it (the training service, through a thin link)."""

    def start(self, user_id: str, samples: list[TrainingSample]) -> TrainingRunView: ...

    def get(self, user_id: str, run_id: str) -> TrainingRunView | None: ...

    def running(self, user_id: str) -> TrainingRunView | None: ...

    def cancel(self, user_id: str, run_id: str) -> None: ...


class TrainingLink:
    """:class:`TrainingRuns` over the training service (:class:`assistant.learning.service.TrainingService`)."""

    def __init__(self, service: TrainingService):
        self.service = service

    def start(self, user_id: str, samples: list[TrainingSample]) -> TrainingRunView:
        return self.service.start(user_id, samples, source="distillation")

    def get(self, user_id: str, run_id: str) -> TrainingRunView | None:
        try:
            return self.service.get_run(user_id, run_id)
        except NotFoundError:
            return None

    def running(self, user_id: str) -> TrainingRunView | None:
        return self.service.current(user_id)

    def cancel(self, user_id: str, run_id: str) -> None:
        try:
            self.service.cancel(user_id, run_id)
        except ConflictError:  # it ended meanwhile: its end is what the run follows
            pass
