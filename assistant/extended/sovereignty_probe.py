"""The sovereignty snapshot, taken from the running service: its settings, the real database, the file
system (key file, data directory and config files: their modes and owners), the environment (which
secrets come from ``ASSISTANT_*`` variables) and the sockets listening on this machine (psutil).
:class:`SovereigntyMonitor` scores it (:func:`assistant.extended.sovereignty.score`) and publishes a
``SovereigntyScore`` signal per report.

Nothing here resolves a host name or opens a connection: endpoints are classified by parsing (see
:mod:`assistant.extended.sovereignty`). Sealed values are checked by opening a random sample of up to
:data:`SAMPLE` values per sealed column with the key and their associated data; their plaintext is
discarded at once. Config files known to the running service are the TOML files ``serve --config``
added to ``commands.hidden_paths`` and those in ``/etc/assistant``, plus any given to the monitor.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from assistant.clock import iso, utcnow
from assistant.extended.sovereignty import SovereigntyReport, score
from assistant.extended.sovereignty_snapshot import (
    ApiKeyCounts,
    ColumnCoverage,
    Companion,
    ConfigFile,
    Endpoint,
    FileInfo,
    Listener,
    SecretSetting,
    Snapshot,
)
from assistant.observability.signals import SignalKind

SAMPLE = 100  # sealed values opened per column
SECRET_SETTINGS = ("inference.api_key", "email.password", "calendar.password", "tasks.password", "contacts.password",
                   "messenger.verify_token", "messenger.app_secret", "messenger.access_token", "voice.mqtt.password",
                   "voice.wake_word.token", "voice.speaker_id.token")
SECRET_NAMES = frozenset({"password", "api_key", "token", "access_token", "app_secret", "verify_token", "secret"})
TLS_SCHEMES = frozenset({"https", "wss", "imaps", "smtps", "mqtts"})
COMPANION_PORTS = {8083: ("wake word service", "wake_word"), 8084: ("speaker service", "speaker_id")}
ETC_CONFIG = Path("/etc/assistant")
_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


# --- endpoints ------------------------------------------------------------------------------------


def _get(settings: Any, path: str) -> Any:
    value = settings
    for part in path.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def url_endpoint(setting: str, role: str, url: str, sensitivity: str) -> Endpoint:
    """An endpoint of a URL, keeping only scheme, host and port (credentials, path and query dropped)."""
    parts = urlsplit(url if "//" in url else f"//{url}")
    try:
        port = parts.port
    except ValueError:
        port = None
    scheme = parts.scheme.lower()
    return Endpoint(setting, role, parts.hostname or "", scheme, port, scheme in TLS_SCHEMES, sensitivity)


def endpoints_of(settings: Any) -> list[Endpoint]:
    """Every endpoint the configuration sends data to (only the capabilities that are on)."""
    from assistant.embeddings.ollama import DEFAULT_URL as OLLAMA_EMBED
    from assistant.llm.ollama import DEFAULT_URL as OLLAMA
    from assistant.llm.openai_compat import DEFAULT_URL as OPENAI

    out: list[Endpoint] = []
    inference = settings.inference
    remote_engines = {"ollama": OLLAMA, "openai": OPENAI}
    if inference.backend in remote_engines:
        out.append(url_endpoint("inference.base_url", "the inference engine",
                                inference.base_url or remote_engines[inference.backend], "high"))
    else:
        out.append(Endpoint("inference.backend", "the inference engine", "", "in-process"))
    memory = settings.memory
    if memory.enabled:
        if memory.embedding_backend == "ollama":
            out.append(url_endpoint("inference.base_url", "the embedder", inference.base_url or OLLAMA_EMBED, "high"))
        else:
            out.append(Endpoint("memory.embedding_backend", "the embedder", "", "in-process"))
    if settings.weather.enabled:
        out.append(url_endpoint("weather.base_url", "weather", settings.weather.base_url, "low"))
        out.append(url_endpoint("weather.geocoding_url", "weather geocoding", settings.weather.geocoding_url, "low"))
    search = settings.web_search
    if search.enabled:
        if search.base_url:
            out.append(url_endpoint("web_search.base_url", "web search", search.base_url, "medium"))
        if search.fallback == "duckduckgo":
            out.append(url_endpoint("web_search.duckduckgo_url", "the web search fallback", search.duckduckgo_url,
                                    "medium"))
    if settings.transit.enabled:
        out.append(url_endpoint("transit.base_url", "transit", settings.transit.base_url, "medium"))
    for section in ("calendar", "tasks", "contacts"):
        url = getattr(settings, section).url
        if url:
            out.append(url_endpoint(f"{section}.url", section, url, "high"))
    email = settings.email
    if email.imap_host and email.smtp_host:
        out.append(Endpoint("email.imap_host", "mail (IMAP)", email.imap_host, "imap", email.imap_port,
                            email.imap_security != "none", "high"))
        out.append(Endpoint("email.smtp_host", "mail (SMTP)", email.smtp_host, "smtp", email.smtp_port,
                            email.smtp_security != "none", "high"))
    if settings.messenger.enabled:
        out.append(url_endpoint("messenger.api_base_url", "the messaging platform", settings.messenger.api_base_url,
                                "medium"))
    voice = settings.voice
    if voice is not None:
        mqtt = voice.mqtt
        out.append(Endpoint("voice.mqtt.host", "the voice bus (MQTT)", mqtt.host, "mqtt", mqtt.port, mqtt.tls, "high"))
        for group, role in (("wake_word", "the wake-word service"), ("speaker_id", "the speaker service")):
            section = getattr(voice, group)
            if section.engine == "remote" and section.url:
                out.append(url_endpoint(f"voice.{group}.url", role, section.url, "high"))
    return out


# --- secrets --------------------------------------------------------------------------------------


def from_env(setting: str, environ: Mapping[str, str]) -> bool:
    """Whether ``setting`` (``email.password``) comes from an ``ASSISTANT_*`` variable: its own
    (``ASSISTANT_EMAIL__PASSWORD``) or a JSON object of a section holding it (``ASSISTANT_EMAIL``)."""
    names = {k.upper(): v for k, v in environ.items()}
    path = setting.split(".")
    for depth in range(1, len(path) + 1):
        value = names.get("ASSISTANT_" + "__".join(p.upper() for p in path[:depth]))
        if value is not None and (depth == len(path) or f'"{path[-1]}"' in value):
            return True
    return False


def secrets_of(settings: Any, endpoints: Iterable[Endpoint], environ: Mapping[str, str]) -> list[SecretSetting]:
    """The secrets the configuration holds (names only), with where each comes from."""
    found = [s for s in SECRET_SETTINGS if _get(settings, s)]
    for e in endpoints:  # a URL with a password in it (https://user:secret@host)
        url = _get(settings, e.setting)
        if isinstance(url, str) and urlsplit(url if "//" in url else f"//{url}").password:
            found.append(e.setting)
    return [SecretSetting(s, "env" if from_env(s, environ) else "config") for s in dict.fromkeys(found)]


def api_key_counts(settings: Any, db: Any, environ: Mapping[str, str]) -> ApiKeyCounts:
    configured = list(settings.security.api_keys)
    plain = [k for k in configured if not k.startswith("sha256:")]
    env = from_env("security.api_keys", environ)
    stored = [r["key_hash"] for r in db.query("SELECT key_hash FROM api_keys")]
    return ApiKeyCounts(config_hashed=len(configured) - len(plain), config_plain_file=0 if env else len(plain),
                        config_plain_env=len(plain) if env else 0, stored=len(stored),
                        stored_hashed=sum(1 for h in stored if _HASH.match(str(h))))


def _secret_keys(data: Any, prefix: str = "") -> list[str]:
    out = []
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if prefix == "security.api_keys":
                if not str(key).startswith("sha256:"):
                    out.append("security.api_keys (a plain key)")
            elif key in SECRET_NAMES and isinstance(value, str) and value:
                out.append(path)
            elif isinstance(value, str) and "://" in value and urlsplit(value).password:
                out.append(path)
            else:
                out.extend(_secret_keys(value, path))
    return list(dict.fromkeys(out))


def config_file(path: Path) -> ConfigFile | None:
    """A TOML config file's mode and the keys in it holding secrets (None if it cannot be read)."""
    try:
        info = path.stat()
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return ConfigFile(str(path), stat.S_IMODE(info.st_mode), tuple(_secret_keys(data)))


