"""REM: synthesis over the last ``pattern_window_days``: patterns, connections, hypotheses, suggestions.

(stub: the steps are being written; see the issue.)
"""

from __future__ import annotations

from assistant.dream.session import Step

REM_STEPS: list[Step] = []
