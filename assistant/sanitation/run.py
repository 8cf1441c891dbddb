"""One sanitation run (placeholder of the core commit: the sanitation helper writes it)."""

from __future__ import annotations


class SanitationRun:
    def __init__(self, service, user_id, *, session_id=None, cycle=None, trigger="manual", checkpoint=None):
        raise NotImplementedError("sanitation runs land with issue 15's sanitation step")
