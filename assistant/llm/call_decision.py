"""The call-or-answer decision at a reply's first token, for the embedded engine's constrained decoding.

With tools offered, a reply is either a final answer or a tool call. Instead of letting the model
write freely and recognising a call from its first characters, constrained decoding reads the
model's own next-token distribution at the reply's first position (the logits of the prompt's last
token, which evaluating the prompt yields anyway) and sums the probability of the tokens that open
a call: Qwen's ``<tool_call>`` tag (as the special token or spelled out), ``{``, ``[`` and a code
fence. That sum, ``p_call``, is compared with a threshold: at or above it the reply is decoded as a
call under the offered tools' grammar from its first token; below it the reply is an answer whose
first token may not open a call (:func:`choose_first`), so call-shaped text never reaches the user.

Pure numpy on arrays of the model's vocabulary: testable without a model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

TAG = "<tool_call>"
OPENERS = ("{", "[", "```")
TOP_K = 40  # the first token of a sampled answer comes from the model's 40 likeliest, as llama.cpp's default


def opens_call(piece: str) -> bool:
    """Whether a token's text (``<tool_call>``, ``{"``, `` {``, ``<``, ````json``...) can begin a call."""
    text = piece.lstrip()
    return bool(text) and (text.startswith(OPENERS) or text.startswith(TAG) or TAG.startswith(text))


@dataclass(frozen=True)
class FirstTokens:
    """Per vocabulary: which tokens open a call, and which may not begin an answer."""

    openers: np.ndarray  # token ids that open a call
    banned: np.ndarray  # bool per token: not a first token of an answer (openers, blank, control, partial UTF-8)

    @classmethod
    def build(cls, n_vocab: int, piece: Callable[[int], bytes], is_control: Callable[[int], bool]) -> FirstTokens:
        openers: list[int] = []
        banned = np.zeros(n_vocab, dtype=bool)
        for token in range(n_vocab):
            try:
                text = piece(token).decode("utf-8")
            except UnicodeDecodeError:  # a byte of a longer character: not a whole first piece
                banned[token] = True
                continue
            if opens_call(text):
                openers.append(token)
                banned[token] = True
            elif not text.strip() or is_control(token):
                banned[token] = True  # an answer starts with a word, not blank space or a control token
        return cls(np.array(openers, dtype=np.int64), banned)


def call_probability(logits: np.ndarray, openers: np.ndarray) -> float:
    """The model's probability (softmax at temperature 1) that the reply's first token opens a call."""
    shifted = np.asarray(logits, dtype=np.float64)
    shifted = np.exp(shifted - shifted.max())
    return float(shifted[openers].sum() / shifted.sum()) if len(openers) else 0.0


def top_opens_call(logits: np.ndarray, openers: np.ndarray) -> bool:
    """Whether the single likeliest first token opens a call (what greedy free decoding would do)."""
    return bool(len(openers)) and int(np.argmax(logits)) in set(openers.tolist())


def decide_call(p_call: float, threshold: float, top_is_call: bool = False) -> bool:
    """Call when the model's call probability reaches ``threshold`` or its likeliest first token
    opens a call anyway (the constrained decoder never calls less than the model would on its own:
    on API-Bank's decision points no threshold separated calls from answers better than chance,
    see benchmarks/tool_decision.py); 0.0 always calls, 1.0 never does."""
    return threshold <= 0.0 or (threshold < 1.0 and (p_call >= threshold or top_is_call))


def choose_first(logits: np.ndarray, banned: np.ndarray, temperature: float,
                 rng: np.random.Generator | None = None) -> int:
    """The answer's first token among those allowed: the likeliest at temperature 0, else sampled
    from the top-k at ``temperature``."""
    masked = np.where(banned, -np.inf, np.asarray(logits, dtype=np.float64))
    if temperature <= 0:
        return int(np.argmax(masked))
    k = min(TOP_K, masked.size)
    top = np.argpartition(-masked, k - 1)[:k]
    top = top[np.isfinite(masked[top])]
    weights = np.exp((masked[top] - masked[top].max()) / temperature)
    return int((rng or np.random.default_rng()).choice(top, p=weights / weights.sum()))
