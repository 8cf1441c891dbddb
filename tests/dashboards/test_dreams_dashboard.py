"""The dreams dashboard over real services (SQLite, the scripted model, the hashing embedder) through the
in-process client; the dream steps are fakes that journal DecayApplied with snapshots; insights are
stored as REM stores them and confirmed or dismissed by the real lifecycle (assistant/dream/insights.py)."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import panel as pn
import pytest

from assistant.dream.journal import APPLIERS, Applied
from assistant.dream.session import PhaseContext
from assistant.dream.types import InsightStatus, InsightType, Operation
from assistant.services import Services
from dashboards.dream_client import DreamClientError, LocalDreamClient
from dashboards.dreams import DreamsView, diff_html, phase_spans, snapshot_diff, timeline_figure

USER = "alice"


class Decays:
    """A step that journals ``times`` DecayApplied operations with a before-snapshot."""

    def __init__(self, name: str, times: int = 2):
        self.name = name
        self.times = times

    def run(self, ctx: PhaseContext) -> None:
        for n in range(self.times):
            ctx.record(Operation.DECAY_APPLIED, f"{self.name}:{ctx.session.id}:{ctx.cycle}:{n}",
                       {"step": self.name, "n": n}, memories=[f"m{n}"],
                       before={"memory": f"m{n}", "importance": 0.9, "text": "<b>I live in Lisbon</b>"})


@pytest.fixture
def dream_services(make_settings, make_services, monkeypatch: pytest.MonkeyPatch) -> Services:
    def apply(deps, entry) -> Applied:
        return Applied(after={**(entry.before_snapshot or {}), "importance": 0.7})

    services = make_services(make_settings(dream={"max_cycles": 2}))  # registers the real appliers: then replace
    monkeypatch.setitem(APPLIERS, Operation.DECAY_APPLIED, apply)
    services.memory.add(USER, "I live in Lisbon.")
    services.dream.nrem_steps, services.dream.rem_steps = [Decays("nrem")], [Decays("rem", times=1)]
    return services


def add_insight(services: Services, title: str) -> str:
    insight, _ = services.dream.store.add_insight(USER, InsightType.PATTERN, title, f"{title}: seen 4 times", 0.8,
                                                  ["m1"], key=title)
    return insight.id


def test_a_triggered_session_shows_on_the_timeline_with_its_phases(dream_services: Services) -> None:
    view = DreamsView(LocalDreamClient(dream_services.dream, USER))
    assert view.sessions == [] and "No dream session yet" in view.status.object
    session = dream_services.dream.trigger(USER, background=False)  # as the scheduler or the API would
    view.refresh()
    assert [s["id"] for s in view.sessions] == [session.id]
    assert view.selected == session.id
    assert "completed" in view.status.object and "2/2" in view.status.object
    traces = {t.name: t for t in view.timeline.object.data}
    assert set(traces) == {"completed", "NREM", "REM"}
    assert len(traces["NREM"].y) == 2 and len(traces["REM"].y) == 2  # one run per cycle
    assert list(view.sessions_table.value["status"]) == ["completed"]
    assert view.sessions_table.value.loc[0, "operations"] == 6


def test_the_trigger_button_starts_a_session_through_the_client(dream_services: Services) -> None:
    view = DreamsView(LocalDreamClient(dream_services.dream, USER))
    started = view.trigger()
    assert started is not None and started["status"] == "running"
    dream_services.dream.wait(USER, 30)
    assert view.poll() is True  # the session changed: read again
    assert view.sessions[0]["status"] == "completed" and view.poll() is False
    again = view.trigger()  # the first is over: a second night may start
    assert again is not None and again["id"] != started["id"]
    dream_services.dream.wait(USER, 30)


def test_a_conflicting_trigger_is_shown_not_raised(dream_services: Services) -> None:
    dream_services.dream.store.create_session(USER, 2, "schedule")  # pending: one active session per user
    view = DreamsView(LocalDreamClient(dream_services.dream, USER))
    assert view.trigger() is None
    assert "Starting a dream failed" in view.message.object and "already pending" in view.message.object


def test_journal_filters_and_the_before_after_diff(dream_services: Services) -> None:
    dream_services.dream.trigger(USER, background=False)
    view = DreamsView(LocalDreamClient(dream_services.dream, USER))
    assert len(view.journal_table.value) == 6
    view.cycle = 2
    assert set(view.journal_table.value["cycle"]) == {2} and len(view.journal_table.value) == 3
    view.phase = "rem"
    assert list(view.journal_table.value["phase"]) == ["REM"]
    view.operation = Operation.MEMORY_CONSOLIDATED.value
    assert view.journal_table.value.empty
    view.cycle, view.phase, view.operation = "all", "all", "all"
    view.journal_table.selection = [0]  # as a click on the first row
    assert view.entry is not None and view.entry["operation"] == "DecayApplied"
    shown = view.diff.object
    assert '-  "importance": 0.9' in shown and '+  "importance": 0.7' in shown
    assert "&lt;b&gt;I live in Lisbon&lt;/b&gt;" in shown and "<b>I live in Lisbon</b>" not in shown  # escaped


def test_insight_buttons_confirm_and_dismiss_through_the_client(dream_services: Services) -> None:
    first, second = add_insight(dream_services, "Runs on Sundays"), add_insight(dream_services, "Cooks risotto")
    view = DreamsView(LocalDreamClient(dream_services.dream, USER))
    assert set(view.insights_table.value["status"]) == {"active"}
    assert view.act(first, "confirm")["status"] == "confirmed"
    assert dream_services.dream.store.insight(USER, first).status is InsightStatus.CONFIRMED
    assert "is now **confirmed**" in view.message.object
    row = list(view.insights_table.value["id"]).index(second)
    view._insight_clicked(type("Click", (), {"column": "dismiss", "row": row})())  # the row's Dismiss button
    assert dream_services.dream.store.insight(USER, second).status is InsightStatus.DISMISSED
    assert view.act(second, "confirm") is None  # dismissed is final: 409 with the state, shown
    assert "Confirming the insight failed" in view.message.object and "dismissed" in view.message.object
    view.insight_status = "confirmed"
    assert list(view.insights_table.value["id"]) == [first]


def test_unknown_ids_are_errors_the_page_shows(dream_services: Services) -> None:
    client = LocalDreamClient(dream_services.dream, USER)
    with pytest.raises(DreamClientError) as caught:
        client.session("no-such-session")
    assert caught.value.status == 404
    with pytest.raises(DreamClientError, match="unknown Phase"):
        client.journal("x", phase="deep")
    other = dream_services.dream.trigger("bob", background=False)  # another user's session: not found for alice
    with pytest.raises(DreamClientError):
        client.session(other.id)


def test_phase_spans_cover_the_session_in_order() -> None:
    session = {"id": "s1", "status": "completed", "started_at": "2026-01-01T00:00:00.000Z",
               "completed_at": "2026-01-01T01:00:00.000Z"}
    entries = [{"seq": i, "cycle_number": c, "phase": p, "created_at": at} for i, (c, p, at) in enumerate([
        (1, "NREM", "2026-01-01T00:05:00.000Z"), (1, "NREM", "2026-01-01T00:10:00.000Z"),
        (1, "REM", "2026-01-01T00:20:00.000Z"), (2, "NREM", "2026-01-01T00:40:00.000Z")])]
    runs = phase_spans(session, entries, datetime(2026, 1, 2))
    assert [(r["cycle"], r["phase"], r["operations"]) for r in runs] == [(1, "nrem", 2), (1, "rem", 1), (2, "nrem", 1)]
    assert runs[0]["start"] == datetime(2026, 1, 1, 0, 0) and runs[-1]["end"] == datetime(2026, 1, 1, 1, 0)
    assert all(a["end"] == b["start"] for a, b in zip(runs, runs[1:], strict=False))
    fig = timeline_figure([session], {"s1": entries}, datetime(2026, 1, 2))
    assert [t.name for t in fig.data] == ["completed", "NREM", "REM"]
    running = {**session, "status": "running", "completed_at": None}
    [bar] = timeline_figure([running], {}, datetime(2026, 1, 1, 2)).data  # no operations yet: the session alone
    assert bar.x[0] == pytest.approx(2 * 3600 * 1000)


def test_snapshot_diff_and_an_entry_without_snapshots() -> None:
    assert snapshot_diff({"a": 1}, {"a": 1}) == []
    assert "+  \"b\": 2" in "\n".join(snapshot_diff({"a": 1}, {"a": 1, "b": 2}))
    entry = {"operation": "EdgePruned", "cycle_number": 1, "phase": "NREM", "status": "failed", "error": "boom",
             "details": {}, "before_snapshot": None, "after_snapshot": None}
    assert "No snapshots" in diff_html(entry) and "error: boom" in diff_html(entry)


def test_the_view_renders(dream_services: Services) -> None:
    pn.extension("plotly", "tabulator")
    dream_services.dream.trigger(USER, background=False)
    view = DreamsView(LocalDreamClient(dream_services.dream, USER))
    model = view.__panel__().get_root()
    assert model is not None and view.callback is not None
    view.callback.stop()
    assert isinstance(view.journal_table.value, pd.DataFrame)


def test_served_over_http_when_the_api_url_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboards.client import connect
    from dashboards.dream_client import HttpDreamClient
    from dashboards.dreams import local_dream

    monkeypatch.setenv("ASSISTANT_API_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ASSISTANT_API_KEY", "k-1")
    client = connect(HttpDreamClient, local_dream)
    assert isinstance(client, HttpDreamClient) and client.http.headers["Authorization"] == "Bearer k-1"
    client.close()
