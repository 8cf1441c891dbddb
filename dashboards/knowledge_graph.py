"""The user's knowledge graph as an interactive network, live.

Everything shown comes from a :class:`~dashboards.graph_client.GraphClient` (the HTTP API or the
package in process: the same JSON); this module lays it out:

- nodes coloured by retention (YlGnBu: pale when fading, dark blue when fresh), sized by mention count, the most mentioned named;
  edges drawn in four traces binned by weight (wider and more opaque when heavier), never one trace
  per edge; plotly ``Scattergl`` (WebGL), which stays interactive at 5,000 nodes / 20,000 edges
  (``benchmarks/graph_dashboard.py`` times building the figure);
- positions from :class:`~dashboards.graph_layout.PositionCache`: one fast force layout at first,
  then each new node placed by its neighbours while the others stay put; the zoom survives
  refreshes (``uirevision``);
- controls: the retention threshold (``min_retention``), a kind filter, a timeline (``as_of``), a
  search box that centres the view on an entity (``center`` + ``depth``), and a details pane for the
  clicked node (its facts and source memories);
- live updates: the client's events (SSE over HTTP) only mark the view stale; a periodic callback
  (every ``refresh_ms``, 1 s) redraws at most once per period, on the server's event loop.

Served by ``assistant dashboards`` (or ``panel serve dashboards/knowledge_graph.py``): with ``ASSISTANT_API_URL`` and
``ASSISTANT_API_KEY`` set it reads the API server (the key's user); otherwise it opens the configured
data directory in process (``--args config.toml``, like ``assistant serve``) and shows the user
``ASSISTANT_DASHBOARD_USER`` (default: the owner), polling the stored event log for the server's
changes. In a notebook: ``pn.extension("plotly")``, then
``KnowledgeGraphView(LocalGraphClient(services.graph, user_id))``.
"""

from __future__ import annotations

import html
import os
import re
import threading
from datetime import UTC, datetime
from typing import Any

import numpy as np
import panel as pn
import param
import plotly.graph_objects as go

from assistant.clock import epoch_of
from assistant.graph.build import open_read_only_graph
from assistant.graph.service import KnowledgeGraph
from assistant.graph.types import NodeKind
from dashboards.banner import serve_page
from dashboards.graph_client import GraphClient, HttpGraphClient, LiveEvent, LocalGraphClient
from dashboards.graph_layout import PositionCache

ALL = "all"
WEIGHT_BINS = [(0.0, 0.5, 0.5, 0.18), (0.5, 0.75, 1.0, 0.28), (0.75, 0.95, 1.6, 0.4), (0.95, 1.01, 2.6, 0.55)]
LABELS = 25  # the most mentioned nodes shown with their names
EDGE_COLOUR = "rgba(110,110,130,{})"
COLOURS = "YlGnBu"  # retention: pale yellow (fading) to dark blue (fresh), readable on white


def plain(text: str) -> str:
    """User content (names, relations, memory summaries) as literal text in Markdown or plotly's HTML
    subset: no tag, link or emphasis a memory could smuggle in."""
    return _MARKDOWN.sub(r"\\\1", html.escape(str(text), quote=True))


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def marker_sizes(mentions: np.ndarray) -> np.ndarray:
    """Marker diameter in px, by the square root of the mentions relative to the most mentioned node:
    from 14 to 40 px in a small graph, from 5 to 15 px at 5,000 nodes (so that hubs stand out and the
    crowd does not cover the edges)."""
    if not len(mentions):
        return np.zeros(0)
    small = float(np.clip(32.0 / len(mentions) ** 0.25, 5.0, 14.0))
    large = min(3.0 * small, 40.0)
    counts = np.maximum(mentions, 1.0)
    share = np.sqrt((counts - 1.0) / max(float(counts.max()) - 1.0, 1.0))
    return small + (large - small) * share


