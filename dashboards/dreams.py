"""Dream mode at a glance: what each night did, operation by operation, and the insights it found.

Everything shown comes from a :class:`~dashboards.dream_client.DreamClient` (the HTTP API or the
package in process: the same JSON), and every action goes through it; this module only lays it out:

- **status** of the active (or latest) session (state, cycle, phase, idle gate) and a *Dream now*
  button (``trigger``: skips the idle gate; a 409 names the session already running);
- **timeline**: a plotly Gantt of the latest sessions (one row each, coloured by state) with the
  NREM and REM phases of each cycle drawn over them, from the journal's timestamps: a phase spans
  from its first operation to the next phase's first operation (the session's start and end close
  the first and last); a session without operations shows only its own bar;
- **sessions** table (select one to browse its journal) and the **journal browser**: filters by
  cycle, phase and operation; selecting an entry shows the diff of its before/after snapshots
  (JSON, ``difflib``'s unified diff: the standard library's, rather than one written here);
- **insights** table (filter by status) with *Confirm* and *Dismiss* buttons in each row, which
  call the client (the API: ``POST /v1/dream/insights/{id}/confirm|dismiss``); a refusal (409 with
  the insight's state) is shown, not raised;
- live: a periodic callback (``refresh_ms``) reads the status and the sessions again; the journals of
  finished sessions are read once and kept.

Served by ``assistant dashboards`` (or ``panel serve dashboards/dreams.py``): with ``ASSISTANT_API_URL`` and ``ASSISTANT_API_KEY``
set it uses the API server (the key's user; the way to watch a running server); otherwise it builds
the services of the configured data directory in process (``--args config.toml``; only while no
server holds that directory) and shows ``ASSISTANT_DASHBOARD_USER`` (default: the owner). In a
notebook: ``pn.extension("plotly", "tabulator")``, then ``DreamsView(LocalDreamClient(services.dream, user))``.
"""

from __future__ import annotations

import difflib
import html
import json
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import panel as pn
import param
import plotly.graph_objects as go

from assistant.clock import epoch_of
from assistant.dream.types import Operation
from dashboards.banner import serve_page
from dashboards.client import ClientError
from dashboards.dream_client import DreamClient, HttpDreamClient, LocalDreamClient
from dashboards.serving import local_services

ALL = "all"
FINAL = ("completed", "failed")
STATE_COLOURS = {"pending": "#bdbdbd", "running": "#9ecae1", "paused": "#fdd0a2", "completed": "#c7e9c0",
                 "failed": "#fcbba1"}
PHASE_COLOURS = {"nrem": "#3182bd", "rem": "#e6550d"}
SESSION_COLUMNS = ["id", "status", "trigger", "cycle", "phase", "started", "completed", "operations", "reason"]
JOURNAL_COLUMNS = ["id", "seq", "cycle", "phase", "operation", "status", "memories", "nodes", "edges", "at",
                   "details"]
INSIGHT_COLUMNS = ["id", "type", "title", "content", "confidence", "status", "evidence", "created"]
INSIGHT_STATUSES = [ALL, "active", "confirmed", "dismissed", "expired"]


def _moment(text: str | None) -> datetime | None:
    """An ISO timestamp of the API as a naive UTC datetime (what plotly's date axis reads)."""
    if not text:
        return None
    return datetime.fromtimestamp(epoch_of(text), UTC).replace(tzinfo=None)


def _short(text: Any, limit: int = 120) -> str:
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- tables ------------------------------------------------------------------------------------------


def sessions_frame(sessions: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{
        "id": s["id"], "status": s["status"], "trigger": s.get("trigger", ""),
        "cycle": f"{s.get('current_cycle', 0)}/{s.get('total_cycles', 0)}", "phase": (s.get("phase") or "").upper(),
        "started": s.get("started_at") or "", "completed": s.get("completed_at") or "",
        "operations": sum(v for k, v in (s.get("counts") or {}).items() if k != "failed"),
        "reason": s.get("reason") or "",
    } for s in sessions], columns=SESSION_COLUMNS)


def journal_frame(entries: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{
        "id": e["id"], "seq": e["seq"], "cycle": e["cycle_number"], "phase": str(e["phase"]).upper(),
        "operation": e["operation"], "status": e["status"], "memories": len(e.get("affected_memory_ids") or []),
        "nodes": len(e.get("affected_node_ids") or []), "edges": len(e.get("affected_edge_ids") or []),
        "at": e.get("created_at", ""), "details": _short(e.get("details") or {}),
    } for e in entries], columns=JOURNAL_COLUMNS)


