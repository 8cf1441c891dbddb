"""Sanitation at a glance: the quality score over time, what sanitation set aside, and the defences it grew.

Everything shown comes from a :class:`~dashboards.quality_client.QualityClient` (the HTTP API or the
package in process: the same JSON), and every action goes through it; this module only lays it out:

- **quality** now (``quality()``: score, trend, the three components, recommendations); when the
  assessment is unavailable, the latest run's is shown and the reason said;
- **curves**: the score and its components (re-ask, correction, abandonment rates) of each run in
  the history (``history()``, oldest first), on a plotly time axis;
- **quarantine** table (reason, verdict, when) with a *Restore* button per row (``restore``: the
  memory gets its type back and leaves the table; a purged one's refusal says when and why);
- **defence patterns** table with their hit counts and a *Deactivate* button per row;
- *Run sanitation now* (``run()``) and a periodic refresh (``refresh_ms``);
- **immune system** (``immune()``): the defence's layers with their pattern counts, the last red-team and
  sanitation results, quarantine counts, anomalies and component restarts, in one table;
- **red team** (``red_team()``): the latest report's defence score per attack family (a bar chart) and its
  bypasses (the attacks that got through, which sanitation's defence evolution learns from).

Served by ``assistant dashboards`` (or ``panel serve dashboards/quality.py``): with ``ASSISTANT_API_URL`` and ``ASSISTANT_API_KEY``
set it uses the API server (the key's user); otherwise it builds the services of the configured data
directory in process (``--args config.toml``; only while no server holds that directory) and shows
``ASSISTANT_DASHBOARD_USER`` (default: the owner). In a notebook: ``pn.extension("plotly", "tabulator")``,
then ``QualityView(LocalQualityClient(services.sanitation, user, services.immune, services.red_team))``.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import panel as pn
import param
import plotly.graph_objects as go

from assistant.clock import epoch_of
from dashboards.banner import serve_page
from dashboards.client import ClientError
from dashboards.quality_client import HttpQualityClient, LocalQualityClient, QualityClient
from dashboards.serving import local_services

SERIES = (("score", "quality score", "#2ca02c"), ("re_ask_rate", "re-ask rate", "#1f77b4"),
          ("correction_rate", "correction rate", "#ff7f0e"), ("abandonment_rate", "abandonment rate", "#d62728"))
TREND_MARKS = {"Improving": "↑", "Stable": "→", "Degrading": "↓"}
QUARANTINE_COLUMNS = ["id", "content", "reason", "type", "quarantined"]
PATTERN_COLUMNS = ["id", "pattern", "family", "source", "hits", "created"]
IMMUNE_COLUMNS = ["part", "state", "detail"]
BYPASS_COLUMNS = ["family", "technique", "why", "text"]


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromtimestamp(epoch_of(text), UTC).replace(tzinfo=None)


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def curves_figure(results: list[dict[str, Any]]) -> go.Figure:
    """One line per series over the runs that have a quality assessment (oldest first)."""
    rated = [r for r in results if r.get("quality") and _moment(r.get("started_at"))]
    x = [_moment(r["started_at"]) for r in rated]
    fig = go.Figure()
    for key, name, colour in SERIES:
        fig.add_trace(go.Scatter(x=x, y=[float(r["quality"].get(key, 0.0)) for r in rated], name=name,
                                 mode="lines+markers", line={"color": colour, "width": 3 if key == "score" else 1.5},
                                 customdata=[r["id"] for r in rated]))
    fig.update_layout(
        xaxis={"type": "date", "title": "run (UTC)"}, yaxis={"range": [0, 1.05], "title": "rate / score"},
        title={"text": f"Quality over {len(rated)} run(s)" if rated else "No sanitation run yet",
               "font": {"size": 14}},
        height=320, margin={"l": 10, "r": 10, "t": 40, "b": 40}, plot_bgcolor="white",
        legend={"orientation": "h", "y": -0.25}, uirevision="quality")
    return fig


def quality_markdown(quality: dict[str, Any] | None, note: str = "") -> str:
    if not quality:
        return "**No quality assessment yet.**" + (f"  \n{html.escape(note)}" if note else "")
    trend = str(quality.get("trend", ""))
    lines = [f"**Quality {float(quality['score']):.2f}** {TREND_MARKS.get(trend, '')} {html.escape(trend)}"
             + (" — **regression**" if quality.get("regression") else ""),
             f"re-ask {float(quality.get('re_ask_rate', 0)):.2f} · correction "
             f"{float(quality.get('correction_rate', 0)):.2f} · abandonment {float(quality.get('abandonment_rate', 0)):.2f}"
             f" · {quality.get('messages', 0)} message(s) in {quality.get('conversations', 0)} conversation(s)"]
    text = "  \n".join(lines)
    recommendations = [f"- {html.escape(r)}" for r in quality.get("recommendations") or []]
    if recommendations:
        text += "\n\n**Recommendations**\n\n" + "\n".join(recommendations)
    return text + (f"\n\n*{html.escape(note)}*" if note else "")


def quarantine_frame(memories: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{
        "id": m["id"], "content": _short(m.get("content") or ""), "reason": m.get("quarantine_reason") or "",
        "type": m.get("original_memory_type") or "", "quarantined": m.get("quarantined_at") or "",
    } for m in memories], columns=QUARANTINE_COLUMNS)


def patterns_frame(patterns: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{
        "id": p["id"], "pattern": p["pattern"], "family": p.get("family") or "", "source": p.get("source") or "",
        "hits": int(p.get("hits") or 0), "created": p.get("created_at") or "",
    } for p in patterns], columns=PATTERN_COLUMNS)


def immune_frame(status: dict[str, Any]) -> pd.DataFrame:
    """The immune status as rows a person reads: one per defence layer, then the last runs, quarantine,
    anomalies and each restartable component."""
    rows: list[dict[str, Any]] = []
    defence = status.get("defence") or {}
    for layer in defence.get("layers") or []:
        detail = ", ".join(f"{k} {v}" for k, v in layer.items()
                           if k in ("patterns", "deactivated", "hits", "variant", "band") and v not in (None, {}))
        rows.append({"part": f"defence: {layer['name']}", "state": "on" if layer.get("active") else "off",
                     "detail": detail or layer.get("detail", "")})
    for name in ("red_team", "sanitation"):
        part = status.get(name) or {}
        latest = part.get("latest") or {}
        score = latest.get("defense_score", latest.get("quality_score"))
        when = latest.get("finished_at") or latest.get("started_at") or ""
        rows.append({"part": name.replace("_", " "), "state": part.get("status", ""),
                     "detail": (f"score {score} " if score is not None else "") + str(when)})
    quarantine = status.get("quarantine") or {}
    rows.append({"part": "quarantine", "state": f"{quarantine.get('quarantined', 0)} held",
                 "detail": f"{quarantine.get('purged', 0)} purged"})
    anomalies = status.get("anomalies") or {}
    rows.append({"part": "anomalies", "state": f"{anomalies.get('detected', 0)} detected",
                 "detail": "; ".join(str(a.get("detail", a)) for a in (anomalies.get("recent") or [])[-3:])})
    for component, state in (status.get("restarts") or {}).items():
        rows.append({"part": f"restarts: {component}",
                     "state": "degraded" if state.get("degraded") else f"{state.get('attempts', 0)} attempt(s)",
                     "detail": state.get("degraded_reason") or state.get("last_error") or ""})
    return pd.DataFrame(rows, columns=IMMUNE_COLUMNS)


def red_team_figure(report: dict[str, Any] | None) -> go.Figure:
    """The defence score per attack family of a red-team report (blocked / tested, 0..100)."""
    families = (report or {}).get("families") or {}
    names = sorted(families)
    fig = go.Figure(go.Bar(x=names, y=[families[n].get("score") or 0 for n in names], marker_color="#2ca02c",
                           text=[f"{families[n].get('blocked', 0)}/{families[n].get('tested', 0)}" for n in names],
                           textposition="outside"))
    title = (f"Red team: defence score {report['defense_score']:.1f} "
             f"({report['attacks_blocked']}/{report['attacks_tested']} blocked)") if report else "No red-team run yet"
    fig.update_layout(title={"text": title, "font": {"size": 14}}, yaxis={"range": [0, 110], "title": "score"},
                      height=300, margin={"l": 10, "r": 10, "t": 40, "b": 40}, plot_bgcolor="white",
                      uirevision="red-team")
    return fig


def bypasses_frame(report: dict[str, Any] | None) -> pd.DataFrame:
    return pd.DataFrame([{"family": b.get("family", ""), "technique": b.get("technique", ""), "why": b.get("why", ""),
                          "text": _short(b.get("text") or "")} for b in (report or {}).get("bypasses") or []],
                        columns=BYPASS_COLUMNS)


class QualityView(pn.viewable.Viewer):
    """The sanitation of one user through ``client`` (see the module docstring)."""

    history_runs = param.Integer(100, bounds=(1, 500), doc="Runs on the curves")
    refresh_ms = param.Integer(5000, bounds=(250, None), doc="How often everything is read again (ms)")

    def __init__(self, client: QualityClient, **params):
        super().__init__(**params)
        self.client = client
        self.results: list[dict[str, Any]] = []
        self.memories: list[dict[str, Any]] = []
        self.patterns: list[dict[str, Any]] = []
        self.summary = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["quality-summary"])
        self.message = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["quality-message"])
        self.run_button = pn.widgets.Button(label="Run sanitation now", color="primary", width=180)
        self.run_button.on_click(lambda _e: self.run())
        self.curves = pn.pane.Plotly(sizing_mode="stretch_width", height=320)
        self.quarantine_table = pn.widgets.Tabulator(
            quarantine_frame([]), disabled=True, show_index=False, hidden_columns=["id"], sizing_mode="stretch_width",
            buttons={"restore": "Restore"}, height=300, css_classes=["quality-quarantine"])
        self.quarantine_table.on_click(self._quarantine_clicked)
        self.patterns_table = pn.widgets.Tabulator(
            patterns_frame([]), disabled=True, show_index=False, hidden_columns=["id"], sizing_mode="stretch_width",
            buttons={"deactivate": "Deactivate"}, height=260, css_classes=["quality-patterns"])
        self.patterns_table.on_click(self._pattern_clicked)
        self.immune_table = pn.widgets.Tabulator(immune_frame({}), disabled=True, show_index=False,
                                                 sizing_mode="stretch_width", height=320,
                                                 css_classes=["quality-immune"])
        self.red_team_note = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["quality-red-team"])
        self.red_team_plot = pn.pane.Plotly(red_team_figure(None), sizing_mode="stretch_width", height=300)
        self.bypasses_table = pn.widgets.Tabulator(bypasses_frame(None), disabled=True, show_index=False,
                                                   sizing_mode="stretch_width", height=220,
                                                   css_classes=["quality-bypasses"])
        self.callback: pn.io.callbacks.PeriodicCallback | None = None
        self.refresh()

    def _try(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except ClientError as exc:
            self.message.object = f"**{what} failed:** {html.escape(str(exc))}"
        except Exception as exc:  # the server unreachable, an unexpected answer: say so, keep the page
            self.message.object = f"**{what} failed:** {html.escape(f'{type(exc).__name__}: {exc}')}"
        return None

    # --- reading ---------------------------------------------------------------------------------

    def refresh(self) -> None:
        page = self._try("Reading the run history", self.client.history, self.history_runs)
        if page is not None:
            self.results = page["results"]
            self.curves.object = curves_figure(self.results)
        self.read_quality()
        self.read_quarantine()
        self.read_patterns()
        self.read_immune()

    def read_immune(self) -> None:
        """The immune status and the latest red-team report; either being off (503) or not run yet (404) is
        said in a line, not as a failure."""
        try:
            self.immune_table.value = immune_frame(self.client.immune())
        except ClientError as exc:
            self.immune_table.value = pd.DataFrame([{"part": "immune status", "state": "unavailable",
                                                     "detail": str(exc)}], columns=IMMUNE_COLUMNS)
        except Exception as exc:
            self.message.object = f"**Reading the immune status failed:** {html.escape(str(exc))}"
        report = None
        try:
            report = self.client.red_team()
            self.red_team_note.object = ""
        except ClientError as exc:
            self.red_team_note.object = f"*{html.escape(str(exc))}*"
        except Exception as exc:
            self.red_team_note.object = f"**Reading the red-team report failed:** {html.escape(str(exc))}"
        self.red_team_plot.object = red_team_figure(report)
        self.bypasses_table.value = bypasses_frame(report)
        self.red_team_plot.visible = report is not None  # no empty axes while there is nothing to plot
        self.bypasses_table.visible = bool(report and report.get("bypasses"))

    def read_quality(self) -> None:
        try:
            self.summary.object = quality_markdown(self.client.quality())
        except Exception as exc:  # not available: the latest run's assessment, and why
            latest = next((r["quality"] for r in reversed(self.results) if r.get("quality")), None)
            note = f"the current assessment is unavailable ({exc}); showing the latest run's" if latest else str(exc)
            self.summary.object = quality_markdown(latest, note)

    def read_quarantine(self) -> None:
        page = self._try("Reading the quarantine", self.client.quarantine)
        if page is not None:
            self.memories = page["memories"]
            self.quarantine_table.value = quarantine_frame(self.memories)

    def read_patterns(self) -> None:
        page = self._try("Reading the defence patterns", self.client.patterns)
        if page is not None:
            self.patterns = page["patterns"]
            self.patterns_table.value = patterns_frame(self.patterns)

    # --- acting ----------------------------------------------------------------------------------

    def restore(self, memory_id: str) -> dict[str, Any] | None:
        memory = self._try("Restoring the memory", self.client.restore, memory_id)
        if memory is not None:
            self.message.object = (f"Restored *{html.escape(_short(memory.get('content') or '', 60))}* as "
                                   f"**{html.escape(memory['memory_type'])}**.")
        self.read_quarantine()
        return memory

    def deactivate(self, pattern_id: str) -> dict[str, Any] | None:
        pattern = self._try("Deactivating the pattern", self.client.deactivate, pattern_id)
        if pattern is not None:
            self.message.object = f"Pattern `{html.escape(_short(pattern['pattern'], 60))}` deactivated."
        self.read_patterns()
        return pattern

    def run(self) -> dict[str, Any] | None:
        result = self._try("Running sanitation", self.client.run)
        if result is not None:
            counts = result.get("counts") or {}
            self.message.object = (f"Sanitation run **{html.escape(result['status'])}**: "
                                   f"{len(result.get('quarantined') or [])} quarantined, "
                                   f"{counts.get('purged', 0)} purged.")
            self.refresh()
        return result

    def _quarantine_clicked(self, event: Any) -> None:
        if event.column == "restore" and event.row is not None and event.row < len(self.quarantine_table.value):
            self.restore(self.quarantine_table.value.iloc[event.row]["id"])

    def _pattern_clicked(self, event: Any) -> None:
        if event.column == "deactivate" and event.row is not None and event.row < len(self.patterns_table.value):
            self.deactivate(self.patterns_table.value.iloc[event.row]["id"])

    # --- layout ----------------------------------------------------------------------------------

    def __panel__(self) -> pn.viewable.Viewable:
        if self.callback is None:
            self.callback = pn.state.add_periodic_callback(self.refresh, period=self.refresh_ms)
        return pn.Column(
            pn.Row("## Quality", self.run_button, sizing_mode="stretch_width"),
            self.message,
            self.summary,
            self.curves,
            "### Quarantined memories",
            self.quarantine_table,
            "### Defence patterns",
            self.patterns_table,
            "### Immune system",
            self.immune_table,
            "### Red team",
            self.red_team_note,
            self.red_team_plot,
            self.bypasses_table,
            sizing_mode="stretch_width",
        )


def local_quality(config: str | None) -> QualityClient:
    """In process: the sanitation service of the configured data directory (built once per process)."""
    services, user = local_services(config, "sanitation",
                                    "sanitation is disabled ([sanitation] enabled = false, or memory.enabled = false)")
    return LocalQualityClient(services.sanitation, user, services.immune, services.red_team)


if pn.state.served:
    serve_page("Quality", ("plotly", "tabulator"), HttpQualityClient, local_quality, QualityView)
