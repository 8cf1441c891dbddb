"""Memory decay curves and a relevance calculator, over ``assistant.memory.decay`` and ``.scoring``.

Serve it with ``panel serve dashboards/decay_curves.py``; in a notebook, call
``pn.extension("plotly")`` and show ``DecayCurves()``. Every number comes from the package's pure
functions (``curve``, ``relevance``, ``freshness``); this module only lays them out.
"""

from __future__ import annotations

import panel as pn
import param
import plotly.graph_objects as go

from assistant.memory.decay import DECAY_PARAMS, base_rate_from_factor, curve
from assistant.memory.scoring import DEFAULT_WEIGHTS, RelevanceWeights, freshness, relevance
from assistant.memory.types import MemoryType

DECAYED_TYPES = [t.value for t in DECAY_PARAMS]


class DecayCurves(pn.viewable.Viewer):
    """Importance over time per memory type, and relevance for one hypothetical memory."""

    decay_factor = param.Number(0.95, bounds=(0.5, 0.999), step=0.001,
                                doc="memory.decay_factor: share of importance a Context memory keeps per day")
    access_count = param.Integer(0, bounds=(0, 50), doc="How often the memory was retrieved")
    days = param.Integer(90, bounds=(1, 365), doc="Days shown (the decay job runs daily)")
    types = param.ListSelector(default=list(DECAYED_TYPES), objects=DECAYED_TYPES, doc="Memory types to plot")
    importance = param.Number(1.0, bounds=(0.0, 1.0), step=0.05, doc="Importance at day 0")

    similarity = param.Number(0.6, bounds=(0.0, 1.0), step=0.01, doc="Similarity of memory and query")
    current_importance = param.Number(0.5, bounds=(0.0, 1.0), step=0.01, doc="The memory's importance now")
    hours_since_access = param.Number(24.0, bounds=(0.0, 720.0), step=1.0, doc="Hours since the last access")
    w_similarity = param.Number(DEFAULT_WEIGHTS.similarity, bounds=(0.0, 1.0), step=0.05)
    w_importance = param.Number(DEFAULT_WEIGHTS.importance, bounds=(0.0, 1.0), step=0.05)
    w_freshness = param.Number(DEFAULT_WEIGHTS.freshness, bounds=(0.0, 1.0), step=0.05)

    def __init__(self, **params):
        super().__init__(**params)
        self.plot = pn.pane.Plotly(self.figure(), sizing_mode="stretch_width", height=460)
        self.calculator = pn.pane.Markdown(self.relevance_text(), sizing_mode="stretch_width")

    # --- what is shown ---------------------------------------------------------------------------

    def figure(self) -> go.Figure:
        base = base_rate_from_factor(self.decay_factor)
        fig = go.Figure()
        for name in self.types:
            values = curve(MemoryType(name), self.access_count, self.days, base_decay_rate=base,
                           importance=self.importance)
            fig.add_trace(go.Scatter(x=list(range(len(values))), y=values, mode="lines", name=name))
        fig.update_layout(
            title=f"Importance over {self.days} days (decay_factor {self.decay_factor:g}, "
                  f"{self.access_count} accesses)",
            xaxis_title="days", yaxis_title="importance", yaxis_rangemode="tozero", legend_title="memory type",
            margin={"l": 50, "r": 20, "t": 60, "b": 40},
        )
        return fig

    @property
    def weights(self) -> RelevanceWeights:
        return RelevanceWeights(self.w_similarity, self.w_importance, self.w_freshness)

    @property
    def relevance_value(self) -> float:
        return float(relevance(self.similarity, self.current_importance, self.hours_since_access, self.weights))

    def relevance_text(self) -> str:
        w = self.weights
        fresh = float(freshness(self.hours_since_access))
        return (
            "### Relevance\n"
            f"| term | value | × weight | = |\n|---|---|---|---|\n"
            f"| similarity | {self.similarity:.3f} | {w.similarity:.2f} | {w.similarity * self.similarity:.3f} |\n"
            f"| importance | {self.current_importance:.3f} | {w.importance:.2f} | "
            f"{w.importance * self.current_importance:.3f} |\n"
            f"| freshness e^(-0.01·{self.hours_since_access:g} h) | {fresh:.3f} | {w.freshness:.2f} | "
            f"{w.freshness * fresh:.3f} |\n\n"
            f"**relevance = {self.relevance_value:.3f}** (an Archived memory scores half of this)"
        )

    # --- keeping the panes current ---------------------------------------------------------------

    @param.depends("decay_factor", "access_count", "days", "types", "importance", watch=True)
    def _update_plot(self) -> None:
        self.plot.object = self.figure()

    @param.depends("similarity", "current_importance", "hours_since_access", "w_similarity", "w_importance",
                   "w_freshness", watch=True)
    def _update_calculator(self) -> None:
        self.calculator.object = self.relevance_text()

    def __panel__(self) -> pn.viewable.Viewable:
        curve_controls = pn.Param(
            self, parameters=["decay_factor", "access_count", "days", "importance", "types"],
            widgets={"types": pn.widgets.CheckBoxGroup}, show_name=False, width=280,
        )
        calculator_controls = pn.Param(
            self, parameters=["similarity", "current_importance", "hours_since_access", "w_similarity",
                              "w_importance", "w_freshness"],
            show_name=False, width=280,
        )
        return pn.Column(
            "## Memory decay",
            pn.Row(curve_controls, self.plot, sizing_mode="stretch_width"),
            pn.Row(calculator_controls, self.calculator, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )


if pn.state.served:
    pn.extension("plotly")
    DecayCurves().servable(title="Memory decay curves")
