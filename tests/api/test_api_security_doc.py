"""docs/security.md lists every route with its role and owner rule, and nothing else: the table cannot
go stale. Routes come from the served OpenAPI documents (the API and both companion services); the
documentation routes outside the schema must answer."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from api.companions import speaker, wakeword
from assistant.config import SpeakerIdSettings, WakeWordSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
ROLES = ("none", "read-only", "user", "admin", "token")
ROW = re.compile(r"^\| (?P<method>[A-Z]+) \| `(?P<path>[^`]+)`(?: \((?P<app>wake word|speaker)\))? \| "
                 r"(?P<role>[a-z-]+) \| (?P<rule>.*\S) \|$")


def doc_rows() -> dict[tuple[str, str, str], tuple[str, str]]:
    """(app, method, path) -> (role, owner rule); app is "api", "wake word" or "speaker"."""
    rows: dict[tuple[str, str, str], tuple[str, str]] = {}
    for line in DOC.read_text().splitlines():
        if not line.startswith(tuple(f"| {m} |" for m in METHODS)):
            continue
        match = ROW.match(line)
        assert match, f"a route row of docs/security.md does not parse: {line}"
        key = (match["app"] or "api", match["method"], match["path"])
        assert key not in rows, f"listed twice: {key}"
        assert match["role"] in ROLES, line
        rows[key] = (match["role"], match["rule"])
    return rows


def operations(openapi: dict) -> dict[tuple[str, str], dict]:
    return {(method.upper(), path): op for path, ops in openapi["paths"].items() for method, op in ops.items()
            if method.upper() in METHODS}


class NoEngine:
    dim = 256

    def embed(self, pcm: bytes) -> None:
        raise AssertionError("not called")

    def close(self) -> None:
        return None


def companion_operations() -> dict[str, dict[tuple[str, str], dict]]:
    apps = {"wake word": wakeword.create_app(WakeWordSettings(), engine_factory=lambda settings, stream: NoEngine()),
            "speaker": speaker.create_app(SpeakerIdSettings(), lambda settings: NoEngine())}
    return {name: operations(app.openapi()) for name, app in apps.items()}


def test_every_api_route_is_in_the_table_with_a_fitting_role(client: TestClient) -> None:
    documented = {(m, p): rule for (app, m, p), rule in doc_rows().items() if app == "api"}
    served = operations(client.get("/api-docs/openapi.json").json())
    missing = sorted(set(served) - set(documented))
    assert not missing, f"routes missing from docs/security.md: {missing}"
    for (method, path), op in served.items():
        role, _ = documented[(method, path)]
        assert (role == "none") == (not op.get("security")), f"{method} {path}: role {role} vs the OpenAPI security"
        assert role != "read-only" or method == "GET", f"{method} {path} cannot be read-only: it is not a GET"


def test_every_row_names_a_route_that_exists(client: TestClient) -> None:
    served = operations(client.get("/api-docs/openapi.json").json())
    for (app, method, path), (role, _) in doc_rows().items():
        if app != "api" or (method, path) in served:
            continue
        # the documentation routes outside the schema: they answer without a key
        response = client.request(method, path.replace("{file}", "favicon.png"))
        assert response.status_code == 200, f"docs/security.md lists {method} {path}, which answers {response}"
        assert role == "none"


def test_every_companion_route_is_in_the_table() -> None:
    rows = doc_rows()
    for app, served in companion_operations().items():
        documented = {(m, p) for (a, m, p) in rows if a == app}
        assert documented == set(served), f"{app} companion: table {sorted(documented)} vs served {sorted(served)}"


def test_the_cross_user_suite_covers_every_owner_rule() -> None:
    """Each route whose rule says "others 404" is exercised by tests/api/test_api_cross_user.py."""
    from tests.api.test_api_cross_user import TABLE

    exercised = {(row.method, re.sub(r"\?.*", "", row.path)) for row in TABLE}
    for (app, method, path), (_, rule) in doc_rows().items():
        if app != "api" or "others 404" not in rule:
            continue
        generic = re.sub(r"\{[a-z_]+\}", "{id}", path)
        assert (method, generic) in exercised, f"{method} {path} ({rule}) has no row in the cross-user suite"

