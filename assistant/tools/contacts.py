"""search_contacts and get_contact over CardDAV (capability ``contacts``).

``caldav`` speaks no CardDAV, so :class:`CardDAVContacts` sends one ``addressbook-query`` REPORT
with ``httpx`` to the address book collection (``[contacts] url``) and parses the vCards with
``vobject``. Matching happens here, not on the server: CardDAV text-match cannot compare phone
numbers by their digits, and a personal address book is small enough to read whole. A contact's id
is its vCard UID (the resource name when a card has none).
"""

from __future__ import annotations

import logging
import re
import threading
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Protocol
from urllib.parse import unquote

from pydantic import Field

from assistant.tools.base import Capability, CapabilityDeps, ToolContext, ToolError, pick_backend, tool
from assistant.tools.dav import server_errors

log = logging.getLogger("assistant.tools.contacts")


@dataclass(frozen=True)
class Contact:
    id: str
    name: str
    emails: tuple[str, ...] = ()
    phones: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()
    organisation: str | None = None
    birthday: str | None = None
    note: str | None = None


class ContactsProvider(Protocol):
    def contacts(self) -> list[Contact]:
        """Every contact of the address book."""
        ...


# --- matching and the tools ------------------------------------------------------------------------


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def matches(contact: Contact, query: str) -> bool:
    """Case-insensitive: the query is in the name (or all its words are), in an e-mail address, or
    its digits (three or more) are in a phone number's digits. Leading zeros of the query are
    dropped, so a national ``020 7946 0018`` or ``0044 20...`` finds ``+44 20 7946 0018``."""
    needle = query.strip().casefold()
    name = contact.name.casefold()
    if needle in name or all(word in name for word in needle.split()):
        return True
    if any(needle in email.casefold() for email in contact.emails):
        return True
    digits = _digits(needle).lstrip("0")
    return len(digits) >= 3 and any(digits in _digits(phone) for phone in contact.phones)


def _provider(ctx: ToolContext) -> ContactsProvider:
    return ctx.backend("contacts")


@tool("contacts", icon="👤", produces=("id",))
def search_contacts(
    ctx: ToolContext,
    query: Annotated[str, Field(min_length=1, max_length=200, description="Part of a name, e-mail or phone number.")],
    limit: Annotated[int, Field(ge=1, le=50, description="How many contacts at most.")] = 10,
) -> list[dict]:
    """Find people in the user's address book by name, e-mail address or phone number."""
    needle = query.strip().casefold()
    found = [c for c in _provider(ctx).contacts() if matches(c, query)]
    found.sort(key=lambda c: (not c.name.casefold().startswith(needle), c.name.casefold()))
    return [{"id": c.id, "name": c.name, "emails": list(c.emails), "phones": list(c.phones)} for c in found[:limit]]


@tool("contacts", icon="📇", requires=(("contact_id", "search_contacts"),))
def get_contact(
    ctx: ToolContext,
    contact_id: Annotated[str, Field(min_length=1, max_length=500, description="The id from search_contacts.")],
) -> dict:
    """Everything the address book holds about one contact."""
    wanted = contact_id.strip()
    for contact in _provider(ctx).contacts():
        if contact.id == wanted:
            return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(contact).items()}
    raise ToolError(f"no contact with id {contact_id!r} (search_contacts shows the ids)")


CONTACT_TOOLS = (search_contacts, get_contact)


# --- vCards ----------------------------------------------------------------------------------------


def _values(card: Any, key: str) -> list[Any]:
    return [line.value for line in card.contents.get(key, []) if line.value not in (None, "", [])]


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_text(v) for v in value if v)
    return " ".join(str(value).split())


def _address(adr: Any) -> str:
    parts = (getattr(adr, name, "") for name in ("box", "extended", "street", "city", "region", "code", "country"))
    return ", ".join(text for text in (_text(p) for p in parts) if text)


def _birthday(value: str) -> str:
    text = str(value).strip()
    compact = re.fullmatch(r"(\d{4})(\d{2})(\d{2})", text)  # vCard 3 allows 18151210
    return "-".join(compact.groups()) if compact else text


