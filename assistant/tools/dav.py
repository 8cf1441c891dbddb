"""What the calendar, tasks and contacts tools share: ISO 8601 parsing in a time zone, the
translation of server failures into :class:`ToolError`, and a lazily opened CalDAV collection.

Design choices:

- Connections are lazy. A capability's backend is built at start-up, but the server is first
  contacted by the first tool call, so a DAV server that is down never stops the service; the
  failure is reported to the model as ``"<service> server at <url> unreachable: ..."`` and the next
  call tries again. Only a successful lookup is cached.
- The ``url`` of a CalDAV section may be the server, the principal or a calendar collection: when no
  display name is configured and the URL itself is a calendar, that calendar is used; otherwise the
  principal's calendars are searched by display name, or for the first that accepts the component
  (VEVENT for events, VTODO for tasks).
- ``caldav``, ``icalendar`` and ``httpx`` are imported where they are used, so importing the tool
  modules (which the catalog does at start-up) stays cheap.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from assistant.errors import ConfigError
from assistant.tools.base import ToolError

_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")\]]+")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


# --- dates and times -------------------------------------------------------------------------------


def zone(section: str, name: str) -> ZoneInfo:
    """The configured time zone; an unknown name is a configuration error."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"{section}.timezone: unknown time zone {name!r} (use an IANA name such as "
                          f"'Europe/Berlin')") from None


def parse_when(value: str, what: str, tz: tzinfo | None) -> date | datetime:
    """An ISO 8601 date (``2024-05-01``) or date-time (``2024-05-01T14:30``, with or without an
    offset), or ``now``/``today``/``tomorrow``. Date-times come back in ``tz``: a naive time is read
    there, an aware one converted. With ``tz=None`` a naive time stays naive (floating)."""
    text = value.strip()
    keyword = text.lower()
    now = datetime.now(tz)
    if keyword == "now":
        return now
    if keyword in ("today", "tomorrow"):
        return now.date() + timedelta(days=1 if keyword == "tomorrow" else 0)
    try:
        if _DATE.match(text):
            return date.fromisoformat(text)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(f"{what}: {value!r} is not an ISO 8601 date or date-time "
                        f"(e.g. 2024-05-01 or 2024-05-01T14:30)") from None
    if tz is None:
        return moment
    return moment.replace(tzinfo=tz) if moment.tzinfo is None else moment.astimezone(tz)


def start_of(value: date | datetime, tz: tzinfo) -> datetime:
    """A date as its midnight in ``tz``; a date-time as it is (floating ones read in ``tz``)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=tz) if value.tzinfo is None else value.astimezone(tz)
    return datetime(value.year, value.month, value.day, tzinfo=tz)


def iso(value: date | datetime | None, tz: tzinfo | None = None) -> str | None:
    """ISO 8601 text; aware date-times shown in ``tz`` when given, dates as dates."""
    if value is None:
        return None
    if isinstance(value, datetime) and value.tzinfo is not None and tz is not None:
        value = value.astimezone(tz)
    return value.isoformat()


def shorten(text: str | None, limit: int = 200) -> str | None:
    """Whitespace collapsed and cut to ``limit`` characters (with an ellipsis)."""
    if not text:
        return None
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


# --- server failures -------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    found = _ERRNO.search(str(exc))
    if found:
        return found.group(0).strip()
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def describe_failure(exc: Exception, service: str, url: str) -> ToolError:
    """The ToolError telling the model what went wrong with the server (no stack trace)."""
    import httpx
    from caldav.lib import error as dav_error

    where = f"{service} server at {url}"
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, dav_error.AuthorizationError):
        return ToolError(f"{where} refused the credentials (check username and password)")
    if isinstance(exc, dav_error.NotFoundError):
        return ToolError(f"{where}: not found: {_reason(exc)}")
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        if status in (401, 403):
            return ToolError(f"{where} refused the credentials (HTTP {status})")
        if status == 404:
            return ToolError(f"{where}: no collection at this URL (HTTP 404)")
        return ToolError(f"{where} answered HTTP {status}")
    if isinstance(exc, (httpx.TransportError, OSError)):  # niquests' errors are OSErrors
        return ToolError(f"{where} unreachable: {_reason(exc)}")
    if isinstance(exc, dav_error.DAVError):
        return ToolError(f"{where} failed: {_reason(exc)}")
    return ToolError(f"{where} sent something unexpected: {_reason(exc)}")


@contextmanager
def server_errors(service: str, url: str) -> Iterator[None]:
    """Turn any failure of a server conversation into a ToolError naming the server."""
    try:
        yield
    except ToolError:
        raise
    except Exception as exc:  # everything a client library may raise goes back to the model
        raise describe_failure(exc, service, url) from exc


# --- a CalDAV collection, opened on first use ------------------------------------------------------


class CalDAVCollection:
    """The calendar collection of a section (``url``, ``username``, ``password``, ``timeout_secs``),
    found on first use by display ``name`` or as the first accepting ``component``."""

    def __init__(self, section: Any, *, service: str, name: str | None, component: str):
        self.url: str = section.url
        self.service = service
        self.name = name
        self.component = component
        self._username = section.username
        self._password = section.password
        self._timeout = section.timeout_secs
        self._client: Any = None
        self._calendar: Any = None
        self.lock = threading.RLock()  # one conversation at a time on the shared HTTP session

    @contextmanager
    def session(self) -> Iterator[Any]:
        """The caldav ``Calendar`` under the lock; server failures become ToolErrors."""
        with self.lock, server_errors(self.service, self.url):
            yield self._open()

    def _open(self) -> Any:
        if self._calendar is None:
            import caldav

            if self._client is None:
                self._client = caldav.DAVClient(url=self.url, username=self._username, password=self._password,
                                                timeout=self._timeout, enable_rfc6764=False)
            self._calendar = self._find(self._client)
        return self._calendar

    def _find(self, client: Any) -> Any:
        from caldav.elements import dav

        if self.name is None:
            here = client.calendar(url=self.url)
            kinds = here.get_properties([dav.ResourceType()]).get("{DAV:}resourcetype") or []
            if "{urn:ietf:params:xml:ns:caldav}calendar" in kinds:
                return here
        calendars = client.principal().calendars()
        if self.name is not None:
            named = {c.get_display_name(): c for c in calendars}
            if self.name in named:
                return named[self.name]
            known = ", ".join(sorted(str(n) for n in named)) or "none"
            raise ToolError(f"no calendar named {self.name!r} at {self.url}; calendars there: {known}")
        for calendar in calendars:
            if self.component in calendar.get_supported_components():
                return calendar
        raise ToolError(f"no calendar accepting {self.component} at {self.url}")

    def close(self) -> None:
        with self.lock:
            if self._client is not None:
                self._client.close()
            self._client = self._calendar = None
