"""The chat page: answers streamed token by token, and under each one the memories and tools it used.

Everything comes from a :class:`~dashboards.chat_client.ChatClient` (``POST /v1/chat/stream`` over HTTP,
or :meth:`ChatService.stream` in process: the same events); this module only lays them out:

- a feed of the exchanges and an input (Enter or *Send*); each message is sent with the conversation id of
  the previous answer (the ``done`` event's ``conversation_id``), so the conversation goes on until *New
  conversation*. Not :class:`panel.chat.ChatInterface`: its icons are Bokeh Tabler icons, whose style sheet
  and font Bokeh loads from a CDN (cdn.jsdelivr.net), and the page must work on a machine with no
  internet access (the browser test allows loopback only);
- the answer grows as the ``message`` deltas arrive (shown as text, never as Markdown or HTML: a model's
  answer may quote a web page or a memory, :mod:`dashboards.text`); when ``done`` arrives, the answer is shown with, under
  it, the **memories** that reached its prompt (type, content, relevance, similarity) and the **tools** it
  ran (tool, status, arguments, a summary of the result or error);
- a link to the answer's explanation, ``/api/chat/{id}/explain``, only when the API serves that route:
  it does not exist yet, so the client looks for it in the API's OpenAPI document once per session
  (:meth:`~dashboards.chat_client.HttpChatClient.explain_url`) and the link appears by itself once it does.

A failure (the API unreachable, the key refused, the engine unavailable, an error during the stream)
shows as a banner above the chat and in the answer's place.

Serve it with ``panel serve dashboards/chat.py``: with ``ASSISTANT_API_URL`` and ``ASSISTANT_API_KEY`` set it
uses the API server (the key's user); otherwise it builds the services of the configured data directory in
process (``--args config.toml``; only while no server holds that directory) and chats as
``ASSISTANT_DASHBOARD_USER`` (default: the owner). ``ASSISTANT_CHAT_MAX_TOKENS`` caps each answer.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
from typing import Any

import pandas as pd
import panel as pn
import param

from dashboards.chat_client import ChatClient, HttpChatClient, LocalChatClient
from dashboards.client import ClientError
from dashboards.text import literal_html, literal_markdown

MEMORY_COLUMNS = ["type", "content", "relevance", "similarity"]
TOOL_COLUMNS = ["tool", "status", "arguments", "result"]


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def memories_frame(done: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{"type": m["memory_type"], "content": _short(m["content"]), "relevance": m["relevance"],
                          "similarity": m["similarity"]} for m in done.get("memories") or []], columns=MEMORY_COLUMNS)


def tools_frame(done: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{"tool": r["tool"], "status": r["status"], "arguments": _short(r.get("arguments") or {}),
                          "result": _short(r["error"] if r.get("error") else r.get("result"))}
                         for r in done.get("tool_runs") or []], columns=TOOL_COLUMNS)


def used_panel(done: dict[str, Any], explain: str | None = None) -> pn.Column:
    """What an answer used, laid out under it."""
    memories, tools = memories_frame(done), tools_frame(done)
    parts: list[Any] = []
    if memories.empty:
        parts.append(pn.pane.Markdown("*No memory reached the prompt.*", css_classes=["chat-memories"]))
    else:
        parts += [pn.pane.Markdown(f"**Memories used** ({len(memories)})"),
                  pn.widgets.Tabulator(memories, disabled=True, show_index=False, sizing_mode="stretch_width",
                                       css_classes=["chat-memories"], layout="fit_data_stretch")]
    if not tools.empty:
        parts += [pn.pane.Markdown(f"**Tools run** ({len(tools)})"),
                  pn.widgets.Tabulator(tools, disabled=True, show_index=False, sizing_mode="stretch_width",
                                       css_classes=["chat-tools"], layout="fit_data_stretch")]
    tokens = done.get("tokens") or {}
    footer = f"{literal_markdown(str(done.get('model', '')))} · {tokens.get('total', 0)} tokens"
    if explain:
        footer += f" · [Why this answer?]({html.escape(explain, quote=True)})"
    parts.append(pn.pane.Markdown(footer, css_classes=["chat-footer"]))
    return pn.Column(*parts, sizing_mode="stretch_width", css_classes=["chat-used"])


class ChatPage(pn.viewable.Viewer):
    """A conversation through ``client`` (see the module docstring)."""

    max_tokens = param.Integer(None, allow_None=True, bounds=(1, None), doc="Cap on each answer's tokens")

    def __init__(self, client: ChatClient, **params):
        super().__init__(**params)
        self.client = client
        self.conversation_id: str | None = None
        self.last_done: dict[str, Any] | None = None
        self.busy = False
        self.banner = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["chat-banner"])
        self.conversation = pn.pane.Markdown("*A new conversation.*", css_classes=["chat-conversation"])
        self.new_button = pn.widgets.Button(label="New conversation", width=170)
        self.new_button.on_click(lambda _e: self.new_conversation())
        self.feed = pn.Column(sizing_mode="stretch_width", css_classes=["chat-feed"])
        self.input = pn.widgets.TextInput(placeholder="Ask something… (Enter sends)", sizing_mode="stretch_width",
                                          css_classes=["chat-input"])
        self.input.param.watch(self._entered, "enter_pressed")
        self.send_button = pn.widgets.Button(label="Send", color="primary", width=100)
        self.send_button.on_click(self._clicked)

    async def _entered(self, _event: Any) -> None:
        await self.send(self.input.value)

    async def _clicked(self, _event: Any) -> None:
        await self.send(self.input.value)

    def new_conversation(self) -> None:
        self.conversation_id = None
        self.last_done = None
        self.conversation.object = "*A new conversation.*"
        self.feed.clear()

    def fail(self, exc: Exception) -> str:
        message = str(exc) if isinstance(exc, ClientError) else f"{type(exc).__name__}: {exc}"
        self.banner.object = f"**The answer failed:** {literal_markdown(message)}"
        self.banner.visible = True
        return message

    async def send(self, message: str) -> dict[str, Any] | None:
        """Send ``message`` in the current conversation; the answer grows in the feed delta by delta, then
        what it used is laid out under it. Returns the ``done`` event's data (None when it failed)."""
        message = (message or "").strip()
        if not message or self.busy:
            return None
        self.busy, self.send_button.disabled, self.input.value = True, True, ""
        self.feed.append(pn.pane.Markdown(f"**You:** {literal_markdown(message)}", css_classes=["chat-user"],
                                          sizing_mode="stretch_width"))
        answer = pn.pane.HTML(literal_html("…", "answer-text"), css_classes=["chat-answer"],
                              sizing_mode="stretch_width")
        block = pn.Column(pn.pane.Markdown("**Assistant:**"), answer, sizing_mode="stretch_width",
                          css_classes=["chat-reply"])
        self.feed.append(block)
        text, done = "", None
        try:
            async for event, data in self.client.stream(message, self.conversation_id, max_tokens=self.max_tokens):
                if event == "message":
                    text += data.get("delta", "")
                    answer.object = literal_html(text, "answer-text")
                elif event == "done":
                    done = data
        except Exception as exc:  # a banner and a note in the answer's place, never a traceback
            failure = self.fail(exc)
            answer.object = literal_html(f"{text}\n\n(no answer: {failure})", "answer-text")
            answer.css_classes = ["chat-answer", "chat-failed"]
            return None
        finally:
            self.busy, self.send_button.disabled = False, False
        self.banner.visible = False
        answer.object = literal_html(text, "answer-text")
        if done is None:
            return None
        self.last_done = done
        self.conversation_id = done.get("conversation_id") or self.conversation_id
        self.conversation.object = f"Conversation `{html.escape(str(self.conversation_id))}`"
        explain = await asyncio.to_thread(self.client.explain_url, done)
        block.append(used_panel(done, explain))
        return done

    def __panel__(self) -> pn.viewable.Viewable:
        return pn.Column(
            pn.Row("## Chat", self.new_button, sizing_mode="stretch_width"),
            self.banner,
            self.conversation,
            self.feed,
            pn.Row(self.input, self.send_button, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )


def local_chat(config: str | None) -> ChatClient:
    """In process: the chat service of the configured data directory (built once per process)."""
    from dashboards.serving import local_services

    services, user = local_services(config, "chat", "chat is unavailable")
    return LocalChatClient(services.chat, user)


def chat_page(client: ChatClient) -> ChatPage:
    cap = os.environ.get("ASSISTANT_CHAT_MAX_TOKENS")
    return ChatPage(client, max_tokens=int(cap) if cap else None)


if pn.state.served:
    from dashboards.banner import serve_page

    serve_page("Chat", ("tabulator",), HttpChatClient, local_chat, chat_page)
