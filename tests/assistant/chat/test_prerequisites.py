"""Prerequisite calls: dependencies among offered tools, the hint in the schema, and the check of a
call's value against earlier results (API-Bank-like specs, no model)."""

from __future__ import annotations

import json

import pytest

from assistant.chat.prerequisites import Dependency, annotate, dependencies, is_handle, missing, words
from assistant.defence.wrap import fence
from assistant.llm.base import ChatMessage, ToolCall, ToolSpec


def spec(name: str, required: list[str], optional: tuple[str, ...] = (), **extra) -> ToolSpec:
    properties = {p: {"type": "string", "description": f"The {p}."} for p in [*required, *optional]}
    return ToolSpec(name, f"{name} API.", {"type": "object", "properties": properties, "required": required}, **extra)


GET_TOKEN = spec("GetUserToken", ["username", "password"], produces=("token",))
DELETE = spec("DeleteAccount", ["token"])
TOKEN = "p9o8i7u6y5t4r3e2w1q"


def history(*, token_result: str | None = TOKEN, user: str = "Delete my account, I am JohnDoe / pass123.") \
        -> list[ChatMessage]:
    messages = [ChatMessage("system", "You are helpful."), ChatMessage("user", user)]
    if token_result is not None:
        call = ToolCall("c1", "GetUserToken", {"username": "JohnDoe", "password": "pass123"})
        messages += [ChatMessage("assistant", "", tool_calls=(call,)),
                     ChatMessage("tool", json.dumps({"result": {"token": token_result}}), tool_call_id="c1",
                                 name="GetUserToken")]
    return messages


def delete(token: object = TOKEN) -> ToolCall:
    return ToolCall("c2", "DeleteAccount", {} if token is None else {"token": token})


DEP = Dependency("DeleteAccount", "token", "GetUserToken", field="token")


# --- dependencies -------------------------------------------------------------------------------


def test_a_required_parameter_another_tool_produces_is_inferred() -> None:
    assert dependencies([GET_TOKEN, DELETE]) == [DEP]
    assert dependencies([DELETE, GET_TOKEN]) == [DEP]


def test_no_dependency_without_the_producer_among_the_offered_tools() -> None:
    assert dependencies([DELETE]) == []
    declared = spec("DeleteAccount", ["token"], requires=(("token", "GetUserToken"),))
    assert dependencies([declared]) == []


def test_an_optional_parameter_is_no_dependency() -> None:
    query = spec("QueryAlarm", ["time"], optional=("token",))
    assert dependencies([GET_TOKEN, query]) == []


def test_a_tool_never_depends_on_itself() -> None:
    refresh = spec("RefreshToken", ["token"], produces=("token",))
    assert dependencies([refresh]) == []
    assert dependencies([refresh, GET_TOKEN]) == [Dependency("RefreshToken", "token", "GetUserToken", field="token")]
    loop = spec("Chain", ["token"], produces=("token",), requires=(("token", "Chain"),))
    assert dependencies([loop]) == []


def test_declared_requires_win_over_inference() -> None:
    login = spec("Login", ["user"], produces=("token",))
    declared = spec("DeleteAccount", ["token"], requires=(("token", "Login"),))
    assert dependencies([GET_TOKEN, login, declared]) == [
        Dependency("DeleteAccount", "token", "Login", others=("GetUserToken",), field="token")]


def test_declared_names_may_differ_and_list_several_producers() -> None:
    listing = spec("list_tasks", [], produces=("id",))
    creating = spec("create_task", ["title"], produces=("id",))
    complete = spec("complete_task", ["task_id"],
                    requires=(("task_id", "list_tasks"), ("task_id", "create_task")))
    assert dependencies([listing, creating, complete]) == [
        Dependency("complete_task", "task_id", "list_tasks", others=("create_task",), field="id")]
    assert dependencies([creating, complete]) == [Dependency("complete_task", "task_id", "create_task", field="id")]


