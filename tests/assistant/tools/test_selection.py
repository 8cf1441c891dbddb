"""Which tools a message is offered: embedding similarity, trigger words, the cap, and chat's use."""

from __future__ import annotations

import numpy as np

from assistant.chat.service import ChatRequest
from assistant.config import Settings, ToolCallingSettings
from assistant.tools.base import ToolContext, tool
from assistant.tools.selection import ToolSelector


@tool("weather")
def get_weather(ctx: ToolContext, location: str) -> dict:
    """Current weather and the daily forecast for a place."""
    return {}


@tool("web")
def search_web(ctx: ToolContext, query: str) -> dict:
    """Search the web."""
    return {}


@tool("code")
def execute_code(ctx: ToolContext, code: str) -> dict:
    """Run a short Python program."""
    return {}


class WordEmbedder:
    """Vectors over a tiny vocabulary: texts sharing these words are similar."""

    VOCAB = ("weather", "forecast", "place", "sunny", "web", "program", "joke")

    def embed(self, texts):  # noqa: ANN001, ANN201
        return [np.array([float(w in t.lower()) for w in self.VOCAB]) + 1e-6 for t in texts]


TOOLS = [get_weather, search_web, execute_code]


def test_similar_tools_are_offered_best_first_and_unrelated_messages_get_none() -> None:
    selector = ToolSelector(WordEmbedder(), threshold=0.3)
    assert selector.select("is it sunny at that place", TOOLS) == ["get_weather"]
    assert selector.select("tell me a joke", TOOLS) == []
    scores = selector.scores("is it sunny at that place", TOOLS)
    assert scores["get_weather"] > 0.3 > scores["search_web"]


def test_trigger_words_select_without_similarity_and_whole_words_only() -> None:
    selector = ToolSelector(None)  # no embedder: triggers only
    assert selector.select("Will it rain in Oslo tomorrow?", TOOLS) == ["get_weather"]
    assert selector.select("look it up on the web please", TOOLS) == ["search_web"]
    assert selector.select("what is 17 * 23?", TOOLS) == ["execute_code"]
    assert selector.select("the rainbow", TOOLS) == []  # "rain" inside a word is no trigger
    assert selector.select("search the web, is it raining?", TOOLS) == ["get_weather", "search_web"]


def test_at_most_max_tools_and_tool_vectors_are_embedded_once() -> None:
    calls = []

    class Counting(WordEmbedder):
        def embed(self, texts):  # noqa: ANN001, ANN201
            calls.append(len(texts))
            return super().embed(texts)

    selector = ToolSelector(Counting(), threshold=0.0, max_tools=2)
    assert len(selector.select("weather on the web", TOOLS)) == 2
    selector.select("another message", TOOLS, query_vector=np.ones(7))
    assert calls == [1, 3]  # the first message, then the tools once; the second message was given


def test_chat_offers_only_the_tools_a_message_is_about(make_settings, make_services, model) -> None:
    """The "auto" selection: a reminder request is offered the reminder tools; a joke goes through
    the plain chat flow; named tools are offered as named."""
    services = make_services(make_settings(tool_calling={"selection": "auto"}), model)
    chat = services.chat
    remind = chat.offered_tools(ChatRequest("Remind me to stretch in ten minutes"))
    assert remind is not None and set(remind) >= {"create_reminder"} and "store_memory" not in remind
    assert chat.offered_tools(ChatRequest("Tell me a joke about cats.")) is None
    assert chat.offered_tools(ChatRequest("Tell me a joke", enabled_tools=("recall_memory",))) == ("recall_memory",)
    assert chat.offered_tools(ChatRequest("Remind me at 5", enabled_tools=())) is None


def test_by_default_an_omitted_enabled_tools_offers_every_tool(clean_env, tmp_path, make_services,  # noqa: ANN001
                                                               model) -> None:
    """The spec: omitted or null enabled_tools means all registered tools (selection "all")."""
    assert ToolCallingSettings().selection == "all"
    services = make_services(Settings.load(server={"data_dir": str(tmp_path)}, inference={"backend": "scripted"},
                                           memory={"embedding_backend": "hashing"}), model)
    chat = services.chat
    for message in ("Tell me a joke about cats.", "Remind me to stretch in ten minutes"):
        assert chat.offered_tools(ChatRequest(message)) == tuple(chat.tool_names)
    assert chat.offered_tools(ChatRequest("Tell me a joke", enabled_tools=("recall_memory",))) == ("recall_memory",)
    assert chat.offered_tools(ChatRequest("hi", enabled_tools=())) is None
