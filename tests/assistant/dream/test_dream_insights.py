"""The insight lifecycle (confirm, dismiss, update, merge, expire: the state machine and its 409s) and
proactive surfacing, in the service and in a chat's system prompt."""

from __future__ import annotations

import asyncio
import time

import pytest

from assistant.chat.service import ChatRequest
from assistant.dream.insights import CONFIRMATION_THRESHOLD, SURFACING_HEADER
from assistant.dream.types import EntryStatus, Insight, InsightStatus, InsightType, Operation, Phase
from assistant.errors import ConflictError, NotFoundError, ValidationFailed
from assistant.llm.scripted import ScriptedChatModel
from assistant.memory.types import MemoryType
from assistant.services import Services

DAY = 86_400.0


@pytest.fixture
def dreamy(make_settings, make_services, model: ScriptedChatModel) -> Services:
    return make_services(make_settings(dream={"max_cycles": 1}), model)


def add(services: Services, title: str, content: str = "", *, kind: InsightType = InsightType.HYPOTHESIS,
        confidence: float = 0.7, user: str = "u1", session: bool = True, status: InsightStatus | None = None,
        sources: list[str] | None = None) -> Insight:
    deps = services.dream.deps
    content = content or f"{title}, says the dream."
    sid = deps.store.create_session(user, 1, "manual").id if session else None
    vector = services.memory.embedder.embed([f"{title}. {content}"])[0]
    insight, _ = deps.store.add_insight(user, kind, title, content, confidence, sources or [], f"key:{title}",
                                        session_id=sid, embedding=vector)
    if status is not None:
        insight = deps.store.update_insight(insight, status=status)
    return insight


def test_a_hypothesis_is_confirmed_past_the_threshold_merged_into_memory_and_journaled(dreamy: Services) -> None:
    insights = dreamy.dream.insights
    memory = dreamy.memory.add("u1", "I looked at flats in Porto.")
    weak = add(dreamy, "You may move to Porto", confidence=0.45, sources=[memory.id])
    with pytest.raises(ConflictError, match="below the confirmation threshold 0.6") as err:
        insights.confirm("u1", weak.id)
    assert err.value.details["status"] == "active" and err.value.details["confidence"] == 0.45
    assert insights.get("u1", weak.id).status is InsightStatus.ACTIVE  # unchanged
    strong = add(dreamy, "You may take up climbing", confidence=CONFIRMATION_THRESHOLD, sources=[memory.id])
    confirmed = insights.confirm("u1", strong.id)
    assert confirmed.status is InsightStatus.CONFIRMED and confirmed.memory_id is not None
    merged = dreamy.memory.get("u1", confirmed.memory_id)
    assert merged.memory_type is MemoryType.DREAM_INSIGHT and "You may take up climbing" in merged.content
    assert merged.importance == pytest.approx(0.6)
    entries, _ = dreamy.dream.journal("u1", strong.session_id, operation=Operation.INSIGHT_CONFIRMED)
    [entry] = entries
    assert entry.status is EntryStatus.APPLIED and entry.phase is Phase.REM
    assert entry.details["insight_id"] == strong.id and entry.before_snapshot["status"] == "active"
    assert set(entry.affected_memory_ids) == {memory.id, confirmed.memory_id}
    with pytest.raises(ConflictError, match="cannot confirm: the insight is confirmed"):
        insights.confirm("u1", strong.id)
    assert insights.merge("u1", strong.id).memory_id == confirmed.memory_id  # once


def test_confirming_other_types_needs_no_threshold_and_writes_no_memory(dreamy: Services) -> None:
    pattern = add(dreamy, "Sintra keeps coming up", kind=InsightType.PATTERN, confidence=0.2, session=False)
    confirmed = dreamy.dream.insights.confirm("u1", pattern.id)
    assert confirmed.status is InsightStatus.CONFIRMED and confirmed.memory_id is None
    merged = dreamy.dream.insights.merge("u1", pattern.id)
    assert merged.memory_id and dreamy.memory.get("u1", merged.memory_id).memory_type is MemoryType.DREAM_INSIGHT


