"""benchmarks/graph_dashboard.py runs end to end on a small graph (the browser part has its own test)."""

from __future__ import annotations

from benchmarks import graph_dashboard


def test_small_run_reports_every_figure(tmp_path) -> None:  # noqa: ANN001
    report = graph_dashboard.main(["--nodes", "300", "--edges", "900", "--json", str(tmp_path / "g.json")])
    assert report["nodes"] == 300 and 0 < report["edges"] <= 900
    assert set(report) >= {"graph_first_s", "graph_cached_s", "layout_s", "layout_add_one_s", "figure_s",
                           "figure_json_s", "figure_json_mb", "view_first_s", "view_refresh_s"}
    assert 2 <= report["traces"] <= 6  # a few edge bins, nodes, labels: never one trace per edge
    assert (tmp_path / "g.json").exists()
