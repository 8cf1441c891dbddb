"""Errors of the package. Codes are the spec's; the API maps each code to its HTTP status."""

from __future__ import annotations

from typing import Any


class AssistantError(Exception):
    """An error a caller can act on: a spec code, a precise message and optional details."""

    code = "INTERNAL_ERROR"

    def __init__(self, message: str, details: dict[str, Any] | None = None, *, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}
        if code is not None:
            self.code = code


class ConfigError(AssistantError):
    """The configuration is invalid; the server does not start."""

    code = "VALIDATION_ERROR"


class BadRequestError(AssistantError):
    code = "BAD_REQUEST"


class ValidationFailed(AssistantError):
    """Input failed validation; ``details['fields']`` lists ``{field, error}``."""

    code = "VALIDATION_ERROR"

    def __init__(self, message: str, fields: list[dict[str, str]] | None = None):
        super().__init__(message, {"fields": fields or []})


class UnauthorizedError(AssistantError):
    code = "UNAUTHORIZED"


class ForbiddenError(AssistantError):
    code = "FORBIDDEN"


class NotFoundError(AssistantError):
    code = "NOT_FOUND"


class ConflictError(AssistantError):
    """The request clashes with what is stored (a unique title already taken, a state that has
    moved on); 409 ``CONFLICT`` (a code the spec's table does not list: documented per route)."""

    code = "CONFLICT"


class RateLimitedError(AssistantError):
    code = "RATE_LIMITED"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class UpstreamError(AssistantError):
    """An external engine or service answered with an error."""

    code = "UPSTREAM_ERROR"


class ServiceUnavailableError(AssistantError):
    """A component is not ready (model missing, engine unreachable, queue timed out)."""

    code = "SERVICE_UNAVAILABLE"


class StorageError(AssistantError):
    code = "INTERNAL_ERROR"


class ModelInstallError(AssistantError):
    code = "INTERNAL_ERROR"
