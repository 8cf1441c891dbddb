"""Metrics (JSON and Prometheus exposition)."""

from assistant.observability.metrics import Metrics

__all__ = ["Metrics"]
