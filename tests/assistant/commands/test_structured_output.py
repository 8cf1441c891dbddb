"""ask_json: the schema offered as the only tool; a call's arguments, else JSON read from text."""

from __future__ import annotations

import asyncio

import pytest

from assistant.commands.structured import ask_json, json_object_in
from assistant.llm.base import ChatMessage
from assistant.llm.queue import InferenceQueue
from assistant.llm.scripted import ScriptedChatModel

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.mark.parametrize(("text", "found"), [
    ('{"n": 1}', {"n": 1}),
    ('```json\n{"n": 2}\n```', {"n": 2}),
    ('Sure! Here it is: {"n": 3} - done', {"n": 3}),
    ('<tool_call>\n{"name": "answer", "arguments": {"n": 4}}\n</tool_call>', {"n": 4}),
    ('{"name": "answer", "arguments": "{\\"n\\": 5}"}', {"n": 5}),
    ('{"name": "other", "arguments": {"n": 6}}', {"n": 6}),  # a bare object's arguments, whatever its name
    ("no json here", None),
    ("{broken", None),
    ("[1, 2]", None),
])
def test_json_object_in(text: str, found: dict | None) -> None:
    assert json_object_in(text, "answer") == found


def _ask(model: ScriptedChatModel) -> dict | None:
    async def run() -> dict | None:
        queue = InferenceQueue(model, queue_timeout_secs=5, request_timeout_secs=5)
        try:
            return await ask_json(queue, [ChatMessage("user", "give n")], "answer", "The answer.", SCHEMA,
                                  max_tokens=64)
        finally:
            queue.close()
    return asyncio.run(run())


def test_a_tool_call_is_the_answer() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("answer", {"n": 7})])
    assert _ask(model) == {"n": 7}
    (_, options), = model.calls
    assert options.tools[0].name == "answer" and options.tools[0].parameters == SCHEMA
    assert options.max_tokens == 64 and options.temperature == 0.0


def test_a_call_of_another_tool_is_ignored_and_text_is_read() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("other", {"n": 1})])
    assert _ask(model) is None
    model.enqueue('{"n": 8}')
    assert _ask(model) == {"n": 8}
