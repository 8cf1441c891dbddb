"""Conversations and messages in SQLite, each conversation owned by one user."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest

from assistant.chat.conversations import ConversationStore
from assistant.errors import NotFoundError
from assistant.llm.base import ChatMessage
from assistant.storage.db import Database


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    db = Database(tmp_path / "c.db")
    yield ConversationStore(db)
    db.close()


def exchange(store: ConversationStore, user, conversation_id=None, n: int = 1, text: str = "q"):  # noqa: ANN001, ANN201
    for i in range(n):
        conversation_id, _, _ = store.record_exchange(
            user_id=user, conversation_id=conversation_id, user_message=f"{text}{i}", reply=f"a{i}",
            model="m", prompt_tokens=3, completion_tokens=2,
        )
    return conversation_id


def test_record_creates_and_get_returns(store: ConversationStore) -> None:
    user = uuid4()
    conversation_id, reply_id, created_at = store.record_exchange(
        user_id=user, conversation_id=None, user_message="Plan my day" * 20, reply="Sure.", model="m",
        prompt_tokens=10, completion_tokens=2,
    )
    conversation = store.get(user, conversation_id)
    assert conversation.user_id == str(user)
    assert conversation.title == ("Plan my day" * 20)[:80]
    assert created_at.endswith("Z")
    messages = store.messages(conversation_id)
    assert [(m.role, m.content, m.model) for m in messages] == [
        ("user", "Plan my day" * 20, None), ("assistant", "Sure.", "m")]
    assert messages[1].id == reply_id
    assert (messages[1].prompt_tokens, messages[1].completion_tokens) == (10, 2)


def test_get_refuses_other_users_and_unknown_ids(store: ConversationStore) -> None:
    owner = uuid4()
    conversation_id = exchange(store, owner)
    with pytest.raises(NotFoundError):
        store.get(uuid4(), conversation_id)
    with pytest.raises(NotFoundError):
        store.get(owner, str(uuid4()))


def test_history_is_the_latest_messages_oldest_first(store: ConversationStore) -> None:
    conversation_id = exchange(store, uuid4(), n=3)
    assert store.history(conversation_id, 3) == [
        ChatMessage("assistant", "a1"), ChatMessage("user", "q2"), ChatMessage("assistant", "a2")]
    assert len(store.history(conversation_id, 100)) == 6
    assert store.history(conversation_id, 0) == []


def test_sequence_numbers_continue(store: ConversationStore) -> None:
    conversation_id = exchange(store, uuid4(), n=2)
    seqs = [r["seq"] for r in store.db.query(
        "SELECT seq FROM messages WHERE conversation_id = ? ORDER BY seq", (conversation_id,))]
    assert seqs == [1, 2, 3, 4]


def test_list_is_per_user(store: ConversationStore) -> None:
    alice, bob = uuid4(), uuid4()
    exchange(store, alice)
    exchange(store, alice)
    exchange(store, bob)
    assert len(store.list(alice)) == 2
    assert len(store.list(bob)) == 1
    assert len(store.list(alice, limit=1)) == 1
    assert store.list(uuid4()) == []


def test_given_new_id_is_used(store: ConversationStore) -> None:
    wanted = str(uuid4())
    user = uuid4()
    assert exchange(store, user, conversation_id=wanted) == wanted
    assert store.get(user, wanted).id == wanted


def test_a_note_is_appended_to_the_owners_conversation_and_reaches_the_model_as_a_user_turn(
        store: ConversationStore) -> None:
    user = uuid4()
    conversation_id = exchange(store, user)
    assert store.add_note(uuid4(), conversation_id, "not yours") is None  # another user's conversation
    assert store.add_note(user, str(uuid4()), "nowhere") is None
    note_id = store.add_note(user, conversation_id, "[approval 1] The tool call x({}) was denied.")
    assert note_id is not None
    stored = store.messages(conversation_id)
    assert [(m.role, m.content) for m in stored][-1] == ("tool", "[approval 1] The tool call x({}) was denied.")
    history = store.history(conversation_id, 10)
    assert [m.role for m in history] == ["user", "assistant", "user"]  # no tool message without its call
    assert history[-1].content.startswith("[approval 1]")


def test_an_earlier_exchange_keeps_its_time(store: ConversationStore) -> None:
    user = uuid4()
    conversation_id, _, created_at = store.record_exchange(
        user_id=user, conversation_id=None, user_message="Weather in Berlin?", reply="Overcast.", model="m",
        prompt_tokens=1, completion_tokens=1, at="2026-03-01T08:05:00.000Z")
    assert created_at == "2026-03-01T08:05:00.000Z"
    assert [m.created_at for m in store.messages(conversation_id)] == ["2026-03-01T08:05:00.000Z"] * 2
