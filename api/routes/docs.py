"""Swagger UI and ReDoc served with local assets: the docs render with no internet."""

from __future__ import annotations

import functools
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

# fastapi-offline ships swagger-ui-bundle.js, swagger-ui.css and redoc.standalone.js; only its
# static files are used, served from our own routes.
ASSETS = Path(fastapi_offline.__file__).parent / "static"
STATIC = "/api-docs/static"
OPENAPI_URL = "/api-docs/openapi.json"


REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@functools.cache
def _redoc_bundle() -> bytes:
    """ReDoc's bundle with its one hard-coded CDN image (the sidebar logo) pointed at a local file."""
    return (ASSETS / "redoc.standalone.js").read_bytes().replace(
        REDOC_CDN_LOGO.encode(), f"{STATIC}/favicon.png".encode()
    )


def install(app: FastAPI) -> None:
    # The endpoints read the app from the request, never from a closure: FastAPI keeps every endpoint
    # in a module-level cache (4,096 entries), and a closure over the app would keep the app, and
    # every service it holds, alive for the process's life.
    router = APIRouter(include_in_schema=False)

    @router.get(f"{STATIC}/redoc.standalone.js")
    async def redoc_bundle() -> Response:
        return Response(_redoc_bundle(), media_type="text/javascript")

    @router.get("/swagger-ui/")
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=OPENAPI_URL,
            title=f"{request.app.title} - Swagger UI",
            swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC}/favicon.png",
        )

    @router.get("/redoc/")
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=OPENAPI_URL,
            title=f"{request.app.title} - ReDoc",
            redoc_js_url=f"{STATIC}/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC}/favicon.png",
            with_google_fonts=False,
        )

    app.include_router(router)
    app.mount(STATIC, StaticFiles(directory=ASSETS), name="api-docs-static")
