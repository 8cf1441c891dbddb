"""What every served dashboard shares: the API error envelope's message, and the services of a data
directory built once per process for the in-process clients."""

from __future__ import annotations

from typing import Any

import httpx


def api_message(response: httpx.Response) -> str:
    """The error envelope's message (``{"error": {"message": ...}}``), else the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(body, dict) and body.get("detail"):
        return str(body["detail"])
    return str(body)[:300]


def local_services(config: str | None, part: str, disabled: str) -> tuple[Any, str]:
    """(services, user) of the configured data directory, built once per process (``pn.state.cache``:
    every page served in process shares them);
    ``part`` is the Services attribute the dashboard needs (a ConfigError saying ``disabled`` when it
    is off); the user is ``ASSISTANT_DASHBOARD_USER`` or the key store's owner."""
    import panel as pn  # here: the clients import this module without needing a Panel server

    key = f"services:{config}"
    if key not in pn.state.cache:  # one Services per data directory and process, whichever page asks first
        import os

        from assistant.config import Settings
        from assistant.services import build_services

        services = build_services(Settings.load(config))
        user = os.environ.get("ASSISTANT_DASHBOARD_USER") or str(services.keys.owner_user_id())
        pn.state.cache[key] = (services, user)
    services, user = pn.state.cache[key]
    if getattr(services, part) is None:
        from assistant.errors import ConfigError

        raise ConfigError(disabled)
    return services, user