def _name(card: Any, emails: list[str]) -> str:
    for fn in _values(card, "fn"):
        if _text(fn):
            return _text(fn)
    for n in _values(card, "n"):
        text = " ".join(_text(getattr(n, p, "")) for p in ("prefix", "given", "additional", "family", "suffix"))
        if text.strip():
            return " ".join(text.split())
    return emails[0] if emails else "(no name)"


def parse_vcard(text: str, fallback_id: str) -> Contact:
    """A Contact from one vCard (3.0 or 4.0); raises ValueError when it cannot be read."""
    import vobject

    try:
        return _contact(vobject.readOne(text), fallback_id)
    except Exception as exc:  # noqa: BLE001 - vobject raises assorted errors; one bad card must not hide the rest
        raise ValueError(f"unreadable vCard: {exc or type(exc).__name__}") from None


def _contact(card: Any, fallback_id: str) -> Contact:
    emails = [_text(v) for v in _values(card, "email")]
    uid, orgs = _values(card, "uid"), [_text(v) for v in _values(card, "org")]
    birthday, note = _values(card, "bday"), _values(card, "note")
    return Contact(
        id=_text(uid[0]) if uid else fallback_id,
        name=_name(card, emails),
        emails=tuple(emails),
        phones=tuple(_text(v) for v in _values(card, "tel")),
        addresses=tuple(a for a in (_address(v) for v in _values(card, "adr")) if a),
        organisation="; ".join(orgs) or None,
        birthday=_birthday(birthday[0]) if birthday else None,
        note=str(note[0]).strip() if note else None,
    )


# --- the CardDAV backend ---------------------------------------------------------------------------

_NS = {"D": "DAV:", "CR": "urn:ietf:params:xml:ns:carddav"}
_QUERY = b"""<?xml version="1.0" encoding="utf-8"?>
<CR:addressbook-query xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav">
  <D:prop><D:getetag/><CR:address-data/></D:prop>
</CR:addressbook-query>"""


def parse_multistatus(body: bytes) -> list[Contact]:
    """The contacts of an addressbook-query answer; unreadable cards are logged and skipped."""
    found = []
    for response in ET.fromstring(body).findall("D:response", _NS):
        href = unquote(response.findtext("D:href", "", _NS))
        data = response.find("D:propstat/D:prop/CR:address-data", _NS)
        if data is None or not (data.text or "").strip():
            continue
        resource = href.rstrip("/").rsplit("/", 1)[-1].removesuffix(".vcf")
        try:
            found.append(parse_vcard(data.text, resource))
        except ValueError as exc:
            log.warning("skipping the contact at %s: %s", href, exc)
    return found


class CardDAVContacts:
    """The vCards of one CardDAV address book collection."""

    def __init__(self, section: Any):
        self.url: str = section.url if section.url.endswith("/") else section.url + "/"
        self._auth = (section.username, section.password or "") if section.username else None
        self._timeout = section.timeout_secs
        self._client: Any = None
        self._lock = threading.Lock()

    def contacts(self) -> list[Contact]:
        with self._lock, server_errors("contacts", self.url):
            if self._client is None:
                import httpx

                self._client = httpx.Client(auth=self._auth, timeout=self._timeout)
            response = self._client.request("REPORT", self.url, content=_QUERY, headers={
                "Depth": "1", "Content-Type": "application/xml; charset=utf-8"})
            response.raise_for_status()
            return parse_multistatus(response.content)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
            self._client = None


BACKENDS = {"carddav": CardDAVContacts}


def _create(deps: CapabilityDeps) -> ContactsProvider:
    section = deps.settings.contacts
    return pick_backend("contacts", BACKENDS, section.backend)(section)


CAPABILITY = Capability(
    "contacts", CONTACT_TOOLS, configured=lambda settings: bool(settings.contacts.url), create=_create,
    description="the user's address book (CardDAV)",
)
