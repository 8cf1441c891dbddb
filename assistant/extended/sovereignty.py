"""The sovereignty score: how much of this installation stays under its owner's control.

``GET /api/sovereignty`` answers ``{total, data_locality, encryption_coverage, secret_management,
network_isolation}`` (the spec's shape): four dimensions of 0..25 points each (whole numbers: the
rounded sum of their parts), and ``total``, their sum (0..100). Each dimension lists its
``findings`` (severity ``high``, ``medium``, ``low`` or ``info``, what was found, how to fix it, and
the setting to change) and a ``breakdown`` of its parts.

Every rule is a pure function of a :class:`Snapshot` of the running system (unit tests build any
snapshot; :mod:`assistant.extended.sovereignty_probe` takes it from the running settings, the
database, the file system and the listening sockets). The rules:

**Data locality (25)**: every configured endpoint the service sends data to (the inference engine,
the embedder, weather, web search and its fallback, transit, calendar, tasks, contacts, IMAP and
SMTP hosts, the messaging platform, the MQTT broker and remote wake-word and speaker services; an
in-process engine counts as local) is classified by parsing its host, without DNS: ``loopback``
(``localhost``, 127.0.0.0/8, ::1), ``lan`` (RFC 1918, link-local, unique-local and shared 100.64/10
addresses; names ending ``.local``, ``.lan``, ``.home``, ``.home.arpa``, ``.internal`` or
``.localdomain``; single-label names such as a container's ``ollama``) or ``remote`` (anything else:
a public address or a domain name, even one your own DNS points at the LAN: use its address or a
local name to have it counted local). Points = 25 x the weighted share of local endpoints, weights by
what the endpoint receives: 3 for the user's words, audio or mail (inference, embeddings, e-mail,
calendar, tasks, contacts, voice), 2 for queries and messages (web search, transit, messaging), 1
for a place name (weather).

**Encryption coverage (25)**: 20 x the share of sealed values that are sealed: every sealed column
of the schema (:data:`assistant.storage.sealed.SEALED`) is counted in the real database, and up to
``SAMPLE`` values per column are opened with the key and their associated data (a value that does
not open, or plain text written before sealing existed, is not sealed; with
``memory.enable_encryption = false`` nothing is). An empty store scores by the mode alone.
Embeddings are stored unsealed by the spec and are not counted. Plus 5 x the share of remote
endpoints reached over TLS (https, IMAPS/STARTTLS, SMTPS/STARTTLS, MQTT over TLS); no remote
endpoint: 5.

**Secret management (25)**: 8 for the memory key file (mode 0600 or stricter and owned by the
service's user; 4 when owned by another user, 0 when readable by group or others or missing while
encryption is on; with encryption off there is no key and the 8 points stand, the loss is counted
under encryption coverage); 2 for the data directory (not readable by others; 1 when only its
group may); 10 x the share of configured secrets (``inference.api_key``, passwords, tokens, the
messaging app secret, credentials inside URLs) that come from environment variables rather than
the config file, minus 3 for each config file holding secrets that group or others may read; 5 x
the share of API keys kept as hashes (``security.api_keys`` written as ``sha256:<hex>``, the keys of
the database always are; a plain key from an environment variable counts half).

**Network isolation (25)**: 10 for the server's bound addresses (the sockets this process listens
on, whatever their port, else ``server.host``): loopback 10, a LAN address 6, every interface
(0.0.0.0, ::) 3, a public address 0 (the worst address counts); 10 x the mean over the companion
services (other processes' sockets listening on 8083 and 8084 or on the ports of the configured
remote wake-word and speaker services, and the MQTT broker of ``[voice]``): 1 on loopback, 0.5
beyond it with a token (a broker: TLS and a password), 0 otherwise; none: 10; 5 for the catalog
sandbox: 3 when commands run in bubblewrap, plus 2 x the share of catalog entries (of this OS)
without ``network = true``.

Findings never hold a secret: they name settings, hosts (with any credentials of a URL removed),
file paths and counts, never a value of a secret setting. The score and findings are server-wide
(no user data), so any key may read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assistant.extended.sovereignty_snapshot import WILDCARDS, Snapshot, classify_host

DIMENSIONS = ("data_locality", "encryption_coverage", "secret_management", "network_isolation")
MAX_POINTS = 25
SEVERITIES = ("high", "medium", "low", "info")
WEIGHTS = {"high": 3, "medium": 2, "low": 1}


# --- the report -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    severity: str
    message: str
    fix: str
    setting: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "message": self.message, "fix": self.fix, "setting": self.setting}


@dataclass(frozen=True)
class Part:
    name: str
    points: float
    max_points: float
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"part": self.name, "points": round(self.points, 2), "max_points": self.max_points,
                "detail": self.detail}


@dataclass(frozen=True)
class Dimension:
    name: str
    parts: tuple[Part, ...]
    findings: tuple[Finding, ...]

    @property
    def score(self) -> int:
        return max(0, min(MAX_POINTS, round(sum(p.points for p in self.parts))))


@dataclass(frozen=True)
class SovereigntyReport:
    dimensions: tuple[Dimension, ...]
    computed_at: str = ""

    def __getitem__(self, name: str) -> Dimension:
        return next(d for d in self.dimensions if d.name == name)

    @property
    def total(self) -> int:
        return sum(d.score for d in self.dimensions)

    def findings(self) -> list[tuple[str, Finding]]:
        """Every finding with its dimension, the most severe first."""
        found = [(d.name, f) for d in self.dimensions for f in d.findings]
        return sorted(found, key=lambda item: SEVERITIES.index(item[1].severity))

    def frame(self):  # noqa: ANN201 - pandas is imported here
        """The findings as a pandas DataFrame (``dimension``, ``severity``, ``message``, ``fix``,
        ``setting``), the most severe first, for notebooks."""
        import pandas as pd

        rows = [{"dimension": name, **f.as_dict()} for name, f in self.findings()]
        return pd.DataFrame(rows, columns=["dimension", "severity", "message", "fix", "setting"])

    def as_dict(self) -> dict[str, Any]:
        return {"total": self.total, **{d.name: d.score for d in self.dimensions},
                "findings": {d.name: [f.as_dict() for f in d.findings] for d in self.dimensions},
                "breakdown": {d.name: [p.as_dict() for p in d.parts] for d in self.dimensions},
                "computed_at": self.computed_at}


# --- helpers --------------------------------------------------------------------------------------


def bind_points(address: str) -> tuple[float, str]:
    """Points (of 10) and the class of a bound address."""
    name = address.strip().strip("[]").lower()
    if name in WILDCARDS:
        return 3.0, "every interface"
    locality = classify_host(name)
    return {"loopback": (10.0, "loopback"), "lan": (6.0, "a LAN address")}.get(locality, (0.0, "a public address"))


def _share(numerator: float, denominator: float, empty: float = 1.0) -> float:
    return numerator / denominator if denominator else empty


def _plural(n: float, word: str) -> str:
    if n == 1:
        return f"{n:g} {word}"
    return f"{n:g} {word[:-1]}ies" if word.endswith("ry") else f"{n:g} {word}s"


# --- the four dimensions --------------------------------------------------------------------------


def data_locality(s: Snapshot) -> Dimension:
    findings = []
    total = local = 0.0
    for e in s.endpoints:
        weight = WEIGHTS.get(e.sensitivity, 1)
        total += weight
        if e.local:
            local += weight
            continue
        findings.append(Finding(
            e.sensitivity, f"{e.role} ({e.setting}) is a remote host: {e.shown()}; what it receives leaves "
            "your network", f"run {e.role} on this machine or your LAN and point {e.setting} at it (a loopback or "
            "private address, or a .local / .home.arpa name), or turn the capability off", e.setting))
    count = sum(1 for e in s.endpoints if e.local)
    part = Part("local endpoints", MAX_POINTS * _share(local, total), MAX_POINTS,
                f"{count} of {_plural(len(s.endpoints), 'endpoint')} local (weighted by what they receive)")
    return Dimension("data_locality", (part,), tuple(findings))


def encryption_coverage(s: Snapshot) -> Dimension:
    findings = []
    values = sum(c.values for c in s.columns)
    if not s.encryption_enabled:
        share = 0.0
        findings.append(Finding("high", f"memory encryption is off: {_plural(values, 'value')} of memories, messages "
                                "and other user text are stored in plain text",
                                "the mode is fixed when a store is created: start a new data directory with "
                                "memory.enable_encryption = true and move the data over", "memory.enable_encryption"))
    else:
        share = _share(sum(c.sealed for c in s.columns), values)
        for c in s.columns:
            if c.plaintext:
                findings.append(Finding("medium", f"{c.plaintext} of {c.values} values of {c.table}.{c.column} are "
                                        "plain text (written before sealing existed)",
                                        "edit or re-create those items: every store seals what it writes"))
            failed = c.checked - c.opened
            if failed:
                findings.append(Finding("high", f"{failed} of {c.checked} sampled values of {c.table}.{c.column} do "
                                        "not open with the key and their place (moved, altered or sealed with "
                                        "another key)", "restore the database from a backup taken with this key "
                                        "file, or find what wrote to the database file outside the service"))
    sealed = Part("sealed values", 20 * share, 20, f"{share:.1%} of {_plural(values, 'stored value')} sealed"
                  + ("" if s.encryption_enabled else " (encryption off)"))
    remote = [e for e in s.endpoints if not e.local]
    tls = [e for e in remote if e.tls]
    for e in remote:
        if not e.tls:
            findings.append(Finding("high" if e.sensitivity == "high" else "medium",
                                    f"{e.role} ({e.setting}) is reached without TLS: {e.shown()}",
                                    f"use https (or the TLS option of {e.setting.rsplit('.', 1)[0]})", e.setting))
    transport = Part("TLS to remote endpoints", 5 * _share(len(tls), len(remote)), 5,
                     f"{len(tls)} of {_plural(len(remote), 'remote endpoint')} over TLS")
    return Dimension("encryption_coverage", (sealed, transport), tuple(findings))


def _key_file_part(s: Snapshot) -> tuple[Part, list[Finding]]:
    key = s.key_file
    if not s.encryption_enabled:
        return Part("key file", 8, 8, "no key file (memory encryption off)"), [
            Finding("info", "memory encryption is off, so there is no key file to protect",
                    "see encryption coverage", "memory.enable_encryption")]
    if key is None or not key.exists:
        path = key.path if key else "the key file"
        return Part("key file", 0, 8, "missing"), [Finding("high", f"the memory key file {path} is missing",
                                                           "restore it from your backup", "memory.encryption_key_path")]
    mode = f"{key.mode & 0o777:04o}"
    if key.mode & 0o077:
        return Part("key file", 0, 8, f"mode {mode}"), [Finding(
            "high", f"the memory key file {key.path} has mode {mode}: other local users may read it",
            f"chmod 600 {key.path}", "memory.encryption_key_path")]
    if key.uid != s.process_uid:
        return Part("key file", 4, 8, f"mode {mode}, owned by uid {key.uid}"), [Finding(
            "medium", f"the memory key file {key.path} is owned by uid {key.uid}, not by the service's user "
            f"(uid {s.process_uid})", "chown the key file to the service's user and keep mode 0600",
            "memory.encryption_key_path")]
    return Part("key file", 8, 8, f"mode {mode}, owned by the service's user"), []


def _data_dir_part(s: Snapshot) -> tuple[Part, list[Finding]]:
    d = s.data_dir
    if d is None or not d.exists:
        return Part("data directory", 2, 2, "not created yet"), []
    mode = f"{d.mode & 0o777:04o}"
    if d.mode & 0o007:
        return Part("data directory", 0, 2, f"mode {mode}"), [Finding(
            "medium", f"the data directory {d.path} (mode {mode}) is open to other local users: they can read the "
            "unsealed parts of the database (embeddings, timestamps, counts)", f"chmod 700 {d.path}",
            "server.data_dir")]
    if d.mode & 0o070:
        return Part("data directory", 1, 2, f"mode {mode}"), [Finding(
            "low", f"the data directory {d.path} (mode {mode}) is open to its group", f"chmod 700 {d.path}",
            "server.data_dir")]
    return Part("data directory", 2, 2, f"mode {mode}"), []


def secret_management(s: Snapshot) -> Dimension:
    key_part, findings = _key_file_part(s)
    dir_part, more = _data_dir_part(s)
    findings += more
    in_env = [x for x in s.secrets if x.source == "env"]
    points = 10 * _share(len(in_env), len(s.secrets))
    for x in s.secrets:
        if x.source != "env":
            env = "ASSISTANT_" + "__".join(x.setting.upper().split("."))
            findings.append(Finding("medium", f"the secret {x.setting} is written in the configuration",
                                    f"remove it from the config file and set the environment variable {env} "
                                    "(e.g. in the service unit's EnvironmentFile, mode 0600)", x.setting))
    for f in s.config_files:
        if f.secret_keys and f.mode & 0o077:
            points -= 3
            findings.append(Finding("high", f"the config file {f.path} (mode {f.mode & 0o777:04o}) holds "
                                    f"{_plural(len(f.secret_keys), 'secret')} ({', '.join(f.secret_keys)}) and other "
                                    "local users may read it", f"chmod 600 {f.path}, and move the secrets to "
                                    "environment variables"))
    secrets = Part("secrets outside the config file", max(0.0, points), 10,
                   f"{len(in_env)} of {_plural(len(s.secrets), 'secret')} from environment variables")
    k = s.api_keys
    keys = k.config_hashed + k.config_plain_file + k.config_plain_env + k.stored
    good = k.config_hashed + k.stored_hashed + 0.5 * k.config_plain_env
    if k.config_plain_file or k.config_plain_env:
        findings.append(Finding("medium", f"{_plural(k.config_plain_file + k.config_plain_env, 'API key')} of "
                                "security.api_keys are written in plain text",
                                "write each as \"sha256:<hex of its SHA-256>\" (the key itself stays with its client)",
                                "security.api_keys"))
    if k.stored_hashed < k.stored:
        findings.append(Finding("high", f"{k.stored - k.stored_hashed} stored API keys are not SHA-256 hashes",
                                "revoke them (assistant keys revoke) and create new ones"))
    hashed = Part("API keys hashed", 5 * _share(good, keys), 5, f"{good:g} of {_plural(keys, 'API key')} hashed")
    return Dimension("secret_management", (key_part, dir_part, secrets, hashed), tuple(findings))


def network_isolation(s: Snapshot) -> Dimension:
    findings = []
    own = sorted({x.address for x in s.listeners if x.own})  # every socket this process listens on
    addresses = own or [s.server_host]
    scored = [(address, *bind_points(address)) for address in addresses]
    address, points, kind = min(scored, key=lambda item: item[1])
    source = "listening" if own else "server.host"
    if points < 10:
        findings.append(Finding("high" if points < 6 else "medium",
                                f"the API is bound to {address} ({kind}, {source}): other machines can reach it",
                                "bind server.host to 127.0.0.1 and put a reverse proxy with TLS in front of it "
                                "(listed in security.trusted_proxies) if other machines need it", "server.host"))
    server = Part("server bind", points, 10, f"{', '.join(addresses)} ({source})")
    shares = []
    for c in s.companions:
        where = f"{c.host}:{c.port}" if c.port else c.host
        if classify_host(c.host) == "loopback" and c.host.strip("[]") not in WILDCARDS:
            shares.append(1.0)
            continue
        shares.append(0.5 if c.authenticated else 0.0)
        what = "a token" if "service" in c.name else "TLS and a password"
        source = c.setting or "a listening socket"
        if c.authenticated:
            findings.append(Finding("low", f"the {c.name} is reachable beyond this machine at {where} ({source}), "
                                    f"with {what}", "bind it to 127.0.0.1 unless another machine needs it",
                                    c.setting))
        else:
            findings.append(Finding("high", f"the {c.name} is reachable beyond this machine at {where} ({source}) "
                                    f"without {what}", f"bind it to 127.0.0.1, or give it {what}", c.setting))
    companions = Part("companion services", 10 * _share(sum(shares), len(shares)), 10,
                      f"{_plural(len(shares), 'companion')}, {sum(1 for x in shares if x == 1.0)} on loopback")
    sandbox = 3.0 if s.sandboxed else 0.0
    if not s.sandboxed:
        findings.append(Finding("high", "catalog commands run on the host, without the bubblewrap sandbox",
                                "install bubblewrap (apt install bubblewrap) and restart the service"))
    without = s.catalog_entries - len(s.network_entries)
    sandbox += 2 * _share(without, s.catalog_entries)
    if s.network_entries:
        findings.append(Finding("low", f"{_plural(len(s.network_entries), 'catalog entry')} run with the host's "
                                f"network: {', '.join(s.network_entries[:5])}"
                                + (" ..." if len(s.network_entries) > 5 else ""),
                                "an admin can re-create the entries that do not need the network without "
                                "network = true"))
    catalog = Part("catalog sandbox", sandbox, 5, ("bubblewrap" if s.sandboxed else "no sandbox")
                   + f", {without} of {_plural(s.catalog_entries, 'entry')} without network")
    return Dimension("network_isolation", (server, companions, catalog), tuple(findings))


def score(snapshot: Snapshot, computed_at: str = "") -> SovereigntyReport:
    """The four dimensions of ``snapshot`` (pure: no I/O)."""
    return SovereigntyReport((data_locality(snapshot), encryption_coverage(snapshot), secret_management(snapshot),
                              network_isolation(snapshot)), computed_at)


def summary(report: SovereigntyReport) -> dict[str, int]:
    return {"total": report.total, **{d.name: d.score for d in report.dimensions}}
