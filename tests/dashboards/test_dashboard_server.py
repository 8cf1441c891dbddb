"""``python -m dashboards``'s settings: the pages it serves, the index, and the key a remote API needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboards.pages import PAGES, Page
from dashboards.server import Refused, api_key_for, available, index_markdown, is_loopback, main


def test_only_pages_whose_module_exists_are_served(tmp_path: Path) -> None:
    (tmp_path / "decay_curves.py").write_text("")
    (tmp_path / "dreams.py").write_text("")
    assert [p.name for p in available(PAGES, tmp_path)] == ["decay_curves", "dreams"]  # the registry's order
    served = {p.name for p in available()}
    assert {"decay_curves", "knowledge_graph", "dreams", "quality", "voice_rooms"} <= served


def test_the_index_lists_each_page_with_its_title_summary_and_link() -> None:
    pages = [Page("dreams", "Dreams", "What each night did."), Page("quality", "Quality <&>", "Runs & patterns.")]
    text = index_markdown(pages, "http://127.0.0.1:8000", None)
    assert 'href="./dreams">Dreams</a>: What each night did.' in text
    assert "Quality &lt;&amp;&gt;" in text and "Runs &amp; patterns." in text
    assert "http://127.0.0.1:8000" in text
    assert "in process" in index_markdown(pages, None, "/etc/a.toml")


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                                ("[::1]", True), ("127.0.0.2", True), ("10.0.0.5", False),
                                                ("example.org", False), ("", False)])
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_remote_api_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSISTANT_API_KEY", raising=False)
    assert api_key_for(None, None) == ""  # in process
    assert api_key_for("http://127.0.0.1:8000", None) == ""  # the pages show the refused-key banner
    assert api_key_for("http://10.0.0.5:8000", "k-1") == "k-1"
    with pytest.raises(Refused, match="--key KEY"):
        api_key_for("http://10.0.0.5:8000", None, ask=False)
    with pytest.raises(Refused, match="not an http"):
        api_key_for("10.0.0.5:8000", "k")
    monkeypatch.setenv("ASSISTANT_API_KEY", "from-env")
    assert api_key_for("https://assistant.example.org", None) == "from-env"


def test_asked_for_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSISTANT_API_KEY", raising=False)
    monkeypatch.setattr("getpass.getpass", lambda prompt: " typed \n")
    assert api_key_for("http://10.0.0.5:8000", None, ask=True) == "typed"


def test_main_refuses_a_remote_api_without_a_key(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.delenv("ASSISTANT_API_KEY", raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert main(["--api", "http://192.168.1.20:8000"]) == 2
    assert "is not on this machine" in capsys.readouterr().err
