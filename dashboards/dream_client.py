"""Where the dreams dashboard reads from and acts through: the package in this process, or the HTTP API.

:class:`DreamClient` is what :mod:`dashboards.dreams` needs; both implementations answer with the JSON
shapes of the ``/v1/dream`` routes (the ``to_json`` of :mod:`assistant.dream.types`):

- ``status()``: ``GET /v1/dream/status`` (``session``: the active or latest session, or None; the idle gate);
- ``sessions(limit, offset)``: ``GET /v1/dream/sessions`` -> ``{"sessions": [...], "total": n}``;
- ``session(id)``: ``GET /v1/dream/sessions/{id}``;
- ``journal(id, cycle=, phase=, operation=, limit=, offset=)``: ``GET /v1/dream/sessions/{id}/journal``
  -> ``{"entries": [...], "total": n}`` (each entry with its before/after snapshots);
- ``insights(insight_type=, status=, limit=, offset=)``: ``GET /v1/dream/insights`` -> ``{"insights": [...], "total": n}``;
- ``confirm(id)`` / ``dismiss(id)``: ``POST /v1/dream/insights/{id}/confirm|dismiss`` -> the insight;
- ``trigger()``: ``POST /v1/dream/trigger`` -> the session (running).

Failures raise a :class:`~dashboards.client.ClientError` with the message a user should read (the API's
error envelope, or the package's error, as :class:`DreamClientError`): a 409 names the state the session or
insight is in; :class:`~dashboards.client.ApiUnreachable` and :class:`~dashboards.client.KeyRefused` say
the server is not there or refused the key.

:class:`LocalDreamClient` wraps a :class:`~assistant.dream.service.DreamService` and a user id (a
triggered session runs in the service's worker thread). :class:`HttpDreamClient` is a
:class:`~dashboards.client.HttpApi` (httpx, the key as ``Authorization: Bearer``).
"""

from __future__ import annotations

from typing import Any, Protocol

from assistant.dream.service import DreamService
from assistant.dream.types import EntryStatus, InsightStatus, InsightType, Operation, Phase
from assistant.errors import AssistantError
from dashboards.client import ClientError, HttpApi

PREFIX = "/v1/dream"
STATUS = {"NOT_FOUND": 404, "CONFLICT": 409, "VALIDATION_ERROR": 422, "BAD_REQUEST": 400}  # as the API maps them


class DreamClientError(ClientError):
    """What the package refused, in words for the user; ``status`` is the HTTP status the API would answer."""


