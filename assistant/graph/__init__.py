"""The knowledge graph: entities and facts extracted from each user's memories.

- :mod:`types` — what extraction returns, what is stored, what is published (events).
- :mod:`retention` — Ebbinghaus retention R = e^(-t/S), pure functions to call and plot.
- :mod:`store` — SQLite persistence (names, aliases, relations and events sealed).
- :mod:`extract` — the ``Extractor`` protocol and its registry (``llm``, ``rules``).
- :mod:`service` — :class:`KnowledgeGraph`: ingestion after each memory write, entity resolution,
  contradictions (bi-temporal edges), recall, decay sweep, backfill, queries.
- :mod:`view` — a cached in-memory view per user (numpy arrays, pre-written JSON) that answers the graph
  endpoint without rebuilding anything per request.
- :mod:`events` — the per-user event log behind the SSE stream (``Last-Event-ID`` resume).
- :mod:`retrieval` — graph-aware retrieval (``memory.retrieval = "hybrid+graph"``).
"""