def insights_frame(insights: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{
        "id": i["id"], "type": i["insight_type"], "title": i["title"], "content": _short(i["content"], 200),
        "confidence": round(float(i["confidence"]), 3), "status": i["status"], "evidence": i["evidence_count"],
        "created": i.get("created_at", ""),
    } for i in insights], columns=INSIGHT_COLUMNS)


# --- the timeline ------------------------------------------------------------------------------------


def session_span(session: dict[str, Any], now: datetime) -> tuple[datetime, datetime]:
    start = _moment(session.get("started_at")) or _moment(session.get("created_at")) or now
    end = _moment(session.get("completed_at"))
    if end is None:
        end = now if session.get("status") not in FINAL else (_moment(session.get("updated_at")) or now)
    return start, max(end, start)


def phase_spans(session: dict[str, Any], entries: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """The (cycle, phase) runs of a session's journal, in order: each from its first operation to the
    next run's first (the first from the session's start, the last to its end)."""
    start, end = session_span(session, now)
    runs: list[dict[str, Any]] = []
    for entry in sorted(entries, key=lambda e: e["seq"]):
        phase, cycle = str(entry["phase"]).lower(), entry["cycle_number"]
        if runs and runs[-1]["phase"] == phase and runs[-1]["cycle"] == cycle:
            runs[-1]["operations"] += 1
            continue
        runs.append({"cycle": cycle, "phase": phase, "start": _moment(entry.get("created_at")) or start,
                     "operations": 1})
    for i, run in enumerate(runs):
        run["start"] = start if i == 0 else max(run["start"], start)
        run["end"] = runs[i + 1]["start"] if i + 1 < len(runs) else end
        run["end"] = max(run["end"], run["start"])
    return runs


def session_label(session: dict[str, Any]) -> str:
    return f"{session['id'][:8]} · {session['status']}"


def _ms(start: datetime, end: datetime) -> float:
    return max((end - start).total_seconds() * 1000.0, 1.0)  # a bar at least visible in hover


def timeline_figure(sessions: list[dict[str, Any]], journals: dict[str, list[dict[str, Any]]],
                    now: datetime | None = None) -> go.Figure:
    """Sessions (rows, oldest at the bottom) coloured by state, their phases drawn over them."""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    fig = go.Figure()
    by_state: dict[str, list[dict[str, Any]]] = {}
    for s in sessions:
        by_state.setdefault(s["status"], []).append(s)
    for state, group in by_state.items():
        spans = [session_span(s, now) for s in group]
        fig.add_trace(go.Bar(
            y=[session_label(s) for s in group], base=[a for a, _ in spans], x=[_ms(a, b) for a, b in spans],
            orientation="h", name=state, width=0.8, marker={"color": STATE_COLOURS.get(state, "#bdbdbd")},
            customdata=[s["id"] for s in group],
            hovertext=[f"session {s['id'][:8]}: {state}, cycle {s.get('current_cycle')}/{s.get('total_cycles')}"
                       for s in group], hoverinfo="text"))
    for phase, colour in PHASE_COLOURS.items():
        ys, bases, widths, texts = [], [], [], []
        for s in sessions:
            for run in phase_spans(s, journals.get(s["id"], []), now):
                if run["phase"] != phase:
                    continue
                ys.append(session_label(s))
                bases.append(run["start"])
                widths.append(_ms(run["start"], run["end"]))
                texts.append(f"cycle {run['cycle']} {phase.upper()}: {run['operations']} operation(s)")
        if ys:
            fig.add_trace(go.Bar(y=ys, base=bases, x=widths, orientation="h", name=phase.upper(), width=0.4,
                                 marker={"color": colour}, hovertext=texts, hoverinfo="text"))
    fig.update_layout(
        barmode="overlay", xaxis={"type": "date", "title": "time (UTC)"},
        yaxis={"categoryorder": "array", "categoryarray": [session_label(s) for s in reversed(sessions)]},
        title={"text": f"{len(sessions)} dream session(s)" if sessions else "No dream session yet",
               "font": {"size": 14}},
        height=max(220, 60 + 40 * len(sessions)), margin={"l": 10, "r": 10, "t": 40, "b": 40},
        plot_bgcolor="white", legend={"orientation": "h", "y": -0.25}, uirevision="timeline",
    )
    return fig


# --- the journal diff --------------------------------------------------------------------------------


def _lines(snapshot: Any) -> list[str]:
    if snapshot is None:
        return []
    return json.dumps(snapshot, indent=2, sort_keys=True, ensure_ascii=False, default=str).splitlines()


def snapshot_diff(before: Any, after: Any) -> list[str]:
    """The unified diff of two snapshots as pretty JSON (whole context: snapshots are small)."""
    a, b = _lines(before), _lines(after)
    return list(difflib.unified_diff(a, b, "before", "after", lineterm="", n=max(len(a), len(b))))


def diff_html(entry: dict[str, Any] | None) -> str:
    """An entry's header and its snapshot diff, escaped (memory text is user content)."""
    if entry is None:
        return "<p>Select a journal entry to see what it changed.</p>"
    head = (f"<b>{html.escape(entry['operation'])}</b> · cycle {entry['cycle_number']} "
            f"{html.escape(str(entry['phase']).upper())} · {html.escape(entry['status'])}")
    if entry.get("error"):
        head += f"<br>error: {html.escape(entry['error'])}"
    details = html.escape(json.dumps(entry.get("details") or {}, ensure_ascii=False, sort_keys=True, default=str))
    head += f"<br><small>details: {details}</small>"
    before, after = entry.get("before_snapshot"), entry.get("after_snapshot")
    if before is None and after is None:
        return head + "<p>No snapshots (journal.store_before_after_snapshots is off, or none were taken).</p>"
    rows = []
    for line in snapshot_diff(before, after):
        colour = ("#e6ffed" if line.startswith("+") and not line.startswith("+++") else
                  "#ffeef0" if line.startswith("-") and not line.startswith("---") else "transparent")
        text = html.escape(line, quote=False) or "&nbsp;"
        rows.append(f'<div class="diff-line" style="background:{colour}">{text}</div>')
    if not rows:
        rows.append("<div>(before and after are the same)</div>")
    return (f'{head}<pre class="snapshot-diff" style="font-size:12px;white-space:pre-wrap;margin-top:6px">'
            f'{"".join(rows)}</pre>')


def status_markdown(status: dict[str, Any]) -> str:
    session = status.get("session")
    gate = status.get("idle_seconds")
    idle = "never active" if gate is None else f"idle {gate:.0f} s"
    lines = [f"schedule `{status.get('schedule', '')}` · {'enabled' if status.get('enabled', True) else 'disabled'}"
             f" · {idle} (gate {status.get('idle_threshold_secs', '?')} s)"]
    if session is None:
        lines.insert(0, "**No dream session yet.**")
    else:
        lines.insert(0, f"**Session {session['id'][:8]}: {session['status']}**, cycle {session['current_cycle']}"
                        f"/{session['total_cycles']}, {str(session['phase']).upper()}"
                        + (f" (paused: {session['paused_reason']})" if session.get("paused_reason") else "")
                        + (f" — {session['reason']}" if session.get("reason") else ""))
    return "  \n".join(lines)


# --- the view ----------------------------------------------------------------------------------------


class DreamsView(pn.viewable.Viewer):
    """The dreams of one user through ``client`` (see the module docstring)."""

    cycle = param.Selector(default=ALL, objects=[ALL], doc="Journal: only this cycle")
    phase = param.Selector(default=ALL, objects=[ALL, "nrem", "rem"], doc="Journal: only this phase")
    operation = param.Selector(default=ALL, objects=[ALL, *[o.value for o in Operation]],
                               doc="Journal: only this operation")
    insight_status = param.Selector(default=ALL, objects=INSIGHT_STATUSES, doc="Insights: only this status")
    timeline_sessions = param.Integer(10, bounds=(1, 100), doc="Sessions on the timeline")
    refresh_ms = param.Integer(2000, bounds=(250, None), doc="How often the status and sessions are read (ms)")

    def __init__(self, client: DreamClient, **params):
        super().__init__(**params)
        self.client = client
        self.sessions: list[dict[str, Any]] = []
        self.entries: list[dict[str, Any]] = []
        self.insights: list[dict[str, Any]] = []
        self.selected: str | None = None  # the session whose journal is shown
        self.entry: dict[str, Any] | None = None
        self._journals: dict[str, list[dict[str, Any]]] = {}  # finished sessions' journals, read once
        self._seen: tuple = ()
        self.status = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.message = pn.pane.Markdown("", sizing_mode="stretch_width")
        self.trigger_button = pn.widgets.Button(label="Dream now", color="primary", width=140)
        self.trigger_button.on_click(lambda _e: self.trigger())
        self.timeline = pn.pane.Plotly(sizing_mode="stretch_width", height=260)
        self.sessions_table = pn.widgets.Tabulator(
            sessions_frame([]), disabled=True, show_index=False, selectable=1, hidden_columns=["id"],
            sizing_mode="stretch_width", height=260, css_classes=["dream-sessions"])
        self.sessions_table.param.watch(self._session_picked, "selection")
        self.journal_table = pn.widgets.Tabulator(
            journal_frame([]), disabled=True, show_index=False, selectable=1, hidden_columns=["id"],
            sizing_mode="stretch_width", height=300, pagination="local", page_size=50,
            css_classes=["dream-journal"])
        self.journal_table.param.watch(self._entry_picked, "selection")
        self.diff = pn.pane.HTML(diff_html(None), sizing_mode="stretch_width", css_classes=["dream-diff"])
        self.insights_table = pn.widgets.Tabulator(
            insights_frame([]), disabled=True, show_index=False, hidden_columns=["id"], sizing_mode="stretch_width",
            buttons={"confirm": "Confirm", "dismiss": "Dismiss"}, css_classes=["dream-insights"])
        self.insights_table.on_click(self._insight_clicked)
        self.callback: pn.io.callbacks.PeriodicCallback | None = None
        self.refresh()

    # --- reading ---------------------------------------------------------------------------------

    def _try(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ClientError as exc:
            self.message.object = f"**{what} failed:** {html.escape(str(exc))}"
        except Exception as exc:  # the server unreachable, an unexpected answer: say so, keep the page
            self.message.object = f"**{what} failed:** {html.escape(f'{type(exc).__name__}: {exc}')}"
        return None

    def journal_of(self, session: dict[str, Any]) -> list[dict[str, Any]]:
        """All the journal of a session (for the timeline); kept once the session is over."""
        if session["id"] in self._journals:
            return self._journals[session["id"]]
        page = self._try("Reading the journal", self.client.journal, session["id"], limit=1000)
        entries = page["entries"] if page else []
        if session["status"] in FINAL and page is not None:
            self._journals[session["id"]] = entries
        return entries

    def refresh(self) -> None:
        """Read the status, the sessions (and their journals), the selected journal and the insights."""
        status = self._try("Reading the status", self.client.status)
        if status is not None:
            self.status.object = status_markdown(status)
        page = self._try("Reading the sessions", self.client.sessions, self.timeline_sessions, 0)
        if page is None:
            return
        self.sessions = page["sessions"]
        self.sessions_table.value = sessions_frame(self.sessions)
        journals = {s["id"]: self.journal_of(s) for s in self.sessions}
        self.timeline.object = timeline_figure(self.sessions, journals)
        if self.sessions and (self.selected is None or self.selected not in journals):
            self.select_session(self.sessions[0]["id"])
        elif self.selected is not None:
            self._sync_selection()
            self.read_journal()
        self.read_insights()
        self._seen = self._state()

    def _state(self) -> tuple:
        return tuple((s["id"], s["status"], s.get("current_cycle"), s.get("phase"), s.get("updated_at"))
                     for s in self.sessions)

    def poll(self) -> bool:
        """The periodic callback: refresh when a session changed (or one is active). True if it did."""
        page = self._try("Reading the sessions", self.client.sessions, self.timeline_sessions, 0)
        if page is None:
            return False
        current = tuple((s["id"], s["status"], s.get("current_cycle"), s.get("phase"), s.get("updated_at"))
                        for s in page["sessions"])
        if current == self._seen:
            return False
        self.refresh()
        return True

    def _sync_selection(self) -> None:
        index = next((i for i, s in enumerate(self.sessions) if s["id"] == self.selected), None)
        if index is not None and self.sessions_table.selection != [index]:
            self.sessions_table.selection = [index]

    def select_session(self, session_id: str) -> None:
        self.selected = session_id
        session = next((s for s in self.sessions if s["id"] == session_id), None)
        total = int(session.get("total_cycles", 0)) if session else 0
        self.param.cycle.objects = [ALL, *range(1, total + 1)]
        if self.cycle != ALL and self.cycle not in self.param.cycle.objects:
            self.cycle = ALL
        self._sync_selection()
        self.read_journal()

    def read_journal(self) -> None:
        if self.selected is None:
            return
        page = self._try("Reading the journal", self.client.journal, self.selected,
                         cycle=None if self.cycle == ALL else int(self.cycle),
                         phase=None if self.phase == ALL else self.phase,
                         operation=None if self.operation == ALL else self.operation, limit=1000)
        if page is None:
            return
        self.entries = page["entries"]
        self.journal_table.value = journal_frame(self.entries)
        if self.entry is not None and all(e["id"] != self.entry["id"] for e in self.entries):
            self.select_entry(None)

    def select_entry(self, entry_id: str | None) -> None:
        self.entry = next((e for e in self.entries if e["id"] == entry_id), None)
        self.diff.object = diff_html(self.entry)

    def read_insights(self) -> None:
        page = self._try("Reading the insights", self.client.insights,
                         status=None if self.insight_status == ALL else self.insight_status)
        if page is not None:
            self.insights = page["insights"]
            self.insights_table.value = insights_frame(self.insights)

    @param.depends("cycle", "phase", "operation", watch=True)
    def _filters_changed(self) -> None:
        self.read_journal()

    @param.depends("insight_status", watch=True)
    def _insight_filter_changed(self) -> None:
        self.read_insights()

    def _session_picked(self, event: param.parameterized.Event) -> None:
        if event.new and event.new[0] < len(self.sessions):
            chosen = self.sessions[event.new[0]]["id"]
            if chosen != self.selected:
                self.select_session(chosen)

    def _entry_picked(self, event: param.parameterized.Event) -> None:
        if event.new and event.new[0] < len(self.entries):
            self.select_entry(self.entries[event.new[0]]["id"])

    # --- acting ----------------------------------------------------------------------------------

    def trigger(self) -> dict[str, Any] | None:
        """Start a session now (through the client); refresh to show it."""
        session = self._try("Starting a dream", self.client.trigger)
        if session is not None:
            self.message.object = f"Dream session {session['id'][:8]} started."
            self.selected = session["id"]
            self.refresh()
            self.select_session(session["id"])
        return session

    def act(self, insight_id: str, action: str) -> dict[str, Any] | None:
        """``confirm`` or ``dismiss`` an insight through the client; the table shows its new status."""
        fn, doing = {"confirm": (self.client.confirm, "Confirming"), "dismiss": (self.client.dismiss, "Dismissing")}[action]
        insight = self._try(f"{doing} the insight", fn, insight_id)
        if insight is not None:
            self.message.object = f"Insight *{html.escape(insight['title'])}* is now **{insight['status']}**."
            self.read_insights()
        return insight

    def _insight_clicked(self, event: Any) -> None:
        if event.column in ("confirm", "dismiss") and event.row is not None and event.row < len(self.insights):
            self.act(self.insights_table.value.iloc[event.row]["id"], event.column)

    # --- layout ----------------------------------------------------------------------------------

    def __panel__(self) -> pn.viewable.Viewable:
        if self.callback is None:
            self.callback = pn.state.add_periodic_callback(self.poll, period=self.refresh_ms)
        filters = pn.Param(self, parameters=["cycle", "phase", "operation"], show_name=False,
                           default_layout=pn.Row, sizing_mode="stretch_width")
        return pn.Column(
            pn.Row("## Dreams", self.trigger_button, self.status, sizing_mode="stretch_width"),
            self.message,
            self.timeline,
            pn.Row(pn.Column("### Sessions", self.sessions_table, width=620),
                   pn.Column("### Journal", filters, self.journal_table, self.diff, sizing_mode="stretch_width"),
                   sizing_mode="stretch_width"),
            pn.Row("### Insights", pn.Param(self, parameters=["insight_status"], show_name=False,
                                            widgets={"insight_status": {"name": "Status"}})),
            self.insights_table,
            sizing_mode="stretch_width",
        )


def local_dream(config: str | None) -> DreamClient:
    """In process: the dream service of the configured data directory (built once per process)."""
    services, user = local_services(config, "dream",
                                    "dream mode is disabled ([dream] enabled = false, or memory.enabled = false)")
    return LocalDreamClient(services.dream, user)


if pn.state.served:
    serve_page("Dreams", ("plotly", "tabulator"), HttpDreamClient, local_dream, DreamsView)
