"""The base of every settings section: unknown keys are refused, assignments are validated."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

DEFAULT_DATA_DIR = Path("~/.local/share/assistant")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
