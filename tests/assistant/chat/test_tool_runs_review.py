"""The loop's review of a call's arguments is kept with the tool run (sealed, in the result's envelope)
and read back, with or without a result and next to the defence's verdict."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

from assistant.chat.tool_loop import ToolRecord
from assistant.chat.tool_runs import ToolRunStore
from assistant.llm.base import ToolCall
from assistant.storage.db import Database
from assistant.storage.memory_key import open_store_sealer

REVIEW = {"changes": [{"field": "time", "before": "tomorrow at 3pm", "after": "2026-11-12 15:00:00",
                       "reason": "resolved 'tomorrow at 3pm'"}], "problems": []}


def test_the_review_survives_the_round_trip_sealed(tmp_path: Path) -> None:
    db = Database(tmp_path / "assistant.db")
    try:
        store, user = ToolRunStore(db, open_store_sealer(db, tmp_path / "memory.key")), str(uuid4())
        records = [
            ToolRecord(1, ToolCall("c1", "AddAgenda", {"time": "2026-11-12 15:00:00"}), {"status": "ok"}, None, 2.0,
                       review=REVIEW),
            ToolRecord(1, ToolCall("c2", "DeleteAccount", {"token": "made-up"}), None, "call GetUserToken first",
                       0.0, "prerequisite", review={"prerequisite": {"parameter": "token", "producer": "GetUserToken"}}),
            ToolRecord(2, ToolCall("c3", "lookup", {"q": "x"}), {"found": 1}, None, 1.0),
        ]
        store.record(user, "conv", "msg", records)
        runs = sorted(store.list(user, message_id="msg"), key=lambda r: (r.iteration, r.tool))
        assert [(r.tool, r.status, r.review) for r in runs] == [
            ("AddAgenda", "ok", REVIEW),
            ("DeleteAccount", "prerequisite", {"prerequisite": {"parameter": "token", "producer": "GetUserToken"}}),
            ("lookup", "ok", None)]
        assert runs[0].result == {"status": "ok"} and runs[1].result is None and runs[2].result == {"found": 1}
        raw = db.scalar("SELECT result_sealed FROM tool_runs WHERE tool = 'AddAgenda'")
        assert b"tomorrow" not in raw  # sealed at rest
    finally:
        db.close()
