"""The memory explorer: search with each hit's relevance breakdown, filters, and a memory's history.

Everything shown comes from a :class:`~dashboards.memory_client.MemoryClient` (the HTTP API or the
package in process: the same JSON); this module only lays it out:

- **search** (``search(q, **filters)``): a table of the hits ranked by relevance with the formula's
  terms per hit (``relevance_parts``: 0.50 x similarity, 0.20 x importance, 0.30 x freshness, and the
  archived factor) and a stacked bar of those terms with the relevance as a dot (an Archived hit's dot
  sits at half its bar); with an empty search box the table lists the memories, newest first
  (``memories(**filters)``);
- **filters**: types, an importance range and creation dates, sent as the routes' query parameters;
- selecting a row shows the memory's **history** (``history(id)``): its events on a time line and in a
  table (created, merged, dream operations, decay, archive, quarantine, restore, last access), and
  the decay formula's projection of its importance with its type's floor.

A failure (the API unreachable, the key refused, a bad filter) shows as a banner above the page.

Serve it with ``panel serve dashboards/memory_explorer.py``: with ``ASSISTANT_API_URL`` and
``ASSISTANT_API_KEY`` set it uses the API server (the key's user); otherwise it builds the services of
the configured data directory in process (``--args config.toml``; only while no server holds that
directory) and shows ``ASSISTANT_DASHBOARD_USER`` (default: the owner). In a notebook:
``pn.extension("plotly", "tabulator")``, then ``MemoryExplorer(LocalMemoryClient(services.memory, user))``.
"""

from __future__ import annotations

import html
from datetime import date
from typing import Any

import pandas as pd
import panel as pn
import param
import plotly.graph_objects as go

from assistant.memory.history import ORDER
from assistant.memory.types import MemoryType
from dashboards.client import ClientError
from dashboards.memory_client import HttpMemoryClient, LocalMemoryClient, MemoryClient
from dashboards.text import literal_markdown

PARTS = (("similarity", "0.50 × similarity", "#1f77b4"), ("importance", "0.20 × importance", "#ff7f0e"),
         ("freshness", "0.30 × freshness", "#2ca02c"))
HIT_COLUMNS = ["id", "content", "type", "importance", "created", "relevance", "similarity part", "importance part",
               "freshness part", "factor"]
EVENT_COLUMNS = ["at", "kind", "title", "importance", "details"]
TYPES = [t.value for t in MemoryType]