def edge_traces(pos: np.ndarray, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> list[go.Scattergl]:
    """One line trace per weight bin: segments separated by NaN gaps."""
    traces = []
    for lo, hi, width, alpha in WEIGHT_BINS:
        pick = (weight >= lo) & (weight < hi)
        if not pick.any():
            continue
        n = int(pick.sum())
        xs = np.full(3 * n, np.nan)
        ys = np.full(3 * n, np.nan)
        xs[0::3], xs[1::3] = pos[src[pick], 0], pos[dst[pick], 0]
        ys[0::3], ys[1::3] = pos[src[pick], 1], pos[dst[pick], 1]
        traces.append(go.Scattergl(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                   name=f"weight {lo:g}-{min(hi, 1):g}",
                                   line={"width": width, "color": EDGE_COLOUR.format(alpha)}))
    return traces


def build_figure(data: dict[str, Any], pos: np.ndarray, center: str | None = None) -> go.Figure:
    """The network of one graph answer (``data``) at positions ``pos`` (one row per node, in order)."""
    nodes, edges = data["nodes"], data["edges"]
    index = {n["id"]: i for i, n in enumerate(nodes)}
    src = np.array([index[e["source"]] for e in edges], dtype=np.int64)
    dst = np.array([index[e["target"]] for e in edges], dtype=np.int64)
    weight = np.array([e["weight"] for e in edges], dtype=np.float64)
    mentions = np.array([n["mention_count"] for n in nodes], dtype=np.float64)
    retention = np.array([n["retention"] for n in nodes], dtype=np.float64)
    names = [html.escape(n["name"]) for n in nodes]
    fig = go.Figure(edge_traces(pos, src, dst, weight))
    fig.add_trace(go.Scattergl(
        x=pos[:, 0] if len(nodes) else [], y=pos[:, 1] if len(nodes) else [], mode="markers", name="nodes",
        customdata=[n["id"] for n in nodes], text=names,
        hovertext=[f"<b>{name}</b> ({n['kind']})<br>retention {n['retention']:.2f} · "
                   f"{n['mention_count']} mentions" for name, n in zip(names, nodes, strict=True)],
        hoverinfo="text", showlegend=False,
        marker={"size": marker_sizes(mentions), "color": retention, "cmin": 0.0, "cmax": 1.0,
                "colorscale": COLOURS, "line": {"width": 0.6, "color": "rgba(40,40,60,0.6)"}, "opacity": 0.9,
                "colorbar": {"title": {"text": "retention"}, "thickness": 12}},
    ))
    labels = []
    if len(nodes):  # annotations: drawn above the WebGL markers, with a light background
        sizes = marker_sizes(mentions)
        labels = [{"x": float(pos[i, 0]), "y": float(pos[i, 1]), "text": names[i], "showarrow": False,
                   "yshift": float(sizes[i]) / 2 + 7, "font": {"size": 11, "color": "#222"},
                   "bgcolor": "rgba(255,255,255,0.6)", "borderpad": 1}
                  for i in np.argsort(-mentions, kind="stable")[:LABELS].tolist()]
    if center is not None and center in index:
        i = index[center]
        fig.add_trace(go.Scatter(x=[pos[i, 0]], y=[pos[i, 1]], mode="markers", hoverinfo="skip", showlegend=False,
                                 name="centre", marker={"size": float(marker_sizes(mentions[i:i + 1])[0]) + 10,
                                                        "color": "rgba(0,0,0,0)",
                                                        "line": {"width": 2.5, "color": "#d62728"}}))
    shown = f"{data['returned_nodes']:,} of {data['total_nodes']:,} nodes, {data['returned_edges']:,} edges"
    fig.update_layout(
        title={"text": f"{shown}{' (truncated)' if data.get('truncated') else ''} · as of {data['as_of']}",
               "font": {"size": 14}},
        xaxis={"visible": False}, yaxis={"visible": False, "scaleanchor": "x"},
        plot_bgcolor="white", margin={"l": 10, "r": 10, "t": 40, "b": 10}, hovermode="closest",
        uirevision="graph", dragmode="pan", annotations=labels,
    )
    return fig


def details_markdown(node: dict[str, Any]) -> str:
    """The details pane: the node, its facts and its source memories."""
    name = plain(node["name"])
    lines = [f"### {name}", f"*{node['kind']}* · retention **{node['retention']:.2f}** · "
             f"{node['mention_count']} mentions · {node['recalls']} recalls · stability {node['stability']:g} d",
             f"first seen {node['created_at']}, last seen {node['last_seen']}"]
    if node.get("aliases"):
        lines.append("aliases: " + ", ".join(plain(a) for a in node["aliases"]))
    lines.append("\n#### Facts")
    for f in node.get("facts", [])[:50]:
        relation, other = plain(f["relation"]), plain(f["other_name"])
        arrow = f"{name} —{relation}→ {other}" if f["direction"] == "out" else f"{other} —{relation}→ {name}"
        state = f" ~~invalid since {f['invalid_at']}~~" if f["invalid_at"] else ""
        lines.append(f"- {arrow} (weight {f['weight']:.2f}){state}")
    if not node.get("facts"):
        lines.append("none")
    lines.append("\n#### Sources")
    for src in node.get("sources", []):
        lines.append(f"- {src['created_at'][:10]}: {plain(src['summary'])}")
    if node.get("sources_truncated"):
        lines.append(f"- … {node['sources_total'] - len(node['sources'])} more")
    return "\n".join(lines)


class KnowledgeGraphView(pn.viewable.Viewer):
    """The graph of one user through ``client`` (see the module docstring)."""

    min_retention = param.Number(0.1, bounds=(0.0, 1.0), step=0.01, doc="Hide nodes retained less than this")
    kind = param.Selector(default=ALL, objects=[ALL, *[k.value for k in NodeKind]], doc="Only nodes of this kind")
    as_of = param.Number(None, allow_None=True, doc="The graph as it was then (epoch seconds); None: now")
    center = param.String(None, allow_None=True, doc="The node the view is centred on (its neighbourhood)")
    depth = param.Integer(1, bounds=(1, 3), doc="Hops around the centre")
    limit = param.Integer(5000, bounds=(1, None), doc="At most this many nodes (the most retained)")
    refresh_ms = param.Integer(1000, bounds=(200, None), doc="Live updates redraw at most this often (ms)")

    def __init__(self, client: GraphClient, *, live: bool = True, positions: PositionCache | None = None, **params):
        super().__init__(**params)
        self.client = client
        self.positions = positions or PositionCache()
        self.data: dict[str, Any] = {"nodes": [], "edges": [], "total_nodes": 0, "returned_nodes": 0,
                                     "returned_edges": 0, "truncated": False, "as_of": ""}
        self.selected: str | None = None
        self._stale = threading.Event()
        self.plot = pn.pane.Plotly(sizing_mode="stretch_both", min_height=600, config={"scrollZoom": True})
        self.details = pn.pane.Markdown("Click a node to see its facts and sources.", sizing_mode="stretch_width")
        self.status = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.search_box = pn.widgets.TextInput(label="Centre on an entity", placeholder="a name, then Enter")
        self.search_box.param.watch(lambda e: self.find(e.new), "value")
        self.clear_button = pn.widgets.Button(label="Show the whole graph", color="primary", variant="outline")
        self.clear_button.on_click(self._show_all)
        self.timeline = pn.widgets.DatetimeSlider(label="As of", start=datetime(2000, 1, 1), end=datetime.now(),
                                                  value=datetime.now(), step=1000)
        self.timeline.param.watch(self._timeline_moved, "value_throttled")
        self.plot.param.watch(self._clicked, "click_data")
        self.callback: pn.io.callbacks.PeriodicCallback | None = None
        self.refresh()
        if live:
            client.subscribe(self._on_event)

    # --- reading and drawing ---------------------------------------------------------------------

    def query(self) -> dict[str, Any]:
        return {"min_retention": self.min_retention, "limit": self.limit, "center": self.center,
                "depth": self.depth, "as_of": self.as_of, "kind": None if self.kind == ALL else self.kind}

    def figure(self) -> go.Figure:
        nodes = self.data["nodes"]
        pos = self.positions.place([n["id"] for n in nodes],
                                   [(e["source"], e["target"], e["weight"]) for e in self.data["edges"]])
        return build_figure(self.data, pos.reshape(-1, 2), self.center)

    def refresh(self) -> None:
        """Read the graph again and redraw it."""
        self._stale.clear()
        try:
            self.data = self.client.graph(**self.query())
        except Exception as exc:  # the server unreachable, the centre removed meanwhile (404): say so, keep the plot
            self.status.object = f"**The graph could not be read:** {exc}"
            if self.center is not None:
                self.status.object += " (*Show the whole graph* leaves the centre)"
            return
        self.plot.object = self.figure()
        self._update_timeline()
        centre = next((plain(n["name"]) for n in self.data["nodes"] if n["id"] == self.center), None)
        self.status.object = f"Centred on **{centre}** ({self.depth} hop{'s' if self.depth > 1 else ''})" \
            if centre else ""

    @param.depends("min_retention", "kind", "as_of", "center", "depth", "limit", watch=True)
    def _changed(self) -> None:
        self.refresh()

    def _update_timeline(self) -> None:
        if self.as_of is not None or not self.data.get("nodes"):
            return
        first = min(epoch_of(n["created_at"]) for n in self.data["nodes"])
        now = epoch_of(self.data["as_of"])
        start, end = _naive(first - 60), _naive(now + 1)
        self.timeline.param.update(start=start, end=end, value=end)

    def _timeline_moved(self, event: param.parameterized.Event) -> None:
        moment = event.new.replace(tzinfo=UTC).timestamp()
        self.as_of = None if moment >= self.timeline.end.replace(tzinfo=UTC).timestamp() - 1 else moment

    # --- search and details ----------------------------------------------------------------------

    def find(self, text: str) -> str | None:
        """Centre on the best match of ``text`` (None: nothing matched, the view is unchanged)."""
        if not text.strip():
            return None
        try:
            hits = self.client.search(text.strip(), 1)
        except Exception as exc:  # the server unreachable
            self.status.object = f"**The search failed:** {plain(str(exc))}"
            return None
        if not hits:
            self.status.object = f"No entity matches *{plain(text)}*."
            return None
        self.center = hits[0]["id"]
        self.select(hits[0]["id"])
        return self.center

    def _show_all(self, _event: object = None) -> None:
        self.search_box.value = ""  # the same name entered again centres again
        self.center = None

    def select(self, node_id: str) -> None:
        self.selected = node_id
        try:
            node = self.client.node(node_id)
        except Exception as exc:  # removed meanwhile (404), the server unreachable
            self.details.object = f"The node could not be read: {exc}"
            return
        self.details.object = details_markdown(node)

    def _clicked(self, event: param.parameterized.Event) -> None:
        points = (event.new or {}).get("points") or []
        node = next((p.get("customdata") for p in points if isinstance(p.get("customdata"), str)), None)
        if node is not None:
            self.select(node)

    # --- live updates ----------------------------------------------------------------------------

    def _on_event(self, event: LiveEvent) -> None:  # a client thread: only mark stale
        self._stale.set()

    def poll(self) -> bool:
        """Redraw if an event arrived since the last refresh (the periodic callback); True if it did."""
        if not self._stale.is_set():
            return False
        self.refresh()
        return True

    def __panel__(self) -> pn.viewable.Viewable:
        if self.callback is None:
            self.callback = pn.state.add_periodic_callback(self.poll, period=self.refresh_ms)
        controls = pn.Column(
            self.search_box, pn.Param(self, parameters=["depth"], show_name=False), self.clear_button,
            pn.Param(self, parameters=["min_retention", "kind"], show_name=False,
                     widgets={"min_retention": {"type": pn.widgets.FloatSlider, "name": "Minimum retention",
                                                "throttled": True}}),
            self.timeline, self.status, pn.layout.Divider(), self.details, width=340,
        )
        return pn.Row(controls, self.plot, sizing_mode="stretch_both", min_height=640)


def _naive(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None)


def served_graph(config: str | None) -> tuple[KnowledgeGraph, str]:
    """A read-only graph over the configured data directory (:func:`open_read_only_graph`), and the
    user to show: ``ASSISTANT_DASHBOARD_USER``, else the installation's owner."""
    from assistant.config import Settings
    from assistant.security import KeyStore

    graph = open_read_only_graph(Settings.load(config))
    user = os.environ.get("ASSISTANT_DASHBOARD_USER") or str(KeyStore(graph.db).owner_user_id())
    return graph, user


def local_graph(config: str | None) -> GraphClient:
    """In process: one read-only graph per process (in ``pn.state.cache``: Panel runs this script again for
    each session), its stored event log polled for the server's changes."""
    key = f"knowledge_graph:{config}"
    if key not in pn.state.cache:
        pn.state.cache[key] = served_graph(config)
    graph, user = pn.state.cache[key]
    return LocalGraphClient(graph, user, poll_secs=1.0)


def graph_view(client: GraphClient) -> KnowledgeGraphView:
    positions = pn.state.cache.setdefault("knowledge_graph:positions", PositionCache())  # kept across sessions
    return KnowledgeGraphView(client, positions=positions)


if pn.state.served:
    serve_page("Knowledge graph", ("plotly",), HttpGraphClient, local_graph, graph_view)
