"""Retrieval-parameter optimisation with fakes: the objective equals what retrieval injects, the
exploration mapping, the apply-only-if-better rule, per-user isolation, cancellation and the refusal."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import optuna
import pytest

from assistant.config import MemorySettings
from assistant.config.extended import OptimizationSettings
from assistant.config.night import SanitationSettings
from assistant.crypto import Sealer
from assistant.embeddings.hashing import HashingEmbedder
from assistant.errors import ConflictError, NotFoundError
from assistant.learning import optimize_study as studies
from assistant.learning.optimize import Optimizer
from assistant.learning.optimize_data import used_by
from assistant.learning.optimize_score import Batch, Case, Score, split
from assistant.learning.optimize_space import BOUNDS, raw_of, to_values
from assistant.learning.optimize_store import OptimizationStore
from assistant.memory.candidates import features
from assistant.memory.store import MemoryStore, NewMemory
from assistant.memory.types import MemoryType
from assistant.storage.db import Database

T0 = 1_717_200_000.0
DAY = 86_400.0
TEXTS = [
    "I live in Reykjavik with my partner Sigrun.", "My violin teacher is Mrs Okafor.",
    "The dentist appointment is on Friday at 10.", "I prefer tea over coffee in the morning.",
    "Our cat Pixel likes the window seat.", "I work as a nurse at the city hospital.",
    "The car needs new tyres before winter.", "My sister Lena moved to Berlin last year.",
    "The book club meets on the first Tuesday.", "I am allergic to peanuts and shellfish.",
]
QUESTIONS = ["Where do I live?", "Who teaches me violin?", "When is the dentist?", "What do I drink?",
             "What is my cat called?", "Where does my sister live?", "What am I allergic to?", "What is my job?"]


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[Callable[..., MemoryStore]]:
    opened: list[Database] = []

    def make(clock: Clock | None = None, **memory: object) -> MemoryStore:
        db = Database(tmp_path / f"m{len(opened)}.db")
        opened.append(db)
        return MemoryStore(db, Sealer(None), HashingEmbedder(384), MemorySettings(embedding_backend="hashing", **memory),
                           clock=clock or Clock())

    yield make
    for db in opened:
        db.close()


def fill(store: MemoryStore, user: str, clock: Clock) -> list[str]:
    ids = []
    for n, text in enumerate(TEXTS):  # a day apart, importance and types varied
        clock.t = T0 + n * DAY
        kind = MemoryType.FACT if n % 3 == 0 else MemoryType.CONTEXT
        ids += store.add_many(user, [NewMemory(text, memory_type=kind, importance=0.3 + 0.05 * n,
                                               conversation_id=f"c{n // 4}")])
    clock.t = T0 + 20 * DAY
    return ids


# --- the objective re-computes retrieval ------------------------------------------------------------------


@pytest.mark.parametrize("values", [
    {}, {"rag_threshold": 0.0}, {"rag_threshold": 0.1, "rag_limit": 2},
    {"rag_threshold": 0.05, "rag_limit": 7, "similarity_weight": 0.2, "importance_weight": 0.5,
     "freshness_weight": 0.3, "dense_weight": 0.3, "keyword_weight": 0.7, "context_weight": 0.5},
])
def test_batch_prompts_are_what_retrieve_for_prompt_injects(make_store, values: dict) -> None:
    clock = Clock()
    store = make_store(clock)
    fill(store, "u", clock)
    base = store.params_for("u")
    params = base.with_values(values)

    class Fixed:
        def tuned(self, user_id: str) -> dict | None:
            return params.flat() if user_id == "u" else None

        def tuned_decay_factors(self) -> dict:
            return {}

    store.tuning = Fixed()
    rate = -math.log(store.settings.decay_factor)  # the stored importance already decayed at this rate
    for q in QUESTIONS:  # features just before each retrieval: a retrieval touches what it injects
        vector = store.embedder.embed([q])[0]
        case = Case(q, "g", features(store, "u", q, vector, now=clock(), pool=250), frozenset(), reference_rate=rate)
        top, kept = Batch([case], k=10).prompts(params)
        _, used = store.retrieve_for_prompt("u", q, vector)
        got = [case.features.ids[j] for j, keep in zip(top[0], kept[0], strict=True) if keep]
        assert sorted(got) == sorted(m.memory.id for m in used), q
    store.tuning = None


def test_recall_at_k_counts_positives_in_the_first_k_injected(make_store) -> None:
    clock = Clock()
    store = make_store(clock)
    ids = fill(store, "u", clock)
    q = QUESTIONS[0]
    found = features(store, "u", q, store.embedder.embed([q])[0], now=clock(), pool=250)
    case = Case("q", "g", found, frozenset({ids[0], "gone"}))  # one positive no longer exists: a miss
    batch = Batch([case], k=5)
    everything = store.params_for("u").with_values({"rag_threshold": 0.0, "rag_limit": 10})
    nothing = store.params_for("u").with_values({"rag_threshold": 0.8})
    assert batch.score(everything).recall == pytest.approx(0.5)
    assert batch.score(nothing).recall == 0.0
    assert batch.score(nothing).injected == 0.0
    assert batch.quality_weight == 0.0  # no quality signal: the objective is recall (minus parsimony)


def test_quality_term_rewards_leaving_out_what_a_re_asked_answer_got(make_store) -> None:
    clock = Clock()
    store = make_store(clock)
    ids = fill(store, "u", clock)
    q = QUESTIONS[0]
    found = features(store, "u", q, store.embedder.embed([q])[0], now=clock(), pool=250)
    noisy = Case("q", "g", found, frozenset(), negatives=frozenset(ids[1:]), quality=0.6)
    batch = Batch([noisy], k=5, quality_weight=0.3)
    assert batch.quality_weight == 0.3
    flood = batch.score(store.params_for("u").with_values({"rag_threshold": 0.0, "rag_limit": 10}))
    none = batch.score(store.params_for("u").with_values({"rag_threshold": 0.8}))
    assert none.quality == 1.0 and flood.quality < 1.0
    assert none.value > flood.value


def test_simulated_decay_makes_decay_factor_matter(make_store) -> None:
    clock = Clock()
    store = make_store(clock)
    fill(store, "u", clock)
    q = QUESTIONS[1]
    found = features(store, "u", q, store.embedder.embed([q])[0], now=clock(), pool=250)
    batch = Batch([Case("q", "g", found, frozenset())], k=5)
    # importance under a faster decay is lower, floors hold: reconstruct with the formula
    slow, fast = (store.params_for("u").with_values({"decay_factor": f}) for f in (0.999, 0.8))
    rate = -math.log(0.8)
    expected = np.clip(found.importance * np.exp(-rate * batch.rate_scale[0, : len(found)] * found.age_days),
                       batch.floor[0, : len(found)], 1.0)
    assert np.all(expected <= found.importance + 1e-12)
    assert batch.score(slow).cases == batch.score(fast).cases == 1


def test_split_keeps_groups_together() -> None:
    f = features.__annotations__  # noqa: F841 - only Case objects matter here
    cases = [Case(f"{g}/{i}", g, None, frozenset({"x"})) for g in "abcde" for i in range(3)]  # type: ignore[arg-type]
    tuning, validation = split(cases, 0.3)
    assert {c.group for c in tuning}.isdisjoint({c.group for c in validation})
    assert len({c.group for c in validation}) == 2 and len(tuning) + len(validation) == len(cases)
    one = [Case(f"a/{i}", "a", None, frozenset()) for i in range(10)]  # type: ignore[arg-type]
    tuning, validation = split(one, 0.3)
    assert len(validation) == 3 and len(tuning) == 7


def test_used_by_needs_the_memory_s_distinctive_words() -> None:
    question = "Where do I live?"
    assert used_by("You live in Reykjavik with Sigrun.", "I live in Reykjavik with my partner Sigrun.", question)
    assert not used_by("I am not sure where you live.", "I live in Reykjavik with my partner Sigrun.", question)


# --- the space and the exploration mapping ------------------------------------------------------------------


def test_space_normalises_weights_and_keeps_the_defaults_inside_the_bounds(make_store) -> None:
    base = make_store().params_for("u")
    raw = raw_of(base)
    assert set(raw) == set(BOUNDS)
    values = to_values(raw)
    assert values["similarity_weight"] + values["importance_weight"] + values["freshness_weight"] == pytest.approx(1)
    assert values["keyword_weight"] == pytest.approx(1 - values["dense_weight"])
    assert base.with_values(values) == base  # the configured parameters are a point of the space


@pytest.mark.parametrize(("weight", "startup", "candidates"), [(1.0, 10, 24), (2.0, 20, 12), (0.5, 5, 48),
                                                                (0.0, 1, 240)])
def test_exploration_weight_maps_to_tpe_startup_trials_and_ei_candidates(weight, startup, candidates) -> None:
    sampler = studies.sampler_for(weight, seed=1)
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert sampler._n_startup_trials == startup == studies.startup_trials(weight)
    assert sampler._n_ei_candidates == candidates == studies.ei_candidates(weight)


# --- the trial loop: apply only if better on the validation split ------------------------------------------


class FakeBatch:
    """A batch whose score is a function of the parameters (no memories)."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def __len__(self) -> int:
        return 1

    def score(self, params) -> Score:  # noqa: ANN001
        value = self.fn(params)
        return Score(value, value, 1.0, 0.0, 1)