def config_paths(settings: Any, extra: Iterable[Path | str] = ()) -> list[Path]:
    paths = [Path(p).expanduser() for p in extra]
    paths += [p.expanduser() for p in settings.commands.hidden_paths if p.suffix == ".toml"]
    if ETC_CONFIG.is_dir():
        paths += sorted(ETC_CONFIG.glob("*.toml"))
    return [p for p in dict.fromkeys(p.resolve() for p in paths) if p.is_file()]


# --- storage --------------------------------------------------------------------------------------


def file_info(path: Path) -> FileInfo:
    try:
        info = path.stat()
    except OSError:
        return FileInfo(str(path), False)
    return FileInfo(str(path), True, stat.S_IMODE(info.st_mode), info.st_uid)


def sealed_coverage(db: Any, sealer: Any, sample: int = SAMPLE) -> list[ColumnCoverage]:
    """Per sealed column: its values, those stored as plain text, and a random sample opened with the key."""
    from nacl.exceptions import CryptoError

    from assistant.storage.sealed import SEALED

    tables = set(db.tables())
    out = []
    for table in SEALED:
        if table.table not in tables:
            continue
        for column in table.columns:
            counts = db.one(f"SELECT count({column}) AS n, total(typeof({column}) = 'text') AS plain "
                            f"FROM {table.table}")
            values, plain = int(counts["n"]), int(counts["plain"])
            checked = opened = 0
            if sealer.encrypted and values > plain:
                rows = db.query(f"SELECT {table.row_id} AS _row_id, {table.user_id} AS _user_id, {column} AS v "
                                f"FROM {table.table} WHERE typeof({column}) = 'blob' ORDER BY random() LIMIT ?",
                                (sample,))
                for row in rows:
                    checked += 1
                    try:
                        sealer.open_bytes(row["v"], table.context(column, row).aad())
                        opened += 1
                    except (CryptoError, ValueError, TypeError):
                        pass
            out.append(ColumnCoverage(table.table, column, values, plain, checked, opened))
    return out


