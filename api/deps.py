"""Dependencies: the Services, one optional service or 503 (``service``), the paging parameters
(``Limit``/``Offset``), the authenticated caller (``CurrentPrincipal``) and an admin caller
(``AdminPrincipal``: any other role is 403 FORBIDDEN naming the role needed).

Keys are checked by the ``Authenticate`` middleware before the body is read (so an
unauthenticated request is 401 even when its body is malformed); the dependency reuses the
principal the middleware found, and authenticates by itself on routes outside its prefixes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import APIKeyHeader, HTTPBearer

from assistant.errors import ForbiddenError, ServiceUnavailableError, UnauthorizedError
from assistant.security import KeyStore, Principal
from assistant.services import Services

# Both schemes are accepted on every protected route (the Authenticate middleware reads both headers;
# Authorization wins when both are sent); declared here so the OpenAPI document lists them as alternatives.
bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer <key>`.")
api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description=(
    "The same API key in an `X-API-Key: <key>` header (as the spec's dream-mode examples send it)."))


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]


def service(name: str, unavailable: str, check: Callable[[Any], Any] | None = None) -> Any:
    """A dependency giving ``services.<name>``, or 503 ``SERVICE_UNAVAILABLE`` with ``unavailable``
    when it is not set up; ``check(found)`` may refuse it too (by raising). Resolved before the body
    is validated, so a disabled service is 503 whatever the body. Use it as
    ``Catalog = Annotated[CommandCatalog, service("catalog", "...")]``."""

    def dependency(services: ServicesDep) -> Any:
        found = getattr(services, name, None)
        if found is None:
            raise ServiceUnavailableError(unavailable)
        if check is not None:
            check(found)
        return found

    dependency.__name__ = f"{name}_service"
    return Depends(dependency)


# Paging: every integer of the API has an upper bound in the schema itself (SQLite integers are 64-bit;
# an unbounded offset of 2**63 once crashed the lists). MAX_OFFSET is far beyond any real table.
MAX_OFFSET = 1_000_000_000
MAX_LIMIT = 1000
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Page size, 1 to {MAX_LIMIT:,}.")]
"""``limit: Limit = 100``. A list with a smaller page bounds it itself (``Query(ge=1, le=200)``)."""
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description=f"Items to skip, 0 to {MAX_OFFSET:,}.")]


def principal_from_headers(keys: KeyStore, method: str, authorization: str | None, api_key: str | None) -> Principal:
    """The caller named by ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``; 401/403 otherwise."""
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UnauthorizedError("the Authorization header must be 'Bearer <API key>'")
        key = token.strip()
    elif api_key:
        key = api_key.strip()
    else:
        raise UnauthorizedError("missing API key: send 'Authorization: Bearer <API key>' or 'X-API-Key: <API key>'")
    principal = keys.authenticate(key)
    if principal is None:
        raise UnauthorizedError("invalid API key")
    if not principal.may(method):
        raise ForbiddenError(f"this API key is read-only: {method} is not permitted")
    return principal


def current_principal(request: Request, services: ServicesDep, _: Annotated[object, Depends(bearer)],
                      __: Annotated[object, Depends(api_key_header)]) -> Principal:
    found = getattr(request.state, "principal", None)
    if found is not None:
        return found
    return principal_from_headers(
        services.keys, request.method, request.headers.get("authorization"), request.headers.get("x-api-key")
    )


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


def require_admin(principal: CurrentPrincipal) -> Principal:
    """The caller, when their key's role is ``admin``; 403 FORBIDDEN otherwise."""
    if not principal.is_admin:
        raise ForbiddenError(
            f"this operation needs an API key with the admin role; this key's role is {principal.role}",
            {"required_role": "admin", "role": principal.role},
        )
    return principal


AdminPrincipal = Annotated[Principal, Depends(require_admin)]


# What a route's description says of the role it needs (dream and sanitation routes).
ROLE_READ = "\n\nRole: any key (`read-only` included). "
ROLE_CHANGE = "\n\nRole: a `user` key (a `read-only` key is 403). "
