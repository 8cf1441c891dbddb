"""How every served page starts, and what it shows when it cannot: a banner, never a blank page or a traceback.

:func:`serve_page` is the last lines of each page module (``if pn.state.served: serve_page(...)``): it
loads the page's Panel extensions, reads where the page reads from (:func:`dashboards.client.target`),
asks the API once whether it is there and takes the key (:func:`dashboards.client.check`), builds the
client (:func:`dashboards.client.connect`) and the view, and closes the client with the session. When
any of this fails the page is its title and a :class:`panel.pane.Alert` saying what is wrong and what to
do (:func:`describe`):

- :class:`~dashboards.client.ApiUnreachable`: nothing answers at the API's address: start the server;
- :class:`~dashboards.client.KeyRefused`: the key is missing, wrong or lacks the role: check the key;
- in process, the data directory cannot be opened (a locked or unreadable database, a disabled part):
  check ``--config``, or point the dashboards at the running server with ``--api``.

A view that loses the API later shows the same words (``describe``) in its own message line.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import panel as pn

from dashboards.client import ApiUnreachable, ClientError, KeyRefused, Target, check, connect, target


def describe(exc: BaseException, where: Target) -> tuple[str, str]:
    """(alert type, Markdown) for a failure to read the page's data: which failure, and what to do."""
    detail = html.escape(str(exc))
    if isinstance(exc, ApiUnreachable):
        return "danger", (f"**The assistant's API at `{where.api_url}` is unreachable.** Start the server "
                          f"(`assistant serve`) or point the dashboards at the right address (`--api URL`).\n\n"
                          f"<small>{detail}</small>")
    if isinstance(exc, KeyRefused):
        return "danger", (f"**The API at `{where.api_url}` refused the key.** Check the key given with `--key` "
                          f"(or `ASSISTANT_API_KEY`); `assistant keys create` makes one.\n\n<small>{detail}</small>")
    if isinstance(exc, ClientError):
        return "warning", f"**The API answered with an error:** {detail}"
    if where.remote:
        return "danger", f"**This page could not read the API at `{where.api_url}`:** {type(exc).__name__}: {detail}"
    config = f"`{where.config}`" if where.config else "the default configuration"
    return "danger", (f"**The data directory of {config} cannot be opened:** {type(exc).__name__}: {detail}\n\n"
                      "Check `--config`, or, while `assistant serve` holds that directory, point the dashboards "
                      "at the server: `assistant dashboards --api URL --key KEY`.")


def banner(exc: BaseException, where: Target) -> pn.pane.Alert:
    kind, text = describe(exc, where)
    return pn.pane.Alert(text, alert_type=kind, sizing_mode="stretch_width", css_classes=["dashboard-banner"])


def serve_page(title: str, extensions: tuple[str, ...], http: Callable[[str, str], Any],
               local: Callable[[str | None], Any], view: Callable[[Any], Any]) -> None:
    """Lay out the page ``title`` for this session (see the module docstring)."""
    pn.extension(*extensions)
    where = target()
    try:
        check(where)
        client = connect(http, local, where)
    except Exception as exc:  # noqa: BLE001 - every failure becomes the banner, not a traceback
        pn.Column(f"## {title}", banner(exc, where), sizing_mode="stretch_width").servable(title=title)
        return
    close = getattr(client, "close", None)
    if close is not None:
        pn.state.on_session_destroyed(lambda _ctx: close())
    try:
        shown = view(client)
    except Exception as exc:  # noqa: BLE001
        pn.Column(f"## {title}", banner(exc, where), sizing_mode="stretch_width").servable(title=title)
        return
    shown.servable(title=title)