# --- sockets and companions ------------------------------------------------------------------------


def listening_sockets() -> list[Listener]:
    """TCP sockets listening on this machine (psutil); only this process's when the others are hidden."""
    import psutil

    pid = os.getpid()
    try:
        connections = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, OSError):
        connections = psutil.Process(pid).net_connections(kind="inet")
    return [Listener(c.laddr.ip, c.laddr.port, getattr(c, "pid", pid) == pid) for c in connections
            if c.status == psutil.CONN_LISTEN and c.laddr]


def companions_of(settings: Any, listeners: Iterable[Listener], environ: Mapping[str, str]) -> list[Companion]:
    """The wake-word and speaker services (configured remote URLs, and other processes listening on
    their ports) and the MQTT broker of ``[voice]``. A listening companion counts as authenticated
    when a token is configured (its section's ``token`` or ``ASSISTANT_COMPANION_TOKEN``): the
    companion commands refuse to bind beyond loopback without one."""
    voice = settings.voice
    ports = dict(COMPANION_PORTS)
    out: list[Companion] = []
    token_env = bool(environ.get("ASSISTANT_COMPANION_TOKEN"))
    for name, group in COMPANION_PORTS.values():
        section = getattr(voice, group, None) if voice is not None else None
        if section is not None and section.engine == "remote" and section.url:
            found = url_endpoint(f"voice.{group}.url", name, section.url, "high")
            out.append(Companion(name, found.host, found.port, bool(section.token), f"voice.{group}.url"))
            if found.port:
                ports[found.port] = (name, group)
    seen = set()
    for listener in listeners:
        if listener.own or listener.port not in ports or (listener.address, listener.port) in seen:
            continue
        seen.add((listener.address, listener.port))
        name, group = ports[listener.port]
        section = getattr(voice, group, None) if voice is not None else None
        token = token_env or bool(section is not None and section.token)
        out.append(Companion(name, listener.address, listener.port, token))
    if voice is not None:
        mqtt = voice.mqtt
        out.append(Companion("voice bus (MQTT)", mqtt.host, mqtt.port, bool(mqtt.tls and mqtt.password),
                             "voice.mqtt.host"))
    return out


