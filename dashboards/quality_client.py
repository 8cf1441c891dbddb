"""Where the quality dashboard reads from and acts through: the package in this process, or the HTTP API.

:class:`QualityClient` is what :mod:`dashboards.quality` needs; both implementations answer with the
JSON shapes of the sanitation and quarantine routes (the ``as_dict()`` of :mod:`assistant.sanitation.types`):

- ``quality()``: ``GET /v1/sanitation/quality`` -> ``{score, trend, recommendations, re_ask_rate, ...}``;
- ``history(limit)``: ``GET /v1/sanitation/results?limit=`` -> ``{"results": [...], "total": n}``, oldest
  first (each result's ``quality`` is the assessment of that run: the dashboard's curves);
- ``quarantine(limit, offset)``: ``GET /v1/memories/quarantine`` -> ``{"memories": [...], "total": n}``
  (each with ``quarantined_at``, ``quarantine_reason``, ``original_memory_type``);
- ``restore(memory_id)``: ``POST /v1/memories/{id}/restore`` -> the memory, restored;
- ``patterns()``: ``GET /v1/sanitation/defense-patterns`` -> ``{"patterns": [...], "total": n}`` (with ``hits``);
- ``deactivate(pattern_id)``: ``DELETE /v1/sanitation/defense-patterns/{id}`` -> the pattern, inactive;
- ``run()``: ``POST /v1/sanitation/run`` -> the result record of a run now;
- ``immune()``: ``GET /api/v1/immune/status`` -> the defence's layers and pattern counts, the last red-team and
  sanitation results, quarantine counts, anomalies and restarts (:class:`assistant.extended.immune.ImmuneView`);
- ``red_team()``: ``GET /api/red-team/report`` -> the latest red-team report (``defense_score``, ``families``,
  ``bypasses``); 404 before the first run, 503 while ``red_team.enabled`` is false.

Failures raise a :class:`~dashboards.client.ClientError` with the message a user should read (the API's
error envelope, or the package's error as :class:`QualityClientError`: a purged memory's 404 says when
and why it was purged); :class:`~dashboards.client.ApiUnreachable` and :class:`~dashboards.client.KeyRefused`
say the server is not there or refused the key.

:class:`LocalQualityClient` wraps a :class:`~assistant.sanitation.service.SanitationService` and a user
id. :class:`HttpQualityClient` is a :class:`~dashboards.client.HttpApi` (httpx, ``Authorization: Bearer``).
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from assistant.errors import AssistantError
from assistant.memory.types import Memory
from assistant.sanitation.service import SanitationService
from dashboards.client import ClientError, HttpApi

RUN_TIMEOUT = 600.0  # seconds: a run over a large store answers when it is over
STATUS = {"NOT_FOUND": 404, "CONFLICT": 409, "VALIDATION_ERROR": 422, "BAD_REQUEST": 400,
          "SERVICE_UNAVAILABLE": 503}  # as the API maps them


class QualityClientError(ClientError):
    """What the package refused, in words for the user; ``status`` is the HTTP status the API would answer."""


class QualityClient(Protocol):
    def quality(self) -> dict[str, Any]: ...

    def history(self, limit: int = 100) -> dict[str, Any]: ...

    def quarantine(self, limit: int = 200, offset: int = 0) -> dict[str, Any]: ...

    def restore(self, memory_id: str) -> dict[str, Any]: ...

    def patterns(self) -> dict[str, Any]: ...

    def deactivate(self, pattern_id: str) -> dict[str, Any]: ...

    def run(self) -> dict[str, Any]: ...

    def immune(self) -> dict[str, Any]: ...

    def red_team(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


# --- in process ---------------------------------------------------------------------------------------


def memory_json(m: Memory) -> dict[str, Any]:
    """A quarantined memory as ``GET /v1/memories/quarantine`` lists it."""
    return {"id": m.id, "content": m.content, "summary": m.summary, "memory_type": m.memory_type.value,
            "importance": m.importance, "access_count": m.access_count, "tags": list(m.tags),
            "created_at": m.created_at, "updated_at": m.updated_at, "quarantined_at": m.quarantined_at,
            "quarantine_reason": m.quarantine_reason,
            "original_memory_type": m.original_memory_type.value if m.original_memory_type else None}


def result_json(result: Any) -> dict[str, Any]:
    body = result.as_dict()
    body.pop("user_id", None)  # the API does not repeat the caller
    return body


class LocalQualityClient:
    """The sanitation of ``user_id`` in ``sanitation`` (this process); ``immune`` and ``red_team`` are the
    services' :class:`~assistant.extended.immune.ImmuneView` and :class:`~assistant.extended.red_team.RedTeam`
    (None: off, answered as the API answers, 503)."""

    def __init__(self, sanitation: SanitationService, user_id: str, immune: Any = None, red_team: Any = None):
        self.sanitation = sanitation
        self.user = str(user_id)
        self.immune_view = immune
        self.team = red_team

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except AssistantError as exc:  # not found, conflict: the message the API would answer
            raise QualityClientError(str(exc), STATUS.get(exc.code)) from exc
        except NotImplementedError as exc:
            raise QualityClientError(f"not available in this build ({exc})", 503) from exc

    def quality(self) -> dict[str, Any]:
        return self._call(self.sanitation.quality, self.user).as_dict()

    def history(self, limit: int = 100) -> dict[str, Any]:
        found = self._call(self.sanitation.store.history, self.user, limit)
        return {"results": [result_json(r) for r in found], "total": len(found)}

    def quarantine(self, limit: int = 200, offset: int = 0) -> dict[str, Any]:
        found, total = self._call(self.sanitation.quarantined, self.user, limit, offset)
        return {"memories": [memory_json(m) for m in found], "total": total, "limit": limit, "offset": offset}

    def restore(self, memory_id: str) -> dict[str, Any]:
        return memory_json(self._call(self.sanitation.restore, self.user, memory_id))

    def patterns(self) -> dict[str, Any]:
        found = self._call(self.sanitation.patterns, self.user)
        return {"patterns": [p.as_dict() for p in found], "total": len(found)}

    def deactivate(self, pattern_id: str) -> dict[str, Any]:
        return self._call(self.sanitation.deactivate_pattern, self.user, pattern_id).as_dict()

    def run(self) -> dict[str, Any]:
        return result_json(self._call(self.sanitation.run, self.user))

    def immune(self) -> dict[str, Any]:
        if self.immune_view is None:
            raise QualityClientError("the immune status is off (sovereign_intelligence.enabled = false)", 503)
        return self._call(self.immune_view.status, self.user)

    def red_team(self) -> dict[str, Any]:
        if self.team is None:
            raise QualityClientError("the red team is disabled (red_team.enabled = false)", 503)
        report = self._call(self.team.latest, self.user)
        if report is None:
            raise QualityClientError("no red-team run has completed yet", 404)
        body = report.as_dict()
        body.pop("results", None)  # as the API answers without ?attacks=true
        return body

    def close(self) -> None:
        pass


# --- over HTTP ----------------------------------------------------------------------------------------


class HttpQualityClient(HttpApi):
    """The sanitation of the API key's user on the server at ``base_url``."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 60.0,
                 transport: httpx.BaseTransport | None = None):
        super().__init__(base_url, api_key, timeout=timeout, transport=transport)

    def quality(self) -> dict[str, Any]:
        return self.send("GET", "/v1/sanitation/quality")

    def history(self, limit: int = 100) -> dict[str, Any]:
        return self.send("GET", "/v1/sanitation/results", params={"limit": limit})

    def quarantine(self, limit: int = 200, offset: int = 0) -> dict[str, Any]:
        return self.send("GET", "/v1/memories/quarantine", params={"limit": limit, "offset": offset})

    def restore(self, memory_id: str) -> dict[str, Any]:
        return self.send("POST", f"/v1/memories/{memory_id}/restore", json={})

    def patterns(self) -> dict[str, Any]:
        return self.send("GET", "/v1/sanitation/defense-patterns")

    def deactivate(self, pattern_id: str) -> dict[str, Any]:
        return self.send("DELETE", f"/v1/sanitation/defense-patterns/{pattern_id}")

    def run(self) -> dict[str, Any]:
        return self.send("POST", "/v1/sanitation/run", json={}, timeout=RUN_TIMEOUT)

    def immune(self) -> dict[str, Any]:
        return self.send("GET", "/api/v1/immune/status")

    def red_team(self) -> dict[str, Any]:
        return self.send("GET", "/api/red-team/report")
