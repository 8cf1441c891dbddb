"""Companion services: small HTTP servers that run one voice engine for many satellites or servers."""
