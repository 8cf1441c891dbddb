"""schemathesis over the served OpenAPI document: every operation, as a user key and as an admin key.

The app is built in-process (the scripted model, real SQLite) and called through ASGI. Each case is
checked for: no server error (5xx other than the documented 502/503), a status code the document
lists, a content type it lists, a body that fits the documented schema, and 405 with an ``Allow``
header for methods the path does not support. ``MAX_EXAMPLES`` bounds the run (a few minutes on two
cores); the figures (operations, cases) are printed at the end of the module.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import schemathesis
import schemathesis.transport.requests
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from api.main import create_app
from api.routes.docs import OPENAPI_URL
from assistant.config import Settings
from assistant.services import Services

MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "12"))  # per operation and role; more for a deep run
STATUSES: Counter[int] = Counter()


@schemathesis.check
def no_server_error(ctx: Any, response: Any, case: Any) -> bool | None:
    """No 500, and any other 5xx is the error envelope (502 and 503 are documented states: an engine
    that failed, a subsystem not configured; status_code_conformance checks they are documented)."""
    STATUSES[response.status_code] += 1
    if response.status_code == 500:
        raise AssertionError(f"500 Internal Server Error: {response.text[:300]}")
    if response.status_code > 500 and "error" not in (response.json() or {}):
        raise AssertionError(f"{response.status_code} without the error envelope: {response.text[:300]}")
    return None


CHECKS = [no_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          unsupported_method]
ROLES = {"user": {"role": "user"}, "admin": {"role": "admin"}}
RAN: Counter[str] = Counter()
ENDLESS_STREAMS = r"^/api/v1/knowledge/graph/stream$"
REQUEST_TIMEOUT_S = 180


@pytest.fixture(params=sorted(ROLES))
def api_schema(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, make_settings: Callable[..., Settings],
               make_services: Callable[..., Services]) -> Iterator[Any]:
    # urllib3-future (niquests' urllib3, installed for caldav) replaces urllib3's pool container, which
    # schemathesis' resend-on-dropped-connection heuristic counts; in-process ASGI drops no connection.
    monkeypatch.setattr(schemathesis.transport.requests, "_count_opened_connections", lambda session: 0)
    if not hasattr(request.node, "_nodeid"):  # schemathesis 4.32's lazy mode reads Node._nodeid, gone in pytest 9
        request.node._nodeid = request.node.nodeid
    settings_ = make_settings(
        security={"rate_limit_enabled": False},
        commands={"seed_defaults": False},
        voice={},  # rooms and sessions without a broker (the bus starts with start_background only)
        messenger={"enabled": True, "verify_token": "verify", "app_secret": "secret"},
    )
    services = make_services(settings_)
    key, _ = services.keys.create(request.param, **ROLES[request.param])
    app = create_app(services)
    # The graph's event stream runs until the client disconnects, which an in-process call never does:
    # tests/api/test_api_knowledge.py follows it on a live server.
    schema = schemathesis.openapi.from_asgi(OPENAPI_URL, app)
    schema.config.headers = {"Authorization": f"Bearer {key}"}
    # schemathesis reads a response for 10 s by default; a first sanitation run (the defence's classifier
    # loaded, every memory inspected) on two cores shared with the rest of CI took longer once. The checks
    # here are about shapes and statuses, never time.
    schema.config.request_timeout = REQUEST_TIMEOUT_S
    yield schema


# The exclusion is on the lazy schema: schemathesis replaces the filters of the fixture's schema with its
# own, so an exclude() there is dropped (the stream then ran until the read timeout cut it, 10 s a case).
schema = schemathesis.pytest.from_fixture("api_schema").exclude(path_regex=ENDLESS_STREAMS)


@pytest.fixture(scope="module", autouse=True)
def figures(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and RAN:
        statuses = ", ".join(f"{code}: {n}" for code, n in sorted(STATUSES.items()))
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nschemathesis: {len(RAN)} operations, {sum(RAN.values())} cases "
                                f"(statuses {statuses})")


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_every_operation_keeps_its_document(case: Any) -> None:
    RAN[f"{case.operation.label}"] += 1
    case.call_and_validate(checks=CHECKS)
