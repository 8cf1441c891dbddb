"""The dynamic layer: the patterns defence evolution generalised from bypasses, per user.

Patterns are compiled with RE2 (``google-re2``, Google's binding: linear-time matching, no
backreferences or look-around), so an evolved pattern can never backtrack catastrophically on a
hostile text. :func:`compile_pattern` is also the gate a candidate passes before it is stored.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence

import re2

from assistant.defence.normalise import decoded_span
from assistant.defence.types import Hit, Layer, Normalised, PatternProvider, Source

log = logging.getLogger(__name__)

MAX_PATTERN_CHARS = 500
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.max_mem = 8 << 20  # a pattern whose automaton needs more is rejected, not built
# A quantified group that itself contains a quantifier: harmless under RE2, but catastrophic for any
# backtracking engine the pattern may be exported to (a stored pattern outlives this process).
_NESTED = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)[+*{]")


class PatternRejected(ValueError):
    """A pattern the dynamic layer will not run (``reason`` says why)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def compile_pattern(pattern: str):
    """The RE2-compiled pattern; :class:`PatternRejected` when it is empty, longer than
    ``MAX_PATTERN_CHARS``, not valid RE2 (backreferences, look-around: what could backtrack), or
    matches the empty string (it would flag every text); nested quantifiers such as ``(a+)+`` are
    rejected too (linear under RE2, catastrophic wherever the pattern is run with a backtracking engine)."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise PatternRejected("the pattern is empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternRejected(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    if _NESTED.search(pattern):
        raise PatternRejected("the pattern nests quantifiers (catastrophic backtracking outside RE2)")
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except Exception as exc:  # re2.error: unsupported syntax (backreference, look-around), bad syntax
        raise PatternRejected(f"the pattern does not compile under RE2 (linear-time) semantics: {exc}") from None
    if compiled.search("") is not None:
        raise PatternRejected("the pattern matches the empty string")
    return compiled


class DynamicLayer:
    layer = Layer.DYNAMIC

    def __init__(self, provider: PatternProvider | None):
        self.provider = provider
        self._compiled: dict[str, object | None] = {}  # pattern hash -> compiled (None: rejected)
        self._lock = threading.Lock()

    def _get(self, digest: str, pattern: str):
        with self._lock:
            if digest in self._compiled:
                return self._compiled[digest]
        try:
            compiled = compile_pattern(pattern)
        except PatternRejected as exc:
            log.warning("defence pattern %s skipped: %s", digest[:12], exc.reason)
            compiled = None
        with self._lock:
            if len(self._compiled) > 10_000:
                self._compiled.clear()
            self._compiled[digest] = compiled
        return compiled

    def check(self, text: Normalised, source: Source, user_id: str | None = None) -> list[Hit]:
        if self.provider is None or user_id is None:
            return []
        patterns = self.provider.active_patterns(user_id)
        if not patterns:
            return []
        hits: list[Hit] = []
        for p in patterns:
            compiled = self._get(p.hash or p.pattern, p.pattern)
            if compiled is None:
                continue
            m = compiled.search(text.folded)
            if m is not None:
                hits.append(Hit(Layer.DYNAMIC, p.id, f"matches evolved pattern ({p.family})",
                                text.span_in_text(*m.span()), 1.0))
                continue
            for i, (kind, plain) in enumerate(text.decoded):
                m = compiled.search(plain)
                if m is not None:
                    hits.append(Hit(Layer.DYNAMIC, p.id, f"matches evolved pattern ({p.family}, hidden as {kind})",
                                    decoded_span(text, i, *m.span()), 1.0))
                    break
        if hits:
            self._count([h.rule for h in hits])
        return hits

    def _count(self, ids: Sequence[str]) -> None:
        try:
            self.provider.count_hits(list(dict.fromkeys(ids)))
        except Exception:  # counting never breaks a verdict
            log.exception("counting defence pattern hits failed")
