"""Swagger UI and ReDoc served with local assets: the docs render with no internet."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

# fastapi-offline ships swagger-ui-bundle.js, swagger-ui.css and redoc.standalone.js; only its
# static files are used, served from our own routes.
ASSETS = Path(fastapi_offline.__file__).parent / "static"
STATIC = "/api-docs/static"
OPENAPI_URL = "/api-docs/openapi.json"


def install(app: FastAPI) -> None:
    app.mount(STATIC, StaticFiles(directory=ASSETS), name="api-docs-static")
    router = APIRouter(include_in_schema=False)

    @router.get("/swagger-ui/")
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=OPENAPI_URL,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC}/favicon.png",
        )

    @router.get("/redoc/")
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=OPENAPI_URL,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{STATIC}/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC}/favicon.png",
            with_google_fonts=False,
        )

    app.include_router(router)