def test_dismiss_and_the_409s_of_the_state_machine(dreamy: Services) -> None:
    insights = dreamy.dream.insights
    active = add(dreamy, "A guess")
    dismissed = insights.dismiss("u1", active.id)
    assert dismissed.status is InsightStatus.DISMISSED
    for action in (insights.confirm, insights.dismiss, insights.merge):
        with pytest.raises(ConflictError, match="the insight is dismissed") as err:
            action("u1", active.id)
        assert err.value.details["status"] == "dismissed"
    expired = add(dreamy, "An old guess", status=InsightStatus.EXPIRED)
    with pytest.raises(ConflictError, match="cannot confirm: the insight is expired"):
        insights.confirm("u1", expired.id)
    assert insights.dismiss("u1", expired.id).status is InsightStatus.DISMISSED
    hypothesis = add(dreamy, "Unconfirmed")
    with pytest.raises(ConflictError, match="becomes memory when it is confirmed"):
        insights.merge("u1", hypothesis.id)


def test_another_users_insight_is_not_found(dreamy: Services) -> None:
    theirs = add(dreamy, "Theirs", user="u2")
    for action in (dreamy.dream.insights.get, dreamy.dream.insights.confirm, dreamy.dream.insights.dismiss,
                   dreamy.dream.insights.merge):
        with pytest.raises(NotFoundError):
            action("u1", theirs.id)
    with pytest.raises(NotFoundError):
        dreamy.dream.insights.update("u1", theirs.id, {"title": "mine"})
    assert dreamy.dream.insights.get("u2", theirs.id).title == "Theirs"


def test_update_edits_text_re_embeds_and_moves_status_only_as_the_machine_allows(dreamy: Services) -> None:
    insights, store = dreamy.dream.insights, dreamy.dream.store
    insight = add(dreamy, "Old title", confidence=0.7)
    updated = insights.update("u1", insight.id, {"title": "New title about gardening", "content": "Gardening."})
    assert (updated.title, updated.content) == ("New title about gardening", "Gardening.")
    ids, vectors = store.insight_vectors("u1", InsightStatus.ACTIVE)
    expected = dreamy.memory.embedder.embed(["New title about gardening. Gardening."])[0]
    assert vectors[ids.index(insight.id)] @ expected == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValidationFailed) as err:
        insights.update("u1", insight.id, {"title": "", "status": "maybe", "colour": "red"})
    assert {f["field"] for f in err.value.details["fields"]} == {"title", "status", "colour"}
    assert insights.get("u1", insight.id).title == "New title about gardening"  # nothing written
    with pytest.raises(ValidationFailed, match="content"):
        insights.update("u1", insight.id, {"content": 42})
    with pytest.raises(ConflictError, match="cannot change the status to expired") as conflict:
        insights.update("u1", insight.id, {"status": "expired", "title": "Changed"})
    assert conflict.value.details["allowed"] == ["confirmed", "dismissed"]
    assert insights.get("u1", insight.id).title == "New title about gardening"
    confirmed = insights.update("u1", insight.id, {"status": "confirmed", "title": "Gardening helps you relax"})
    assert confirmed.status is InsightStatus.CONFIRMED and confirmed.title == "Gardening helps you relax"
    assert confirmed.memory_id is not None  # a hypothesis: merged on confirmation
    with pytest.raises(ConflictError, match="cannot change the status to dismissed: the insight is confirmed"):
        insights.update("u1", insight.id, {"status": "dismissed"})
    assert insights.update("u1", insight.id, {"status": "confirmed"}).status is InsightStatus.CONFIRMED  # no change
    gone = add(dreamy, "Dismissed one", status=InsightStatus.DISMISSED)
    with pytest.raises(ConflictError, match="cannot edit the insight: the insight is dismissed"):
        insights.update("u1", gone.id, {"title": "x"})
    weak = add(dreamy, "Weak", confidence=0.35)
    with pytest.raises(ConflictError, match="below the confirmation threshold"):
        insights.update("u1", weak.id, {"status": "confirmed", "title": "Edited"})
    assert insights.get("u1", weak.id).title == "Weak"  # checked before anything was written


