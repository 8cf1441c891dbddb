"""environment.yml mirrors pyproject.toml: the same pip requirements, plus a pinned torch and ``-e .``."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def normalise(requirement: str) -> str:
    return re.sub(r"\s+", "", requirement)


def pip_list() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    pips = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pips) == 1, "one pip section"
    return [normalise(r) for r in pips[0]]


def pyproject_requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return [normalise(r) for r in requirements]


def test_pip_list_equals_pyproject_plus_torch_and_editable_install() -> None:
    expected = Counter(pyproject_requirements()) + Counter(["torch==2.13.0", "-e."])
    assert Counter(pip_list()) == expected


def test_torch_comes_first_and_pinned() -> None:
    assert pip_list()[0] == "torch==2.13.0"


def test_python_version_matches() -> None:
    env = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert python == "python=3.11"
    assert ">=3.11" in project["requires-python"] and "<3.12" in project["requires-python"]
