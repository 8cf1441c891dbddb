"""The shared DAV helpers: ISO 8601 parsing in a zone and server failures as ToolErrors."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest
from caldav.lib import error as dav_error

from assistant.tools.base import ToolError
from assistant.tools.dav import describe_failure, iso, parse_when, server_errors, shorten, start_of

BERLIN = ZoneInfo("Europe/Berlin")
URL = "http://dav.example/"


def test_parse_when_reads_naive_times_in_the_zone_and_converts_aware_ones() -> None:
    assert parse_when("2024-05-01", "start", BERLIN) == date(2024, 5, 1)
    assert parse_when(" 2024-05-01T14:30 ", "start", BERLIN) == datetime(2024, 5, 1, 14, 30, tzinfo=BERLIN)
    converted = parse_when("2024-12-01T12:00:00Z", "start", BERLIN)
    assert converted == datetime(2024, 12, 1, 13, 0, tzinfo=BERLIN) and converted.tzinfo == BERLIN
    assert parse_when("2024-05-01T14:30", "due", None) == datetime(2024, 5, 1, 14, 30)  # floating
    offset = parse_when("2024-05-01T14:30+05:30", "due", None)
    assert offset.utcoffset() == timedelta(hours=5, minutes=30)
    assert parse_when("NOW", "start", BERLIN).tzinfo == BERLIN
    assert parse_when("today", "start", BERLIN) == datetime.now(BERLIN).date()


def test_parse_when_names_the_field_and_the_value() -> None:
    with pytest.raises(ToolError, match=r"^due: 'soon' is not an ISO 8601 date or date-time \(e.g. 2024-05-01"):
        parse_when("soon", "due", None)


def test_start_of_and_iso() -> None:
    assert start_of(date(2024, 5, 1), BERLIN) == datetime(2024, 5, 1, tzinfo=BERLIN)
    assert start_of(datetime(2024, 5, 1, 8), BERLIN) == datetime(2024, 5, 1, 8, tzinfo=BERLIN)
    assert iso(datetime(2024, 5, 1, 6, tzinfo=UTC), BERLIN) == "2024-05-01T08:00:00+02:00"
    assert iso(date(2024, 5, 1), BERLIN) == "2024-05-01" and iso(None) is None
    assert shorten("  a\n b  ") == "a b" and shorten("") is None and shorten("abcdef", 4) == "abc…"


@pytest.mark.parametrize(("exc", "message"), [
    (ConnectionRefusedError(111, "Connection refused"), r"calendar server at http://dav.example/ unreachable"),
    (OSError("HTTPConnectionPool: Max retries (Caused by NewConnectionError('[Errno 111] Connection refused'))"),
     r"unreachable: \[Errno 111\] Connection refused$"),
    (httpx.ConnectTimeout("timed out"), "unreachable: timed out"),
    (dav_error.AuthorizationError(), "refused the credentials"),
    (dav_error.NotFoundError("gone"), "not found"),
    (dav_error.ReportError("bad report"), "failed: "),
    (ValueError("odd XML"), "sent something unexpected: odd XML"),
])
def test_failures_become_tool_errors_naming_the_server(exc: Exception, message: str) -> None:
    error = describe_failure(exc, "calendar", URL)
    assert isinstance(error, ToolError)
    assert error.args[0].startswith("calendar server at http://dav.example/")
    with pytest.raises(ToolError, match=message):
        raise error


@pytest.mark.parametrize(("status", "message"), [(401, r"refused the credentials \(HTTP 401\)"),
                                                 (404, "no collection at this URL"), (500, "answered HTTP 500")])
def test_http_statuses_become_tool_errors(status: int, message: str) -> None:
    request = httpx.Request("REPORT", URL)
    response = httpx.Response(status, request=request)
    with pytest.raises(ToolError, match=message), server_errors("contacts", URL):
        response.raise_for_status()


def test_tool_errors_pass_through_unchanged() -> None:
    with pytest.raises(ToolError, match="^no calendar named 'x'$"), server_errors("calendar", URL):
        raise ToolError("no calendar named 'x'")
