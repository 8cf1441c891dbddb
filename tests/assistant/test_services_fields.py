"""`Services` names a real type for every part (no `Any`), and importing it stays light."""

from __future__ import annotations

import subprocess
import sys
import typing
from dataclasses import fields

from apscheduler.schedulers.background import BackgroundScheduler

from assistant.services import Services


def test_every_field_has_a_real_type() -> None:
    hints = typing.get_type_hints(Services, localns={"BackgroundScheduler": BackgroundScheduler})
    for f in fields(Services):
        hint = hints[f.name]
        parts = typing.get_args(hint) or (hint,)
        assert typing.Any not in parts, f"Services.{f.name} is typed Any"
    assert hints["scheduler"] == BackgroundScheduler | None


def test_importing_the_services_loads_no_heavy_library() -> None:
    """The types come from modules the wiring imports anyway; APScheduler only for type checkers."""
    code = ("import sys, assistant.services; heavy = {'torch', 'sentence_transformers', 'llama_cpp', 'apscheduler', "
            "'faster_whisper', 'onnxruntime'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
