"""The training service with a fake trainer, scorer and converter: the state machine, the activation
rule, rejection and failure keeping the previous adapter, cancel, 409, min_samples, auto start, recovery."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

import pytest

from assistant.errors import ConflictError, NotFoundError, ServiceUnavailableError
from assistant.learning.evaluate import decide, regression_set, split
from assistant.learning.feedback import LabelledSample
from assistant.learning.runs import Run, RunStore
from assistant.learning.types import RunState, TrainingSample
from assistant.observability.signals import SignalKind
from assistant.services import Services
from tests.assistant.learning.training_support import FakeScorer, FakeTrainer, base_file, rate_many, use_fakes

ALICE, BOB = str(uuid4()), str(uuid4())
MIN = 4


@pytest.fixture
def make(make_services: Callable[..., Services], make_settings: Callable[..., object],
         tmp_path: Path) -> Callable[..., Services]:
    def build(**lora: object) -> Services:
        settings = make_settings(lora={"enabled": True, "min_samples": MIN, "auto_start": False,
                                       "base_model_path": str(base_file(tmp_path)), **lora})
        services = make_services(settings)
        use_fakes(services)
        return services

    return build


def finished(services: Services, user: str, run_id: str) -> Run:
    assert services.training is not None
    services.training.wait(30)
    return services.training.get_run(user, run_id)


def test_a_run_goes_through_its_states_and_activates_the_adapter(make: Callable[..., Services]) -> None:
    services = make()
    training = services.training
    assert training is not None
    seen: list[tuple[str, str, int]] = []
    training.subscribe(lambda run: seen.append((run.state.value, run.phase, run.step)))
    rate_many(services, ALICE, 6)
    run = training.start(ALICE)
    assert (run.state, run.phase, run.source) == (RunState.PREPARING, "queued", "feedback")
    done = finished(services, ALICE, run.id)
    assert done.state is RunState.ACTIVE, done.error
    states = [s for s, _, _ in seen]
    assert states[0] == "preparing" and states[-1] == "active"
    order = list(dict.fromkeys(states))
    assert order == ["preparing", "training", "evaluating", "active"]
    phases = list(dict.fromkeys(p for _, p, _ in seen))
    assert phases == ["queued", "preparing", "training", "converting", "smoke_check", "evaluating", "active"]
    assert done.losses == [2.0, 1.0, pytest.approx(0.666667)]
    assert done.samples + done.held_out == 6 and 1 <= done.held_out < 6  # 0.2 held back by hash, at least one
    trainer = training.trainer
    assert isinstance(trainer, FakeTrainer)
    assert trainer.calls[0]["rank"] == 8 and trainer.calls[0]["learning_rate"] == 0.0001
    assert len(trainer.calls[0]["samples"]) == done.samples
    adapter = training.active_adapter(ALICE)
    assert adapter is not None and adapter.run_id == run.id and adapter.samples == done.samples
    assert adapter.gguf_path == services.data_dir / "adapters" / ALICE / run.id / "adapter.gguf"
    assert training.active_gguf(ALICE) == adapter.gguf_path and adapter.gguf_path.is_file()
    assert training.active_gguf(BOB) is None
    assert done.metrics["decision"].startswith("better on the held-back feedback")
    assert done.metrics["smoke_answer"] == "Hello!"
    status = training.status(ALICE)
    assert status["state"] == "active" and status["active_adapter"].id == adapter.id
    assert status["samples"]["new_samples"] == 0 and status["samples"]["samples"] == 6


def test_training_progress_signals(make: Callable[..., Services]) -> None:
    services = make()
    assert services.training is not None
    got = []
    services.signals.subscribe(lambda s: got.append(s) if s.kind is SignalKind.TRAINING_PROGRESS else None)
    rate_many(services, ALICE, MIN)
    run = services.training.start(ALICE)
    finished(services, ALICE, run.id)
    steps = [s for s in got if s.data["phase"] == "training"]
    assert [(s.data["step"], s.data["total_steps"], s.value) for s in steps] == [(1, 3, 0.3333), (2, 3, 0.6667),
                                                                                 (3, 3, 1.0)]
    assert all(s.user_id == ALICE and s.data["run_id"] == run.id for s in got)
    assert got[-1].data["state"] == "active"
    # converting and evaluating keep the finished training steps; a decided run is complete
    after = [(s.data["phase"], s.data["step"], s.data["total_steps"]) for s in got if s.data["phase"] == "converting"]
    assert after and all(step == total == 3 for _, step, total in after)
    assert got[-1].value == 1.0 and services.training.get_run(ALICE, run.id).progress()["fraction"] == 1.0


def test_a_rejected_run_keeps_the_previous_adapter(make: Callable[..., Services]) -> None:
    services = make()
    training = services.training
    assert training is not None
    rate_many(services, ALICE, MIN)
    first = finished(services, ALICE, training.start(ALICE).id)
    assert first.state is RunState.ACTIVE
    # the new adapter is worse than the active one on the held-back feedback
    training.scorer = FakeScorer(held={"base": 2.0, "active": 1.4, "candidate": 1.5})
    rate_many(services, ALICE, MIN, start=100)
    second = finished(services, ALICE, training.start(ALICE).id)
    assert second.state is RunState.REJECTED
    assert "not better on the held-back feedback" in (second.error or "")
    assert training.active_adapter(ALICE).run_id == first.id  # type: ignore[union-attr]
    assert not (services.data_dir / "adapters" / ALICE / second.id).exists()
    assert (services.data_dir / "adapters" / ALICE / first.id / "adapter.gguf").is_file()
    assert training.scorer.calls[0][1].keys() == {"base", "active", "candidate"}  # type: ignore[attr-defined]


def test_worse_on_the_regression_set_is_rejected(make: Callable[..., Services]) -> None:
    services = make()
    assert services.training is not None
    services.training.scorer = FakeScorer(regression={"base": 1.0, "candidate": 1.06})  # above 1.0 x 1.05
    rate_many(services, ALICE, MIN)
    run = finished(services, ALICE, services.training.start(ALICE).id)
    assert run.state is RunState.REJECTED and "worse on the regression set" in (run.error or "")
    assert services.training.active_adapter(ALICE) is None


def test_a_failed_conversion_fails_the_run_and_changes_nothing(make: Callable[..., Services]) -> None:
    services = make()
    training = services.training
    assert training is not None
    rate_many(services, ALICE, MIN)
    first = finished(services, ALICE, training.start(ALICE).id)

    def broken(peft: Path, base: Path, out: Path) -> Path:
        raise RuntimeError("converter exploded")

    training.converter = broken
    rate_many(services, ALICE, MIN, start=50)
    run = finished(services, ALICE, training.start(ALICE).id)
    assert run.state is RunState.FAILED and run.error == "RuntimeError: converter exploded"
    assert training.active_adapter(ALICE).run_id == first.id  # type: ignore[union-attr]
    assert not (services.data_dir / "adapters" / ALICE / run.id).exists()
    # a failed run consumed nothing: its samples are still new for a manual start
    assert training.new_samples(ALICE) == MIN


def test_a_second_run_is_409_with_the_running_id_and_cancel_stops_it(make: Callable[..., Services]) -> None:
    services = make()
    training = services.training
    assert training is not None
    gate = threading.Event()
    trainer = FakeTrainer(gate=gate)
    training.trainer = trainer
    rate_many(services, ALICE, MIN)
    run = training.start(ALICE)
    assert trainer.started.wait(10)
    with pytest.raises(ConflictError) as caught:
        training.start(ALICE)
    assert caught.value.details["run_id"] == run.id
    with pytest.raises(ConflictError):
        training.start(ALICE, [TrainingSample(({"role": "user", "content": "q"},), "a", "distillation")] * MIN,
                       source="distillation")
    with pytest.raises(NotFoundError):
        training.cancel(BOB, run.id)
    assert training.current(ALICE).id == run.id  # type: ignore[union-attr]
    training.cancel(ALICE, run.id)
    done = finished(services, ALICE, run.id)
    assert done.state is RunState.CANCELLED and done.error == "cancelled by the user"
    assert training.active_adapter(ALICE) is None
    assert not (services.data_dir / "adapters" / ALICE / run.id).exists()
    with pytest.raises(ConflictError):
        training.cancel(ALICE, run.id)  # over: nothing to cancel
    gate.set()


def test_too_few_samples_is_a_precise_refusal(make: Callable[..., Services]) -> None:
    services = make()
    assert services.training is not None
    rate_many(services, ALICE, MIN - 1)
    with pytest.raises(ConflictError) as caught:
        services.training.start(ALICE)
    assert caught.value.message.startswith(f"not enough new training samples: {MIN - 1} since the last training run, "
                                           f"lora.min_samples is {MIN}")
    assert caught.value.details == {"reason": "not_enough_samples", "new_samples": MIN - 1, "samples": MIN - 1,
                                    "min_samples": MIN}
    with pytest.raises(ConflictError) as given:
        services.training.start(ALICE, [TrainingSample(({"role": "user", "content": "q"},), "a", "distillation")])
    assert given.value.details["samples"] == 1


def test_given_samples_train_with_their_source(make: Callable[..., Services]) -> None:
    services = make()
    assert services.training is not None
    samples = [TrainingSample(({"role": "user", "content": f"q{i}"},), f"a{i}", "distillation") for i in range(MIN)]
    run = finished(services, ALICE, services.training.start(ALICE, samples, source="distillation").id)
    assert (run.state, run.source, run.samples + run.held_out) == (RunState.ACTIVE, "distillation", MIN)


def test_auto_start_after_enough_feedback(make: Callable[..., Services]) -> None:
    services = make(auto_start=True)
    assert services.training is not None
    rate_many(services, ALICE, MIN - 1)
    assert services.training.current(ALICE) is None and services.training.runs.count(ALICE) == 0
    _, reply = services.conversations.record_exchange(user_id=ALICE, conversation_id=None, user_message="q?",
                                                      reply="a", model="m", prompt_tokens=1, completion_tokens=1)[:2]
    _, started = services.training.feedback(ALICE, reply, 1)
    assert started is not None and started.source == "feedback"
    assert finished(services, ALICE, started.id).state is RunState.ACTIVE
    _, again = services.training.feedback(ALICE, reply, -1, correction="better")
    assert again is None  # one changed sample since the last run: not enough


def test_disabled_lora_refuses_training_but_keeps_feedback(make: Callable[..., Services]) -> None:
    services = make(enabled=False)
    assert services.training is not None
    rate_many(services, ALICE, MIN)  # accepted
    for call in (lambda t: t.start(ALICE), lambda t: t.status(ALICE), lambda t: t.cancel(ALICE, str(uuid4())),
                 lambda t: t.submit_adapter(ALICE, Path("x"), 1, "federated")):
        with pytest.raises(ServiceUnavailableError) as caught:
            call(services.training)
        assert caught.value.message == "LoRA training is disabled (lora.enabled = false)"


def test_a_missing_base_model_is_503_naming_the_settings(make: Callable[..., Services], tmp_path: Path) -> None:
    services = make(base_model_path=str(tmp_path / "missing.gguf"))
    assert services.training is not None
    rate_many(services, ALICE, MIN)
    with pytest.raises(ServiceUnavailableError) as caught:
        services.training.start(ALICE)
    assert "lora.base_model_path" in caught.value.message and "missing.gguf" in caught.value.message


def test_a_submitted_adapter_is_converted_evaluated_and_activated(make: Callable[..., Services],
                                                                    tmp_path: Path) -> None:
    services = make()
    training = services.training
    assert training is not None
    rate_many(services, ALICE, MIN)
    peft = tmp_path / "fedavg"
    peft.mkdir()
    (peft / "adapter_config.json").write_text("{}")
    (peft / "adapter_model.safetensors").write_bytes(b"w")
    run = finished(services, ALICE, training.submit_adapter(ALICE, peft, 120, "federated").id)
    assert (run.state, run.source, run.samples) == (RunState.ACTIVE, "federated", 120)
    assert 1 <= run.held_out < MIN  # the user's held-back feedback (feedback ids are random: the split varies)
    assert training.trainer.calls == []  # type: ignore[attr-defined]
    record = training.active_adapter(ALICE)
    assert record is not None and record.samples == 120 and (record.peft_dir / "adapter_config.json").is_file()
    # without held-back feedback nothing shows it is better: rejected
    other = finished(services, BOB, training.submit_adapter(BOB, peft, 10, "federated").id)
    assert other.state is RunState.REJECTED and "no held-back samples" in (other.error or "")


def test_runs_left_running_are_marked_failed_at_start(make_services: Callable[..., Services],
                                                      make_settings: Callable[..., object], tmp_path: Path) -> None:
    settings = make_settings(lora={"enabled": True, "base_model_path": str(base_file(tmp_path))})
    first = make_services(settings)
    stale = Run(id=str(uuid4()), user_id=ALICE, source="feedback", base_model="m", state=RunState.TRAINING,
                phase="training")
    RunStore(first.db).save(stale)
    (first.data_dir / "adapters" / ALICE / stale.id).mkdir(parents=True)
    first.close()
    second = make_services(settings)
    assert second.training is not None
    run = second.training.get_run(ALICE, stale.id)
    assert (run.state, run.error) == (RunState.FAILED, "the process stopped during the run")
    assert not (second.data_dir / "adapters" / ALICE / stale.id).exists()
    with pytest.raises(NotFoundError):
        second.training.get_run(BOB, stale.id)


def test_only_the_two_newest_adapters_stay_on_disk(make: Callable[..., Services]) -> None:
    services = make()
    training = services.training
    assert training is not None
    runs = []
    for n in range(3):
        rate_many(services, ALICE, MIN, start=n * 10)
        runs.append(finished(services, ALICE, training.start(ALICE).id))
    assert [r.state for r in runs] == [RunState.ACTIVE] * 3
    kept = [a.run_id for a in training.runs.adapters(ALICE)]
    assert kept == [runs[2].id, runs[1].id]
    assert not (services.data_dir / "adapters" / ALICE / runs[0].id).exists()


# --- the pure parts -----------------------------------------------------------------------------------


def labelled(n: int) -> list[LabelledSample]:
    return [LabelledSample(f"key-{i}", TrainingSample(({"role": "user", "content": str(i)},), str(i), "preferred"))
            for i in range(n)]


def test_the_held_back_split_is_stable_and_never_empty() -> None:
    train, held = split(labelled(100), 0.2)
    assert 10 <= len(held) <= 30 and len(train) + len(held) == 100
    assert {s.key for s in split(labelled(120), 0.2)[1]} >= {s.key for s in held}  # held back stays held back
    assert [len(x) for x in split(labelled(2), 0.2)] == [1, 1]
    assert [len(x) for x in split(labelled(1), 0.2)] == [1, 0]


def test_the_activation_rule() -> None:
    regression = {"base": 1.0, "candidate": 1.05}
    assert decide({"base": 2.0, "candidate": 1.9}, regression, 0.05).activate
    assert not decide({"base": 2.0, "candidate": 2.0}, regression, 0.05).activate  # strictly better only
    assert not decide({"base": 2.0, "candidate": 1.9}, {"base": 1.0, "candidate": 1.051}, 0.05).activate
    with_active = decide({"base": 2.0, "active": 1.5, "candidate": 1.6}, {**regression, "active": 1.0}, 0.05)
    assert not with_active.activate and with_active.metrics["reference"] == "active"
    assert not decide(None, regression, 0.05).activate


def test_the_regression_set_is_packaged() -> None:
    samples = regression_set()
    assert len(samples) == 20
    calls = [s for s in samples if s.answer.startswith('{"name"')]
    assert len(calls) == 8 and all(s.messages[0]["role"] == "system" for s in samples)


def test_a_run_reads_as_under_way_until_its_final_state_is_stored(make: Callable[..., Services]) -> None:
    """The red team's CI race, here: a caller that sees a run over must find the next start free."""
    services = make()
    training = services.training
    assert training is not None
    storing, release = threading.Event(), threading.Event()
    save = training.runs.save

    def slow_save(run: Run) -> None:
        if not run.running:
            storing.set()
            release.wait(10)
        save(run)

    training.runs.save = slow_save  # type: ignore[method-assign]
    rate_many(services, ALICE, 6)
    run = training.start(ALICE)
    assert storing.wait(10)  # the worker has decided; the final state is not stored yet
    seen = training.get_run(ALICE, run.id)
    assert seen.state is RunState.EVALUATING and seen.finished_at is None
    assert training.status(ALICE)["state"] == "evaluating"
    assert training.current(ALICE).state is RunState.EVALUATING  # type: ignore[union-attr]  # still under way
    release.set()
    done = finished(services, ALICE, run.id)
    assert done.state is RunState.ACTIVE and done.finished_at is not None
    assert training.status(ALICE)["state"] == "active" and training.current(ALICE) is None
