"""Dependencies: the Services, the authenticated caller (``CurrentPrincipal``) and an admin
caller (``AdminPrincipal``: any other role is 403 FORBIDDEN naming the role needed).

Keys are checked by the ``Authenticate`` middleware before the body is read (so an
unauthenticated request is 401 even when its body is malformed); the dependency reuses the
principal the middleware found, and authenticates by itself on routes outside its prefixes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPBearer

from assistant.errors import ForbiddenError, UnauthorizedError
from assistant.security import KeyStore, Principal
from assistant.services import Services

bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer <key>` (or `X-API-Key: <key>`).")


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]


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
        raise UnauthorizedError("missing API key: send 'Authorization: Bearer <API key>'")
    principal = keys.authenticate(key)
    if principal is None:
        raise UnauthorizedError("invalid API key")
    if not principal.may(method):
        raise ForbiddenError(f"this API key is read-only: {method} is not permitted")
    return principal


def current_principal(request: Request, services: ServicesDep, _: Annotated[object, Depends(bearer)]) -> Principal:
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
