"""Companion services: small HTTP servers that run one voice engine for many satellites or servers.

They bind to 127.0.0.1 by default. With a shared token (``--token``, the environment variable
``ASSISTANT_COMPANION_TOKEN``, or ``token`` in the engine's config section) every request must
carry ``Authorization: Bearer <token>`` (401 with the error envelope otherwise, compared in
constant time); bound to any address other than loopback, a service refuses to start without one
(:func:`check_binding`). The server's ``remote`` engines send the section's ``token``.
"""

from __future__ import annotations

import hmac
import ipaddress
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request, Response

from api import errors
from assistant.errors import ConfigError

TOKEN_ENV = "ASSISTANT_COMPANION_TOKEN"
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and ``localhost``; any other name or address (0.0.0.0 included) is not."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """ConfigError when the service would listen beyond loopback without a token, or the token is short."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"the companion token must be at least {MIN_TOKEN_CHARS} characters "
                          f"(got {len(token)}); generate one with: python -c 'import secrets; "
                          "print(secrets.token_urlsafe(32))'")
    if token is None and not is_loopback(host):
        raise ConfigError(f"refusing to serve on {host} without a token: anyone who can reach it could use the "
                          f"engine. Set --token, {TOKEN_ENV} or the section's token (and the same token on the "
                          "server's [voice] side), or bind to 127.0.0.1")


def companion_app(title: str, description: str | None, token: str | None = None, **fastapi: Any) -> FastAPI:
    """A FastAPI app with the project's error envelope and an ``X-Request-Id`` on every response;
    with ``token``, every request needs ``Authorization: Bearer <token>``."""
    app = FastAPI(title=title, description=description, **fastapi)
    errors.install(app)
    expected = f"Bearer {token}".encode() if token else None

    @app.middleware("http")
    async def request_id(request: Request, call_next: Callable) -> Response:
        request.state.request_id = str(uuid.uuid4())
        if expected is not None and not hmac.compare_digest(
                request.headers.get("authorization", "").encode(), expected):
            response: Response = errors.error_response(
                request, "UNAUTHORIZED", "this companion service needs Authorization: Bearer <its token>",
                headers={"WWW-Authenticate": "Bearer"}, status=401)
        else:
            response = await call_next(request)
        response.headers["X-Request-Id"] = request.state.request_id
        return response

    return app
