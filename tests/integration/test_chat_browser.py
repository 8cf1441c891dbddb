"""The chat page in Chromium against a live API server with the real small model (SmolLM2-135M, a short
``max_tokens``): ``panel serve dashboards/chat.py`` with ``ASSISTANT_API_URL`` and ``ASSISTANT_API_KEY``.

The user's store holds a memory; a message typed into the page is answered by the model through
``POST /v1/chat/stream``: the answer appears in the feed, and under it the memory that reached the prompt
(its type and text); a second message continues the same conversation (the page keeps its id: the API
then holds one conversation with both exchanges). No console error, nothing fetched outside loopback, no
explanation link (the API has no ``/api/chat/{id}/explain`` yet). Screenshot: ``tests/artifacts/chat.png``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from tests.integration.browser import ARTIFACTS, CHROMIUM, FLAGS, loopback_only, panel_serve, wait_for
from tests.integration.support import serve

pytestmark = pytest.mark.integration
MEMORY = "My sister Ada lives in Lisbon"


def test_the_chat_page_streams_an_answer_with_its_memories(tmp_path: Path, small_model_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    live, key = serve(tmp_path / "server", memory={"embedding_backend": "hashing"},
                      inference={"model_path": str(small_model_path), "threads": 2, "temperature": 0.0,
                                 "max_tokens": 24},
                      tool_calling={"selection": "auto"}, security={"rate_limit_enabled": False})
    with live:
        services = live.services
        user = str(services.keys.authenticate(key).user_id)
        memory = services.memory.add(user, MEMORY, memory_type="fact", importance=0.9)
        env = {"ASSISTANT_API_URL": live.base_url, "ASSISTANT_API_KEY": key}
        outside: list[str] = []
        errors: list[str] = []
        with panel_serve("chat", tmp_path / "panel.log", env) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page: Page = browser.new_page(viewport={"width": 1200, "height": 1100})
            loopback_only(page, outside)
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            box = page.locator(".chat-input input")
            box.wait_for(timeout=30_000)
            box.fill(MEMORY)  # the very words of the memory: it reaches the prompt whatever the embedder
            box.press("Enter")
            page.locator(".chat-user").first.wait_for(timeout=30_000)
            used = page.locator(".chat-memories .tabulator-row")
            wait_for(used.count, lambda n: n == 1, "the memory the answer used", 180)
            assert MEMORY in used.first.inner_text() and "Fact" in used.first.inner_text()
            page.screenshot(path=str(ARTIFACTS / "chat.png"), full_page=True)
            answer = page.locator(".chat-answer .answer-text").first.inner_text()
            assert answer.strip() and "no answer" not in answer
            assert "tokens" in page.locator(".chat-footer p").first.inner_text()
            assert page.get_by_text("Why this answer").count() == 1  # the answer's explanation, /api/chat/{id}/explain
            conversation = page.locator(".chat-conversation p").inner_text()
            assert "Conversation" in conversation

            box.fill("Where does she live?")
            page.get_by_role("button", name="Send").click()
            wait_for(page.locator(".chat-footer").count, lambda n: n == 2, "the second answer", 180)
            assert page.locator(".chat-conversation p").inner_text() == conversation  # the same conversation
            page.screenshot(path=str(ARTIFACTS / "chat_continued.png"), full_page=True)
            browser.close()
        assert services.memory.get(user, memory.id).access_count >= 1  # the API recorded the recall
        listed = services.chat.conversations.list(user)
        assert len(listed) == 1 and str(listed[0].id) in conversation
        assert [m.role for m in services.chat.conversations.messages(str(listed[0].id))] == [
            "user", "assistant", "user", "assistant"]
    assert outside == []
    assert errors == [], errors
