"""The error envelope and the exception handlers that produce it for every failure."""

from __future__ import annotations

import logging
import re
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
    "GATEWAY_TIMEOUT": 504,  # a mesh peer did not answer in time (mesh inference without fallback)
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


# The OpenAI-compatible routes answer errors in OpenAI's shape (clients such as the openai SDK read
# it): {"error": {"message", "type", "param", "code"}}, and 400 where the others say 422.
OPENAI_PATHS = ("/v1/chat/completions", "/v1/models")
_OPENAI_TYPE = {401: "invalid_request_error", 403: "permission_error", 429: "rate_limit_error"}
_OPENAI_CODE = {"UNAUTHORIZED": "invalid_api_key", "FORBIDDEN": "insufficient_permissions",
                "PAYLOAD_TOO_LARGE": "request_too_large", "RATE_LIMITED": "rate_limit_exceeded",
                "METHOD_NOT_ALLOWED": "method_not_allowed", "NOT_FOUND": "not_found",
                "SERVICE_UNAVAILABLE": "service_unavailable", "UPSTREAM_ERROR": "upstream_error",
                "INTERNAL_ERROR": "internal_error", "ENGINE_ERROR": "service_unavailable"}


def is_openai_path(path: str) -> bool:
    """``/v1/chat/completions``, ``/v1/models`` and ``/v1/models/...``."""
    return any(path == p or path.startswith(p + "/") for p in OPENAI_PATHS)


def openai_param(field: str) -> str:
    """A field path as OpenAI names parameters: ``tools.0.function.name`` -> ``tools[0].function.name``."""
    return re.sub(r"\.(\d+)(?=\.|\[|$)", r"[\1]", field)


def openai_error(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> tuple[int, dict]:
    """The status and body of an error in OpenAI's shape. ``details`` may name ``param`` and ``code``
    (``model_not_found``); otherwise the param is the first invalid field, the code follows ours."""
    details = details or {}
    status = 400 if status == 422 else status
    fields = details.get("fields") or []
    param = details.get("param") or (openai_param(fields[0]["field"]) if fields else None)
    error_type = "server_error" if status >= 500 else _OPENAI_TYPE.get(status, "invalid_request_error")
    return status, {"error": {"message": message, "type": error_type, "param": param,
                              "code": details.get("code") or _OPENAI_CODE.get(code)}}


def error_body(path: str, status: int, code: str, message: str, request_id: str,
               details: dict[str, Any] | None = None, **extra: Any) -> tuple[int, dict[str, Any]]:
    """The status and body of an error on ``path``: OpenAI's shape on the OpenAI-compatible routes,
    the envelope everywhere else (what every error producer, handlers and middlewares, calls)."""
    if is_openai_path(path):
        return openai_error(status, code, message, details)
    return status, envelope(code, message, request_id, details, **extra)


def request_id_of(request: Request) -> str:
    return getattr(request.state, "request_id", "")


def error_response(request: Request, code: str, message: str, details: dict[str, Any] | None = None,
                   headers: dict[str, str] | None = None, status: int | None = None, **extra: Any) -> JSONResponse:
    status, body = error_body(request.url.path, status or STATUS_OF.get(code, 500), code, message,
                              request_id_of(request), details, **extra)
    return JSONResponse(body, status_code=status, headers=headers)


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
