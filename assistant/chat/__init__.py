"""Conversations and the chat service."""