def _short(text: str, limit: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def hits_frame(hits: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per memory; the relevance columns are empty for a listed (not searched) memory."""
    rows = []
    for h in hits:
        parts = h.get("relevance_parts") or {}
        rows.append({"id": h["id"], "content": _short(h["content"]), "type": h["memory_type"],
                     "importance": round(float(h["importance"]), 3), "created": h["created_at"],
                     "relevance": h.get("relevance"), "similarity part": parts.get("similarity"),
                     "importance part": parts.get("importance"), "freshness part": parts.get("freshness"),
                     "factor": parts.get("factor")})
    return pd.DataFrame(rows, columns=HIT_COLUMNS)


def parts_figure(hits: list[dict[str, Any]]) -> go.Figure:
    """The relevance terms of each search hit, stacked; the relevance itself as a dot."""
    scored = [h for h in hits if h.get("relevance_parts")]
    labels = [f"{n + 1}. {html.escape(_short(h['content'], 28))}" for n, h in enumerate(scored)]
    fig = go.Figure()
    for key, name, colour in PARTS:
        fig.add_trace(go.Bar(x=labels, y=[h["relevance_parts"][key] for h in scored], name=name,
                             marker_color=colour, customdata=[h["id"] for h in scored]))
    fig.add_trace(go.Scatter(x=labels, y=[h["relevance"] for h in scored], name="relevance", mode="markers",
                             marker={"color": "black", "size": 10, "symbol": "diamond"}))
    fig.update_layout(barmode="stack", height=320, margin={"l": 10, "r": 10, "t": 40, "b": 40}, plot_bgcolor="white",
                      title={"text": f"Relevance of {len(scored)} hit(s), term by term" if scored
                             else "Search to see each hit's relevance, term by term", "font": {"size": 14}},
                      yaxis={"title": "relevance"}, legend={"orientation": "h", "y": -0.3}, uirevision="parts")
    return fig


def events_frame(history: dict[str, Any] | None) -> pd.DataFrame:
    rows = []
    for e in (history or {}).get("events", []):
        details = {k: v for k, v in (e.get("details") or {}).items() if v not in (None, [], {})}
        importance = e.get("importance")
        rows.append({"at": e["at"], "kind": e["kind"], "title": e["title"],
                     "importance": "" if importance is None else round(float(importance), 3),
                     "details": _short(", ".join(f"{k}: {v}" for k, v in details.items()), 240)})
    return pd.DataFrame(rows, columns=EVENT_COLUMNS)


def timeline_figure(history: dict[str, Any] | None) -> go.Figure:
    """The memory's events on a time axis, one lane per kind."""
    events = (history or {}).get("events", [])
    fig = go.Figure()
    for kind in ORDER:
        mine = [e for e in events if e["kind"] == kind]
        if mine:
            fig.add_trace(go.Scatter(x=[pd.Timestamp(e["at"]).tz_convert(None) for e in mine], y=[kind] * len(mine),
                                     mode="markers", name=kind, marker={"size": 13},
                                     text=[html.escape(e["title"]) for e in mine], hovertemplate="%{x}<br>%{text}<extra></extra>"))
    fig.update_layout(height=260, margin={"l": 10, "r": 10, "t": 40, "b": 30}, plot_bgcolor="white", showlegend=False,
                      title={"text": f"History: {len(events)} event(s)" if history else "Select a memory to see its "
                             "history", "font": {"size": 14}},
                      xaxis={"type": "date"}, yaxis={"categoryorder": "array", "categoryarray": list(ORDER)})
    return fig


def decay_figure(history: dict[str, Any] | None) -> go.Figure:
    """The decay formula's projection of the memory's importance, with its type's floor."""
    decay = (history or {}).get("decay")
    fig = go.Figure()
    if decay:
        points = decay["projection"]
        fig.add_trace(go.Scatter(x=[p["day"] for p in points], y=[p["importance"] for p in points], mode="lines",
                                 name="importance"))
        fig.add_hline(y=decay["floor"], line_dash="dot", annotation_text=f"{decay['decay_type']} floor")
    title = ("Importance if left alone (daily decay runs)" if decay else
             "No decay for this memory" if history else "")
    fig.update_layout(height=260, margin={"l": 10, "r": 10, "t": 40, "b": 30}, plot_bgcolor="white",
                      title={"text": title, "font": {"size": 14}}, xaxis={"title": "days from now"},
                      yaxis={"range": [0, 1.05], "title": "importance"})
    return fig


def decay_markdown(history: dict[str, Any] | None) -> str:
    if not history:
        return ""
    m = history["memory"]
    head = f"**{literal_markdown(_short(m['content'], 200))}** — {m['memory_type']}, importance {m['importance']:.3f}, " \
           f"{m['access_count']} access(es)"
    d = history.get("decay")
    if not d:
        return head
    archive = (f"archived by the clean-up in {d['archive_in_days']} day(s) if nothing touches it"
               if d["archive_in_days"] is not None else "never archived by the clean-up (its floor is above it)")
    return (f"{head}  \nstability {d['stability']:.2f} · effective rate {d['effective_rate']:.4f}/day · "
            f"reinforcement {d['reinforcement']:.3f} · freshness {d['freshness']:.3f} "
            f"({d['hours_since_access']:.1f} h since the last access) · {archive}")


class MemoryExplorer(pn.viewable.Viewer):
    """The memories of one user through ``client`` (see the module docstring)."""

    limit = param.Integer(20, bounds=(1, 100), doc="Hits per search")
    browse_limit = param.Integer(200, bounds=(1, 1000), doc="Memories listed without a search")
    days = param.Integer(90, bounds=(1, 3650), doc="Days of decay projection")

    def __init__(self, client: MemoryClient, **params):
        super().__init__(**params)
        self.client = client
        self.hits: list[dict[str, Any]] = []
        self.history: dict[str, Any] | None = None
        self.banner = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["memory-banner"])
        self.query = pn.widgets.TextInput(placeholder="Search your memories (empty: list them)", label="Search",
                                          sizing_mode="stretch_width", css_classes=["memory-query"])
        self.query.param.watch(lambda _e: self.refresh(), "enter_pressed")
        self.search_button = pn.widgets.Button(label="Search", color="primary", width=110, align="end")
        self.search_button.on_click(lambda _e: self.refresh())
        self.types = pn.widgets.MultiChoice(label="Types", options=TYPES, width=320)
        self.importance = pn.widgets.RangeSlider(label="Importance", start=0.0, end=1.0, value=(0.0, 1.0), step=0.05,
                                                 width=220)
        self.after = pn.widgets.DatePicker(label="Created from", width=150)
        self.before = pn.widgets.DatePicker(label="Created before", width=150)
        for widget in (self.types, self.importance, self.after, self.before):
            widget.param.watch(lambda _e: self.refresh(), "value")
        self.status = pn.pane.Markdown("", css_classes=["memory-status"])
        self.table = pn.widgets.Tabulator(
            hits_frame([]), disabled=True, show_index=False, hidden_columns=["id"], selectable=1,
            sizing_mode="stretch_width", height=340, css_classes=["memory-hits"],
            formatters={"content": {"type": "textarea"}})
        self.table.param.watch(self._selected, "selection")
        self.parts = pn.pane.Plotly(parts_figure([]), sizing_mode="stretch_width", height=320,
                                    css_classes=["memory-parts"])
        self.summary = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["memory-summary"])
        self.timeline = pn.pane.Plotly(timeline_figure(None), sizing_mode="stretch_width", height=260,
                                       css_classes=["memory-timeline"])
        self.decay = pn.pane.Plotly(decay_figure(None), sizing_mode="stretch_width", height=260,
                                    css_classes=["memory-decay"])
        self.events = pn.widgets.Tabulator(events_frame(None), disabled=True, show_index=False,
                                           sizing_mode="stretch_width", height=240, css_classes=["memory-events"])
        self.refresh()

    def _try(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            value = fn(*args, **kwargs)
        except ClientError as exc:
            self.banner.object = f"**{what} failed:** {literal_markdown(str(exc))}"
        except Exception as exc:  # an unexpected answer: say so, keep the page
            self.banner.object = f"**{what} failed:** {literal_markdown(f'{type(exc).__name__}: {exc}')}"
        else:
            self.banner.visible = False
            return value
        self.banner.visible = True
        return None

    def filters(self) -> dict[str, Any]:
        """The widgets as the routes' query parameters (None: not sent)."""
        low, high = self.importance.value
        return {"memory_type": list(self.types.value) or None,
                "min_importance": low if low > 0 else None, "max_importance": high if high < 1 else None,
                "created_after": self.after.value.isoformat() if isinstance(self.after.value, date) else None,
                "created_before": self.before.value.isoformat() if isinstance(self.before.value, date) else None}

    def refresh(self) -> None:
        q = self.query.value.strip()
        if q:
            found = self._try("Searching", self.client.search, q, self.limit, **self.filters())
        else:
            found = self._try("Listing the memories", self.client.memories, self.browse_limit, 0, **self.filters())
        if found is None:
            return
        self.hits = found
        self.table.selection = []
        self.table.value = hits_frame(found)
        self.parts.object = parts_figure(found)
        self.status.object = (f"{len(found)} hit(s) for *{literal_markdown(q)}*, ranked by relevance" if q else
                              f"{len(found)} memory(ies), newest first")

    def _selected(self, event: Any) -> None:
        rows = event.new
        if rows and rows[0] < len(self.table.value):
            self.show_history(self.table.value.iloc[rows[0]]["id"])

    def show_history(self, memory_id: str) -> dict[str, Any] | None:
        history = self._try("Reading the memory's history", self.client.history, memory_id, self.days)
        if history is not None:
            self.history = history
            self.summary.object = decay_markdown(history)
            self.timeline.object = timeline_figure(history)
            self.decay.object = decay_figure(history)
            self.events.value = events_frame(history)
        return history

    def __panel__(self) -> pn.viewable.Viewable:
        return pn.Column(
            "## Memory explorer",
            self.banner,
            pn.Row(self.query, self.search_button, sizing_mode="stretch_width"),
            pn.Row(self.types, self.importance, self.after, self.before),
            self.status,
            self.table,
            self.parts,
            "### History of the selected memory",
            self.summary,
            self.timeline,
            self.events,
            self.decay,
            sizing_mode="stretch_width",
        )


def local_memory(config: str | None) -> MemoryClient:
    """In process: the memory store of the configured data directory (built once per process)."""
    from dashboards.serving import local_services

    services, user = local_services(config, "memory", "the memory store is disabled (memory.enabled = false)")
    journal = services.dream.store.memory_journal if services.dream is not None else None
    return LocalMemoryClient(services.memory, user, journal)


if pn.state.served:
    from dashboards.banner import serve_page

    serve_page("Memory explorer", ("plotly", "tabulator"), HttpMemoryClient, local_memory, MemoryExplorer)