def test_hypotheses_without_evidence_expire_after_the_ttl(dreamy: Services) -> None:
    store = dreamy.dream.store
    store.clock = lambda: time.time() - 31 * DAY
    old = add(dreamy, "Old")
    old_pattern = add(dreamy, "Old pattern", kind=InsightType.PATTERN)
    store.clock = lambda: time.time() - 29 * DAY
    recent = add(dreamy, "Recent")
    store.clock = time.time
    assert dreamy.dream.settings.hypothesis_ttl_days == 30
    assert dreamy.dream.insights.expire("u1") == 1
    assert store.insight("u1", old.id).status is InsightStatus.EXPIRED
    assert store.insight("u1", recent.id).status is InsightStatus.ACTIVE
    assert store.insight("u1", old_pattern.id).status is InsightStatus.ACTIVE


def test_surfacing_picks_confirmed_similar_confident_insights_within_the_budget(dreamy: Services) -> None:
    insights = dreamy.dream.insights
    assert dreamy.dream.settings.rem.surfacing_similarity_threshold == 0.5
    assert dreamy.dream.settings.rem.surfacing_confidence_threshold == 0.5
    text = "climbing in Sintra with Ana"
    on_topic = add(dreamy, "Climbing in Sintra with Ana", "You go climbing in Sintra with Ana.",
                   kind=InsightType.PATTERN, confidence=0.8, status=InsightStatus.CONFIRMED)
    add(dreamy, "Climbing in Sintra with Ana, weakly", "You go climbing in Sintra with Ana.",
        kind=InsightType.PATTERN, confidence=0.49, status=InsightStatus.CONFIRMED)
    add(dreamy, "Climbing in Sintra with Ana, unconfirmed", "You go climbing in Sintra with Ana.",
        kind=InsightType.PATTERN, confidence=0.9)
    add(dreamy, "Budget meetings pile up on Mondays", "Your budget meetings are on Mondays.",
        kind=InsightType.PATTERN, confidence=0.9, status=InsightStatus.CONFIRMED)
    found = insights.surface("u1", text, None, 2000)
    assert found.startswith("Did you know?") and "not instructions" in found
    lines = found.splitlines()[1:]
    assert lines == ['- "Climbing in Sintra with Ana: You go climbing in Sintra with Ana."']
    assert insights.surface("u1", "What is the weather in Oslo?", None, 2000) == ""
    assert insights.surface("u1", text, None, len(SURFACING_HEADER) + 10) == ""  # no room
    assert insights.surface("u2", text, None, 2000) == ""
    dreamy.dream.settings.rem.proactive_surfacing = False
    assert insights.surface("u1", text, None, 2000) == ""
    assert on_topic.id


def test_a_confirmed_insight_reaches_the_system_prompt_and_an_unrelated_one_does_not(
        dreamy: Services, model: ScriptedChatModel) -> None:
    add(dreamy, "Climbing in Sintra with Ana", "You go climbing in Sintra with Ana every week.",
        kind=InsightType.PATTERN, confidence=0.8, status=InsightStatus.CONFIRMED)
    add(dreamy, "Budget meetings pile up on Mondays", "Your budget meetings are on Mondays.",
        kind=InsightType.PATTERN, confidence=0.9, status=InsightStatus.CONFIRMED)
    asyncio.run(dreamy.chat.chat("u1", ChatRequest("Shall I go climbing in Sintra with Ana?")))
    system = "\n".join(m.content for m in model.calls[-1][0] if m.role == "system")  # with tools: a second one
    assert "Did you know?" in system and "You go climbing in Sintra with Ana every week." in system
    assert "budget" not in system.lower()
    asyncio.run(dreamy.chat.chat("u1", ChatRequest("What is the capital of Norway?")))
    assert not any("Did you know?" in m.content for m in model.calls[-1][0])
