"""NREM: consolidation. Steps, in order (each change a journaled operation, see :mod:`journal`):

(stub: the steps are being written; see the issue.)
"""

from __future__ import annotations

from assistant.dream.session import Step

NREM_STEPS: list[Step] = []
