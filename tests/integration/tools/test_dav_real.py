"""The calendar, tasks and contacts tools against a real Radicale server on loopback.

The toolbox is built the way the service builds it (``build_toolbox`` over the configured
sections) and the tools are called with the arguments a model would send. Each test works in its
own dates (2031 and later) so the module-scoped server can be shared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from assistant.config import Settings
from assistant.tools import calendar, contacts, tasks
from assistant.tools.base import CapabilityDeps, ToolError
from assistant.tools.catalog import Toolbox, build_toolbox
from tests.integration.support import free_port
from tests.integration.tools.dav_server import DavServer, dav_server_fixture  # noqa: F401

pytestmark = pytest.mark.integration

CAPABILITIES = [calendar.CAPABILITY, tasks.CAPABILITY, contacts.CAPABILITY]


def _section(server: DavServer, **extra: Any) -> dict[str, Any]:
    return {"url": server.base_url + "/", "username": server.username, "password": server.password, **extra}


@pytest.fixture
def toolbox_for(make_settings: Callable[..., Settings]) -> Callable[..., Toolbox]:
    built: list[Toolbox] = []

    def make(**sections: Any) -> Toolbox:
        toolbox = build_toolbox(CapabilityDeps(make_settings(**sections)), CAPABILITIES)
        built.append(toolbox)
        return toolbox

    yield make
    for toolbox in built:
        toolbox.close()


def call(toolbox: Toolbox, name: str, **arguments: Any) -> Any:
    tool = toolbox.registry.get(name)
    assert tool is not None, f"{name} is not registered"
    return tool(toolbox.context("u1"), arguments)


@pytest.fixture
def berlin(dav_server: DavServer, toolbox_for: Callable[..., Toolbox]) -> Toolbox:
    """The calendar "Personal" read in Europe/Berlin."""
    return toolbox_for(calendar=_section(dav_server, calendar="Personal", timezone="Europe/Berlin"))


# --- calendar --------------------------------------------------------------------------------------


def test_a_created_event_is_listed_with_its_details(berlin: Toolbox) -> None:
    created = call(berlin, "create_calendar_event", title="Dentist", start="2031-03-10T09:30",
                   duration_minutes=45, location="Main St 1", description="Bring the\n  insurance card")
    assert created["title"] == "Dentist"
    assert (created["start"], created["end"]) == ("2031-03-10T09:30:00+01:00", "2031-03-10T10:15:00+01:00")

    listed = call(berlin, "list_calendar_events", start="2031-03-10", days=1)
    assert listed == [{"uid": created["uid"], "title": "Dentist", "start": "2031-03-10T09:30:00+01:00",
                       "end": "2031-03-10T10:15:00+01:00", "location": "Main St 1",
                       "description": "Bring the insurance card"}]
    assert call(berlin, "list_calendar_events", start="2031-03-11", days=7) == []


def test_days_are_counted_in_the_configured_time_zone(berlin: Toolbox) -> None:
    late = call(berlin, "create_calendar_event", title="Night train", start="2031-04-01T23:30",
                end="2031-04-02T00:30")
    past_midnight = call(berlin, "create_calendar_event", title="Owl watch", start="2031-04-03T00:30:00+02:00")
    utc_given = call(berlin, "create_calendar_event", title="Call Tokyo", start="2031-04-02T07:00:00Z")
    assert utc_given["start"] == "2031-04-02T09:00:00+02:00"  # shown in Berlin time

    on_the_2nd = [e["title"] for e in call(berlin, "list_calendar_events", start="2031-04-02", days=1)]
    assert on_the_2nd == ["Night train", "Call Tokyo"]  # overlapping the day, sorted by start
    on_the_3rd = [e["uid"] for e in call(berlin, "list_calendar_events", start="2031-04-03", days=1)]
    assert on_the_3rd == [past_midnight["uid"]]  # 2031-04-02T22:30Z belongs to the 3rd in Berlin
    assert late["uid"] not in [e["uid"] for e in call(berlin, "list_calendar_events", start="2031-04-02T01:00")]


def test_all_day_events_use_dates_with_an_inclusive_end(berlin: Toolbox) -> None:
    created = call(berlin, "create_calendar_event", title="Holiday", start="2031-04-20", end="2031-04-22")
    assert created == {"uid": created["uid"], "title": "Holiday", "start": "2031-04-20", "end": "2031-04-22",
                       "all_day": True}
    listed = call(berlin, "list_calendar_events", start="2031-04-22", days=1)
    assert [(e["title"], e["start"], e["end"], e.get("all_day")) for e in listed] == [
        ("Holiday", "2031-04-20", "2031-04-22", True)]
    assert call(berlin, "list_calendar_events", start="2031-04-23", days=1) == []


def _put_recurring(server: DavServer) -> None:
    ics = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:standup-2031
DTSTAMP:20310101T000000Z
DTSTART:20310505T060000Z
DTEND:20310505T061500Z
RRULE:FREQ=DAILY;COUNT=5
SUMMARY:Stand-up
END:VEVENT
BEGIN:VEVENT
UID:standup-2031
DTSTAMP:20310101T000000Z
RECURRENCE-ID:20310506T060000Z
DTSTART:20310506T080000Z
DTEND:20310506T081500Z
SUMMARY:Stand-up (moved)
END:VEVENT
END:VCALENDAR
""".replace("\n", "\r\n")
    response = httpx.put(server.calendar_url + "standup-2031.ics", content=ics.encode(), auth=server.auth,
                         headers={"Content-Type": "text/calendar; charset=utf-8"})
    response.raise_for_status()


