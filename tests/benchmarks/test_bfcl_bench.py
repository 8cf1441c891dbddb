"""benchmarks/bfcl.py: BFCL names made acceptable to the OpenAI API and mapped back for scoring, and a
case's reply (tool_calls, or none) scored with BFCL's AST rules."""

from __future__ import annotations

from types import SimpleNamespace

from benchmarks import _bfcl, bfcl


def _reply(calls: list[tuple[str, str]]) -> SimpleNamespace:
    tool_calls = [SimpleNamespace(function=SimpleNamespace(name=n, arguments=a)) for n, a in calls]
    return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(tool_calls=tool_calls or None))])


class FakeClient:
    def __init__(self, replies: list[SimpleNamespace]):
        self.replies, self.sent = replies, []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **request):  # noqa: ANN003, ANN201
        self.sent.append(request)
        return self.replies.pop(0)


def dotted_case() -> _bfcl.Case:
    return next(c for c in _bfcl.load_cases() if "." in c.specs[0].name)


def test_dotted_names_are_renamed_for_the_api_and_mapped_back() -> None:
    case = dotted_case()
    specs, back = bfcl.openai_named(case)
    assert "." not in specs[0].name and back[specs[0].name] == case.specs[0].name
    assert specs[0].parameters == case.specs[0].parameters


def test_a_right_call_scores_and_no_call_is_a_miss() -> None:
    import json

    case = dotted_case()
    specs, _ = bfcl.openai_named(case)
    right = json.dumps(case.expected.arguments)
    client = FakeClient([_reply([(specs[0].name, right)]), _reply([])])
    hit, miss = bfcl.run_endpoint(client, "m", [case, case])
    assert (hit.name_ok, hit.ast_ok, miss.called, miss.why) == (True, True, None, "no call")
    sent = client.sent[0]
    assert sent["tool_choice"] == "auto" and sent["extra_body"] == {"memory": {"retrieve": False, "learn": False}}
    assert sent["tools"][0]["function"]["name"] == specs[0].name
    summary = bfcl.summary([hit, miss])
    assert summary["ast_pct"] == 50.0 and summary["no_call_pct"] == 50.0


def test_unparseable_arguments_score_as_wrong_not_as_a_crash() -> None:
    case = dotted_case()
    specs, _ = bfcl.openai_named(case)
    (outcome,) = bfcl.run_endpoint(FakeClient([_reply([(specs[0].name, "{not json")])]), "m", [case])
    assert outcome.name_ok and not outcome.ast_ok
