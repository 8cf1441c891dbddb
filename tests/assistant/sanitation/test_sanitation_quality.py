"""The quality assessment over hand-made conversations (fake store, fake embedder, fixed clock)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from assistant.chat.conversations import Conversation, StoredMessage
from assistant.clock import iso_at
from assistant.config import SanitationSettings
from assistant.sanitation import quality as Q
from assistant.sanitation.types import Trend

T0 = 1_750_000_000.0
LATER = Q.SESSION_WINDOW_SECS + 60  # after the last turn: every conversation is over


class FakeConversations:
    """ConversationStore's reads: ``list`` (most recently updated first) and ``messages``."""

    def __init__(self) -> None:
        self.turns: dict[str, list[tuple[str, str, float]]] = {}
        self.read: list[str] = []

    def add(self, cid: str, *turns: tuple[str, str, float]) -> None:
        self.turns[cid] = list(turns)

    def list(self, user_id: str, limit: int = 100, offset: int = 0) -> list[Conversation]:
        rows = sorted(self.turns.items(), key=lambda kv: -kv[1][-1][2])
        return [Conversation(cid, user_id, cid, iso_at(t[0][2]), iso_at(t[-1][2]))
                for cid, t in rows][offset:offset + limit]

    def messages(self, cid: str) -> list[StoredMessage]:
        self.read.append(cid)
        return [StoredMessage(f"{cid}-{n}", role, text, None, iso_at(ts))
                for n, (role, text, ts) in enumerate(self.turns[cid])]


class FakeEmbedder:
    """Texts of one group get the same vector; every other text its own orthogonal one."""

    id = "fake"
    dimension = 64

    def __init__(self, *groups: set[str]) -> None:
        self.groups = groups
        self.calls: list[list[str]] = []
        self._own: dict[str, int] = {}

    def embed(self, texts):  # noqa: ANN001, ANN201
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            group = next((g for g, members in enumerate(self.groups) if text in members), None)
            slot = group if group is not None else len(self.groups) + self._own.setdefault(text, len(self._own))
            out[i, slot] = 1.0
        return out


def deps(conversations: FakeConversations, embedder=None, last_run=None, **settings):  # noqa: ANN001, ANN201
    store = SimpleNamespace(last_run_ts=lambda user: last_run)
    return SimpleNamespace(conversations=conversations, memory=SimpleNamespace(embedder=embedder), store=store,
                           settings=SanitationSettings(**settings), clock=lambda: T0 + LATER)


WEATHER = "What is the weather in Paris tomorrow?"
FORECAST = "Tell me the forecast for Paris tomorrow"


def known_set() -> FakeConversations:
    """8 user messages, 4 follow-ups of which 2 re-ask, 1 correction, 4 conversations of which 2 abandoned."""
    c = FakeConversations()
    c.add("a", ("user", WEATHER, T0), ("assistant", "Sunny.", T0 + 1),
          ("user", FORECAST, T0 + 2), ("assistant", "Sunny, 24 degrees.", T0 + 3),  # re-ask (embedder)
          ("user", "Actually, I meant Lyon, not Paris", T0 + 4), ("assistant", "Lyon: rain.", T0 + 5),  # correction
          ("user", "Great, thank you so much", T0 + 6), ("assistant", "You're welcome.", T0 + 7))
    c.add("b", ("user", "Play some jazz music please", T0 + 10), ("assistant", "Playing jazz.", T0 + 11))
    c.add("c", ("user", "How do I reset my router?", T0 + 20))  # unanswered: abandoned
    c.add("d", ("user", "When is my dentist appointment?", T0 + 30), ("assistant", "Tuesday.", T0 + 31),
          ("user", "When is my dentist appointment?", T0 + 32),  # lexical re-ask
          ("assistant", "Tuesday at 3.", T0 + 32 + Q.SESSION_WINDOW_SECS))  # answered too late: abandoned
    return c


