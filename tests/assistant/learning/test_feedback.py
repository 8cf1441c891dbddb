"""Feedback: ownership, sealing, what becomes a training sample, and implicit capture from quality signals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

import apsw
import pytest

from assistant.errors import NotFoundError, ValidationFailed
from assistant.learning.feedback import CORRECTION, EXPLICIT, RE_ASK
from assistant.observability.signals import SignalKind
from assistant.services import Services
from tests.assistant.learning.training_support import answered, use_fakes

ALICE, BOB = str(uuid4()), str(uuid4())
SYSTEM = "You are a helpful, concise personal assistant running locally."


@pytest.fixture
def svc(make_services: Callable[..., Services], make_settings: Callable[..., object]) -> Services:
    services = make_services(make_settings())  # lora.enabled = false: feedback is collected anyway
    use_fakes(services)
    return services


def test_feedback_on_an_own_answer_is_stored_sealed(svc: Services, tmp_path: Path) -> None:
    assert svc.training is not None
    _, reply = answered(svc, ALICE, "What is the capital of Australia?", "Sydney.")
    stored, started = svc.training.feedback(ALICE, reply, -1, correction="Canberra-zebra is the capital",
                                            useful_memory_ids=["m1", "m1", "m2"])
    assert started is None  # lora disabled: no run
    assert (stored.kind, stored.rating, stored.sample) == (EXPLICIT, -1, True)
    assert stored.useful_memory_ids == ("m1", "m2")
    raw = apsw.Connection(str(tmp_path / "data" / "assistant.db"))
    dump = b"".join(bytes(r[0]) for r in raw.execute("SELECT body_sealed FROM training_feedback"))
    assert b"zebra" not in dump
    assert svc.training.feedback_store.get(ALICE, stored.id).correction == "Canberra-zebra is the capital"
    assert svc.training.feedback_store.useful_memories(ALICE) == {reply: ("m1", "m2")}


def test_unknown_and_other_users_messages_are_the_same_404(svc: Services) -> None:
    assert svc.training is not None
    _, reply = answered(svc, ALICE, "Question?", "Answer.")
    with pytest.raises(NotFoundError) as other:
        svc.training.feedback(BOB, reply, 1)
    unknown_id = str(uuid4())
    with pytest.raises(NotFoundError) as unknown:
        svc.training.feedback(BOB, unknown_id, 1)
    assert other.value.message == f"message {reply} not found"
    assert unknown.value.message == f"message {unknown_id} not found"
    assert svc.training.feedback_store.counts(ALICE).feedback == 0


def test_a_user_message_or_a_bad_rating_is_a_validation_error(svc: Services) -> None:
    assert svc.training is not None
    conversation, _ = answered(svc, ALICE, "Question?", "Answer.")
    user_message = svc.conversations.messages(conversation)[0].id
    with pytest.raises(ValidationFailed) as caught:
        svc.training.feedback(ALICE, user_message, 1)
    assert caught.value.details["fields"][0]["field"] == "message_id"
    _, reply = answered(svc, ALICE, "Question two?", "Answer two.")
    with pytest.raises(ValidationFailed) as bad:
        svc.training.feedback(ALICE, reply, 5)
    assert bad.value.details["fields"] == [{"field": "rating", "error": "must be -1, 0 or 1 (got 5)"}]


def test_what_becomes_a_sample(svc: Services) -> None:
    assert svc.training is not None
    store = svc.training.feedback_store
    conversation, first = answered(svc, ALICE, "Hi, I'm planning a trip.", "Nice! Where to?")
    _, preferred = answered(svc, ALICE, "What's the capital of Australia?", "Sydney.", conversation)
    _, approved = answered(svc, ALICE, "And of Japan?", "Tokyo.", conversation)
    _, corrected = answered(svc, ALICE, "And of Canada?", "Toronto.", conversation)
    _, neutral = answered(svc, ALICE, "And of Peru?", "Lima, I think.", conversation)
    svc.training.feedback(ALICE, preferred, -1, preferred_answer="The capital of Australia is Canberra.")
    svc.training.feedback(ALICE, approved, 1)
    svc.training.feedback(ALICE, corrected, -1, correction="Ottawa")
    svc.training.feedback(ALICE, neutral, 0)
    svc.training.feedback(ALICE, first, -1)
    samples = store.samples(ALICE)
    assert [(s.answer, s.source) for s in samples] == [
        ("The capital of Australia is Canberra.", "preferred"), ("Tokyo.", "preferred"), ("Ottawa", "correction")]
    first_sample = samples[0]
    assert first_sample.messages == (
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi, I'm planning a trip."},
        {"role": "assistant", "content": "Nice! Where to?"},
        {"role": "user", "content": "What's the capital of Australia?"})
    counts = store.counts(ALICE)
    assert (counts.feedback, counts.samples, counts.positive, counts.neutral, counts.negative) == (5, 3, 1, 1, 3)
    # a second feedback on the same answer replaces the first
    svc.training.feedback(ALICE, approved, 0)
    assert store.counts(ALICE).samples == 2


def test_the_prompt_keeps_the_last_context_messages(svc: Services) -> None:
    assert svc.training is not None
    store = svc.training.feedback_store
    store.context_messages = 2
    conversation = None
    for i in range(4):
        conversation, reply = answered(svc, ALICE, f"q{i} words here", f"a{i}", conversation)
    svc.training.feedback(ALICE, reply, 1)
    (sample,) = store.samples(ALICE)
    assert [m["content"] for m in sample.messages] == [SYSTEM, "q2 words here", "a2", "q3 words here"]


def test_implicit_capture_of_re_asks_and_corrections(svc: Services) -> None:
    assert svc.training is not None
    store = svc.training.feedback_store
    conversation, first = answered(svc, ALICE, "What time does the city library open on Sunday?", "It is a library.")
    _, second = answered(svc, ALICE, "What time does the city library open on Sunday?", "At 10 am on Sundays.",
                         conversation)
    assert svc.training.capture_implicit(ALICE) == 1  # re-asked, not settled yet: a rating only
    (row,) = store.list(ALICE)
    assert (row.kind, row.rating, row.sample, row.message_id) == (RE_ASK, -1, False, first)
    _, _ = answered(svc, ALICE, "Thanks. Is there parking nearby for bicycles?", "Yes, at the entrance.",
                    conversation)
    assert svc.training.capture_implicit(ALICE) == 1  # the re-ask settled: the accepted answer is a sample
    (sample,) = store.samples(ALICE)
    assert sample.answer == "At 10 am on Sundays." and sample.source == "implicit"
    assert sample.messages[-1] == {"role": "user", "content": "What time does the city library open on Sunday?"}
    assert len(sample.messages) == 2  # the system prompt and the first question
    other, wrong = answered(svc, ALICE, "Who wrote Hamlet by the way?", "Charles Dickens wrote it.")
    answered(svc, ALICE, "Actually, that's wrong: it was Shakespeare.", "You're right, Shakespeare.", other)
    assert svc.training.capture_implicit(ALICE) == 1
    corrections = store.list(ALICE, kind=CORRECTION)
    assert [(c.message_id, c.rating, c.sample) for c in corrections] == [(wrong, -1, False)]
    assert svc.training.capture_implicit(ALICE) == 0  # idempotent
    assert store.counts(BOB).feedback == 0


def test_a_quality_signal_captures_the_users_implicit_feedback(svc: Services) -> None:
    assert svc.training is not None
    conversation, _ = answered(svc, ALICE, "Remind me what my dentist's phone number is?", "I don't know.")
    answered(svc, ALICE, "Remind me what my dentist's phone number is?", "It is 555-0100.", conversation)
    svc.signals.publish(SignalKind.QUALITY_SCORE, {"re_ask_rate": 1.0}, user_id=ALICE, value=0.6)
    assert svc.training.feedback_store.counts(ALICE).negative == 1
