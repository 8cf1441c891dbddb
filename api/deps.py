"""Dependencies: the Services, and the authenticated caller (``CurrentUser``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from assistant.errors import ForbiddenError, UnauthorizedError
from assistant.security import Principal
from assistant.services import Services

bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer <key>`.")


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]


def current_principal(
    request: Request,
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    if credentials is None:
        if request.headers.get("authorization"):
            raise UnauthorizedError("the Authorization header must be 'Bearer <API key>'")
        raise UnauthorizedError("missing API key: send 'Authorization: Bearer <API key>'")
    principal = services.keys.authenticate(credentials.credentials.strip())
    if principal is None:
        raise UnauthorizedError("invalid API key")
    if not principal.may(request.method):
        raise ForbiddenError(f"this API key is read-only: {request.method} is not permitted")
    return principal


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]