def test_only_handles_are_inferred_not_shared_descriptive_names() -> None:
    navigation = spec("Navigation", ["start", "end"], produces=("time", "route"))
    agenda = spec("AddAgenda", ["token", "content", "time", "location"])
    assert dependencies([GET_TOKEN, navigation, agenda]) == [Dependency("AddAgenda", "token", "GetUserToken", field="token")]
    assert [is_handle(n) for n in ("token", "task_id", "userId", "api_key", "booking_reference", "ids")] == [True] * 6
    assert [is_handle(n) for n in ("time", "year", "status", "identity", "keyword", "")] == [False] * 6


def test_several_producers_the_most_specific_name_wins_a_tie_gives_none() -> None:
    login = spec("Login", ["user"], produces=("token",))
    assert dependencies([login, GET_TOKEN, DELETE]) == [
        Dependency("DeleteAccount", "token", "GetUserToken", others=("Login",), field="token")]
    admin = spec("GetAdminToken", ["secret"], produces=("token",))
    assert dependencies([admin, GET_TOKEN, DELETE]) == []


def test_words_split_identifiers() -> None:
    assert words("GetUserToken") == ["get", "user", "token"]
    assert words("get_user_token") == ["get", "user", "token"]
    assert words("list_tasks") == ["list", "task"]
    assert words("HTTPRequestId") == ["http", "request", "id"]


def test_odd_schemas_give_no_dependencies() -> None:
    odd = ToolSpec("Odd", "", {"type": "object"}, requires=(("x", "GetUserToken"),))
    bad = ToolSpec("Bad", "", {"type": "object", "required": "token"})
    assert dependencies([GET_TOKEN, odd, bad]) == []


# --- annotate -----------------------------------------------------------------------------------


def test_annotate_names_the_producer_in_the_description() -> None:
    specs = (GET_TOKEN, DELETE)
    annotated = annotate(specs, dependencies(specs))
    assert annotated[0] is GET_TOKEN
    description = annotated[1].parameters["properties"]["token"]["description"]
    assert description == "The token. Get it from GetUserToken first (the token in its result)."
    assert DELETE.parameters["properties"]["token"]["description"] == "The token."  # the original is untouched
    assert annotated[1].parameters["required"] == ["token"]
    again = annotate(annotated, dependencies(annotated))
    assert again[1].parameters["properties"]["token"]["description"] == description


def test_annotate_a_declared_dependency_names_the_producers_handle() -> None:
    listing = spec("list_tasks", [], produces=("id",))
    complete = ToolSpec("complete_task", "Done.", {"type": "object", "properties": {"task_id": {"type": "string"}},
                                                   "required": ["task_id"]},
                        requires=(("task_id", "list_tasks"),))
    annotated = annotate([listing, complete], dependencies([listing, complete]))
    assert annotated[1].parameters["properties"]["task_id"]["description"] == \
        "Get it from list_tasks first (the id in its result)."


def test_annotate_without_dependencies_is_the_same_specs() -> None:
    assert annotate([GET_TOKEN, DELETE], []) == (GET_TOKEN, DELETE)


# --- missing ------------------------------------------------------------------------------------


def test_the_value_of_an_earlier_producer_result_lets_the_call_run() -> None:
    assert missing(delete(), [DEP], history()) is None


def test_a_made_up_or_absent_value_is_missing() -> None:
    assert missing(delete("a1b2c3d4e5"), [DEP], history()) == DEP
    assert missing(delete(), [DEP], history(token_result=None)) == DEP
    assert missing(delete(None), [DEP], history()) == DEP
    assert missing(delete(""), [DEP], history()) == DEP
    assert missing(delete("   "), [DEP], history()) == DEP


def test_only_the_producers_results_count() -> None:
    other = ChatMessage("tool", json.dumps({"result": {"token": TOKEN}}), tool_call_id="x", name="Echo")
    assistant = ChatMessage("assistant", f"Your token is {TOKEN}.")
    assert missing(delete(), [DEP], [*history(token_result=None), other, assistant]) == DEP


def test_the_value_is_looked_up_at_any_depth_and_in_a_fenced_result() -> None:
    nested = {"result": [{"account": {"tokens": ["x", TOKEN]}}]}
    fenced = fence(json.dumps(nested), "GetUserToken result", "b0undary")
    for content in (json.dumps(nested), fenced, f"Your token is {TOKEN}."):
        messages = [ChatMessage("user", "hi"), ChatMessage("tool", content, tool_call_id="c1", name="GetUserToken")]
        assert missing(delete(), [DEP], messages) is None, content