def test_a_candidate_is_applied_only_when_it_beats_the_current_parameters_on_validation(make_store) -> None:
    base = make_store().params_for("u")
    study = studies.open_study(None, "t", 1.0, seed=3)
    # tuning rewards a low threshold; validation punishes it: nothing may be applied
    result = studies.run_trials(study, base, FakeBatch(lambda p: -p.rag_threshold), FakeBatch(lambda p: p.rag_threshold),
                                12)
    assert any(o.candidate for o in result.outcomes)
    assert result.applied == []
    assert result.outcomes[0].values["rag_threshold"] == pytest.approx(base.rag_threshold)  # the current ones first

    study = studies.open_study(None, "t2", 1.0, seed=3)
    agree = studies.run_trials(study, base, FakeBatch(lambda p: -p.rag_threshold), FakeBatch(lambda p: -p.rag_threshold),
                               12)
    assert agree.applied
    validations = [o.validation.value for o in agree.applied]
    assert validations == sorted(validations) and validations[0] > -base.rag_threshold  # each beats the one before
    assert all(o.candidate for o in agree.applied)


def test_the_loop_stops_when_cancelled(make_store) -> None:
    base = make_store().params_for("u")
    seen = []
    result = studies.run_trials(studies.open_study(None, "c", 1.0, seed=1), base, FakeBatch(lambda p: 0.0),
                                FakeBatch(lambda p: 0.0), 10, on_trial=lambda o, r: seen.append(o.number),
                                cancelled=lambda: len(seen) >= 3)
    assert result.cancelled and len(result.outcomes) == 3


