"""Every page ``assistant dashboards`` serves, in the order of its index page.

A page is a module ``dashboards/<name>.py`` that lays itself out when ``panel serve`` runs it
(``if pn.state.served: ... .servable(title=...)``), reading through :mod:`dashboards.client`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    name: str  # the module and the URL path: /<name>
    title: str
    summary: str  # one line on the index page


PAGES: tuple[Page, ...] = (
    Page("chat", "Chat", "Streamed answers, with the memories and tools each answer used."),
    Page("memory_explorer", "Memory explorer",
         "Search with the relevance breakdown of each hit; filter by type, importance and date; a memory's history."),
    Page("decay_curves", "Memory decay curves", "How retention falls with time for each importance and decay rate."),
    Page("knowledge_graph", "Knowledge graph", "Entities and relations learned from memories, live."),
    Page("dreams", "Dreams", "What each night of dream mode did, and the insights it found."),
    Page("quality", "Quality", "Conversation quality, quarantined memories and the defence's patterns."),
    Page("voice_rooms", "Voice rooms", "The satellites in each room and what they hear."),
)
