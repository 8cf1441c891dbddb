"""/v1/commands/catalog: list, search, count, get, create, delete, execute (200 / 202 / 409),
executions, the audit log, admin_auth rules and the OpenAPI description of the value sets."""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest

from assistant.catalog import DEFAULT_ENTRIES, RunOutcome, current_os

BASE = "/v1/commands/catalog"
ENTRY_KEYS = {"id", "name", "description", "command", "category", "risk_level", "os", "requires_approval",
              "network", "created_at", "updated_at"}
EXECUTION_KEYS = {"execution_id", "catalog_id", "approval_id", "user_id", "command", "status", "exit_code", "stdout",
                  "stderr", "duration_ms", "truncated", "executed_at"}
OTHER_OS = "windows" if current_os().value != "windows" else "linux"


class CountingRunner:
    def __init__(self, outcome: RunOutcome):
        self.outcome = outcome
        self.commands: list[str] = []

    def run(self, command: str, *, timeout_secs: float, max_output_bytes: int, network: bool = False) -> RunOutcome:
        self.commands.append(command)
        return self.outcome


def fields_of(response) -> dict[str, str]:
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR", response.text
    return {f["field"]: f["error"] for f in error["details"]["fields"]}


def create(client, admin_auth, **body) -> dict:
    payload = {"name": f"Echo {uuid4().hex[:6]}", "description": "says hello", "command": "echo hello",
               "category": "system", "risk_level": "low", "os": "any", **body}
    response = client.post(BASE, json=payload, headers=admin_auth)
    assert response.status_code == 201, response.text
    return response.json()


# --- list, count, search, get ------------------------------------------------------------------------


def test_the_defaults_are_listed_in_name_order(client, admin_auth) -> None:
    response = client.get(BASE, headers=admin_auth)
    assert response.status_code == 200
    items = response.json()
    assert len(items) == len(DEFAULT_ENTRIES) == client.get(f"{BASE}/count", headers=admin_auth).json()["count"]
    assert all(set(i) == ENTRY_KEYS for i in items)
    assert [i["name"].casefold() for i in items] == sorted(i["name"].casefold() for i in items)
    assert {i["os"] for i in items} == {"linux", "macos", "windows", "any"}
    assert all(i["requires_approval"] for i in items if i["risk_level"] in ("high", "critical"))
    UUID(items[0]["id"])


def test_paging(client, admin_auth) -> None:
    everything = client.get(BASE, params={"limit": 1000}, headers=admin_auth).json()
    page = client.get(BASE, params={"limit": 5, "offset": 3}, headers=admin_auth).json()
    assert page == everything[3:8]
    assert client.get(BASE, params={"offset": 1000}, headers=admin_auth).json() == []


@pytest.mark.parametrize(("params", "field"), [
    ({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"offset": -1}, "offset"), ({"limit": "ten"}, "limit"),
    ({"category": "games"}, "category"), ({"os": "beos"}, "os"), ({"risk_level": "extreme"}, "risk_level"),
])
def test_bad_list_parameters_are_422(client, admin_auth, params, field) -> None:
    response = client.get(BASE, params=params, headers=admin_auth)
    assert response.status_code == 422
    assert field in fields_of(response)


def test_filters(client, admin_auth) -> None:
    linux = client.get(BASE, params={"os": "linux"}, headers=admin_auth).json()
    assert linux and {i["os"] for i in linux} == {"linux"}
    count = client.get(f"{BASE}/count", params={"os": "linux"}, headers=admin_auth).json()
    assert count == {"count": len(linux)}
    high = client.get(BASE, params={"risk_level": "high", "category": "network"}, headers=admin_auth).json()
    assert high and all(i["risk_level"] == "high" and i["category"] == "network" for i in high)