# --- the service: per-user parameters, the refusal, a background run ------------------------------------------


class FakeExplanations:
    """No recorded answers (the cold start is what these tests exercise)."""

    def recent(self, user_id: str, limit: int = 500) -> list:
        return []


def locomo_file(tmp_path: Path) -> Path:
    import json

    sessions = {}
    turns = [(f"D1:{i + 1}", "Ann" if i % 2 == 0 else "Bob", t) for i, t in enumerate(TEXTS[:5])]
    sessions["session_1"] = [{"dia_id": d, "speaker": s, "text": t} for d, s, t in turns]
    sessions["session_1_date_time"] = "1:56 pm on 8 May, 2023"
    sessions["session_2"] = [{"dia_id": f"D2:{i + 1}", "speaker": "Ann", "text": t} for i, t in enumerate(TEXTS[5:])]
    sessions["session_2_date_time"] = "10:00 am on 20 June, 2023"
    qa = [{"question": q, "evidence": [e], "category": 4} for q, e in
          [("Where does Ann live?", "D1:1"), ("Who teaches violin?", "D1:2"), ("When is the dentist?", "D1:3"),
           ("What does Ann drink?", "D1:4"), ("Where does Lena live?", "D2:3"), ("What is Ann allergic to?", "D2:5")]]
    data = [{"sample_id": f"conv-{n}", "conversation": sessions, "qa": qa} for n in range(3)]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def make_optimizer(tmp_path: Path, make_store) -> Iterator[Callable[..., Optimizer]]:
    made: list[Optimizer] = []

    def make(**settings: object) -> Optimizer:
        store = make_store()
        optimizer = Optimizer(OptimizationSettings(enabled=True, seed=7, **settings), tmp_path,
                              OptimizationStore(store.db), store, explanations=FakeExplanations(),
                              conversations=object(), sanitation=SanitationSettings())
        store.tuning = optimizer
        made.append(optimizer)
        return optimizer

    yield make
    for optimizer in made:
        optimizer.close()


def test_without_data_or_dataset_a_run_is_refused_precisely(make_optimizer) -> None:
    optimizer = make_optimizer()
    with pytest.raises(ConflictError) as info:
        optimizer.start("u")
    message = info.value.message
    assert "0 answer(s)" in message and "optimization.min_user_cases = 20" in message
    assert "optimization.dataset_path is not set" in message
    assert info.value.details["reason"] == "not_enough_data"
    assert optimizer.running("u") is None  # the refusal left nothing claimed
    with pytest.raises(NotFoundError):
        optimizer.study("u")


