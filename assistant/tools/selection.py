"""Which registered tools to offer for one message (tool retrieval), when ``[tool_calling]
selection = "auto"``. The default, ``"all"``, offers every registered tool, as the spec says of an
omitted ``enabled_tools``; this module is the opt-in alternative.

Offering every tool on every message costs the embedded 0.5B model dearly: the tool list is
~1,100 prompt tokens (seconds of prompt evaluation on two cores), and with it in the prompt the
model answers plain requests worse — asked to "count from one to five in words" it called
list_reminders, then replied "I'm sorry, but I can't assist with that." So with ``"auto"``, unless
the request names its tools (``enabled_tools``), the chat offers only the tools the message is
about: those whose name and description are close to the message in the embedding space (cosine ≥
``selection_threshold``, MiniLM, the embedder the memory store already runs for the same message)
or whose trigger words it contains, at most ``max_offered_tools``, best first. A message about
none of them is answered by the plain chat flow.

Measured with MiniLM on the tool texts: weather questions score 0.31-0.49 on get_weather, "send an
e-mail to Bob" 0.55 on send_email, while "count from one to five", "tell me a joke" and "what is
the capital of France" stay under 0.28 on every tool. Embeddings alone miss some asks ("search the
web for …" scores 0.19 on search_web; "remember that …" 0.14 on store_memory), hence the triggers.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence

import numpy as np

from assistant.tools.base import Tool

# Words that show a message wants a tool, by tool name (case-insensitive, whole words).
TRIGGERS: dict[str, str] = {
    "get_weather": r"weather|forecast|rain(?:ing|y)?|snow(?:ing|y)?|temperature|sunny|windy?|umbrella",
    "search_web": r"search|look (?:it |that )?up|google|web|internet|online|news|latest",
    "search_transit": r"trains?|bus(?:es)?|trams?|subway|metro|u-?bahn|s-?bahn|journey|transit|departures?|connections?",
    "create_reminder": r"remind(?: me)?|reminders?",
    "list_reminders": r"reminders?",
    "list_calendar_events": r"calendar|agenda|schedule|meetings?|appointments?|events?",
    "create_calendar_event": r"calendar|schedule|meeting|appointment|book|event",
    "list_tasks": r"tasks?|to-?dos?|to do list",
    "create_task": r"tasks?|to-?dos?|to do list",
    "complete_task": r"tasks?|to-?dos?|done with|finished|complete",
    "search_contacts": r"contacts?|phone number|address book|number of|e-?mail address",
    "get_contact": r"contacts?|phone number|address book",
    "search_emails": r"e-?mails?|inbox|mails?|messages? from",
    "draft_email": r"draft|e-?mail|write (?:a|an) (?:mail|message)",
    "send_email": r"send|e-?mail|mail",
    "store_memory": r"remember|don'?t forget|note that|keep in mind|memori[sz]e",
    "recall_memory": r"do you remember|what do you know about|recall|did i (?:tell|say)",
    "execute_code": r"calculate|compute|run (?:this|the|my) (?:code|program|script)|python|sqrt|factorial|"
                    r"primes?|\d+(?:\.\d+)?\s*[-+*/^%]\s*\d+",
}
_COMPILED = {name: re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE) for name, pattern in TRIGGERS.items()}
TRIGGER_SCORE = 1.0  # a trigger word outranks any similarity


def tool_text(t: Tool) -> str:
    return f"{t.name.replace('_', ' ')}: {t.spec.description}"


class ToolSelector:
    """Picks the tools a message is about; embeds the tool texts once per set of tools."""

    def __init__(self, embedder: object | None, threshold: float = 0.30, max_tools: int = 5):
        self.embedder = embedder
        self.threshold = threshold
        self.max_tools = max_tools
        self._vectors: dict[tuple[str, ...], np.ndarray] = {}
        self._lock = threading.Lock()

    def _tool_vectors(self, tools: Sequence[Tool]) -> np.ndarray:
        key = tuple(t.name for t in tools)
        with self._lock:
            if key not in self._vectors:
                vectors = np.asarray(self.embedder.embed([tool_text(t) for t in tools]), dtype=np.float32)
                norms = np.linalg.norm(vectors, axis=1, keepdims=True)
                self._vectors[key] = vectors / np.where(norms == 0, 1, norms)
            return self._vectors[key]

    def scores(self, message: str, tools: Sequence[Tool], query_vector: np.ndarray | None = None) -> dict[str, float]:
        """Each tool's score for ``message``: its cosine, or TRIGGER_SCORE on a trigger word."""
        similarity = np.zeros(len(tools), dtype=np.float32)
        if self.embedder is not None and tools:
            q = np.asarray(query_vector if query_vector is not None else self.embedder.embed([message])[0],
                           dtype=np.float32)
            q = q / (np.linalg.norm(q) or 1.0)
            similarity = self._tool_vectors(tools) @ q
        out = {}
        for t, sim in zip(tools, similarity, strict=True):
            trigger = _COMPILED.get(t.name)
            out[t.name] = TRIGGER_SCORE if trigger is not None and trigger.search(message) else float(sim)
        return out

    def select(self, message: str, tools: Iterable[Tool], query_vector: np.ndarray | None = None) -> list[str]:
        """Names of the tools to offer, best first; [] when the message is about none."""
        tools = list(tools)
        ranked = sorted(self.scores(message, tools, query_vector).items(), key=lambda kv: (-kv[1], kv[0]))
        return [name for name, score in ranked if score >= self.threshold][: self.max_tools]