def catalog_of(db: Any, catalog: Any) -> tuple[bool, int, tuple[str, ...]]:
    """Whether catalog commands run in bubblewrap, how many entries run on this OS, and those with network."""
    from assistant.catalog.executor import SandboxedRunner
    from assistant.catalog.values import current_os

    runner = getattr(catalog, "runner", None)
    sandboxed = isinstance(runner, SandboxedRunner) and shutil.which("bwrap") is not None
    rows = db.query("SELECT name, network FROM command_catalog WHERE os IN (?, 'any') ORDER BY name",
                    (current_os().value,))
    return sandboxed, len(rows), tuple(r["name"] for r in rows if r["network"])


# --- the monitor ----------------------------------------------------------------------------------


class SovereigntyMonitor:
    """Scores the running service. ``listeners`` and ``environ`` are injectable (tests)."""

    def __init__(self, settings: Any, db: Any, sealer: Any, key_path: Path, signals: Any = None, *,
                 catalog: Any = None, config_files: Iterable[Path | str] = (),
                 environ: Mapping[str, str] | None = None,
                 listeners: Callable[[], list[Listener]] = listening_sockets,
                 clock: Callable[[], Any] = utcnow):
        self.settings = settings
        self.db = db
        self.sealer = sealer
        self.key_path = Path(key_path)
        self.signals = signals
        self.catalog = catalog
        self.config_files = tuple(config_files)
        self.environ = environ
        self.listeners = listeners
        self.clock = clock

    def snapshot(self) -> Snapshot:
        s = self.settings
        environ = os.environ if self.environ is None else self.environ
        endpoints = endpoints_of(s)
        try:
            listeners = list(self.listeners())
        except Exception:  # noqa: BLE001 - no socket table readable: the configured host alone counts
            listeners = []
        sandboxed, entries, network = catalog_of(self.db, self.catalog)
        files = [f for f in (config_file(p) for p in config_paths(s, self.config_files)) if f is not None]
        return Snapshot(
            endpoints=tuple(endpoints), encryption_enabled=bool(self.sealer.encrypted),
            columns=tuple(sealed_coverage(self.db, self.sealer)), key_file=file_info(self.key_path.expanduser()),
            data_dir=file_info(s.data_dir), process_uid=getattr(os, "geteuid", lambda: -1)(),
            secrets=tuple(secrets_of(s, endpoints, environ)), config_files=tuple(files),
            api_keys=api_key_counts(s, self.db, environ), server_host=s.server.host,
            listeners=tuple(listeners), companions=tuple(companions_of(s, listeners, environ)),
            sandboxed=sandboxed, catalog_entries=entries, network_entries=network)

    def report(self) -> SovereigntyReport:
        """Score the service now and publish a ``SovereigntyScore`` signal (server-wide: no user)."""
        report = score(self.snapshot(), iso(self.clock()))
        if self.signals is not None:
            self.signals.publish(SignalKind.SOVEREIGNTY_SCORE,
                                 {**{d.name: d.score for d in report.dimensions},
                                  "findings": {d.name: len(d.findings) for d in report.dimensions}},
                                 value=report.total)
        return report


def build_sovereignty(settings: Any, db: Any, sealer: Any, key_path: Path, signals: Any = None,
                      catalog: Any = None) -> SovereigntyMonitor | None:
    """The server's monitor while ``sovereign_intelligence.enabled``, else None (the route answers 503)."""
    if not settings.sovereign_intelligence.enabled:
        return None
    return SovereigntyMonitor(settings, db, sealer, key_path, signals, catalog=catalog)