def test_recurring_events_are_expanded_in_the_range(dav_server: DavServer, berlin: Toolbox) -> None:
    _put_recurring(dav_server)
    listed = call(berlin, "list_calendar_events", start="2031-05-05", days=3)
    assert [(e["uid"], e["title"], e["start"]) for e in listed] == [
        ("standup-2031", "Stand-up", "2031-05-05T08:00:00+02:00"),
        ("standup-2031", "Stand-up (moved)", "2031-05-06T10:00:00+02:00"),
        ("standup-2031", "Stand-up", "2031-05-07T08:00:00+02:00"),
    ]
    later = call(berlin, "list_calendar_events", start="2031-05-09", days=30)
    assert [e["start"] for e in later] == ["2031-05-09T08:00:00+02:00"]  # COUNT=5 ends the series


def test_the_calendar_is_chosen_by_collection_url_or_display_name(
        dav_server: DavServer, toolbox_for: Callable[..., Toolbox]) -> None:
    direct = toolbox_for(calendar={**_section(dav_server), "url": dav_server.work_calendar_url})
    created = call(direct, "create_calendar_event", title="Board meeting", start="2031-06-02T10:00")

    by_name = toolbox_for(calendar=_section(dav_server, calendar="Work"))
    assert [e["uid"] for e in call(by_name, "list_calendar_events", start="2031-06-02", days=1)] == [created["uid"]]
    personal = toolbox_for(calendar=_section(dav_server, calendar="Personal"))
    assert call(personal, "list_calendar_events", start="2031-06-02", days=1) == []

    default = toolbox_for(calendar=_section(dav_server))  # the server root, no name: a calendar accepting VEVENT
    made = call(default, "create_calendar_event", title="Somewhere", start="2031-06-09T10:00")
    homes = [name for name in ("Personal", "Work") if made["uid"] in [
        e["uid"] for e in call(toolbox_for(calendar=_section(dav_server, calendar=name)), "list_calendar_events",
                               start="2031-06-09", days=1)]]
    assert len(homes) == 1  # Radicale lists collections in no fixed order; "Chores" (VTODO only) is never picked

    unknown = toolbox_for(calendar=_section(dav_server, calendar="Holidays"))
    with pytest.raises(ToolError, match=r"no calendar named 'Holidays'.*Personal, Work"):
        call(unknown, "list_calendar_events")


def test_bad_dates_are_reported_to_the_model(berlin: Toolbox) -> None:
    with pytest.raises(ToolError, match="'next friday' is not an ISO 8601"):
        call(berlin, "create_calendar_event", title="x", start="next friday")
    with pytest.raises(ToolError, match="not after start"):
        call(berlin, "create_calendar_event", title="x", start="2031-07-01T10:00", end="2031-07-01T09:00")
    assert call(berlin, "list_calendar_events", start="2031-07-01", days=1) == []


def test_the_credentials_of_the_section_reach_the_server(
        dav_server: DavServer, toolbox_for: Callable[..., Toolbox]) -> None:
    wrong = toolbox_for(calendar=_section(dav_server, password="wrong"), tasks=_section(dav_server, password="no"),
                        contacts={**_section(dav_server, password="wrong"), "url": dav_server.addressbook_url})
    with pytest.raises(ToolError, match="refused the credentials"):
        call(wrong, "list_calendar_events")
    with pytest.raises(ToolError, match="refused the credentials"):
        call(wrong, "list_tasks")
    with pytest.raises(ToolError, match=r"refused the credentials \(HTTP 401\)"):
        call(wrong, "search_contacts", query="ada")


# --- tasks -----------------------------------------------------------------------------------------


