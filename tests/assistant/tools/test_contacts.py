"""The contact tools over a fake ContactsProvider: matching by name, e-mail and phone digits; the
vCard and multistatus parsing of the CardDAV backend."""

from __future__ import annotations

import pytest

from assistant.tools import contacts
from assistant.tools.base import CapabilityDeps, ToolContext, ToolError
from assistant.tools.contacts import (
    CardDAVContacts,
    Contact,
    get_contact,
    matches,
    parse_multistatus,
    parse_vcard,
    search_contacts,
)

ADA = Contact("ada", "Ada Lovelace", ("ada@example.org",), ("+44 20 7946 0018",), ("London, United Kingdom",),
              "Analytical Engines", "1815-12-10", "First program")
GRACE = Contact("grace", "Grace Hopper", ("grace@navy.example",), ("(555) 010-1906",))
ADAM = Contact("adam", "Adam Smith", ("adam@economics.example",))


class FakeContacts:
    def __init__(self, *items: Contact):
        self.items = list(items)

    def contacts(self) -> list[Contact]:
        return list(self.items)


@pytest.fixture
def ctx() -> ToolContext:
    return ToolContext("u1", {"contacts": FakeContacts(GRACE, ADAM, ADA)})


@pytest.mark.parametrize(("query", "found"), [
    ("ada", True), ("LOVELACE", True), ("lovelace ada", True), ("Ada Byron", False),
    ("EXAMPLE.ORG", True), ("7946 0018", True), ("+442079460018", True), ("020 7946 0018", True), ("0044 20 7946", True),
    ("44", False), ("0009", False),
])
def test_matching_by_name_email_and_phone_digits(query: str, found: bool) -> None:
    assert matches(ADA, query) is found


def test_search_puts_name_prefixes_first_and_respects_the_limit(ctx: ToolContext) -> None:
    assert [c["id"] for c in search_contacts(ctx, {"query": "ada"})] == ["ada", "adam"]
    assert [c["id"] for c in search_contacts(ctx, {"query": "example"})] == ["ada", "adam", "grace"]
    assert [c["id"] for c in search_contacts(ctx, {"query": "example", "limit": 2})] == ["ada", "adam"]
    assert search_contacts(ctx, {"query": "0101906"}) == [
        {"id": "grace", "name": "Grace Hopper", "emails": ["grace@navy.example"], "phones": ["(555) 010-1906"]}]
    assert search_contacts(ctx, {"query": "zebra"}) == []


@pytest.mark.parametrize("arguments", [{"query": ""}, {"query": "a", "limit": 0}, {"query": "a", "limit": 51}])
def test_bad_search_arguments_are_refused(ctx: ToolContext, arguments: dict) -> None:
    with pytest.raises(ToolError, match="invalid arguments for search_contacts"):
        search_contacts(ctx, arguments)


def test_get_contact_returns_every_field_and_refuses_unknown_ids(ctx: ToolContext) -> None:
    assert get_contact(ctx, {"contact_id": "ada"}) == {
        "id": "ada", "name": "Ada Lovelace", "emails": ["ada@example.org"], "phones": ["+44 20 7946 0018"],
        "addresses": ["London, United Kingdom"], "organisation": "Analytical Engines", "birthday": "1815-12-10",
        "note": "First program"}
    with pytest.raises(ToolError, match="no contact with id 'Ada Lovelace'"):
        get_contact(ctx, {"contact_id": "Ada Lovelace"})


# --- vCards and the CardDAV answer -----------------------------------------------------------------


def test_a_vcard_3_is_parsed() -> None:
    card = ("BEGIN:VCARD\r\nVERSION:3.0\r\nUID:u-1\r\nFN:Ada  Lovelace\r\nEMAIL;TYPE=HOME:ada@example.org\r\n"
            "TEL:+44 20\r\nTEL:555\r\nADR;TYPE=HOME:;;12 Square;London;;SW1Y;UK\r\nORG:Engines;Research\r\n"
            "BDAY:18151210\r\nNOTE:Line one\\nline two\r\nEND:VCARD\r\n")
    assert parse_vcard(card, "fallback") == Contact(
        "u-1", "Ada Lovelace", ("ada@example.org",), ("+44 20", "555"), ("12 Square, London, SW1Y, UK",),
        "Engines, Research", "1815-12-10", "Line one\nline two")


def test_a_vcard_without_uid_or_fn_uses_the_resource_name_and_n() -> None:
    card = "BEGIN:VCARD\r\nVERSION:3.0\r\nN:Hopper;Grace;;Rear Admiral;\r\nEND:VCARD\r\n"
    assert parse_vcard(card, "grace") == Contact("grace", "Rear Admiral Grace Hopper")
    nameless = "BEGIN:VCARD\r\nVERSION:3.0\r\nEMAIL:x@example.org\r\nEND:VCARD\r\n"
    assert parse_vcard(nameless, "x").name == "x@example.org"


def test_an_unreadable_vcard_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unreadable vCard"):
        parse_vcard("this is not a vCard", "x")


def test_a_multistatus_answer_yields_the_readable_cards() -> None:
    body = b"""<?xml version="1.0"?>
<multistatus xmlns="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav">
  <response><href>/alice/contacts/ada%20l.vcf</href><propstat><prop>
    <getetag>"1"</getetag><CR:address-data>BEGIN:VCARD
VERSION:3.0
FN:Ada Lovelace
END:VCARD
</CR:address-data></prop><status>HTTP/1.1 200 OK</status></propstat></response>
  <response><href>/alice/contacts/broken.vcf</href><propstat><prop>
    <CR:address-data>BEGIN:VCARD
garbage</CR:address-data></prop></propstat></response>
  <response><href>/alice/contacts/</href><propstat><prop><getetag>"x"</getetag></prop></propstat></response>
</multistatus>"""
    assert parse_multistatus(body) == [Contact("ada l", "Ada Lovelace")]


def test_the_capability_is_configured_by_url_and_lazy(make_settings) -> None:
    assert not contacts.CAPABILITY.configured(make_settings())
    settings = make_settings(contacts={"url": "http://127.0.0.1:9/alice/contacts", "username": "alice"})
    backend = contacts.CAPABILITY.create(CapabilityDeps(settings))
    assert isinstance(backend, CardDAVContacts) and backend.url == "http://127.0.0.1:9/alice/contacts/"
    backend.close()


def test_get_contact_needs_an_id_a_search_returned(ctx: ToolContext) -> None:
    import json

    from assistant.chat.prerequisites import Dependency, annotate, dependencies, missing
    from assistant.llm.base import ChatMessage, ToolCall

    deps = dependencies([search_contacts.spec, get_contact.spec])
    assert deps == [Dependency("get_contact", "contact_id", "search_contacts", field="id")]
    described = annotate([search_contacts.spec, get_contact.spec], deps)[1]
    assert described.parameters["properties"]["contact_id"]["description"].endswith(
        "Get it from search_contacts first (the id in its result).")
    found = ChatMessage("tool", json.dumps(search_contacts(ctx, {"query": "ada"})), name="search_contacts")
    assert missing(ToolCall("c", "get_contact", {"contact_id": "grace"}), deps, [found]) == deps[0]
    assert missing(ToolCall("c", "get_contact", {"contact_id": "ada"}), deps, [found]) is None
