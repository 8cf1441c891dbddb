"""Companion services: small HTTP servers that run one voice engine for many satellites or servers."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request, Response

from api import errors


def companion_app(title: str, description: str | None, **fastapi: Any) -> FastAPI:
    """A FastAPI app with the project's error envelope and an ``X-Request-Id`` on every response."""
    app = FastAPI(title=title, description=description, **fastapi)
    errors.install(app)

    @app.middleware("http")
    async def request_id(request: Request, call_next: Callable) -> Response:
        request.state.request_id = str(uuid.uuid4())
        response = await call_next(request)
        response.headers["X-Request-Id"] = request.state.request_id
        return response

    return app
