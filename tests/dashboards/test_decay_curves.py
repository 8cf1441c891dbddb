"""The decay-curves dashboard: a Viewer whose figure and calculator follow its parameters."""

from __future__ import annotations

import panel as pn
import pytest

from assistant.memory.decay import DECAY_PARAMS, base_rate_from_factor, curve
from assistant.memory.scoring import RelevanceWeights, relevance
from assistant.memory.types import MemoryType
from dashboards.decay_curves import DecayCurves


def test_one_trace_per_decayed_type_by_default() -> None:
    view = DecayCurves()
    assert [t.name for t in view.plot.object.data] == [t.value for t in DECAY_PARAMS]


def test_selecting_types_changes_the_traces() -> None:
    view = DecayCurves()
    view.types = ["Fact", "Context"]
    assert [t.name for t in view.plot.object.data] == ["Fact", "Context"]
    view.types = []
    assert len(view.plot.object.data) == 0


@pytest.mark.parametrize("memory_type", [MemoryType.CORRECTION, MemoryType.CONTEXT])
def test_last_value_follows_decay_factor_access_count_and_days(memory_type: MemoryType) -> None:
    view = DecayCurves(types=[memory_type.value])
    view.param.update(decay_factor=0.9, access_count=5, days=30, importance=0.8)
    trace = view.plot.object.data[0]
    expected = curve(memory_type, 5, 30, base_decay_rate=base_rate_from_factor(0.9), importance=0.8)
    assert len(trace.y) == 31
    assert trace.y[-1] == pytest.approx(expected[-1])
    assert list(trace.x) == list(range(31))


def test_more_accesses_keep_more_importance() -> None:
    view = DecayCurves(types=["Context"], days=60)
    never = view.plot.object.data[0].y[-1]
    view.access_count = 20
    often = view.plot.object.data[0].y[-1]
    assert often > never
    assert never == pytest.approx(DECAY_PARAMS[MemoryType.CONTEXT].floor)


def test_relevance_calculator_uses_the_weights() -> None:
    view = DecayCurves()
    view.param.update(similarity=0.8, current_importance=0.4, hours_since_access=10.0,
                      w_similarity=1.0, w_importance=0.0, w_freshness=0.0)
    assert view.relevance_value == pytest.approx(0.8)
    view.w_freshness = 0.5
    expected = relevance(0.8, 0.4, 10.0, RelevanceWeights(1.0, 0.0, 0.5))
    assert view.relevance_value == pytest.approx(expected)
    assert f"{expected:.3f}" in view.calculator.object


def test_panel_returns_a_panel_object() -> None:
    layout = DecayCurves().__panel__()
    assert isinstance(layout, pn.viewable.Viewable)
    assert any(isinstance(obj, pn.pane.Plotly) for obj in layout.select(pn.pane.Plotly))
