"""HTTP shapes every route shares: bounded paging, 405 with a complete Allow header (fixed paths never
taken for an ``{id}``), the 503 of a service that is not set up, and the webhook's errors in JSON."""

from __future__ import annotations

from typing import Any

from api.deps import MAX_OFFSET
from api.routes.docs import OPENAPI_URL

PAGED = ["/v1/memories", "/v1/tools/runs", "/v1/agent-profiles", "/v1/commands/catalog",
         "/v1/commands/catalog/audit", "/v1/commands/catalog/executions", "/v1/approvals", "/v1/agentic/tasks",
         "/v1/snippets", "/v1/snippets/search?q=a"]


def test_an_offset_beyond_its_bound_is_422_never_500(client, auth) -> None:
    for path in PAGED:  # 2**63 once crashed 8 of these lists with OverflowError in SQLite
        joiner = "&" if "?" in path else "?"
        for offset in (2**63, 2**64 + 5, MAX_OFFSET + 1, 10**30):
            response = client.get(f"{path}{joiner}offset={offset}", headers=auth)
            assert response.status_code == 422, (path, offset, response.text)
            assert response.json()["error"]["details"]["fields"][0]["field"] == "offset"
        for limit in (0, 2**63):
            response = client.get(f"{path}{joiner}limit={limit}", headers=auth)
            assert response.status_code == 422, (path, limit, response.text)
        response = client.get(f"{path}{joiner}offset={MAX_OFFSET}", headers=auth)
        assert response.status_code == 200, (path, response.text)


def integer_parameters(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                schema = parameter["schema"]
                for option in [schema, *schema.get("anyOf", [])]:
                    if option.get("type") == "integer":
                        found.append((f"{method.upper()} {path}", parameter["name"], option))
    return found


def integer_fields(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for name, schema in document["components"]["schemas"].items():
        if not name.endswith(("Create", "Update", "Request", "RequestBody", "In", "Patch", "Decision")):
            continue  # request models only: answers may hold any count
        for field, prop in schema.get("properties", {}).items():
            for option in [prop, *prop.get("anyOf", [])]:
                if option.get("type") == "integer":
                    found.append((name, field, option))
    return found


def test_every_integer_input_has_a_maximum_in_the_document(client) -> None:
    document = client.get(OPENAPI_URL).json()
    parameters, fields = integer_parameters(document), integer_fields(document)
    assert len(parameters) >= 20 and fields
    unbounded = [(where, name) for where, name, schema in [*parameters, *fields] if "maximum" not in schema]
    assert unbounded == []


SHAPES = [
    ("DELETE", "/v1/commands/catalog/audit", "GET"),
    ("DELETE", "/v1/commands/catalog/search", "GET"),
    ("PUT", "/v1/commands/catalog/count", "GET"),
    ("DELETE", "/v1/commands/catalog/executions", "GET"),
    ("DELETE", "/v1/memories/search", "GET"),
    ("PATCH", "/v1/memories/stats", "GET"),
    ("GET", "/v1/memories/decay", "POST"),
    ("PUT", "/v1/memories/3fa85f64-5717-4562-b3fc-2c963f66afa6", "DELETE, GET"),
    ("PATCH", "/v1/snippets/3fa85f64-5717-4562-b3fc-2c963f66afa6", "DELETE, GET, PUT"),
    ("DELETE", "/v1/memories", "GET, POST"),
    ("POST", "/v1/voice/rooms/3fa85f64-5717-4562-b3fc-2c963f66afa6", "DELETE, GET, PATCH"),
    ("DELETE", "/health", "GET"),
]


def test_405_names_every_method_of_the_path(client, auth) -> None:
    for method, path, allow in SHAPES:  # fixed paths once fell into /{id} and answered 422
        response = client.request(method, path, headers=auth)
        assert response.status_code == 405, (method, path, response.text)
        assert response.headers["allow"] == allow, (method, path)
        error = response.json()["error"]
        assert error["code"] == "METHOD_NOT_ALLOWED" and allow in error["message"] and error["request_id"]


def test_405_comes_after_the_key_check(client) -> None:
    assert client.delete("/v1/commands/catalog/audit").status_code == 401


def test_the_allow_header_agrees_with_the_document(client, auth) -> None:
    document = client.get(OPENAPI_URL).json()
    for path, operations in document["paths"].items():
        concrete = path.replace("{platform}", "messenger")
        for name in ("{memory_id}", "{snippet_id}", "{entry_id}", "{room_id}", "{profile_id}", "{task_id}",
                     "{approval_id}", "{execution_id}", "{speaker_id}", "{node_id}"):
            concrete = concrete.replace(name, "3fa85f64-5717-4562-b3fc-2c963f66afa6")
        documented = sorted(m.upper() for m in operations)
        if "TRACE" in documented:
            continue
        response = client.request("TRACE", concrete, headers=auth)
        assert response.status_code == 405, (path, response.text)
        assert response.headers["allow"].split(", ") == documented, path


def test_a_service_that_is_not_set_up_is_503_before_the_body(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(memory={"enabled": False}))
    client = make_client(services)
    key, _ = services.keys.create("k")
    response = client.post("/v1/memories", json={"unknown": 1}, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 503
    assert response.json()["error"]["message"] == "the memory store is disabled (memory.enabled = false)"


def test_webhook_errors_are_json_as_documented(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(messenger={"enabled": True, "verify_token": "v", "app_secret": "s"}))
    client = make_client(services)
    response = client.get("/v1/webhooks/other", params={"hub.mode": "subscribe"})
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == "NOT_FOUND"
    documented = client.get(OPENAPI_URL).json()["paths"]["/v1/webhooks/{platform}"]["get"]["responses"]
    assert list(documented["404"]["content"]) == ["application/json"]
    assert list(documented["200"]["content"]) == ["text/plain"]


def test_the_method_table_is_the_openapi_documents(services) -> None:  # noqa: ANN001
    # MethodCheck reads the routes instead of building the document (0.6-0.8 s a new app): same table
    from api.main import create_app
    from api.middleware import documented_methods

    app = create_app(services)
    verbs = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
    document = {path: {m.upper() for m in ops if m in verbs} for path, ops in app.openapi()["paths"].items()}
    table = documented_methods(app)
    assert len(table) > 100 and table == document
