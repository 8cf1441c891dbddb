"""benchmarks/graph_api.py runs end to end at a tiny size (a served subprocess, seconds) and reports every figure."""

from __future__ import annotations

import json

import pytest

from benchmarks import graph_api

pytestmark = pytest.mark.integration


def test_tiny_run_reports_every_figure(tmp_path) -> None:  # noqa: ANN001
    report = graph_api.main(["--nodes", "40", "--edges", "120", "--memories", "30", "--requests", "3",
                             "--json", str(tmp_path / "graph_api.json")])
    assert (report["graph"]["nodes"], report["graph"]["edges"]) == (40, 120)  # every node and edge was served
    assert 0 < report["graph"]["shown_at_default_threshold"] <= 40  # the default threshold hides faded nodes
    for figure in ("cold_build_ms", "first_request_ms", "p50_render_in_process_ms", "p50_graph_ms", "p50_graph_default_query_ms",
                   "p50_networkx_ms", "ratio"):
        assert report[figure] > 0, figure
    assert json.loads((tmp_path / "graph_api.json").read_text())["ratio"] == report["ratio"]


def test_names_are_distinct_and_of_every_kind() -> None:
    import random

    made = graph_api.names(500, random.Random(1))
    assert len({n for n, _ in made}) == 500
    assert {k for _, k in made} == set(graph_api.KIND_SHARE)
