"""The error envelope and the exception handlers that produce it for every failure."""

from __future__ import annotations

import logging
import sys
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from assistant.errors import AssistantError, RateLimitedError, UnauthorizedError

log = logging.getLogger("api")

STATUS_OF = {
    "BAD_REQUEST": 400,
    "UNAUTHORIZED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "CONFLICT": 409,
    "PAYLOAD_TOO_LARGE": 413,
    "VALIDATION_ERROR": 422,
    "RATE_LIMITED": 429,
    "INTERNAL_ERROR": 500,
    "UPSTREAM_ERROR": 502,
    "SERVICE_UNAVAILABLE": 503,
    "ENGINE_ERROR": 503,  # a voice engine failed or timed out (the companion services' interface)
}
CODE_OF_STATUS = {status: code for code, status in STATUS_OF.items()}


def envelope(code: str, message: str, request_id: str, details: dict[str, Any] | None = None,
             **extra: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    error["request_id"] = request_id
    error.update(extra)
    return {"error": error}


def request_id_of(request: Request) -> str:
    return getattr(request.state, "request_id", "")


def error_response(request: Request, code: str, message: str, details: dict[str, Any] | None = None,
                   headers: dict[str, str] | None = None, status: int | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse(
        envelope(code, message, request_id_of(request), details, **extra),
        status_code=status or STATUS_OF.get(code, 500),
        headers=headers,
    )


def _field_name(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts) or "body"


def _describe(err: dict[str, Any]) -> str:
    message = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    if err["type"] not in ("missing", "extra_forbidden") and isinstance(value, int | float | bool | str):
        shown = value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "..."
        message += f" (got {shown!r})"
    return message


def unreadable_body(cause: BaseException) -> str:
    """Why FastAPI could not read a JSON body, said precisely (it says only "error parsing the body")."""
    if isinstance(cause, UnicodeDecodeError):
        return f"the request body is not valid UTF-8 (byte {cause.start}); JSON text must be UTF-8"
    if isinstance(cause, RecursionError):
        return "the JSON body is nested too deeply"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return f"the JSON body holds an integer of more than {sys.get_int_max_str_digits():,} digits"
    return f"the request body cannot be read as JSON: {str(cause)[:200]}"


async def on_assistant_error(request: Request, exc: AssistantError) -> JSONResponse:
    headers: dict[str, str] = {}
    extra: dict[str, Any] = {}
    if isinstance(exc, UnauthorizedError):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, RateLimitedError):
        headers["Retry-After"] = str(exc.retry_after)
        extra["retry_after"] = exc.retry_after
    if STATUS_OF.get(exc.code, 500) >= 500:
        log.warning("%s: %s", exc.code, exc.message)
    return error_response(request, exc.code, exc.message, exc.details, headers or None, **extra)


async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    for err in errors:
        if err["type"] == "json_invalid":
            where = err.get("ctx", {}).get("error", "")
            position = err["loc"][-1] if len(err["loc"]) > 1 else "?"
            return error_response(
                request, "BAD_REQUEST", f"malformed JSON body: {where} at position {position}".strip()
            )
        if tuple(err["loc"]) == ("body",) and err["type"] in ("model_attributes_type", "dict_type", "missing"):
            media = request.headers.get("content-type", "").split(";")[0].strip()
            if media and media.lower() != "application/json" and not media.lower().endswith("+json"):
                return error_response(
                    request, "BAD_REQUEST", f"the request body must be JSON: Content-Type must be "
                                            f"application/json (got {media[:100]!r})")
            what = "is missing" if err["type"] == "missing" else "must be a JSON object"
            return error_response(
                request, "BAD_REQUEST", f"the request body {what} (Content-Type: application/json)"
            )
    fields = [{"field": _field_name(tuple(e["loc"])), "error": _describe(e)} for e in errors]
    summary = "; ".join(f"{f['field']}: {f['error']}" for f in fields[:3])
    return error_response(request, "VALIDATION_ERROR", f"request validation failed: {summary}", {"fields": fields})


async def on_http_exception(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = CODE_OF_STATUS.get(exc.status_code, "BAD_REQUEST" if exc.status_code < 500 else "INTERNAL_ERROR")
    if exc.status_code == 404 and exc.detail == "Not Found":
        message = f"no route {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    elif exc.status_code == 400 and exc.__cause__ is not None:
        message = unreadable_body(exc.__cause__)
    else:
        message = str(exc.detail)
    return error_response(request, code, message, headers=getattr(exc, "headers", None), status=exc.status_code)


def install(app: FastAPI) -> None:
    app.add_exception_handler(AssistantError, on_assistant_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_exception)
