"""Reuse the replaying engine server of the llm tests for the embedding backends."""

from tests.assistant.llm.conftest import closed_port_url, engine  # noqa: F401