def test_the_formula_with_the_spec_weights_on_known_rates() -> None:
    embedder = FakeEmbedder({WEATHER, FORECAST})
    result = Q.assess(deps(known_set(), embedder), "u1", now=T0 + 33 + LATER)
    assert (result.re_ask_rate, result.correction_rate, result.abandonment_rate) == (0.5, 0.125, 0.5)
    assert result.score == pytest.approx(1 - (0.5 * 0.4 + 0.125 * 0.4 + 0.5 * 0.2))  # 0.65
    assert result.score == pytest.approx(0.65)
    assert (result.messages, result.conversations) == (8, 4)
    assert result.window_start is None and result.window_end == iso_at(T0 + 33 + LATER)
    assert result.trend is Trend.STABLE and result.regression is False
    # the lexical repeat never reached the embedder; the paraphrase did
    assert all("When is my dentist appointment?" not in call for call in embedder.calls)
    assert any(FORECAST in call for call in embedder.calls)
    # the largest weighted component comes first, one sentence each
    assert [r.split()[0] for r in result.recommendations] == ["Re-asks", "Abandoned", "Corrections"]
    assert "rag_limit" in result.recommendations[0]


def test_weights_come_from_the_settings() -> None:
    embedder = FakeEmbedder({WEATHER, FORECAST})
    result = Q.assess(deps(known_set(), embedder, quality_re_ask_weight=0.0, quality_correction_weight=1.0,
                           quality_abandonment_weight=0.0), "u1", now=T0 + 33 + LATER)
    assert result.score == pytest.approx(0.875)


def test_without_an_embedder_only_lexical_repeats_count() -> None:
    result = Q.assess(deps(known_set(), None), "u1", now=T0 + 33 + LATER)
    assert result.re_ask_rate == 0.25  # the dentist repeat only


@pytest.mark.parametrize(("previous", "current", "expected"), [
    ("When is my dentist appointment?", "when is my dentist appointment", True),  # lexical
    (WEATHER, FORECAST, True),  # the embedder says the same thing
    (WEATHER, "What about London, then?", False),  # same topic, another question
    ("thanks", "thanks", False),  # acknowledgements are never re-asks
    ("Play some jazz music please", "ok great", False),
])
def test_re_ask_detection(previous: str, current: str, expected: bool) -> None:
    assert Q.re_asks([(previous, current)], FakeEmbedder({WEATHER, FORECAST})) == [expected]


def test_a_failing_embedder_leaves_the_lexical_repeats() -> None:
    class Broken:
        def embed(self, texts):  # noqa: ANN001, ANN202
            raise RuntimeError("model gone")

    pairs = [(WEATHER, FORECAST), ("When is my dentist appointment?", "When is my dentist appointment?")]
    assert Q.re_asks(pairs, Broken()) == [False, True]


@pytest.mark.parametrize(("text", "expected"), [
    ("Actually, it's on Friday", True), ("No, I meant the other one", True), ("That's wrong", True),
    ("I'm not sure what you meant", False), ("What is the capital of Norway?", False),
])
def test_the_correction_cue_is_the_learning_heuristics(text: str, expected: bool) -> None:
    assert Q.is_correction(text) is expected


def test_abandonment_is_an_unanswered_or_late_answered_last_message() -> None:
    c = FakeConversations()
    c.add("answered", ("user", "Book a table for two", T0), ("assistant", "Done.", T0 + 1))
    c.add("unanswered", ("user", "Book a table for three", T0 + 2))
    c.add("late", ("user", "Book a table for four", T0 + 3), ("assistant", "Done.", T0 + 3 + Q.SESSION_WINDOW_SECS))
    c.add("empty", ("user", "Book a table for five", T0 + 4), ("assistant", "  ", T0 + 5))
    c.add("corrected", ("user", "Book a table for six", T0 + 6), ("assistant", "For seven?", T0 + 7),
          ("user", "No, for six people", T0 + 8), ("assistant", "Booked for six.", T0 + 9))  # ends answered
    c.add("answered later", ("user", "Where is the station?", T0 + 10), ("assistant", "", T0 + 11),
          ("user", "Where is the train station?", T0 + 12), ("assistant", "Two blocks north.", T0 + 13))
    result = Q.assess(deps(c), "u1", now=T0 + 3 + Q.SESSION_WINDOW_SECS)
    assert result.abandonment_rate == pytest.approx(3 / 6, abs=1e-4)  # unanswered, late, empty
    # before the late reply arrived, that message was still unanswered: abandoned all the same
    assert Q.assess(deps(c), "u1", now=T0 + 60).abandonment_rate == pytest.approx(3 / 6, abs=1e-4)


