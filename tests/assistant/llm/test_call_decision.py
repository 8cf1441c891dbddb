"""The call-or-answer decision at a reply's first token, on a toy vocabulary."""

from __future__ import annotations

import numpy as np

from assistant.llm.call_decision import FirstTokens, call_probability, choose_first, decide_call, opens_call

VOCAB = [b"Sure", b"{\"", b"<tool_call>", b"<", b" {", b"```", b"[", b"  ", b"<|im_end|>", b"\xe4", b"The", b"<b>"]
CONTROL = {8}


def first_tokens() -> FirstTokens:
    return FirstTokens.build(len(VOCAB), VOCAB.__getitem__, CONTROL.__contains__)


def test_openers_are_the_tokens_that_can_begin_a_call() -> None:
    assert [opens_call(t) for t in ("<tool_call>", "<tool", "<", '{"', " {", "```json", "[", "Sure", "<b>", "", " ")] \
        == [True, True, True, True, True, True, True, False, False, False, False]
    first = first_tokens()
    assert first.openers.tolist() == [1, 2, 3, 4, 5, 6]
    # an answer may not begin with an opener, blank space, a control token or a byte of a character
    assert np.flatnonzero(~first.banned).tolist() == [0, 10, 11]


def test_call_probability_sums_the_openers() -> None:
    first = first_tokens()
    logits = np.full(len(VOCAB), -30.0)
    logits[[0, 1, 2]] = np.log([0.5, 0.3, 0.2])
    assert abs(call_probability(logits, first.openers) - 0.5) < 1e-6
    assert call_probability(logits, np.array([], dtype=np.int64)) == 0.0


def test_threshold_zero_always_calls_and_one_never_does() -> None:
    assert decide_call(0.0, 0.0) and decide_call(0.5, 0.5) and not decide_call(0.49, 0.5)
    assert not decide_call(1.0, 1.0)


def test_the_answers_first_token_is_never_an_opener() -> None:
    first = first_tokens()
    logits = np.zeros(len(VOCAB))
    logits[2], logits[10], logits[0] = 9.0, 2.0, 1.0  # <tool_call> likeliest, then "The"
    assert choose_first(logits, first.banned, 0.0) == 10
    rng = np.random.default_rng(0)
    assert {choose_first(logits, first.banned, 1.0, rng) for _ in range(50)} <= {0, 10, 11}


def test_the_engine_never_calls_less_than_greedy_decoding_would() -> None:
    import numpy as np

    from assistant.llm.call_decision import top_opens_call

    openers = np.array([3])
    logits = np.array([1.0, 1.0, 1.0, 1.2])  # the call opener is the likeliest token, yet p_call < 0.5
    p = call_probability(logits, openers)
    assert p < 0.5 and top_opens_call(logits, openers)
    assert decide_call(p, 0.5, top_is_call=True) and not decide_call(p, 0.5, top_is_call=False)
    assert not decide_call(p, 1.0, top_is_call=True)  # 1.0 still never calls
    assert not top_opens_call(np.array([2.0, 1.0, 1.0, 1.2]), openers)