def test_a_cold_start_run_applies_per_user_and_only_when_better(make_optimizer, tmp_path: Path) -> None:
    optimizer = make_optimizer(dataset_path=tmp_path and locomo_file(tmp_path), max_iterations=8)
    memory = optimizer.memory
    status = optimizer.run("alice", progress=False)
    run = status["run"]
    assert run["state"] == "completed" and run["trials_done"] == 8 and run["source"] == "locomo"
    total, trials = optimizer.history("alice")
    assert total == 8 and [t["number"] for t in trials] == list(range(8))
    applied = [t for t in trials if t["applied"]]
    # every applied trial beat the validation score in force at its time
    bar = run["baseline_validation"]
    for t in applied:
        assert t["validation_score"] > bar
        bar = t["validation_score"]
    if applied:
        assert status["applied"]["trial_number"] == applied[-1]["number"]
        assert memory.params_for("alice").flat() == pytest.approx(
            memory.params_for("bob").with_values(applied[-1]["params"]).flat())
    assert memory.params_for("bob") == optimizer.defaults()  # another user keeps the configured parameters
    assert optimizer.history("bob") == (0, [])
    assert len(optimizer.study("alice").trials) == 8  # the optuna study, in data_dir/optuna.db
    assert (tmp_path / "optuna.db").exists()


def test_tuned_parameters_reach_search_retrieval_and_decay(make_optimizer) -> None:
    optimizer = make_optimizer()
    memory = optimizer.memory
    for user in ("alice", "bob"):
        memory.add_many(user, [NewMemory(t) for t in TEXTS])
    values = {**memory.params_for("alice").flat(), "rag_threshold": 0.0, "rag_limit": 9, "decay_factor": 0.8}
    optimizer.store.apply("alice", values, source="locomo", run_id="r", study="s", trial_number=1, score=1.0,
                          validation_score=1.0)
    _, used_alice = memory.retrieve_for_prompt("alice", "Where does my sister live?")
    _, used_bob = memory.retrieve_for_prompt("bob", "Where does my sister live?")
    assert len(used_alice) == 9  # threshold 0, limit 9
    assert len(used_bob) <= 5
    memory.clock = lambda: T0 + 10 * DAY
    memory.decay()
    alice = {m.content: m.importance for m in memory.list("alice", 100)}
    bob = {m.content: m.importance for m in memory.list("bob", 100)}
    for text in TEXTS:  # accessed memories gain reinforcement; compare the untouched rate through one memory
        assert alice[text] <= bob[text] + 1e-9
    assert any(alice[t] < bob[t] - 1e-6 for t in TEXTS)
    assert optimizer.reset("alice") and memory.params_for("alice") == optimizer.defaults()


def test_a_background_run_is_exclusive_and_cancellable(make_optimizer, tmp_path: Path, monkeypatch) -> None:
    optimizer = make_optimizer(max_iterations=50)
    optimizer.settings = optimizer.settings.model_copy(update={"min_user_cases": 1})
    gate, reached = threading.Event(), threading.Event()
    cases = [Case(f"q{i}", f"g{i % 3}", features(optimizer.memory, "u", "x", np.ones(384, dtype=np.float32) / 19.6,
                                                    now=T0), frozenset({"m"})) for i in range(6)]
    monkeypatch.setattr(optimizer, "_user_cases", lambda user: cases)
    real = Batch.score

    def slow(self, params):  # noqa: ANN001, ANN202
        reached.set()
        gate.wait(5)
        return real(self, params)

    monkeypatch.setattr(Batch, "score", slow)
    started = optimizer.start("u")
    assert started["state"] == "running" and started["source"] == "user_data"
    reached.wait(5)
    with pytest.raises(ConflictError) as info:
        optimizer.start("u")
    assert info.value.details == {"run_id": started["id"]}
    with pytest.raises(ConflictError) as other:
        optimizer.start("v")
    assert other.value.details == {}  # another user's run: no id
    assert optimizer.cancel("u") == started["id"]
    gate.set()
    for _ in range(100):
        if optimizer.running("u") is None:
            break
        threading.Event().wait(0.05)
    run = optimizer.status("u")["run"]
    assert run["state"] == "cancelled" and run["trials_done"] < 50
    with pytest.raises(NotFoundError):
        optimizer.cancel("u")
