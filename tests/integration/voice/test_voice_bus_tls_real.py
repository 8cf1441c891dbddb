"""The voice bus and the satellite simulator against a real mosquitto that requires a password and
speaks only TLS (a CA and certificates made in the test): the right credentials and CA connect and
messages flow both ways; a wrong password, a missing CA, a certificate for another host, a plain
port and a missing client certificate are each refused with a clear reason; missing TLS files are
a configuration error before anything connects. No test asserts a duration."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from assistant.config import MqttSettings
from assistant.errors import ConfigError
from assistant.voice.bus import VoiceBus, probe_broker
from assistant.voice.messages import StatusMessage
from assistant.voice.satellite import Satellite, SatelliteError
from tests.integration.voice.certs import Certificates, make_certificates
from tests.integration.voice.mosquitto import Mosquitto, mosquitto_factory  # noqa: F401

pytestmark = pytest.mark.integration

AT = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TIMEOUT = 30.0
USERS = {"voice": "s3cret-voice", "kitchen": "s3cret-kitchen"}
REFUSAL_WAIT = 3.0  # how long a refused bus is given to fail (it never connects)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def secure(mosquitto_factory, certs: Certificates) -> Mosquitto:  # noqa: F811
    return mosquitto_factory(users=USERS, tls=certs)


def settings(broker: Mosquitto, **extra: object) -> MqttSettings:
    return MqttSettings(host=broker.host, port=broker.port, topic_prefix="home", keep_alive_secs=5, **extra)


def eventually(check: Callable[[], object], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def refused(bus: VoiceBus) -> str:
    """Start ``bus``, see that it does not connect, and return why (its ``last_error``)."""
    bus.start()
    try:
        assert not bus.wait_connected(REFUSAL_WAIT)
        eventually(lambda: bus.last_error)
        return bus.last_error or ""
    finally:
        bus.stop()


def test_password_and_tls_connect_and_messages_flow(secure: Mosquitto, certs: Certificates) -> None:
    statuses: list[StatusMessage] = []
    server = VoiceBus(settings(secure, username="voice", password=USERS["voice"], tls=True, ca_file=certs.ca),
                      on_status=statuses.append)
    satellite = VoiceBus(settings(secure, username="kitchen", password=USERS["kitchen"], tls=True, ca_file=certs.ca),
                         role="satellite", origin="sat-kitchen")
    server.start()
    satellite.start()
    try:
        assert server.wait_connected(TIMEOUT) and satellite.wait_connected(TIMEOUT)
        assert server.last_error is None
        satellite.publish_status(StatusMessage("kitchen", AT))
        eventually(lambda: statuses)
        assert statuses[0] == StatusMessage("kitchen", AT)
    finally:
        satellite.stop()
        server.stop()


def test_a_wrong_password_is_refused_by_the_broker(secure: Mosquitto, certs: Certificates) -> None:
    reason = refused(VoiceBus(settings(secure, username="voice", password="wrong", tls=True, ca_file=certs.ca)))
    assert reason == "the broker refused the connection: Not authorized; check voice.mqtt.username and password"
    reason = refused(VoiceBus(settings(secure, tls=True, ca_file=certs.ca)))  # no credentials at all
    assert "Not authorized" in reason


def test_without_the_ca_the_broker_is_not_trusted(secure: Mosquitto) -> None:
    reason = refused(VoiceBus(settings(secure, username="voice", password=USERS["voice"], tls=True)))
    assert "TLS certificate of the broker" in reason and "is not trusted (" in reason
    assert "set voice.mqtt.ca_file to the CA that signed it" in reason


def test_a_certificate_for_another_host_fails_unless_insecure(mosquitto_factory, tmp_path: Path) -> None:  # noqa: F811
    other = make_certificates(tmp_path / "other", server_names=("broker.example",))
    broker = mosquitto_factory(users=USERS, tls=other)
    credentials = {"username": "voice", "password": USERS["voice"], "tls": True, "ca_file": other.ca}
    assert "not trusted" in refused(VoiceBus(settings(broker, **credentials)))
    assert probe_broker(settings(broker, **credentials)) is not None
    bus = VoiceBus(settings(broker, **credentials, tls_insecure=True))  # the chain is still checked
    bus.start()
    try:
        assert bus.wait_connected(TIMEOUT)
    finally:
        bus.stop()


def test_tls_to_a_plain_port_and_plain_to_a_tls_port_fail(mosquitto_factory, secure: Mosquitto,  # noqa: F811
                                                           certs: Certificates) -> None:
    plain = mosquitto_factory(users=USERS)
    reason = refused(VoiceBus(settings(plain, username="voice", password=USERS["voice"], tls=True, ca_file=certs.ca)))
    assert "TLS handshake with the broker" in reason and "is TLS enabled on that port?" in reason
    reason = refused(VoiceBus(settings(secure, username="voice", password=USERS["voice"])))
    assert reason.endswith("closed the connection before answering (a TLS port? then set tls = true)")


def test_a_required_client_certificate(mosquitto_factory, certs: Certificates) -> None:  # noqa: F811
    broker = mosquitto_factory(users=USERS, tls=certs, require_certificate=True)
    base = {"username": "voice", "password": USERS["voice"], "tls": True, "ca_file": certs.ca}
    assert refused(VoiceBus(settings(broker, **base)))  # no client certificate: the handshake fails
    bus = VoiceBus(settings(broker, **base, cert_file=certs.client.cert, key_file=certs.client.key))
    bus.start()
    try:
        assert bus.wait_connected(TIMEOUT)
    finally:
        bus.stop()


def test_missing_or_unusable_tls_files_are_a_configuration_error(secure: Mosquitto, certs: Certificates,
                                                                 tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="voice.mqtt.ca_file .*missing.pem does not exist"):
        VoiceBus(settings(secure, tls=True, ca_file=tmp_path / "missing.pem"))
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate")
    with pytest.raises(ConfigError, match="the TLS files cannot be used"):
        VoiceBus(settings(secure, tls=True, ca_file=not_pem))
    with pytest.raises(ConfigError, match="cannot be used"):
        VoiceBus(settings(secure, tls=True, ca_file=certs.ca, cert_file=certs.client.cert, key_file=certs.server.key))


def test_the_satellite_connects_over_tls_and_names_a_refusal(secure: Mosquitto, certs: Certificates) -> None:
    good = settings(secure, username="kitchen", password=USERS["kitchen"], tls=True, ca_file=certs.ca)
    with Satellite("kitchen", good, realtime=False, connect_timeout=TIMEOUT) as satellite:
        assert satellite.bus.connected
    bad = settings(secure, username="kitchen", password="wrong", tls=True, ca_file=certs.ca)
    with pytest.raises(SatelliteError, match="within 3 s: the broker refused the connection: Not authorized"):
        Satellite("kitchen", bad, realtime=False, connect_timeout=3).start()


def satellite_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "api.cli", "satellite", "--room", "kitchen", *args],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))


def test_the_satellite_cli_takes_tls_and_credentials(secure: Mosquitto, certs: Certificates, tmp_path: Path) -> None:
    wav = tmp_path / "silence.wav"
    from assistant.voice.audio import write_wav

    write_wav(wav, b"\0\0" * 1600)
    broker = f"{secure.host}:{secure.port}"
    common = ["--wav", str(wav), "--broker", broker, "--no-realtime", "--connect-timeout", "3", "--timeout", "0"]
    wrong = satellite_cli(*common, "--tls", "--ca-file", str(certs.ca), "--username", "kitchen", "--password", "no")
    assert wrong.returncode == 1 and "Not authorized; check voice.mqtt.username and password" in wrong.stderr
    untrusted = satellite_cli(*common, "--tls", "--username", "kitchen", "--password", USERS["kitchen"])
    assert untrusted.returncode == 1 and "is not trusted" in untrusted.stderr
    missing = satellite_cli(*common, "--tls", "--ca-file", str(tmp_path / "nope.pem"))
    assert missing.returncode == 2 and "nope.pem does not exist" in missing.stderr
    without_tls = satellite_cli(*common, "--ca-file", str(certs.ca))
    assert without_tls.returncode == 2 and "need tls = true" in without_tls.stderr
    env_password = subprocess.run(
        [sys.executable, "-m", "api.cli", "satellite", "--room", "kitchen", *common, "--tls", "--ca-file",
         str(certs.ca), "--username", "kitchen"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "ASSISTANT_MQTT_PASSWORD": USERS["kitchen"]})
    assert "connected" in env_password.stdout and "no reply within 0 s" in env_password.stderr  # it got in
