"""What the sovereignty score is computed from: a :class:`Snapshot` of the running system, and how a
host is classified (by parsing it, never by DNS). :mod:`assistant.extended.sovereignty` holds the
rules; :mod:`assistant.extended.sovereignty_probe` takes the snapshot from the running service."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

LOCAL_SUFFIXES = (".local", ".lan", ".home", ".home.arpa", ".internal", ".localdomain", ".localhost")
WILDCARDS = ("0.0.0.0", "::", "", "*")


def classify_host(host: str) -> str:
    """``loopback``, ``lan`` or ``remote``, by parsing ``host`` (no DNS: see the module docstring)."""
    name = host.strip().strip("[]").lower().rstrip(".")
    if name in ("localhost", "") or name.endswith(".localhost"):
        return "loopback"
    try:
        address = ipaddress.ip_address(name.split("%")[0])
    except ValueError:
        if "." not in name or name.endswith(LOCAL_SUFFIXES):
            return "lan"
        return "remote"
    if address.is_loopback or address.is_unspecified:
        return "loopback"
    return "remote" if address.is_global else "lan"


@dataclass(frozen=True)
class Endpoint:
    setting: str  # the setting that names it, e.g. "weather.base_url"
    role: str  # what it is: "inference engine", "weather", ...
    host: str  # "" for an in-process engine
    scheme: str = ""  # "https", "imap", "mqtt", ... ("in-process" for an engine in this process)
    port: int | None = None
    tls: bool = False
    sensitivity: str = "high"  # what it receives: high (words, audio, mail), medium (queries), low (a place)

    @property
    def locality(self) -> str:
        return "local" if self.scheme == "in-process" else classify_host(self.host)

    @property
    def local(self) -> bool:
        return self.locality in ("local", "loopback", "lan")

    def shown(self) -> str:
        if self.scheme == "in-process":
            return "in-process"
        port = f":{self.port}" if self.port else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}{port}" if self.scheme else f"{host}{port}"


@dataclass(frozen=True)
class ColumnCoverage:
    table: str
    column: str
    values: int  # non-null values
    plaintext: int = 0  # stored as TEXT (before sealing existed)
    checked: int = 0  # sampled blobs tried with the key
    opened: int = 0  # of those, how many opened with the key and their associated data

    @property
    def sealed(self) -> float:
        """Estimated sealed values: the blobs, times the share of sampled blobs that opened."""
        blobs = self.values - self.plaintext
        return blobs * (self.opened / self.checked) if self.checked else 0.0


@dataclass(frozen=True)
class FileInfo:
    path: str
    exists: bool
    mode: int = 0  # permission bits
    uid: int = -1


@dataclass(frozen=True)
class SecretSetting:
    setting: str
    source: str  # "env" or "config"


@dataclass(frozen=True)
class ConfigFile:
    path: str
    mode: int
    secret_keys: tuple[str, ...] = ()  # key paths holding secrets (names only)


@dataclass(frozen=True)
class ApiKeyCounts:
    config_hashed: int = 0
    config_plain_file: int = 0  # plain keys in the config file
    config_plain_env: int = 0  # plain keys from an environment variable
    stored: int = 0
    stored_hashed: int = 0


@dataclass(frozen=True)
class Listener:
    address: str
    port: int
    own: bool = False  # this process listens there


@dataclass(frozen=True)
class Companion:
    name: str  # "wake word service", "speaker service", "voice bus (MQTT)"
    host: str
    port: int | None
    authenticated: bool  # a token (a broker: TLS and a password)
    setting: str | None = None  # the setting naming it, or None for a socket found listening


@dataclass(frozen=True)
class Snapshot:
    endpoints: tuple[Endpoint, ...] = ()
    encryption_enabled: bool = True
    columns: tuple[ColumnCoverage, ...] = ()
    key_file: FileInfo | None = None
    data_dir: FileInfo | None = None
    process_uid: int = 0
    secrets: tuple[SecretSetting, ...] = ()
    config_files: tuple[ConfigFile, ...] = ()
    api_keys: ApiKeyCounts = field(default_factory=ApiKeyCounts)
    server_host: str = "127.0.0.1"
    listeners: tuple[Listener, ...] = ()
    companions: tuple[Companion, ...] = ()
    sandboxed: bool = True
    catalog_entries: int = 0
    network_entries: tuple[str, ...] = ()
