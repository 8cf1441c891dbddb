"""The MCP server with real components and the SDK's own client: ``assistant mcp`` spawned on stdio, and
``/mcp`` of a live uvicorn server; the real MiniLM embedder (memory store then search finds the memory),
real SQLite. No chat model runs (nothing here generates text)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.integration.support import serve

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
READER_KEY = "ak_mcp-integration-reader"


async def store_and_search(client: Client, content: str, query: str) -> tuple[set[str], dict, list[dict]]:
    """The tools listed, the stored memory, the search's hits (through the tools)."""
    names = {t.name for t in (await client.list_tools()).tools}
    stored = await client.call_tool("memory_store", {"content": content, "memory_type": "fact"})
    assert not stored.is_error, stored.content
    found = await client.call_tool("memory_search", {"query": query, "limit": 3})
    assert not found.is_error, found.content
    return names, stored.structured_content["result"], found.structured_content["result"]


def stdio(config: Path, *extra: str, key: str | None = None) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ASSISTANT_API_KEY", None)
    if key is not None:
        env["ASSISTANT_API_KEY"] = key
    return StdioServerParameters(command=sys.executable, args=["-m", "api.cli", "mcp", "--config", str(config),
                                                                *extra], env=env, cwd=str(ROOT))


def test_stdio_lists_tools_stores_and_finds_a_memory(tmp_path: Path) -> None:
    reader_user = uuid4()
    config = tmp_path / "config.toml"
    config.write_text(f'[server]\ndata_dir = "{tmp_path / "data"}"\n\n[security.api_keys]\n'
                      f'"{READER_KEY}" = {{ user_id = "{reader_user}", role = "read-only" }}\n')

    async def owner() -> tuple[Any, ...]:
        async with Client(stdio(config)) as client:
            names, stored, hits = await store_and_search(client, "My sister Alice lives in Lisbon",
                                                         "Where does my sister live?")
            read = await client.read_resource(f"memory://{stored['id']}")
            return names, stored, hits, read.contents[0].text

    names, stored, hits, text = asyncio.run(owner())
    assert {"memory_search", "memory_store", "recall_memory", "snippet_list"} <= names
    assert hits[0]["id"] == stored["id"] and hits[0]["similarity"] > 0.3  # MiniLM: the question finds it
    assert "Lisbon" in text

    async def reader() -> tuple[set[str], Any, Any]:
        async with Client(stdio(config, key=READER_KEY)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            try:
                await client.call_tool("memory_store", {"content": "x"})
                refused = None
            except MCPError as exc:
                refused = exc
            try:
                await client.read_resource(f"memory://{stored['id']}")  # the owner's: not the reader's user
                missing = None
            except MCPError as exc:
                missing = exc
            return names, refused, missing

    names, refused, missing = asyncio.run(reader())
    assert "memory_search" in names and "memory_store" not in names
    assert refused is not None and refused.data["code"] == "FORBIDDEN"
    assert missing is not None and missing.code == -32002


def test_stdio_refuses_an_invalid_key(tmp_path: Path) -> None:
    import subprocess

    config = tmp_path / "config.toml"
    config.write_text(f'[server]\ndata_dir = "{tmp_path / "data"}"\n')
    done = subprocess.run([sys.executable, "-m", "api.cli", "mcp", "--config", str(config), "--key", "ak_wrong"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          cwd=str(ROOT), stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "invalid API key" in done.stderr and done.stdout == ""


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026-07-28 protocol, and the initialize handshake
def test_http_lists_tools_stores_and_finds_a_memory(tmp_path: Path, mode: str) -> None:
    live, key = serve(tmp_path, security={"rate_limit_enabled": False})
    with live:
        url = f"{live.base_url}/mcp"
        unauthenticated = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                     headers={"Accept": "application/json, text/event-stream"},
                                     timeout=120)  # httpx's 5 s default is not a latency bound: CI is shared
        assert unauthenticated.status_code == 401
        assert unauthenticated.json()["error"]["code"] == "UNAUTHORIZED"

        async def main() -> tuple[Any, ...]:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
                async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
                    found = await store_and_search(client, "I take my coffee black, no sugar",
                                                   "How do I like my coffee?")
                    return (*found, client.protocol_version)

        names, stored, hits, version = asyncio.run(main())
        assert {"memory_search", "memory_store"} <= names
        assert hits[0]["id"] == stored["id"] and set(hits[0]) >= {"relevance", "similarity", "keyword_score"}
        user = str(live.services.keys.authenticate(key).user_id)
        assert live.services.memory.get(user, stored["id"]).content == "I take my coffee black, no sugar"
        assert (version == "2026-07-28") == (mode == "auto")
