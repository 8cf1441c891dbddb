"""benchmarks/graph_extraction.py on a few LoCoMo turns: rules on all of them, llm (scripted) on two."""

from __future__ import annotations

import json

from assistant.llm.scripted import ScriptedChatModel
from benchmarks import graph_extraction as bench


def test_small_run_reports_both_extractors(capsys) -> None:  # noqa: ANN001
    model = ScriptedChatModel()
    model.enqueue(json.dumps({"passages": [
        {"index": 1, "entities": [{"name": "Caroline", "kind": "person"}, {"name": "Sweden", "kind": "place"}],
         "facts": [{"subject": "Caroline", "relation": "lives_in", "object": "Sweden"}]},
        {"index": 2, "entities": [], "facts": []}]}))
    report = bench.main(["--conversations", "1", "--limit", "40", "--llm-sample", "2", "--json"], model=model)
    assert report["turns"] == 40
    rules, llm = report["rules"], report["llm"]
    assert rules["passages"] == 40 and rules["passages_per_s"] > 0 and rules["entities_per_passage"] > 0
    assert llm["passages"] == 2 and llm["failures"] == 0 and llm["facts_per_passage"] == 0.5
    assert llm["relations"] == {"lives_in": 1}
    assert report["rules_over_llm"] > 0
    out = capsys.readouterr().out
    assert "passages/s" in out and json.loads(out.strip().splitlines()[-1])["turns"] == 40


def test_sample_is_even_and_deterministic() -> None:
    passages = bench.load_passages(conversations=1, limit=100)
    assert [p.memory_id for p in bench.sample(passages, 4)] == [passages[i].memory_id for i in (0, 25, 50, 75)]
    assert bench.sample(passages, 0) == [] and len(bench.sample(passages[:3], 10)) == 3
    assert passages[0].speaker and passages[0].text.startswith("On ")
