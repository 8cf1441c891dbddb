"""The sovereignty score: the rules as pure functions of a snapshot (any configuration), and the probe
that takes the snapshot from real settings, a real database and injected sockets and environment."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from assistant.extended.sovereignty import MAX_POINTS, score
from assistant.extended.sovereignty_probe import (
    SovereigntyMonitor,
    api_key_counts,
    build_sovereignty,
    companions_of,
    config_file,
    endpoints_of,
    from_env,
    sealed_coverage,
    secrets_of,
)
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
    classify_host,
)
from assistant.observability.signals import SignalBus, SignalKind

UID = 1000
LOCAL_ENGINE = Endpoint("inference.backend", "the inference engine", "", "in-process")


def good(**changes) -> Snapshot:  # noqa: ANN003
    """Everything local, sealed, protected and bound to loopback."""
    base = Snapshot(
        endpoints=(LOCAL_ENGINE, Endpoint("calendar.url", "calendar", "192.168.1.10", "http", 5232, False, "high")),
        encryption_enabled=True, columns=(ColumnCoverage("memories", "content", 40, 0, 40, 40),),
        key_file=FileInfo("/data/memory.key", True, 0o600, UID), data_dir=FileInfo("/data", True, 0o700, UID),
        process_uid=UID, secrets=(SecretSetting("calendar.password", "env"),),
        api_keys=ApiKeyCounts(config_hashed=1, stored=2, stored_hashed=2), server_host="127.0.0.1",
        listeners=(Listener("127.0.0.1", 8080, own=True),),
        companions=(Companion("wake word service", "127.0.0.1", 8083, False),), sandboxed=True, catalog_entries=10)
    return replace(base, **changes)


def dims(report) -> dict[str, int]:  # noqa: ANN001
    return {d.name: d.score for d in report.dimensions}


def check_bounds(report) -> None:  # noqa: ANN001
    for d in report.dimensions:
        assert 0 <= d.score <= MAX_POINTS, d
    assert report.total == sum(d.score for d in report.dimensions)
    assert 0 <= report.total <= 100


def test_a_sovereign_installation_scores_100_without_findings() -> None:
    report = score(good())
    check_bounds(report)
    assert report.total == 100 and set(dims(report).values()) == {25}
    assert report.findings() == []
    body = report.as_dict()
    assert set(body) >= {"total", "data_locality", "encryption_coverage", "secret_management", "network_isolation",
                         "findings", "breakdown"}


def test_the_worst_installation_stays_within_bounds() -> None:
    worst = Snapshot(
        endpoints=(Endpoint("inference.base_url", "the inference engine", "api.example.com", "http", 80, False),),
        encryption_enabled=False, columns=(ColumnCoverage("memories", "content", 10, 10),),
        key_file=FileInfo("/k", False), data_dir=FileInfo("/d", True, 0o777, UID), process_uid=UID,
        secrets=(SecretSetting("inference.api_key", "config"),),
        config_files=(ConfigFile("/etc/assistant/config.toml", 0o644, ("inference.api_key",)),) * 5,
        api_keys=ApiKeyCounts(config_plain_file=2, stored=1, stored_hashed=0), server_host="8.8.8.8",
        companions=(Companion("speaker service", "0.0.0.0", 8084, False),), sandboxed=False, catalog_entries=3,
        network_entries=("a", "b", "c"))
    report = score(worst)
    check_bounds(report)
    assert dims(report) == {"data_locality": 0, "encryption_coverage": 0, "secret_management": 8,
                            "network_isolation": 0}  # only the key file's points stand: encryption is off
    assert report.findings()[0][1].severity == "high"
    frame = report.frame()
    assert list(frame.columns) == ["dimension", "severity", "message", "fix", "setting"]
    assert len(frame) == len(report.findings()) and frame["severity"].iloc[0] == "high"


@pytest.mark.parametrize(("host", "kind"), [
    ("localhost", "loopback"), ("127.0.0.1", "loopback"), ("::1", "loopback"), ("[::1]", "loopback"),
    ("10.1.2.3", "lan"), ("172.16.0.1", "lan"), ("192.168.1.5", "lan"), ("169.254.1.1", "lan"), ("fe80::1", "lan"),
    ("fd00::1", "lan"), ("100.64.0.1", "lan"), ("nas.local", "lan"), ("router.home.arpa", "lan"), ("ollama", "lan"),
    ("api.open-meteo.com", "remote"), ("8.8.8.8", "remote"), ("2001:4860:4860::8888", "remote"),
])
def test_hosts_are_classified_by_parsing_only(host: str, kind: str) -> None:
    assert classify_host(host) == kind


def test_data_locality_weights_endpoints_by_what_they_receive() -> None:
    weather = Endpoint("weather.base_url", "weather", "api.open-meteo.com", "https", None, True, "low")
    report = score(good(endpoints=(LOCAL_ENGINE, weather)))
    assert report["data_locality"].score == round(25 * 3 / 4)  # 19: the engine weighs 3, the place name 1
    [finding] = report["data_locality"].findings
    assert (finding.severity, finding.setting) == ("low", "weather.base_url")
    assert "api.open-meteo.com" in finding.message
    remote_engine = Endpoint("inference.base_url", "the inference engine", "llm.example.com", "https", None, True)
    assert score(good(endpoints=(remote_engine, weather)))["data_locality"].score == 0


def test_encryption_coverage_counts_sealed_values_and_tls() -> None:
    columns = (ColumnCoverage("memories", "content", 80, 0, 40, 40), ColumnCoverage("messages", "content", 20, 20))
    report = score(good(columns=columns))
    assert report["encryption_coverage"].score == round(20 * 80 / 100 + 5)  # 21
    assert "20 of 20 values of messages.content are plain text" in report["encryption_coverage"].findings[0].message
    tampered = score(good(columns=(ColumnCoverage("memories", "content", 10, 0, 10, 8),)))
    assert tampered["encryption_coverage"].findings[0].severity == "high"
    plain_remote = Endpoint("web_search.base_url", "web search", "search.example.com", "http", None, False, "medium")
    report = score(good(endpoints=(LOCAL_ENGINE, plain_remote)))
    assert report["encryption_coverage"].score == 20  # the remote endpoint without TLS costs the 5
    off = score(good(encryption_enabled=False))
    assert off["encryption_coverage"].score == 5
    assert off["encryption_coverage"].findings[0].setting == "memory.enable_encryption"


def test_an_empty_store_scores_by_its_mode() -> None:
    assert score(good(columns=()))["encryption_coverage"].score == 25
    assert score(good(columns=(), encryption_enabled=False))["encryption_coverage"].score == 5


@pytest.mark.parametrize(("mode", "uid", "points"), [(0o600, UID, 25), (0o400, UID, 25), (0o640, UID, 17),
                                                      (0o644, UID, 17), (0o600, 0, 21)])
def test_the_key_file_mode_and_owner(mode: int, uid: int, points: int) -> None:
    report = score(good(key_file=FileInfo("/data/memory.key", True, mode, uid)))
    assert report["secret_management"].score == points
    if points < 25:
        assert "/data/memory.key" in report["secret_management"].findings[0].message


def test_secrets_from_the_config_file_cost_points() -> None:
    secrets = (SecretSetting("email.password", "config"), SecretSetting("inference.api_key", "env"))
    report = score(good(secrets=secrets))
    assert report["secret_management"].score == 20  # 10 x 1/2
    [finding] = report["secret_management"].findings
    assert finding.setting == "email.password" and "ASSISTANT_EMAIL__PASSWORD" in finding.fix
    readable = ConfigFile("/srv/config.toml", 0o644, ("email.password",))
    assert score(good(secrets=secrets, config_files=(readable,)))["secret_management"].score == 17
    assert score(good(data_dir=FileInfo("/data", True, 0o755, UID)))["secret_management"].score == 23
    keys = ApiKeyCounts(config_hashed=1, config_plain_file=1, stored=2, stored_hashed=2)
    assert score(good(api_keys=keys))["secret_management"].score == 24  # 5 x 3/4 = 3.75


def test_network_isolation_reads_the_listening_sockets_before_the_setting() -> None:
    wide = score(good(listeners=(Listener("0.0.0.0", 8080, own=True),)))
    assert wide["network_isolation"].score == 18
    assert "0.0.0.0" in wide["network_isolation"].findings[0].message
    assert "listening" in wide["network_isolation"].findings[0].message
    assert score(good(listeners=(), server_host="192.168.1.4"))["network_isolation"].score == 21
    exposed = Companion("wake word service", "0.0.0.0", 8083, False)
    report = score(good(companions=(exposed,)))
    assert report["network_isolation"].score == 15
    assert report["network_isolation"].findings[0].severity == "high"
    assert score(good(companions=(replace(exposed, authenticated=True),)))["network_isolation"].score == 20
    assert score(good(companions=()))["network_isolation"].score == 25
    unsandboxed = score(good(sandboxed=False, network_entries=("Listening ports (Linux)",)))
    assert unsandboxed["network_isolation"].score == 22  # 0 + 2 x 9/10 of the sandbox's 5


# --- the probe: real settings, a real database --------------------------------------------------------


def test_endpoints_of_the_configuration(make_settings) -> None:  # noqa: ANN001
    settings = make_settings(
        inference={"backend": "ollama", "base_url": "http://user:pw-secret@192.168.1.7:11434"},
        weather={"enabled": True}, calendar={"url": "https://dav.example.com/cal/"},
        email={"imap_host": "mail.example.com", "smtp_host": "mail.example.com", "smtp_security": "none"},
        voice={"mqtt": {"host": "broker.local"}, "wake_word": {"engine": "remote", "url": "http://127.0.0.1:8083"}})
    found = {e.setting: e for e in endpoints_of(settings)}
    assert set(found) == {"inference.base_url", "memory.embedding_backend", "weather.base_url",
                          "weather.geocoding_url", "calendar.url", "email.imap_host", "email.smtp_host",
                          "voice.mqtt.host", "voice.wake_word.url"}
    engine = found["inference.base_url"]
    assert (engine.host, engine.port, engine.local, engine.shown()) == ("192.168.1.7", 11434, True,
                                                                        "http://192.168.1.7:11434")
    assert found["weather.base_url"].tls and not found["weather.base_url"].local
    assert found["email.imap_host"].tls and not found["email.smtp_host"].tls
    secrets = secrets_of(settings, found.values(), {})
    assert [s.setting for s in secrets] == ["inference.base_url"]  # the password inside the URL


def test_secrets_from_the_environment(make_settings, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("ASSISTANT_EMAIL__PASSWORD", "env-secret")
    settings = make_settings(inference={"api_key": "file-secret"}, email={"username": "me"})
    environ = dict(os.environ)
    found = {s.setting: s.source for s in secrets_of(settings, endpoints_of(settings), environ)}
    assert found == {"inference.api_key": "config", "email.password": "env"}
    assert from_env("voice.mqtt.password", {"ASSISTANT_VOICE": '{"mqtt": {"password": "x"}}'})
    assert not from_env("voice.mqtt.password", {"ASSISTANT_VOICE": '{"mqtt": {"host": "x"}}'})


def test_config_files_name_their_secret_keys_never_the_values(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[email]\npassword = "hunter2-value"\n[security.api_keys]\n"plain-key-value" = "'
                    '00000000-0000-0000-0000-000000000001"\n"sha256:abc" = "00000000-0000-0000-0000-000000000001"\n')
    path.chmod(0o644)
    found = config_file(path)
    assert found is not None and found.mode == 0o644
    assert found.secret_keys == ("email.password", "security.api_keys (a plain key)")
    text = json.dumps(score(good(config_files=(found,))).as_dict())
    assert "hunter2-value" not in text and "plain-key-value" not in text and str(path) in text


def test_companions_from_the_settings_and_the_sockets(make_settings) -> None:  # noqa: ANN001
    settings = make_settings(voice={"speaker_id": {"engine": "remote", "url": "http://192.168.1.20:9000"},
                                    "mqtt": {"host": "127.0.0.1"}})
    listeners = [Listener("0.0.0.0", 8083), Listener("127.0.0.1", 9000), Listener("127.0.0.1", 8080, own=True)]
    found = {(c.name, c.host, c.port): c for c in companions_of(settings, listeners, {})}
    assert set(found) == {("speaker service", "192.168.1.20", 9000), ("wake word service", "0.0.0.0", 8083),
                          ("speaker service", "127.0.0.1", 9000), ("voice bus (MQTT)", "127.0.0.1", 1883)}
    assert not found[("wake word service", "0.0.0.0", 8083)].authenticated
    with_token = companions_of(settings, listeners, {"ASSISTANT_COMPANION_TOKEN": "t"})
    assert all(c.authenticated for c in with_token if c.port == 8083)


def test_sealed_coverage_opens_real_values(services) -> None:  # noqa: ANN001
    memory = services.memory
    first = memory.add("u1", "My locker code is 4711", "locker")
    memory.add("u1", "I like green tea", "tea")
    coverage = {(c.table, c.column): c for c in sealed_coverage(services.db, services.sealer)}
    content = coverage[("memories", "content")]
    assert (content.values, content.plaintext, content.checked, content.opened) == (2, 0, 2, 2)
    # a value moved to another row does not open there; a TEXT value is plain text
    services.db.execute("UPDATE memories SET content = (SELECT content FROM memories WHERE id = ?) WHERE id != ?",
                        (first.id, first.id))
    services.db.execute("UPDATE memories SET summary = 'plain' WHERE id = ?", (first.id,))
    coverage = {(c.table, c.column): c for c in sealed_coverage(services.db, services.sealer)}
    assert coverage[("memories", "content")].opened == 1
    assert coverage[("memories", "summary")].plaintext == 1


def test_stored_api_keys_are_hashes(services, make_settings) -> None:  # noqa: ANN001
    services.keys.create("one")
    settings = make_settings(security={"api_keys": {"plain-key": "00000000-0000-0000-0000-000000000001"}})
    counts = api_key_counts(settings, services.db, {})
    assert (counts.stored, counts.stored_hashed, counts.config_plain_file) == (1, 1, 1)


def test_the_monitor_scores_the_running_service_and_publishes_a_signal(services, make_settings) -> None:  # noqa: ANN001
    settings = make_settings(server={"host": "0.0.0.0"}, email={"imap_host": "imap.example.com",
                             "smtp_host": "smtp.example.com", "username": "me", "password": "hunter2-secret"})
    bus = SignalBus()
    monitor = SovereigntyMonitor(settings, services.db, services.sealer, services.data_dir / "memory.key", bus,
                                 catalog=services.catalog, environ={}, listeners=lambda: [])
    report = monitor.report()
    check_bounds(report)
    assert report["network_isolation"].findings[0].setting == "server.host"
    assert any(f.setting == "email.password" for f in report["secret_management"].findings)
    assert "hunter2-secret" not in json.dumps(report.as_dict())
    [signal] = bus.recent(SignalKind.SOVEREIGNTY_SCORE)
    assert signal.value == report.total and signal.user_id is None
    assert signal.data["data_locality"] == report["data_locality"].score


def test_disabled_builds_nothing(make_settings, services) -> None:  # noqa: ANN001
    off = make_settings(sovereign_intelligence={"enabled": False})
    assert build_sovereignty(off, services.db, services.sealer, Path("k")) is None