def test_search_over_name_and_description(client, admin_auth) -> None:
    create(client, admin_auth, name="Greeter", description="Prints a FRIENDLY hello")
    names = [i["name"] for i in client.get(f"{BASE}/search", params={"q": "friendly"}, headers=admin_auth).json()]
    assert names == ["Greeter"]
    dns = client.get(f"{BASE}/search", params={"q": "dns"}, headers=admin_auth).json()
    assert {"DNS configuration (Linux)", "Flush DNS cache (Windows)"} <= {i["name"] for i in dns}
    assert all(set(i) == ENTRY_KEYS for i in dns)
    assert client.get(f"{BASE}/search", params={"q": "zzz-nothing"}, headers=admin_auth).json() == []


@pytest.mark.parametrize("params", [{}, {"q": ""}, {"q": "   "}, {"q": "x" * 201}])
def test_search_needs_a_query(client, admin_auth, params) -> None:
    response = client.get(f"{BASE}/search", params=params, headers=admin_auth)
    assert response.status_code == 422
    assert "q" in fields_of(response)


def test_get(client, admin_auth) -> None:
    made = create(client, admin_auth)
    response = client.get(f"{BASE}/{made['id']}", headers=admin_auth)
    assert response.status_code == 200 and response.json() == made


def test_get_unknown_and_malformed_ids(client, admin_auth) -> None:
    missing = client.get(f"{BASE}/{uuid4()}", headers=admin_auth)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    assert client.get(f"{BASE}/not-a-uuid", headers=admin_auth).status_code == 422


# --- create ------------------------------------------------------------------------------------------


def test_create_shape(client, admin_auth) -> None:
    response = client.post(BASE, json={"name": "Kernel", "description": "kernel version", "command": "uname -r",
                                       "category": "system", "risk_level": "low", "os": "linux",
                                       "requires_approval": False}, headers=admin_auth)
    assert response.status_code == 201
    body = response.json()
    assert set(body) == ENTRY_KEYS
    assert {k: body[k] for k in ("name", "description", "command", "category", "risk_level", "os",
                                 "requires_approval")} == {
        "name": "Kernel", "description": "kernel version", "command": "uname -r", "category": "system",
        "risk_level": "low", "os": "linux", "requires_approval": False}
    assert body["created_at"] == body["updated_at"] and body["created_at"].endswith("Z")


@pytest.mark.parametrize("risk", ["high", "critical"])
def test_high_risk_is_forced_to_require_approval(client, admin_auth, risk) -> None:
    assert create(client, admin_auth, risk_level=risk, requires_approval=False)["requires_approval"] is True


def test_description_and_requires_approval_are_optional(client, admin_auth) -> None:
    response = client.post(BASE, json={"name": "Bare", "command": "true", "category": "other", "risk_level": "low",
                                       "os": "any"}, headers=admin_auth)
    assert response.status_code == 201
    assert response.json()["description"] == "" and response.json()["requires_approval"] is False


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"category": "games"}, "category", ["system", "disk", "network", "process", "service", "package", "security"]),
    ({"risk_level": "extreme"}, "risk_level", ["low", "medium", "high", "critical"]),
    ({"os": "beos"}, "os", ["linux", "macos", "windows", "any"]),
    ({"name": ""}, "name", ["must not be empty"]),
    ({"name": "   "}, "name", ["must not be empty"]),
    ({"command": ""}, "command", ["must not be empty"]),
    ({"command": "echo \u0000"}, "command", ["NUL"]),
    ({"name": "n" * 201}, "name", ["200"]),
    ({"requires_approval": "maybe"}, "requires_approval", ["bool"]),
    ({"colour": "red"}, "colour", ["Extra"]),
])
def test_invalid_entries_are_422_with_fields(client, admin_auth, change, field, words) -> None:
    payload = {"name": "Bad", "command": "true", "category": "system", "risk_level": "low", "os": "any", **change}
    response = client.post(BASE, json=payload, headers=admin_auth)
    assert response.status_code == 422
    error = fields_of(response)[field]
    for word in words:
        assert word in error
    assert client.get(f"{BASE}/search", params={"q": "Bad"}, headers=admin_auth).json() == []


