"""The prompt set of a distillation run: the user's own past questions, or a list the user gives.

A run's prompts are the questions the student should learn to answer. By default they are the caller's own
messages (role ``user``, in all their conversations; never another user's), newest first, deduplicated by
their normalised wording (case and runs of white space ignored), up to the run's maximum. A given list is
checked the same way: each prompt non-empty and at most :data:`MAX_PROMPT_CHARS` characters, at most
``distillation.max_prompts`` of them, repeats dropped. :func:`read_prompt_file` turns a file (JSONL or plain
text) into such a list: the HTTP route takes the list in its body, so a client reads the file and sends it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from assistant.errors import ValidationFailed

MAX_PROMPT_CHARS = 4000  # a question longer than this is not a chat question (and would crowd the context)
PromptSource = Literal["history", "given"]
FILE_KEYS = ("prompt", "question", "content", "text")  # what a JSONL object's prompt may be called


class QuestionSource(Protocol):
    """Where the user's past questions come from (:class:`assistant.chat.conversations.ConversationStore`)."""

    def user_messages(self, user_id: str, *, batch: int = 200) -> Iterable[tuple[str, str]]: ...


@dataclass(frozen=True)
class PromptSet:
    prompts: tuple[str, ...]
    source: PromptSource
    skipped: int = 0  # past questions left out: repeats, or longer than MAX_PROMPT_CHARS


def normalised(text: str) -> str:
    """The key two prompts are the same by: case-folded, white space collapsed."""
    return " ".join(text.split()).casefold()


def past_questions(source: QuestionSource, user_id: str, limit: int) -> PromptSet:
    """Up to ``limit`` distinct questions of ``user_id``, most recent first."""
    seen: set[str] = set()
    prompts: list[str] = []
    skipped = 0
    for _message_id, text in source.user_messages(str(user_id)):
        text = text.strip()
        key = normalised(text)
        if not key or key in seen or len(text) > MAX_PROMPT_CHARS:
            skipped += 1
            continue
        seen.add(key)
        prompts.append(text)
        if len(prompts) >= limit:
            break
    return PromptSet(tuple(prompts), "history", skipped)


def given_prompts(prompts: list[str], limit: int, *, setting: str = "distillation.max_prompts") -> PromptSet:
    """The caller's own list, checked: :class:`ValidationFailed` naming each bad item (``prompts[3]``);
    repeats (by normalised wording) count once."""
    fields: list[dict[str, str]] = []
    if len(prompts) > limit:
        fields.append({"field": "prompts", "error": f"at most {limit} prompts ({setting}); got {len(prompts)}"})
    seen: set[str] = set()
    kept: list[str] = []
    for i, prompt in enumerate(prompts):
        if not isinstance(prompt, str):
            fields.append({"field": f"prompts[{i}]", "error": "must be a string"})
            continue
        text = prompt.strip()
        if not text:
            fields.append({"field": f"prompts[{i}]", "error": "must not be empty"})
        elif len(text) > MAX_PROMPT_CHARS:
            fields.append({"field": f"prompts[{i}]",
                           "error": f"at most {MAX_PROMPT_CHARS} characters; got {len(text)}"})
        elif normalised(text) not in seen:
            seen.add(normalised(text))
            kept.append(text)
    if fields:
        summary = "; ".join(f"{f['field']}: {f['error']}" for f in fields[:3])
        raise ValidationFailed(f"invalid prompts: {summary}", fields)
    return PromptSet(tuple(kept), "given", len(prompts) - len(kept))


def read_prompt_file(text: str) -> list[str]:
    """The prompts of a file's text, one per line: a JSONL line is a JSON string or an object with one of
    :data:`FILE_KEYS` (or OpenAI-style ``messages``, whose last ``user`` message is the prompt); any other
    line is the prompt itself. Blank lines are skipped. :class:`ValidationFailed` for a JSON line without
    a prompt (naming its line number)."""
    prompts: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if not line.startswith(("{", '"')):
            prompts.append(line)
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            prompts.append(line)  # text that merely starts like JSON
            continue
        prompt = _prompt_of(value)
        if prompt is None:
            error = f"a JSON line needs a string, one of {', '.join(FILE_KEYS)}, or messages with a user message"
            raise ValidationFailed(f"line {number}: {error}", [{"field": f"line {number}", "error": error}])
        prompts.append(prompt)
    return prompts


def _prompt_of(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return None
    for key in FILE_KEYS:
        if isinstance(value.get(key), str):
            return value[key]
    messages = value.get("messages")
    if isinstance(messages, list):
        users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if users and isinstance(users[-1], str):
            return users[-1]
    return None
