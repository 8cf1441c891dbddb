"""Test doubles are never selectable in production: they answer only where ``ASSISTANT_TESTING`` is set.

The scripted chat model and the hashing embedder stay in their registries (so a test's settings,
a subprocess the tests start, and the notebooks' quick mode name them as any backend), but
creating one outside a test run is a configuration error. A variable rather than a separate
registry because a config file is also read by processes the tests start (``assistant serve`` in
a subprocess), which inherit the environment but not an in-process registration.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from assistant.errors import ConfigError

TESTING_ENV = "ASSISTANT_TESTING"


def testing_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``ASSISTANT_TESTING`` is set to something other than empty, 0, false or no."""
    value = (os.environ if environ is None else environ).get(TESTING_ENV, "")
    return value.strip().lower() not in ("", "0", "false", "no")


def require_testing(kind: str, backend_id: str, environ: Mapping[str, str] | None = None) -> None:
    """ConfigError unless this is a test run: ``kind`` names the setting (``inference backend``)."""
    if not testing_enabled(environ):
        raise ConfigError(
            f"{kind} {backend_id!r} is a test double (canned answers, no real model) and is refused outside "
            f"tests; choose a real one, or set {TESTING_ENV}=1 for a test run or a notebook's quick mode",
            {"backend": backend_id, "environment_variable": TESTING_ENV},
        )