def test_the_window_starts_at_the_last_completed_run() -> None:
    c = FakeConversations()
    c.add("old", ("user", "Actually that is wrong", T0 - 500), ("assistant", "Sorry.", T0 - 499))
    c.add("mixed", ("user", "When is my dentist appointment?", T0 - 400), ("assistant", "Tuesday.", T0 - 399),
          ("user", "When is my dentist appointment?", T0 + 10), ("assistant", "Tuesday at 3.", T0 + 11))
    result = Q.assess(deps(c, last_run=T0), "u1", now=T0 + 20)
    assert result.window_start == iso_at(T0)
    assert (result.messages, result.conversations) == (1, 1)
    assert result.re_ask_rate == 1.0  # its previous message is older than the window, still compared
    assert result.correction_rate == 0.0  # the old correction is outside
    assert "old" not in c.read  # a conversation not updated since the run is not even opened
    # an explicit ``since`` wins over the store's last run
    assert Q.assess(deps(c, last_run=T0), "u1", since=T0 - 1000, now=T0 + 20).messages == 3


def test_no_messages_scores_one_with_nothing_to_judge() -> None:
    history = [SimpleNamespace(quality={"score": 0.5, "messages": 4})]
    result = Q.assess(deps(FakeConversations()), "u1", history=history, now=T0)
    assert (result.score, result.messages, result.conversations) == (1.0, 0, 0)
    assert result.trend is Trend.STABLE and result.regression is False
    assert result.recommendations == ["No user messages since the last run: nothing to judge."]
    assert Q.assess(deps(FakeConversations()), "u1").window_end == iso_at(T0 + LATER)  # deps.clock


def test_a_clean_window_says_nothing_to_change() -> None:
    c = FakeConversations()
    c.add("a", ("user", "Play some jazz music please", T0), ("assistant", "Playing.", T0 + 1))
    result = Q.assess(deps(c), "u1", now=T0 + 5)
    assert result.score == 1.0
    assert result.recommendations == ["No re-asks, corrections or abandoned conversations since the last run: "
                                      "nothing to change."]


def runs(*scores: float) -> list[SimpleNamespace]:
    return [SimpleNamespace(quality={"score": s, "messages": 3}) for s in scores]


@pytest.mark.parametrize(("history", "trend"), [
    (runs(0.5, 0.55, 0.6), Trend.IMPROVING),  # 0.65 against a mean of 0.55
    (runs(0.9, 0.8, 0.7), Trend.DEGRADING),  # against 0.8
    (runs(0.66, 0.64, 0.66), Trend.STABLE),  # within the dead band
    (runs(0.1, 0.66, 0.64, 0.65), Trend.STABLE),  # only the last three count
    ([], Trend.STABLE),
    ([SimpleNamespace(quality={"score": 1.0, "messages": 0}), SimpleNamespace(quality=None)], Trend.STABLE),
    ([SimpleNamespace(quality={"score": 0.2, "messages": 5}, status="rolled_back")], Trend.STABLE),
])
def test_trend_in_every_direction(history: list, trend: Trend) -> None:
    result = Q.assess(deps(known_set(), FakeEmbedder({WEATHER, FORECAST})), "u1", history=history,
                      now=T0 + 33 + LATER)
    assert result.score == pytest.approx(0.65)
    assert result.trend is trend


def test_a_drop_past_the_threshold_is_a_regression() -> None:
    embedder = FakeEmbedder({WEATHER, FORECAST})
    now = T0 + 33 + LATER
    fell = Q.assess(deps(known_set(), embedder), "u1", history=runs(0.8, 0.9), now=now)
    assert fell.regression is True
    assert fell.recommendations[0].startswith("Quality fell by 0.25")
    assert Q.assess(deps(known_set(), embedder), "u1", history=runs(0.9, 0.74), now=now).regression is False
    assert Q.assess(deps(known_set(), embedder, quality_regression_threshold=0.05), "u1", history=runs(0.71),
                    now=now).regression is True
    # dict results (as_dict) are read too
    assert Q.assess(deps(known_set(), embedder), "u1", history=[{"quality": {"score": 0.9, "messages": 1}}],
                    now=now).regression is True


def test_as_dict_is_json_ready() -> None:
    body = Q.assess(deps(known_set(), FakeEmbedder()), "u1", now=T0 + 33 + LATER).as_dict()
    assert body["trend"] == "Stable" and isinstance(body["recommendations"], list)
