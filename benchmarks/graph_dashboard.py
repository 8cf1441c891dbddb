"""The knowledge-graph dashboard at scale: fetching, laying out and drawing 5,000 nodes / 20,000 edges.

Setup (not measured): a KnowledgeGraph on a fresh SQLite file in a temporary directory (the hashing
embedder) gets ``--nodes`` nodes and ``--edges`` edges written straight through
:class:`~assistant.graph.store.GraphStore` (:func:`synthetic_graph`): nodes created over the last
three days with 1-20 mentions, edge ends drawn with a Zipf-like popularity (a few hubs, as entity
graphs have), weights 0.3-1.0.

Measured (each once, after a warm-up where it matters):

* ``graph``: the in-process client's ``graph(min_retention=0)`` (the route's JSON, parsed), first
  (snapshot built) and cached;
* ``layout``: :class:`dashboards.graph_layout.PositionCache` placing every node (the grid force layout,
  100 iterations), and adding one node with three edges afterwards (the others fixed);
* ``figure``: :func:`dashboards.knowledge_graph.build_figure` (traces binned by weight) and the
  figure's JSON (what Panel sends the browser) with its size;
* ``view``: a whole :class:`KnowledgeGraphView` refresh (fetch + place + figure) with positions cached;
* ``--compare``: the layouts this one was chosen over (networkx ``spring_layout`` with 15 iterations,
  ``forceatlas2_layout`` with 20, ``spectral_layout``): slow, minutes;
* ``--browser``: the view served with ``pn.serve`` and opened in Chromium (the apt build): time until
  the plot holds every node, and the time of a zoom (``Plotly.relayout``) and a pan, i.e. that it stays
  interactive.

Figures only, no thresholds asserted.

    .venv/bin/python benchmarks/graph_dashboard.py [--nodes 5000] [--edges 20000] [--compare] [--browser [--screenshot PATH]]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.config import KnowledgeGraphSettings, KnowledgeVisualizationSettings, MemorySettings  # noqa: E402
from assistant.crypto import open_sealer  # noqa: E402
from assistant.embeddings.hashing import HashingEmbedder  # noqa: E402
from assistant.graph.service import KnowledgeGraph  # noqa: E402
from assistant.graph.store import GraphStore  # noqa: E402
from assistant.graph.types import NodeKind  # noqa: E402
from assistant.memory.store import MemoryStore  # noqa: E402
from assistant.storage.db import Database  # noqa: E402
from assistant.testing.graph import ScriptedExtractor  # noqa: E402

USER = "bench"
DAY = 86_400.0


def synthetic_graph(graph: KnowledgeGraph, user: str, nodes: int, edges: int, seed: int = 7) -> list[str]:
    """Write ``nodes`` nodes and about ``edges`` edges (self-loops dropped) for ``user``; their ids."""
    store = GraphStore(graph.db, graph.store.sealer)
    rng = np.random.default_rng(seed)
    now = time.time()
    kinds = list(NodeKind)
    with graph.db.transaction() as db:
        ids = [store.insert_node(db, user, f"Entity {i}", kinds[i % len(kinds)], now - rng.uniform(0, 3) * DAY, 1.0)
               for i in range(nodes)]
        db.execute("UPDATE kg_nodes SET mention_count = 1 + abs(random()) % 20 WHERE user_id = ?", (user,))
        popular = 1 / np.arange(1, nodes + 1) ** 0.8
        src = rng.integers(0, nodes, edges)
        dst = rng.choice(nodes, edges, p=popular / popular.sum())
        for a, b in zip(src.tolist(), dst.tolist(), strict=True):
            if a != b:
                store.insert_edge(db, user, ids[a], "related_to", ids[b], weight=float(rng.uniform(0.3, 1.0)),
                                  valid_at=now - DAY, now=now - DAY, stability=1.0)
    graph.views.changed(user)
    return ids


def open_graph(directory: Path) -> tuple[Database, KnowledgeGraph]:
    db = Database(directory / "assistant.db")
    sealer = open_sealer(db, directory / "memory.key")
    memory = MemoryStore(db, sealer, HashingEmbedder(), MemorySettings())
    graph = KnowledgeGraph(db, sealer, memory, ScriptedExtractor(), KnowledgeGraphSettings(), MemorySettings(),
                           KnowledgeVisualizationSettings())
    return db, graph


def timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def measure(graph: KnowledgeGraph, compare: bool) -> dict[str, Any]:
    from dashboards.graph_client import LocalGraphClient
    from dashboards.graph_layout import PositionCache
    from dashboards.knowledge_graph import KnowledgeGraphView, build_figure

    client = LocalGraphClient(graph, USER)
    out: dict[str, Any] = {}
    data, out["graph_first_s"] = timed(lambda: client.graph(min_retention=0.0))
    data, out["graph_cached_s"] = timed(lambda: client.graph(min_retention=0.0))
    out["nodes"], out["edges"] = data["returned_nodes"], data["returned_edges"]
    ids = [n["id"] for n in data["nodes"]]
    edges = [(e["source"], e["target"], e["weight"]) for e in data["edges"]]
    cache = PositionCache()
    pos, out["layout_s"] = timed(lambda: cache.place(ids, edges))
    extra = [("new", ids[i], 1.0) for i in (0, 1, 2)]
    _, out["layout_add_one_s"] = timed(lambda: cache.place([*ids, "new"], [*edges, *extra]))
    fig, out["figure_s"] = timed(lambda: build_figure(data, pos))
    text, out["figure_json_s"] = timed(fig.to_json)
    out["figure_json_mb"] = round(len(text) / 1e6, 2)
    out["traces"] = len(fig.data)
    view, out["view_first_s"] = timed(lambda: KnowledgeGraphView(client, live=False, min_retention=0.0))
    _, out["view_refresh_s"] = timed(view.refresh)
    if compare:
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(ids)
        g.add_edges_from((s, t) for s, t, _ in edges)
        _, out["nx_spring_15_s"] = timed(lambda: nx.spring_layout(g, iterations=15, seed=1))
        _, out["nx_forceatlas2_20_s"] = timed(lambda: nx.forceatlas2_layout(g, max_iter=20, seed=1))
        _, out["nx_spectral_s"] = timed(lambda: nx.spectral_layout(g))
    client.close()
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}


def browser(graph: KnowledgeGraph, screenshot: Path | None = None) -> dict[str, float]:
    """Serve the view and time drawing, zooming and panning in Chromium."""
    import shutil

    import panel as pn
    from playwright.sync_api import sync_playwright

    from dashboards.graph_client import LocalGraphClient
    from dashboards.knowledge_graph import KnowledgeGraphView

    pn.extension("plotly")
    client = LocalGraphClient(graph, USER)
    with socket.socket() as sock:  # a free loopback port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = pn.serve({"graph": lambda: KnowledgeGraphView(client, live=False, min_retention=0.0)}, port=port,
                      address="127.0.0.1", show=False, threaded=True, websocket_origin=f"127.0.0.1:{port}")
    find = """() => { const f = (r) => { for (const e of r.querySelectorAll('*')) {
        if (e.classList && e.classList.contains('js-plotly-plot')) return e;
        if (e.shadowRoot) { const h = f(e.shadowRoot); if (h) return h; } } return null; }; return f(document); }"""
    out: dict[str, float] = {}
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    try:
        with sync_playwright() as p:
            chrome = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=flags)
            page = chrome.new_page(viewport={"width": 1400, "height": 900})
            start = time.perf_counter()
            page.goto(f"http://127.0.0.1:{port}/graph")
            page.wait_for_function(f"() => {{ const d = ({find})(); return d && d.data && "
                                   "d.data.some(t => t.name === 'nodes' && t.x.length > 0); }", timeout=120_000)
            out["browser_draw_s"] = time.perf_counter() - start
            for name, update in (("zoom", "{'xaxis.range': [-0.3, 0.3], 'yaxis.range': [-0.3, 0.3]}"),
                                 ("pan", "{'xaxis.range': [0, 0.6], 'yaxis.range': [0, 0.6]}")):
                ms = page.evaluate(f"async () => {{ const d = ({find})(); const t = performance.now(); "
                                   f"await window.Plotly.relayout(d, {update}); return performance.now() - t; }}")
                out[f"browser_{name}_ms"] = ms
            if screenshot is not None:
                page.evaluate(f"async () => window.Plotly.relayout(({find})(), "
                              "{'xaxis.autorange': true, 'yaxis.autorange': true})")
                page.screenshot(path=str(screenshot))
            chrome.close()
    finally:
        server.stop()
        client.close()
    return {k: round(v, 3) for k, v in out.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--edges", type=int, default=20_000)
    parser.add_argument("--compare", action="store_true", help="also time the networkx layouts (minutes)")
    parser.add_argument("--browser", action="store_true", help="also draw it in Chromium")
    parser.add_argument("--screenshot", type=Path, help="with --browser: save the page here (PNG)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db, graph = open_graph(Path(tmp))
        try:
            synthetic_graph(graph, USER, args.nodes, args.edges)
            report = measure(graph, args.compare)
            if args.browser:
                report |= browser(graph, args.screenshot)
        finally:
            graph.close()
            db.close()
    for key, value in report.items():
        print(f"{key:>22}: {value}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
