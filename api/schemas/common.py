from __future__ import annotations

from typing import Any

from pydantic import BaseModel

NOT_BLANK = r"\S"
"""A JSON Schema ``pattern`` (unanchored: matched anywhere) stating what a "must not be blank" validator checks."""
_CONTROL = "\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029"
ONE_LINE = f"^[^{_CONTROL}]*[^\\s{_CONTROL}][^{_CONTROL}]*$"
"""One line, not blank, without control characters (room names, snippet titles); ECMA-262 syntax."""


def one_of_ignoring_case(names: list[str] | set[str], padding: bool = False) -> str:
    """A JSON Schema ``pattern`` matching any of ``names`` in any case (an ``enum`` cannot ignore
    case, and ``(?i)`` is not ECMA-262, so each letter is a class); ``padding``: spaces around too."""
    options = "|".join("".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in name)
                       for name in sorted(names))
    space = "\\s*" if padding else ""
    return f"^{space}(?:{options}){space}$"


class FieldError(BaseModel):
    field: str
    error: str


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] | None = None
    request_id: str
    retry_after: int | None = None


class ErrorEnvelope(BaseModel):
    error: ErrorBody


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route may answer with."""
    text = {
        400: "Malformed JSON or a body that is not a JSON object (BAD_REQUEST)",
        401: "Missing or invalid API key (UNAUTHORIZED)",
        403: "The key is read-only and the method changes state (FORBIDDEN)",
        404: "Not found, or owned by another user (NOT_FOUND)",
        409: "Conflicts with what is stored, e.g. a title already taken (CONFLICT)",
        413: "Body larger than server.max_body_bytes (PAYLOAD_TOO_LARGE)",
        422: "Validation failed; details.fields lists {field, error} (VALIDATION_ERROR)",
        429: "Rate limited; Retry-After header and retry_after field (RATE_LIMITED)",
        502: "The inference engine answered with an error (UPSTREAM_ERROR)",
        503: "Model missing, engine unreachable, queue or generation timed out (SERVICE_UNAVAILABLE)",
    }
    return {s: {"model": ErrorEnvelope, "description": text.get(s, "Error")} for s in statuses}


AUTH_ERRORS = (401, 403, 429)

ADMIN_ONLY = {403: {"model": ErrorEnvelope, "description": (
    "The key's role is not admin (FORBIDDEN; details.required_role is `admin`, details.role the key's), "
    "or the key is read-only")}}
"""Merge after ``error_responses(...)`` on a route that needs an admin key."""