def test_tasks_are_created_listed_and_completed(dav_server: DavServer, toolbox_for: Callable[..., Toolbox]) -> None:
    box = toolbox_for(tasks=_section(dav_server))  # no task_list: the first calendar accepting VTODO
    taxes = call(box, "create_task", title="File taxes", due="2031-05-31", priority=1,
                 description="Receipts are in the blue folder")
    plants = call(box, "create_task", title="Water the plants", due="2031-05-02T18:00")
    someday = call(box, "create_task", title="Learn the cello")
    assert taxes == {"id": taxes["id"], "title": "File taxes", "due": "2031-05-31", "status": "needs-action",
                     "priority": 1}
    assert plants["due"] == "2031-05-02T18:00:00"  # floating: shown as written

    assert [t["title"] for t in call(box, "list_tasks")] == ["Water the plants", "File taxes", "Learn the cello"]
    assert call(box, "complete_task", task_id=plants["id"])["status"] == "completed"

    pending = call(box, "list_tasks")
    assert [t["id"] for t in pending] == [taxes["id"], someday["id"]]
    everything = {t["id"]: t["status"] for t in call(box, "list_tasks", include_completed=True)}
    assert everything == {taxes["id"]: "needs-action", someday["id"]: "needs-action", plants["id"]: "completed"}

    with pytest.raises(ToolError, match="no task with id 'no-such-task'"):
        call(box, "complete_task", task_id="no-such-task")
    stored = httpx.request("REPORT", dav_server.tasks_url, auth=dav_server.auth, headers={"Depth": "1"}, content=b"""
        <C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><C:calendar-data/></D:prop>
        <C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VTODO"/></C:comp-filter></C:filter>
        </C:calendar-query>""")
    assert "DESCRIPTION:Receipts are in the blue folder" in stored.text
    assert "PRIORITY:1" in stored.text


# --- contacts --------------------------------------------------------------------------------------


@pytest.fixture
def address_book(dav_server: DavServer, toolbox_for: Callable[..., Toolbox]) -> Toolbox:
    return toolbox_for(contacts={**_section(dav_server), "url": dav_server.addressbook_url})


def test_contacts_are_found_by_name_email_or_phone(address_book: Toolbox) -> None:
    def names(query: str, **extra: Any) -> list[str]:
        return [c["name"] for c in call(address_book, "search_contacts", query=query, **extra)]

    assert call(address_book, "search_contacts", query="ada") == [{
        "id": "ada-lovelace", "name": "Ada Lovelace", "emails": ["ada@example.org", "countess@analytical.example"],
        "phones": ["+44 20 7946 0018"]}]
    assert names("LOVELACE ada") == ["Ada Lovelace"]
    assert names("navy.example") == ["Grace Hopper"]
    assert names("010-1906") == ["Grace Hopper"]  # by digits, whatever the punctuation
    assert names("example") == ["Ada Lovelace", "Alan Turing", "Grace Hopper"]
    assert names("example", limit=1) == ["Ada Lovelace"]
    assert names("nobody") == []


def test_a_contact_is_read_whole(address_book: Toolbox) -> None:
    assert call(address_book, "get_contact", contact_id="ada-lovelace") == {
        "id": "ada-lovelace",
        "name": "Ada Lovelace",
        "emails": ["ada@example.org", "countess@analytical.example"],
        "phones": ["+44 20 7946 0018"],
        "addresses": ["12 St James's Square, London, SW1Y 4JH, United Kingdom"],
        "organisation": "Analytical Engines Ltd",
        "birthday": "1815-12-10",
        "note": "Wrote the first program.",
    }
    alan = call(address_book, "get_contact", contact_id="alan-turing")  # a vCard 4.0
    assert (alan["name"], alan["emails"], alan["organisation"]) == ("Alan Turing", ["alan@bletchley.example"], None)
    with pytest.raises(ToolError, match="no contact with id 'nobody'"):
        call(address_book, "get_contact", contact_id="nobody")


# --- failures and configuration -----------------------------------------------------------------------


def test_an_unreachable_server_is_a_tool_error_not_a_crash(toolbox_for: Callable[..., Toolbox]) -> None:
    down = f"http://127.0.0.1:{free_port()}/"
    section = {"url": down, "username": "alice", "password": "x", "timeout_secs": 5}
    box = toolbox_for(calendar=section, tasks=section, contacts=section)  # lazy: building does not connect
    assert {"list_calendar_events", "create_task", "search_contacts"} <= set(box.registry.names())
    with pytest.raises(ToolError, match=f"calendar server at {down} unreachable: .*refused"):
        call(box, "list_calendar_events")
    with pytest.raises(ToolError, match=f"tasks server at {down} unreachable"):
        call(box, "create_task", title="x")
    with pytest.raises(ToolError, match=f"contacts server at {down} unreachable"):
        call(box, "search_contacts", query="ada")


def test_sections_without_a_url_register_no_tools(toolbox_for: Callable[..., Toolbox]) -> None:
    box = toolbox_for()
    assert len(box.registry) == 0
    assert {(s.name, s.configured, s.reason) for s in box.status} == {
        ("calendar", False, "not configured"), ("tasks", False, "not configured"),
        ("contacts", False, "not configured")}