@pytest.mark.parametrize("missing", ["name", "command", "category", "risk_level", "os"])
def test_required_fields(client, admin_auth, missing) -> None:
    payload = {"name": "Bad", "command": "true", "category": "system", "risk_level": "low", "os": "any"}
    del payload[missing]
    response = client.post(BASE, json=payload, headers=admin_auth)
    assert response.status_code == 422 and missing in fields_of(response)


def test_malformed_body_is_400(client, admin_auth) -> None:
    response = client.post(BASE, content=b"{nope", headers={**admin_auth, "Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "BAD_REQUEST"


def test_duplicate_name_is_409_regardless_of_case(client, admin_auth) -> None:
    create(client, admin_auth, name="Unique")
    response = client.post(BASE, json={"name": "UNIQUE", "command": "true", "category": "system",
                                       "risk_level": "low", "os": "any"}, headers=admin_auth)
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "CONFLICT" and "UNIQUE" in error["message"] and error["request_id"]
    default = client.post(BASE, json={"name": "uptime (linux)", "command": "true", "category": "system",
                                      "risk_level": "low", "os": "any"}, headers=admin_auth)
    assert default.status_code == 409


# --- delete ------------------------------------------------------------------------------------------


def test_delete(client, admin_auth) -> None:
    made = create(client, admin_auth)
    response = client.delete(f"{BASE}/{made['id']}", headers=admin_auth)
    assert response.status_code == 204 and response.content == b""
    assert client.get(f"{BASE}/{made['id']}", headers=admin_auth).status_code == 404
    again = client.delete(f"{BASE}/{made['id']}", headers=admin_auth)
    assert again.status_code == 404 and again.json()["error"]["code"] == "NOT_FOUND"


def test_delete_a_default(client, admin_auth) -> None:
    first = client.get(BASE, params={"limit": 1}, headers=admin_auth).json()[0]
    assert client.delete(f"{BASE}/{first['id']}", headers=admin_auth).status_code == 204
    assert client.get(f"{BASE}/count", headers=admin_auth).json()["count"] == len(DEFAULT_ENTRIES) - 1


# --- execute -----------------------------------------------------------------------------------------


def test_execute_really_runs_the_command(client, admin_auth, auth, api_key, services) -> None:
    made = create(client, admin_auth, command="echo hello; echo oops >&2")
    response = client.post(f"{BASE}/{made['id']}/execute", headers=auth)  # a user key may execute
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == EXECUTION_KEYS
    assert body["status"] == "completed" and body["exit_code"] == 0
    assert body["stdout"] == "hello\n" and body["stderr"] == "oops\n" and body["truncated"] is False
    assert body["catalog_id"] == made["id"] and body["approval_id"] is None
    assert body["user_id"] == str(services.keys.authenticate(api_key).user_id)
    assert body["duration_ms"] >= 0 and body["executed_at"].endswith("Z")
    stored = client.get(f"{BASE}/executions/{body['execution_id']}", headers=auth)
    assert stored.status_code == 200 and stored.json() == body


def test_a_failing_command_is_200_failed(client, admin_auth) -> None:
    made = create(client, admin_auth, command="echo bad >&2; exit 4")
    body = client.post(f"{BASE}/{made['id']}/execute", headers=admin_auth).json()
    assert (body["status"], body["exit_code"], body["stderr"]) == ("failed", 4, "bad\n")


def test_timed_out_and_truncated_shapes(client, admin_auth, services) -> None:
    services.catalog.runner = CountingRunner(RunOutcome(None, "x" * 10, "", 30000, timed_out=True, truncated=True))
    made = create(client, admin_auth)
    body = client.post(f"{BASE}/{made['id']}/execute", headers=admin_auth).json()
    assert (body["status"], body["exit_code"], body["truncated"]) == ("timed_out", None, True)


def test_another_os_is_409_and_nothing_happens(client, admin_auth, services) -> None:
    runner = services.catalog.runner = CountingRunner(RunOutcome(0, "", "", 1))
    made = create(client, admin_auth, os=OTHER_OS)
    response = client.post(f"{BASE}/{made['id']}/execute", headers=admin_auth)
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "CONFLICT" and OTHER_OS in error["message"] and current_os().value in error["message"]
    assert error["details"] == {"entry_os": OTHER_OS, "server_os": current_os().value}
    assert runner.commands == []
    assert client.get("/v1/approvals", headers=admin_auth).json() == []
    assert client.get(f"{BASE}/executions", headers=admin_auth).json() == []


def test_requires_approval_is_200_with_the_request_and_nothing_runs(client, admin_auth, auth, services) -> None:
    runner = services.catalog.runner = CountingRunner(RunOutcome(0, "", "", 1))
    made = create(client, admin_auth, requires_approval=True)
    response = client.post(f"{BASE}/{made['id']}/execute", headers=auth)
    assert response.status_code == 200  # the spec: 200, with the approval request in the body
    body = response.json()
    assert set(body) == {"status", "approval_id", "catalog_id", "message", "approval"}
    assert body["status"] == "approval_required" and body["catalog_id"] == made["id"]
    assert body["approval"]["id"] == body["approval_id"] and body["approval"]["status"] == "pending"
    assert f"/v1/approvals/{body['approval_id']}/approve" in body["message"]
    assert runner.commands == []
    assert client.get(f"{BASE}/executions", headers=admin_auth).json() == []


def test_execute_unknown_entry(client, admin_auth) -> None:
    assert client.post(f"{BASE}/{uuid4()}/execute", headers=admin_auth).status_code == 404


def test_executions_listing(client, admin_auth) -> None:
    one, two = create(client, admin_auth, command="echo 1"), create(client, admin_auth, command="echo 2")
    for entry in (one, two, one):
        client.post(f"{BASE}/{entry['id']}/execute", headers=admin_auth)
    listed = client.get(f"{BASE}/executions", headers=admin_auth).json()
    assert [x["stdout"] for x in listed] == ["1\n", "2\n", "1\n"]  # newest first
    mine = client.get(f"{BASE}/executions", params={"catalog_id": two["id"]}, headers=admin_auth).json()
    assert [x["catalog_id"] for x in mine] == [two["id"]]
    assert len(client.get(f"{BASE}/executions", params={"limit": 1, "offset": 1}, headers=admin_auth).json()) == 1
    assert client.get(f"{BASE}/executions", params={"limit": 201}, headers=admin_auth).status_code == 422
    assert client.get(f"{BASE}/executions/{uuid4()}", headers=admin_auth).status_code == 404


# --- audit -------------------------------------------------------------------------------------------


def test_the_audit_log(client, admin_auth, api_key, services) -> None:
    user_id = str(services.keys.authenticate(api_key).user_id)
    made = create(client, admin_auth)
    client.post(f"{BASE}/{made['id']}/execute", headers=admin_auth)
    client.delete(f"{BASE}/{made['id']}", headers=admin_auth)
    events = client.get(f"{BASE}/audit", params={"catalog_id": made["id"]}, headers=admin_auth).json()
    assert [e["action"] for e in events] == ["deleted", "execute", "created"]
    assert all(e["user_id"] == user_id and e["catalog_id"] == made["id"] for e in events)
    assert set(events[0]) == {"id", "action", "catalog_id", "approval_id", "execution_id", "user_id", "detail", "at"}
    assert events[1]["execution_id"] and "completed" in events[1]["detail"]
    seeded = client.get(f"{BASE}/audit", params={"action": "created", "limit": 1000}, headers=admin_auth).json()
    assert len(seeded) == len(DEFAULT_ENTRIES) + 1
    assert sum(e["user_id"] is None for e in seeded) == len(DEFAULT_ENTRIES)
    assert client.get(f"{BASE}/audit", params={"action": "exploded"}, headers=admin_auth).status_code == 422
    assert client.get(f"{BASE}/audit", params={"limit": 0}, headers=admin_auth).status_code == 422


# --- admin_auth --------------------------------------------------------------------------------------------


def test_a_key_is_needed(client) -> None:
    for method, path in (("GET", BASE), ("GET", f"{BASE}/count"), ("POST", BASE), ("GET", f"{BASE}/audit"),
                         ("POST", f"{BASE}/{uuid4()}/execute"), ("DELETE", f"{BASE}/{uuid4()}")):
        response = client.request(method, path)
        assert response.status_code == 401 and response.json()["error"]["code"] == "UNAUTHORIZED"


def test_read_only_keys_read_but_do_not_change_or_run(client, admin_auth, read_only_auth, services) -> None:
    runner = services.catalog.runner = CountingRunner(RunOutcome(0, "", "", 1))
    made = create(client, admin_auth)
    for path in (BASE, f"{BASE}/count", f"{BASE}/{made['id']}", f"{BASE}/audit", f"{BASE}/executions"):
        assert client.get(path, headers=read_only_auth).status_code == 200
    assert client.get(f"{BASE}/search", params={"q": "echo"}, headers=read_only_auth).status_code == 200
    for method, path in (("POST", f"{BASE}/{made['id']}/execute"), ("DELETE", f"{BASE}/{made['id']}")):
        response = client.request(method, path, headers=read_only_auth)
        assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN"
    forbidden = client.post(BASE, json={"name": "x", "command": "true", "category": "system", "risk_level": "low",
                                        "os": "any"}, headers=read_only_auth)
    assert forbidden.status_code == 403
    assert runner.commands == [] and client.get(f"{BASE}/{made['id']}", headers=admin_auth).status_code == 200


def test_every_user_sees_the_same_catalog(client, admin_auth, services) -> None:
    key, _ = services.keys.create("other", user_id=uuid4())
    other = {"Authorization": f"Bearer {key}"}
    made = create(client, admin_auth)
    assert client.get(f"{BASE}/{made['id']}", headers=other).json() == made


# --- roles and owners (issue 11, holes 1 and 3) -------------------------------------------------------


def other_user(services, role: str = "user") -> dict[str, str]:
    key, _ = services.keys.create(f"other {role} {uuid4().hex[:4]}", user_id=uuid4(), role=role)
    return {"Authorization": f"Bearer {key}"}


def test_a_user_key_cannot_create_or_delete_entries(client, auth, admin_auth, services) -> None:
    payload = {"name": "Read the key", "command": "cat memory.key", "category": "system", "risk_level": "low",
               "os": "any"}
    before = client.get(f"{BASE}/count", headers=auth).json()["count"]
    for headers in (auth, other_user(services)):  # the owner's user key, another user's key
        response = client.post(BASE, json=payload, headers=headers)
        assert response.status_code == 403, response.text
        error = response.json()["error"]
        assert error["code"] == "FORBIDDEN" and "admin role" in error["message"] and error["request_id"]
        assert error["details"] == {"required_role": "admin", "role": "user"}
    made = create(client, admin_auth)
    for headers in (auth, other_user(services)):
        response = client.delete(f"{BASE}/{made['id']}", headers=headers)
        assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN"
    assert client.get(f"{BASE}/{made['id']}", headers=auth).status_code == 200  # still there
    assert client.get(f"{BASE}/count", headers=auth).json()["count"] == before + 1
    assert client.get(f"{BASE}/search", params={"q": "Read the key"}, headers=auth).json() == []


def test_a_user_key_gets_403_even_for_an_invalid_body(client, auth) -> None:
    response = client.post(BASE, json={"name": ""}, headers=auth)  # no validation details for a non-admin
    assert response.status_code == 403


def test_executions_belong_to_who_asked(client, auth, admin_auth, services) -> None:
    made = create(client, admin_auth, command="echo mine")
    other = other_user(services)
    mine = client.post(f"{BASE}/{made['id']}/execute", headers=auth).json()
    theirs = client.post(f"{BASE}/{made['id']}/execute", headers=other).json()
    assert mine["user_id"] != theirs["user_id"]
    response = client.get(f"{BASE}/executions/{mine['execution_id']}", headers=other)
    assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
    assert [x["execution_id"] for x in client.get(f"{BASE}/executions", headers=other).json()] == [
        theirs["execution_id"]]
    assert [x["execution_id"] for x in client.get(f"{BASE}/executions", headers=auth).json()] == [
        mine["execution_id"]]
    everyone = client.get(f"{BASE}/executions", headers=admin_auth).json()  # an admin sees all
    assert {x["execution_id"] for x in everyone} == {mine["execution_id"], theirs["execution_id"]}
    assert client.get(f"{BASE}/executions/{theirs['execution_id']}", headers=admin_auth).status_code == 200
    audit = client.get(f"{BASE}/audit", params={"action": "execute"}, headers=other).json()
    assert [e["execution_id"] for e in audit] == [theirs["execution_id"]]  # only their own events
    assert len(client.get(f"{BASE}/audit", params={"action": "execute"}, headers=admin_auth).json()) == 2


def test_the_network_flag(client, admin_auth, services) -> None:
    runner = services.catalog.runner = NetworkRunner()
    plain = create(client, admin_auth)
    online = create(client, admin_auth, network=True)
    assert plain["network"] is False and online["network"] is True
    assert client.get(f"{BASE}/{online['id']}", headers=admin_auth).json()["network"] is True
    networked = {e.name for e in DEFAULT_ENTRIES if e.network}  # the defaults that look at the host's network
    assert networked and all(i["network"] is (i["name"] in networked)
                             for i in client.get(BASE, headers=admin_auth).json() if i["id"] != online["id"])
    for entry in (plain, online):
        client.post(f"{BASE}/{entry['id']}/execute", headers=admin_auth)
    assert runner.networks == [False, True]
    bad = client.post(BASE, json={"name": "x", "command": "true", "category": "system", "risk_level": "low",
                                  "os": "any", "network": "sometimes"}, headers=admin_auth)
    assert bad.status_code == 422 and "network" in fields_of(bad)


class NetworkRunner:
    def __init__(self) -> None:
        self.networks: list[bool] = []

    def run(self, command: str, *, timeout_secs: float, max_output_bytes: int, network: bool = False) -> RunOutcome:
        self.networks.append(network)
        return RunOutcome(0, "", "", 1)


# --- documentation -----------------------------------------------------------------------------------


def test_openapi_documents_the_value_sets_and_statuses(client) -> None:
    doc = client.get("/api-docs/openapi.json").json()
    paths = doc["paths"]
    for path in (BASE, f"{BASE}/search", f"{BASE}/count", f"{BASE}/{{entry_id}}", f"{BASE}/{{entry_id}}/execute",
                 f"{BASE}/audit", f"{BASE}/executions", f"{BASE}/executions/{{execution_id}}"):
        assert path in paths, path
    listing = paths[BASE]["get"]["description"]
    for word in ("system", "disk", "network", "process", "service", "package", "security", "low", "medium", "high",
                 "critical", "linux", "macos", "windows", "any", "name"):
        assert word in listing
    assert "security" in paths[BASE]["post"]["description"]
    assert {"201", "409", "422"} <= set(paths[BASE]["post"]["responses"])
    execute = paths[f"{BASE}/{{entry_id}}/execute"]["post"]
    assert {"200", "404", "409"} <= set(execute["responses"]) and "202" not in execute["responses"]
    assert "approval_required" in execute["description"] and "**200**" in execute["description"]
    schemas = str(execute["responses"]["200"]["content"]["application/json"]["schema"])
    assert "ExecutionOut" in schemas and "ApprovalRequired" in schemas
    for operation in (paths[BASE]["post"], paths[f"{BASE}/{{entry_id}}"]["delete"]):
        assert "admin" in operation["description"] and "admin" in operation["responses"]["403"]["description"]
    assert "204" in paths[f"{BASE}/{{entry_id}}"]["delete"]["responses"]
