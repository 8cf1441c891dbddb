"""The one client layer: where a page reads (``target``), which client it gets (``connect``), the check
before a page lays itself out (``check``), and the banner each failure shows (``describe``)."""

from __future__ import annotations

import httpx
import panel as pn
import pytest

from dashboards.banner import banner, describe
from dashboards.client import ApiUnreachable, ClientError, KeyRefused, Target, check, connect, target


def test_target_reads_the_environment_then_the_script_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ASSISTANT_API_URL", "ASSISTANT_API_KEY", "ASSISTANT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    assert target(["page.py"]) == Target(None, "", None)
    assert target(["page.py", "a.toml"]).config == "a.toml"  # panel serve ... --args a.toml
    monkeypatch.setenv("ASSISTANT_CONFIG", "b.toml")
    monkeypatch.setenv("ASSISTANT_API_URL", "http://127.0.0.1:8000")
    monkeypatch.setenv("ASSISTANT_API_KEY", "k")
    assert target(["page.py", "a.toml"]) == Target("http://127.0.0.1:8000", "k", "b.toml")


def test_connect_chooses_http_or_in_process() -> None:
    http = connect(lambda url, key: ("http", url, key), lambda config: ("local", config), Target("http://x", "k"))
    local = connect(lambda url, key: ("http", url, key), lambda config: ("local", config), Target(None, "", "c.toml"))
    assert http == ("http", "http://x", "k") and local == ("local", "c.toml")


def answering(status: int) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, json={
        "error": {"code": "UNAUTHORIZED", "message": "invalid API key"}} if status >= 400 else {"version": "1"}))


def test_check_says_unreachable_or_refused_before_the_page_is_built() -> None:
    where = Target("http://api.test", "k")
    check(where, transport=answering(200))
    check(Target(None), transport=answering(500))  # in process: nothing to ask
    with pytest.raises(KeyRefused, match="invalid API key"):
        check(where, transport=answering(401))

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ApiUnreachable, match="did not answer"):
        check(where, transport=httpx.MockTransport(refuse))


def test_each_failure_has_its_banner() -> None:
    remote, local = Target("http://127.0.0.1:9", "k"), Target(None, "", "/etc/a.toml")
    kind, text = describe(ApiUnreachable("the API server did not answer"), remote)
    assert kind == "danger" and "unreachable" in text and "assistant serve" in text
    kind, text = describe(KeyRefused("refused: invalid API key", 401), remote)
    assert "refused the key" in text and "--key" in text
    kind, text = describe(ClientError("the insight is dismissed", 409), remote)
    assert kind == "warning" and "the insight is dismissed" in text
    kind, text = describe(OSError("unable to open database file <x>"), local)
    assert "/etc/a.toml" in text and "cannot be opened" in text and "&lt;x&gt;" in text and "--api" in text
    alert = banner(ApiUnreachable("gone"), remote)
    assert isinstance(alert, pn.pane.Alert) and alert.alert_type == "danger"
