"""Tool capability sections: one each; a tool is registered only when its section is configured."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from assistant.config.base import Section


class WeatherSettings(Section):
    """get_weather. Off until enabled: it calls a public HTTP API (or a self-hosted Open-Meteo)."""

    enabled: bool = False
    backend: str = "open-meteo"
    base_url: str = "https://api.open-meteo.com"
    geocoding_url: str = "https://geocoding-api.open-meteo.com"
    temperature_unit: Literal["celsius", "fahrenheit"] = "celsius"
    timeout_secs: float = Field(10, gt=0, le=300)


class WebSearchSettings(Section):
    """search_web: a SearXNG instance's JSON API, DuckDuckGo's HTML page as the fallback."""

    enabled: bool = False
    backend: str = "searxng"
    base_url: str | None = None  # e.g. http://127.0.0.1:8888 (SearXNG with the json format enabled)
    fallback: str | None = "duckduckgo"  # None: no fallback
    duckduckgo_url: str = "https://html.duckduckgo.com/html/"
    max_results: int = Field(5, ge=1, le=50)
    timeout_secs: float = Field(10, gt=0, le=300)


class DavSettings(Section):
    url: str | None = None  # configured when set
    username: str | None = None
    password: str | None = None
    timeout_secs: float = Field(15, gt=0, le=300)


class CalendarSettings(DavSettings):
    """list_calendar_events, create_calendar_event over CalDAV."""

    backend: str = "caldav"
    calendar: str | None = None  # a calendar's display name; None = the principal's first calendar
    timezone: str = "UTC"  # how naive times given by the model are read


class TasksSettings(DavSettings):
    """list_tasks, create_task, complete_task over CalDAV VTODO."""

    backend: str = "caldav"
    task_list: str | None = None  # a calendar (with VTODO) by display name; None = the first that holds tasks


class ContactsSettings(DavSettings):
    """search_contacts, get_contact over CardDAV (``url`` is the address book collection)."""

    backend: str = "carddav"


class RemindersSettings(Section):
    """create_reminder, list_reminders: stored in SQLite, fired by the scheduler."""

    enabled: bool = True
    backend: str = "sqlite"
    check_interval_secs: float = Field(30, ge=1, le=3600)
    timezone: str = "UTC"  # how naive times given by the model are read


class TransitSettings(Section):
    """search_transit: a transport.rest / HAFAS-style journeys API."""

    enabled: bool = False
    backend: str = "transport-rest"
    base_url: str = "https://v6.db.transport.rest"
    max_results: int = Field(3, ge=1, le=20)
    timeout_secs: float = Field(15, gt=0, le=300)


class CodeExecutionSettings(Section):
    """execute_code: Python in a sandboxed process; not registered when no sandbox can be set up."""

    enabled: bool = True
    backend: str = "sandbox"
    cpu_time_secs: float = Field(5, gt=0, le=600)
    wall_time_secs: float = Field(10, gt=0, le=600)
    memory_mb: int = Field(256, ge=16, le=65_536)
    max_output_bytes: int = Field(65_536, ge=256, le=10_485_760)
    max_processes: int = Field(8, ge=1, le=1024)


class EmailSettings(Section):
    """search_emails (IMAP), draft_email (draft store), send_email (SMTP)."""

    backend: str = "imap-smtp"
    imap_host: str | None = None  # configured when imap_host and smtp_host are set
    imap_port: int = Field(993, ge=1, le=65535)
    imap_security: Literal["ssl", "starttls", "none"] = "ssl"
    smtp_host: str | None = None
    smtp_port: int = Field(587, ge=1, le=65535)
    smtp_security: Literal["ssl", "starttls", "none"] = "starttls"
    username: str | None = None
    password: str | None = None
    from_address: str | None = None
    mailbox: str = "INBOX"
    drafts_mailbox: str = "Drafts"  # the draft store: drafts are IMAP messages flagged \\Draft here
    timeout_secs: float = Field(15, gt=0, le=300)
