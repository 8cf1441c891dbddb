"""A real Radicale CalDAV/CardDAV server on a free loopback port, for the calendar, tasks and
contacts tools.

Radicale runs as a subprocess (``sys.executable -m radicale``) with a throwaway configuration:
htpasswd authentication with a plain-text password file (so the username and password of the
settings really pass through the clients), owner-only rights and filesystem storage, all under a
temporary directory. Import the fixture explicitly:
``from tests.integration.tools.dav_server import dav_server_fixture  # noqa: F401`` (it is named
``dav_server``). It creates the collections the tests use and seeds a few contacts:

- ``events`` ("Personal", VEVENT) and ``work`` ("Work", VEVENT): calendars
- ``chores`` ("Chores", VTODO): the task list
- ``contacts`` ("Contacts"): an address book with three vCards
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.integration.support import free_port

USERNAME = "alice"
PASSWORD = "s3cret-pass"

_CALENDAR_BODY = """<?xml version="1.0" encoding="utf-8"?>
<D:mkcol xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">
  <D:set><D:prop>
    <D:resourcetype><D:collection/><C:calendar/></D:resourcetype>
    <D:displayname>{name}</D:displayname>
    <C:supported-calendar-component-set>{components}</C:supported-calendar-component-set>
  </D:prop></D:set>
</D:mkcol>"""

_ADDRESSBOOK_BODY = """<?xml version="1.0" encoding="utf-8"?>
<D:mkcol xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav">
  <D:set><D:prop>
    <D:resourcetype><D:collection/><CR:addressbook/></D:resourcetype>
    <D:displayname>{name}</D:displayname>
  </D:prop></D:set>
</D:mkcol>"""

CONTACTS = {
    "ada": """BEGIN:VCARD
VERSION:3.0
UID:ada-lovelace
FN:Ada Lovelace
N:Lovelace;Ada;;;
EMAIL;TYPE=HOME:ada@example.org
EMAIL;TYPE=WORK:countess@analytical.example
TEL;TYPE=CELL:+44 20 7946 0018
ADR;TYPE=HOME:;;12 St James's Square;London;;SW1Y 4JH;United Kingdom
ORG:Analytical Engines Ltd
BDAY:1815-12-10
NOTE:Wrote the first program.
END:VCARD
""",
    "grace": """BEGIN:VCARD
VERSION:3.0
UID:grace-hopper
FN:Grace Hopper
N:Hopper;Grace;;;
EMAIL:grace@navy.example
TEL;TYPE=WORK:(555) 010-1906
ORG:US Navy;Computing
END:VCARD
""",
    "alan": """BEGIN:VCARD
VERSION:4.0
UID:alan-turing
FN:Alan Turing
N:Turing;Alan;;;
EMAIL:alan@bletchley.example
END:VCARD
""",
}


@dataclass(frozen=True)
class DavServer:
    base_url: str  # the server root; the principal is base_url + "/alice/"
    username: str
    password: str
    calendar_url: str  # "Personal"
    work_calendar_url: str  # "Work"
    tasks_url: str  # "Chores"
    addressbook_url: str

    @property
    def auth(self) -> tuple[str, str]:
        return (self.username, self.password)


def _write_config(root: Path, port: int) -> Path:
    users = root / "users"
    users.write_text(f"{USERNAME}:{PASSWORD}\n")
    config = root / "config"
    config.write_text(f"""[server]
hosts = 127.0.0.1:{port}

[auth]
type = htpasswd
htpasswd_filename = {users}
htpasswd_encryption = plain
delay = 0

[rights]
type = owner_only

[storage]
filesystem_folder = {root / "collections"}

[web]
type = none

[logging]
level = warning
mask_passwords = True
""")
    return config


def _wait_until_up(process: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"radicale exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"radicale did not answer at {url}: {log.read_text()[-2000:]}")


def _mkcol(client: httpx.Client, url: str, body: str) -> None:
    response = client.request("MKCOL", url, content=body.encode(), headers={"Content-Type": "application/xml"})
    response.raise_for_status()


def _seed(client: httpx.Client, server: DavServer) -> None:
    client.request("PROPFIND", f"{server.base_url}/{USERNAME}/", headers={"Depth": "0"})  # creates the principal
    for url, name, components in ((server.calendar_url, "Personal", ["VEVENT"]),
                                  (server.work_calendar_url, "Work", ["VEVENT"]),
                                  (server.tasks_url, "Chores", ["VTODO"])):
        comps = "".join(f'<C:comp name="{c}"/>' for c in components)
        _mkcol(client, url, _CALENDAR_BODY.format(name=name, components=comps))
    _mkcol(client, server.addressbook_url, _ADDRESSBOOK_BODY.format(name="Contacts"))
    for name, card in CONTACTS.items():
        response = client.put(f"{server.addressbook_url}{name}.vcf", content=card.replace("\n", "\r\n").encode(),
                              headers={"Content-Type": "text/vcard; charset=utf-8"})
        response.raise_for_status()


@pytest.fixture(scope="module", name="dav_server")
def dav_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DavServer]:
    """Radicale on loopback with the collections above; stopped (by its PID) after the module."""
    root = tmp_path_factory.mktemp("radicale")
    port = free_port()
    config = _write_config(root, port)
    log = root / "radicale.log"
    base = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "radicale", "--config", str(config)],
                                   stdout=out, stderr=subprocess.STDOUT, cwd=root)
    try:
        _wait_until_up(process, base + "/", log)
        principal = f"{base}/{USERNAME}"
        server = DavServer(base, USERNAME, PASSWORD, f"{principal}/events/", f"{principal}/work/",
                           f"{principal}/chores/", f"{principal}/contacts/")
        with httpx.Client(auth=server.auth, timeout=30) as client:
            _seed(client, server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