def test_a_substring_of_a_value_is_not_the_value() -> None:
    assert missing(delete(TOKEN[:8]), [DEP], history()) == DEP  # a prefix of the real token
    assert missing(delete("t4r3"), [DEP], history()) == DEP
    short = [ChatMessage("tool", json.dumps({"result": "Meeting at 1 pm"}), name="GetUserToken")]
    assert missing(delete("1"), [DEP], short) == DEP
    exact = [ChatMessage("tool", json.dumps({"result": {"token": 1}}), name="GetUserToken")]
    assert missing(delete(1), [DEP], exact) is None
    assert missing(delete("1"), [DEP], exact) is None


def test_a_key_of_the_result_is_no_value() -> None:
    assert missing(delete("token"), [DEP], history()) == DEP


def test_with_the_field_in_the_result_only_its_values_count() -> None:
    dep = Dependency("complete_task", "task_id", "list_tasks", field="id")
    listed = [ChatMessage("tool", json.dumps([{"id": "3f2a-rent", "title": "Pay rent"}]), name="list_tasks")]
    assert missing(ToolCall("c", "complete_task", {"task_id": "Pay rent"}), [dep], listed) == dep
    assert missing(ToolCall("c", "complete_task", {"task_id": "3f2a-rent"}), [dep], listed) is None
    other_shape = [ChatMessage("tool", json.dumps([{"uid": "3f2a-rent"}]), name="list_tasks")]
    assert missing(ToolCall("c", "complete_task", {"task_id": "3f2a-rent"}), [dep], other_shape) is None


def test_a_value_from_the_users_words_still_needs_the_producer() -> None:
    user = "My username is JaneSmith and my password is password."  # qwen2.5-0.5b sent token="password"
    assert missing(delete("password"), [DEP], history(token_result=None, user=user)) == DEP
    assert missing(delete("password"), [DEP], history(user=user)) == DEP


def test_other_producers_results_count_and_lists_need_every_element() -> None:
    dep = Dependency("complete_task", "task_id", "list_tasks", others=("create_task",), field="id")
    created = ChatMessage("tool", json.dumps({"id": "7f1e-task", "title": "milk"}), name="create_task")
    listed = ChatMessage("tool", json.dumps([{"id": "aa11-task"}]), name="list_tasks")
    call = ToolCall("c", "complete_task", {"task_id": "7f1e-task"})
    assert missing(call, [dep], [created]) is None
    both = ToolCall("c", "complete_task", {"task_id": ["7f1e-task", "aa11-task"]})
    assert missing(both, [dep], [created, listed]) is None
    assert missing(both, [dep], [created]) == dep


def test_calls_of_other_tools_are_never_held_back() -> None:
    assert missing(ToolCall("c", "GetUserToken", {"username": "u", "password": "p"}), [DEP], []) is None
    assert missing(ToolCall("c", "DeleteAccount", {"token": "made-up"}), [], []) is None


@pytest.mark.parametrize("arguments", [{"token": {"nested": True}}, {"token": True}, {"token": 3.5}])
def test_odd_values_do_not_raise(arguments: dict) -> None:
    assert missing(ToolCall("c", "DeleteAccount", arguments), [DEP], history()) == DEP


def test_the_first_missing_dependency_is_returned() -> None:
    transfer = spec("Transfer", ["token", "account_id"])
    accounts = spec("ListAccounts", ["token"], produces=("account_id",))
    deps = dependencies([GET_TOKEN, accounts, transfer])
    assert deps == [Dependency("ListAccounts", "token", "GetUserToken", field="token"),
                    Dependency("Transfer", "token", "GetUserToken", field="token"),
                    Dependency("Transfer", "account_id", "ListAccounts", field="account_id")]
    call = ToolCall("c", "Transfer", {"token": TOKEN, "account_id": "acc-9911"})
    assert missing(call, deps, history()) == deps[2]
    listed = ChatMessage("tool", json.dumps({"result": [{"account_id": "acc-9911"}]}), name="ListAccounts")
    assert missing(call, deps, [*history(), listed]) is None
