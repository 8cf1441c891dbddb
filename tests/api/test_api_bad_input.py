"""Bad input on every route with a body (every POST, PUT and PATCH of the OpenAPI document).

Each route gets: a body over ``server.max_body_bytes`` (declared and chunked: 413), a wrong
Content-Type, invalid UTF-8, JSON nested 5,000 deep, an integer of 5,000 digits, malformed JSON
(all 400), and an unknown field where the schema forbids them (422 naming it). Every answer is the
error envelope, never a 5xx; and nothing is stored half-way: afterwards every list is still empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.errors import CODE_OF_STATUS, is_openai_path
from api.routes.docs import OPENAPI_URL
from assistant.config import Settings
from assistant.services import Services

MAX_BODY = 16_384
SOME_ID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"
JSON = {"Content-Type": "application/json"}
UNREADABLE: dict[str, tuple[bytes, dict[str, str]]] = {
    "wrong content type": (b'{"name": "x"}', {"Content-Type": "text/plain"}),
    "invalid UTF-8": (b'{"name": "\xff\xfe"}', JSON),
    "nested 5,000 deep": (b'{"name": ' + b"[" * 5000 + b"]" * 5000 + b"}", JSON),
    "an integer of 5,000 digits": (b'{"name": ' + b"9" * 5000 + b"}", JSON),
    "malformed JSON": (b'{"name": ', JSON),
}
# The webhook reads its body as JSON whatever the Content-Type says (documented on the route).
ANY_CONTENT_TYPE = {"/v1/webhooks/messenger"}
LISTS = ["/v1/memories", "/v1/snippets", "/v1/agent-profiles", "/v1/commands/catalog", "/v1/approvals",
         "/v1/agentic/tasks", "/v1/voice/rooms", "/v1/voice/speakers", "/v1/tools/runs",
         "/v1/commands/catalog/executions", "/v1/dream/sessions", "/v1/dream/insights"]


def admin_key(services: Services) -> str:
    """A key that may do everything."""
    return services.keys.create("admin", role="admin")[0]


@pytest.fixture
def app_client(make_settings: Callable[..., Settings], make_services: Callable[..., Services],
               make_client: Callable[[Services], TestClient]) -> Iterator[tuple[TestClient, dict[str, str]]]:
    services = make_services(make_settings(
        server={"max_body_bytes": MAX_BODY},
        security={"rate_limit_enabled": False},
        commands={"seed_defaults": False},
        voice={},
        messenger={"enabled": True, "verify_token": "v", "app_secret": "s", "signature_required": False},
        red_team={"enabled": True},  # off, its run would be 503 before the body is read (as documented)
        federated={"enabled": True, "max_payload_bytes": MAX_BODY},  # its own body limit, else the same rules
        mesh={"enabled": True}, lora={"enabled": True}, optimization={"enabled": True},  # off: 503 before the body
        distillation={"enabled": True, "teacher_base_url": "http://127.0.0.1:9/v1", "teacher_model": "teacher"},
    ))
    yield make_client(services), {"Authorization": f"Bearer {admin_key(services)}"}


def _document(client: TestClient) -> dict[str, Any]:
    return client.get(OPENAPI_URL).json()


def _routes(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method in ("post", "put", "patch") and "requestBody" in operation:
                concrete = path.replace("{platform}", "messenger")
                for name in ("entry_id", "approval_id", "task_id", "room_id", "profile_id", "snippet_id", "insight_id"):
                    concrete = concrete.replace("{" + name + "}", SOME_ID)
                found.append((method.upper(), concrete, operation))
    return found


def _json_body(operation: dict[str, Any]) -> bool:
    return "application/json" in operation["requestBody"].get("content", {})


def _forbids_unknown_fields(document: dict[str, Any], operation: dict[str, Any]) -> bool:
    schema = operation["requestBody"]["content"].get("application/json", {}).get("schema", {})
    for option in [schema, *schema.get("anyOf", [])]:
        ref = option.get("$ref", "")
        if ref:
            return document["components"]["schemas"][ref.rsplit("/", 1)[-1]].get("additionalProperties") is False
    return False


def assert_envelope(response: Any, status: int, where: str) -> dict[str, Any]:
    assert response.status_code == status, f"{where}: {response.status_code} {response.text[:300]}"
    error = response.json()["error"]
    if is_openai_path(response.request.url.path):  # OpenAI's shape there: the status says the code
        assert set(error) == {"message", "type", "param", "code"} and error["message"], where
        return {**error, "code": CODE_OF_STATUS[status]}
    assert error["code"] and error["message"] and error["request_id"], where
    return error


def test_every_route_with_a_body_refuses_bad_input_with_the_envelope(app_client) -> None:
    client, auth = app_client
    document = _document(client)
    routes = _routes(document)
    assert len(routes) >= 15, [r[:2] for r in routes]  # every POST/PUT/PATCH with a body
    checked = 0
    for method, path, operation in routes:
        where = f"{method} {path}"
        media = next(iter(operation["requestBody"]["content"]))
        big = b"[" + b"0," * MAX_BODY + b"0]"
        assert_envelope(client.request(method, path, content=big, headers={**auth, "Content-Type": media}),
                        413, f"{where} declared oversize")

        def chunks() -> Iterator[bytes]:
            for _ in range(MAX_BODY // 1024 + 1):
                yield b" " * 1024

        assert_envelope(client.request(method, path, content=chunks(), headers={**auth, "Content-Type": media}),
                        413, f"{where} chunked oversize")
        if not _json_body(operation):
            continue  # an audio upload: its own decoder answers bad samples (tests/api/test_api_voice_speakers.py)
        for case, (body, headers) in UNREADABLE.items():
            if case == "wrong content type" and path in ANY_CONTENT_TYPE:
                continue
            error = assert_envelope(client.request(method, path, content=body, headers={**auth, **headers}),
                                    400, f"{where} {case}")
            assert error["code"] == "BAD_REQUEST"
            assert "error parsing the body" not in error["message"], (where, case, error["message"])
            checked += 1
        if _forbids_unknown_fields(document, operation):
            error = assert_envelope(client.request(method, path, json={"x_unknown_field": 1}, headers=auth),
                                    422, f"{where} unknown field")
            assert "x_unknown_field" in [f["field"] for f in error["details"]["fields"]], (where, error)
            checked += 1
    assert checked >= 5 * 15
    for path in LISTS:  # nothing stored half-way
        response = client.get(path, headers=auth)
        assert response.status_code == 200, (path, response.text)
        data = response.json()
        items = data if isinstance(data, list) else next(v for v in data.values() if isinstance(v, list))
        assert items == [], (path, data)


@pytest.mark.parametrize(("body", "message"), [
    (b'{"content": "\xff"}', "not valid UTF-8"),
    (b'{"content": ' + b"[" * 33 + b"]" * 33 + b"}", "nested deeper than 32"),
    (b'{"content": ' + b"9" * 5000 + b"}", "more than 4,300 digits"),
])
def test_unreadable_bodies_are_named_precisely(client, auth, body: bytes, message: str) -> None:
    error = assert_envelope(client.post("/v1/memories", content=body, headers={**auth, **JSON}), 400, "memories")
    assert message in error["message"]


def test_json_nested_within_the_bound_is_read(client, auth) -> None:
    body = b'{"content": "x", "summary": "s", "tags": ' + b"[" * 31 + b"]" * 31 + b"}"
    error = assert_envelope(client.post("/v1/memories", content=body, headers={**auth, **JSON}), 422, "memories")
    assert error["details"]["fields"][0]["field"].startswith("tags")


def test_brackets_inside_strings_do_not_count_as_nesting(client, auth) -> None:
    text = "[" * 100 + '\\"{' * 50
    response = client.post("/v1/memories", json={"content": text, "summary": "s"}, headers=auth)
    assert response.status_code == 201, response.text
    assert response.json()["content"] == text


def test_a_deep_body_without_a_key_is_401(client) -> None:
    body = b"[" * 100 + b"]" * 100
    assert_envelope(client.post("/v1/memories", content=body, headers=JSON), 401, "no key")


def test_wrong_content_type_names_the_one_expected(client, auth) -> None:
    error = assert_envelope(client.post("/v1/snippets", content=b'{"title": "x"}',
                                        headers={**auth, "Content-Type": "text/plain"}), 400, "snippets")
    assert "application/json" in error["message"] and "text/plain" in error["message"]