class DreamClient(Protocol):
    def status(self) -> dict[str, Any]: ...

    def sessions(self, limit: int = 20, offset: int = 0) -> dict[str, Any]: ...

    def session(self, session_id: str) -> dict[str, Any]: ...

    def journal(self, session_id: str, *, cycle: int | None = None, phase: str | None = None,
                operation: str | None = None, limit: int = 500, offset: int = 0) -> dict[str, Any]: ...

    def insights(self, *, insight_type: str | None = None, status: str | None = None, limit: int = 100,
                 offset: int = 0) -> dict[str, Any]: ...

    def confirm(self, insight_id: str) -> dict[str, Any]: ...

    def dismiss(self, insight_id: str) -> dict[str, Any]: ...

    def trigger(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


# --- in process ---------------------------------------------------------------------------------------


def _enum(kind: type, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return kind(value.lower() if kind in (Phase, InsightType, InsightStatus, EntryStatus) else value)
    except ValueError:
        raise DreamClientError(f"unknown {kind.__name__}: {value!r}", 422) from None


class LocalDreamClient:
    """The dreams of ``user_id`` in ``dream`` (this process)."""

    def __init__(self, dream: DreamService, user_id: str):
        self.dream = dream
        self.user = str(user_id)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AssistantError as exc:  # not found, conflict: the message the API would answer
            raise DreamClientError(str(exc), STATUS.get(exc.code)) from exc
        except NotImplementedError as exc:
            raise DreamClientError("not available in this version", 501) from exc

    def status(self) -> dict[str, Any]:
        return self._call(self.dream.status, self.user)

    def sessions(self, limit: int = 20, offset: int = 0) -> dict[str, Any]:
        found, total = self._call(self.dream.sessions, self.user, limit, offset)
        return {"sessions": [s.to_json() for s in found], "total": total, "limit": limit, "offset": offset}

    def session(self, session_id: str) -> dict[str, Any]:
        return self._call(self.dream.session, self.user, session_id).to_json()

    def journal(self, session_id: str, *, cycle: int | None = None, phase: str | None = None,
                operation: str | None = None, limit: int = 500, offset: int = 0) -> dict[str, Any]:
        entries, total = self._call(self.dream.journal, self.user, session_id, cycle=cycle,
                                    phase=_enum(Phase, phase), operation=_enum(Operation, operation),
                                    limit=limit, offset=offset)
        return {"entries": [e.to_json() for e in entries], "total": total, "limit": limit, "offset": offset}

    def insights(self, *, insight_type: str | None = None, status: str | None = None, limit: int = 100,
                 offset: int = 0) -> dict[str, Any]:
        found, total = self._call(self.dream.insights.list, self.user, insight_type=_enum(InsightType, insight_type),
                                  status=_enum(InsightStatus, status), limit=limit, offset=offset)
        return {"insights": [i.to_json() for i in found], "total": total}

    def confirm(self, insight_id: str) -> dict[str, Any]:
        return self._call(self.dream.insights.confirm, self.user, insight_id).to_json()

    def dismiss(self, insight_id: str) -> dict[str, Any]:
        return self._call(self.dream.insights.dismiss, self.user, insight_id).to_json()

    def trigger(self) -> dict[str, Any]:
        return self._call(self.dream.trigger, self.user).to_json()

    def close(self) -> None:
        pass


# --- over HTTP ----------------------------------------------------------------------------------------


def _page(body: Any, key: str) -> dict[str, Any]:
    """A page as ``{key: [...], "total": n}`` whatever the route wraps it in (a bare list, ``items``)."""
    if isinstance(body, list):
        return {key: body, "total": len(body)}
    items = body.get(key, body.get("items", []))
    return {**body, key: items, "total": body.get("total", len(items))}


class HttpDreamClient(HttpApi):
    """The dreams of the API key's user on the server at ``base_url``."""

    def _send(self, method: str, path: str, *, params: dict[str, Any] | None = None,
              json: dict[str, Any] | None = None) -> Any:
        return self.send(method, PREFIX + path, params=params, json=json)

    def status(self) -> dict[str, Any]:
        return self._send("GET", "/status")

    def sessions(self, limit: int = 20, offset: int = 0) -> dict[str, Any]:
        return _page(self._send("GET", "/sessions", params={"limit": limit, "offset": offset}), "sessions")

    def session(self, session_id: str) -> dict[str, Any]:
        return self._send("GET", f"/sessions/{session_id}")

    def journal(self, session_id: str, *, cycle: int | None = None, phase: str | None = None,
                operation: str | None = None, limit: int = 500, offset: int = 0) -> dict[str, Any]:
        params = {"cycle": cycle, "phase": phase, "operation": operation, "limit": limit, "offset": offset}
        return _page(self._send("GET", f"/sessions/{session_id}/journal", params=params), "entries")

    def insights(self, *, insight_type: str | None = None, status: str | None = None, limit: int = 100,
                 offset: int = 0) -> dict[str, Any]:
        params = {"type": insight_type, "status": status, "limit": limit, "offset": offset}
        return _page(self._send("GET", "/insights", params=params), "insights")

    def confirm(self, insight_id: str) -> dict[str, Any]:
        return self._send("POST", f"/insights/{insight_id}/confirm")

    def dismiss(self, insight_id: str) -> dict[str, Any]:
        return self._send("POST", f"/insights/{insight_id}/dismiss")

    def trigger(self) -> dict[str, Any]:
        return self._send("POST", "/trigger", json={})
