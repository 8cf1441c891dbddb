"""Conversations and their messages, persisted in SQLite and owned by one user each.

Message texts and titles are sealed like memories (XChaCha20-Poly1305) when a sealer is given:
the same words are in both, so neither is written in plaintext. A title is bound (associated
data) to its conversation and user, a message's text to its message and the conversation's user.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from uuid import UUID, uuid4

from assistant.clock import iso
from assistant.crypto import SealContext, Sealer
from assistant.errors import NotFoundError
from assistant.llm.base import ChatMessage
from assistant.storage.db import Database


@dataclass(frozen=True)
class Conversation:
    id: str
    user_id: str
    title: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class StoredMessage:
    id: str
    role: str
    content: str
    model: str | None
    created_at: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ConversationStore:
    def __init__(self, db: Database, sealer: Sealer | None = None):
        self.db = db
        self.sealer = sealer or Sealer(None)

    def _open(self, value: bytes | str, table: str, column: str, row_id: str, user_id: str) -> str:
        return value if isinstance(value, str) else self.sealer.open(value, SealContext(table, column, row_id, user_id))

    def _conversation(self, row: dict) -> Conversation:
        return Conversation(**{**row, "title": self._open(row["title"], "conversations", "title", row["id"],
                                                          row["user_id"])})

    def get(self, user_id: UUID | str, conversation_id: UUID | str) -> Conversation:
        """The conversation, if it exists and belongs to ``user_id``; otherwise NotFoundError."""
        row = self.db.one(
            "SELECT * FROM conversations WHERE id = ? AND user_id = ?", (str(conversation_id), str(user_id))
        )
        if row is None:
            raise NotFoundError(f"conversation {conversation_id} not found")
        return self._conversation(row)

    def list(self, user_id: UUID | str, limit: int = 100, offset: int = 0) -> list[Conversation]:
        rows = self.db.query(
            "SELECT * FROM conversations WHERE user_id = ? ORDER BY updated_at DESC LIMIT ? OFFSET ?",
            (str(user_id), limit, offset),
        )
        return [self._conversation(r) for r in rows]

    def history(self, conversation_id: str, limit: int) -> list[ChatMessage]:
        """The last ``limit`` messages, oldest first. A stored ``tool`` message (the outcome of a
        tool call decided after the reply that asked for it, see :meth:`add_note`) answers no call
        of the new prompt, and backends refuse a tool message without its call: it is given to the
        model as a user-turn note, whose text says what it is."""
        if limit <= 0:
            return []
        rows = self.db.query(
            "SELECT m.id, m.role, m.content, c.user_id FROM messages m JOIN conversations c ON c.id = m.conversation_id "
            "WHERE m.conversation_id = ? ORDER BY m.seq DESC LIMIT ?",
            (conversation_id, limit),
        )
        return [ChatMessage("user" if r["role"] == "tool" else r["role"],
                            self._open(r["content"], "messages", "content", r["id"], r["user_id"]))
                for r in reversed(rows)]

    def add_note(self, user_id: UUID | str, conversation_id: str, content: str, role: str = "tool") -> str | None:
        """Append one message to ``user_id``'s conversation (sealed like the others); its id, or
        None when there is no such conversation of that user."""
        message_id = str(uuid4())
        now = iso()
        with self.db.transaction() as db:
            if db.one("SELECT 1 FROM conversations WHERE id = ? AND user_id = ?",
                      (conversation_id, str(user_id))) is None:
                return None
            seq = db.scalar("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE conversation_id = ?", (conversation_id,))
            sealed = self.sealer.seal(content, SealContext("messages", "content", message_id, str(user_id)))
            db.execute(
                "INSERT INTO messages (id, conversation_id, role, content, model, prompt_tokens, completion_tokens, "
                "created_at, seq) VALUES (?, ?, ?, ?, NULL, 0, 0, ?, ?)",
                (message_id, conversation_id, role, sealed, now, seq + 1),
            )
            db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))
        return message_id

    def user_messages(self, user_id: UUID | str, *, batch: int = 200) -> Iterator[tuple[str, str]]:
        """``user_id``'s own messages (role ``user``) across their conversations, newest first, as
        ``(message_id, text)``; read and opened ``batch`` at a time, so a caller that stops early opens
        no more (distillation's prompt set, assistant/learning/distill_prompts.py)."""
        offset = 0
        while True:
            rows = self.db.query(
                "SELECT m.id, m.content, c.user_id FROM messages m JOIN conversations c ON c.id = m.conversation_id "
                "WHERE c.user_id = ? AND m.role = 'user' ORDER BY m.created_at DESC, m.seq DESC LIMIT ? OFFSET ?",
                (str(user_id), batch, offset),
            )
            for r in rows:
                yield r["id"], self._open(r["content"], "messages", "content", r["id"], r["user_id"])
            if len(rows) < batch:
                return
            offset += batch

    def messages(self, conversation_id: str) -> list[StoredMessage]:
        rows = self.db.query(
            "SELECT m.id, m.role, m.content, m.model, m.created_at, m.prompt_tokens, m.completion_tokens, c.user_id "
            "FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE m.conversation_id = ? ORDER BY m.seq",
            (conversation_id,),
        )
        return [StoredMessage(**{**{k: v for k, v in r.items() if k != "user_id"},
                                 "content": self._open(r["content"], "messages", "content", r["id"], r["user_id"])})
                for r in rows]

    def record_exchange(
        self,
        *,
        user_id: UUID | str,
        conversation_id: str | None,
        user_message: str,
        reply: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        reply_id: str | None = None,
        at: str | None = None,
    ) -> tuple[str, str, str]:
        """Store one user message and its reply atomically (creating the conversation if new).
        ``at`` (an ISO 8601 UTC time, as :func:`assistant.clock.iso` writes it) stores an exchange that
        happened earlier (a history imported, the precache notebook's); by default now.

        Returns ``(conversation_id, reply_id, reply_created_at)``.
        """
        now = at or iso()
        reply_id = reply_id or str(uuid4())
        with self.db.transaction() as db:
            owner = None if conversation_id is None else db.scalar(
                "SELECT user_id FROM conversations WHERE id = ?", (conversation_id,))
            if owner is None:
                conversation_id, owner = conversation_id or str(uuid4()), str(user_id)
                title = self.sealer.seal(user_message[:80], SealContext("conversations", "title", conversation_id, owner))
                db.execute(
                    "INSERT INTO conversations (id, user_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (conversation_id, owner, title, now, now),
                )
            else:
                db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))
            seq = db.scalar("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE conversation_id = ?", (conversation_id,))
            message_id = str(uuid4())
            db.execute(
                "INSERT INTO messages (id, conversation_id, role, content, model, prompt_tokens, completion_tokens, "
                "created_at, seq) VALUES (?, ?, 'user', ?, NULL, 0, 0, ?, ?)",
                (message_id, conversation_id,
                 self.sealer.seal(user_message, SealContext("messages", "content", message_id, owner)), now, seq + 1),
            )
            db.execute(
                "INSERT INTO messages (id, conversation_id, role, content, model, prompt_tokens, completion_tokens, "
                "created_at, seq) VALUES (?, ?, 'assistant', ?, ?, ?, ?, ?, ?)",
                (reply_id, conversation_id, self.sealer.seal(reply, SealContext("messages", "content", reply_id, owner)),
                 model, prompt_tokens, completion_tokens, now,
                 seq + 2),
            )
        return conversation_id, reply_id, now
