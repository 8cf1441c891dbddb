"""The voice bus: one paho-mqtt 2.x client that speaks the topics and formats of :mod:`assistant.voice.messages`.

The server role subscribes to input audio, status and control, and publishes output audio, wake events
and control; the satellite role (the simulator) is the mirror image. The client connects in the
background (``connect_async`` + ``loop_start``), reconnects with exponential back-off
(``reconnect_delay_set``) and subscribes again in every ``on_connect``. ``keep_alive_secs`` and
``max_inflight`` come from ``[voice.mqtt]``.

Authentication and encryption also come from there: ``username``/``password`` (the broker's password
file), and ``tls = true`` for TLS with the broker's certificate verified against ``ca_file`` (default:
the system's CAs) and its host name (unless ``tls_insecure``), with an optional client certificate
(``cert_file``/``key_file``). A TLS file that is missing or unusable is a ConfigError when the bus is
built. A connection that fails is retried with back-off, and why it failed is kept in
:attr:`VoiceBus.last_error` and logged: the broker's refusal (``Not authorized``: a wrong user name or
password), or, for a failure before MQTT (paho does not say which), a direct probe of the address
and the TLS handshake (:func:`probe_broker`: an untrusted certificate, a wrong host name, no TLS on
that port).

A message that is too large for its kind, malformed, or whose callback raises is dropped: the reason
is logged and counted in ``dropped[(topic_kind, reason)]``; the network thread never sees an exception.
"""

from __future__ import annotations

import itertools
import logging
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Literal

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from assistant.config import MqttSettings
from assistant.errors import ConfigError
from assistant.voice.messages import (
    QOS,
    ControlAction,
    ControlMessage,
    MessageError,
    OutputFrame,
    StatusMessage,
    TopicKind,
    Topics,
    WakeEvent,
    check_pcm,
    output_frames,
)

log = logging.getLogger("assistant.voice.bus")

Role = Literal["server", "satellite"]

DEFAULT_MAX_BYTES: Mapping[TopicKind, int] = {
    TopicKind.INPUT: 64 * 1024,  # 2 s of audio per message
    TopicKind.OUTPUT: 64 * 1024 + 12,
    TopicKind.WAKE: 1024,
    TopicKind.CONTROL: 4096,
    TopicKind.STATUS: 4096,
}
SUBSCRIBES: Mapping[Role, tuple[TopicKind, ...]] = {
    "server": (TopicKind.INPUT, TopicKind.CONTROL, TopicKind.STATUS),
    "satellite": (TopicKind.OUTPUT, TopicKind.WAKE, TopicKind.CONTROL),
}


def _ignore(*_args: object) -> None:
    return None


def tls_context(settings: MqttSettings) -> ssl.SSLContext | None:
    """The TLS context of ``settings`` (None without ``tls``); ConfigError naming the setting when a
    file is missing or is not a certificate or key."""
    if not settings.tls:
        return None
    files = {name: getattr(settings, name) for name in ("ca_file", "cert_file", "key_file")}
    for name, path in files.items():
        if path is not None and not path.expanduser().is_file():
            raise ConfigError(f"voice.mqtt.{name} {path} does not exist or is not a file")
    ca, cert, key = (str(p.expanduser()) if p is not None else None for p in files.values())
    try:
        context = ssl.create_default_context(cafile=ca)
        if cert is not None:
            context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(f"voice.mqtt: the TLS files cannot be used ({exc}); ca_file must hold PEM CA "
                          "certificates, cert_file/key_file a PEM certificate and its key") from None
    context.check_hostname = not settings.tls_insecure
    return context


def probe_broker(settings: MqttSettings, timeout: float = 5.0) -> str | None:
    """Why a connection to the broker fails below MQTT: the address, or the TLS handshake (None: both work)."""
    where = f"{settings.host}:{settings.port}"
    try:
        sock = socket.create_connection((settings.host, settings.port), timeout=timeout)
    except OSError as exc:
        return f"the broker at {where} cannot be reached: {exc.strerror or exc}"
    with sock:
        context = tls_context(settings)
        if context is None:
            return None
        try:
            with context.wrap_socket(sock, server_hostname=settings.host):
                return None
        except ssl.SSLCertVerificationError as exc:
            return (f"the TLS certificate of the broker at {where} is not trusted ({exc.verify_message}): set "
                    "voice.mqtt.ca_file to the CA that signed it (and connect by the name it was issued for)")
        except (ssl.SSLError, OSError) as exc:
            return f"the TLS handshake with the broker at {where} failed ({exc}): is TLS enabled on that port?"


def _refusal(reason_code: object) -> str:
    """The broker's CONNACK refusal, with what to check for the authentication ones."""
    text = str(reason_code)
    hint = ("; check voice.mqtt.username and password" if text in ("Not authorized", "Bad user name or password")
            else "")
    return f"the broker refused the connection: {text}{hint}"


class VoiceBus:
    """Typed callbacks in, typed publish methods out. Callbacks run on paho's network thread: keep them short."""

    def __init__(
        self,
        settings: MqttSettings,
        *,
        role: Role = "server",
        origin: str | None = None,
        client_id: str = "",
        max_bytes: Mapping[TopicKind, int] | None = None,
        output_chunk_bytes: int = 16_000,  # 0.5 s of 16 kHz 16-bit audio per frame
        reconnect_min_delay: float = 1.0,
        reconnect_max_delay: float = 30.0,
        on_audio: Callable[[str, bytes], None] = _ignore,
        on_wake: Callable[[WakeEvent], None] = _ignore,
        on_control: Callable[[ControlMessage], None] = _ignore,
        on_status: Callable[[StatusMessage], None] = _ignore,
        on_output: Callable[[str, OutputFrame], None] = _ignore,
    ):
        self.settings = settings
        self.role: Role = role
        self.origin = origin or role
        self.topics = Topics(settings.topic_prefix)
        self.max_bytes = {**DEFAULT_MAX_BYTES, **(max_bytes or {})}
        self.output_chunk_bytes = output_chunk_bytes
        self.on_audio, self.on_wake, self.on_control, self.on_status, self.on_output = (
            on_audio, on_wake, on_control, on_status, on_output)
        self.dropped: Counter[tuple[str, str]] = Counter()
        self.received: Counter[str] = Counter()
        self._connected = threading.Event()
        self._streams = itertools.count(1)
        self._started = False
        self.last_error: str | None = None  # why the last connection attempt failed (None once connected)
        self._answered = False  # the broker answered this connection's CONNECT (accepting or refusing it)
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311)
        if settings.username is not None:
            client.username_pw_set(settings.username, settings.password)
        context = tls_context(settings)
        if context is not None:
            client.tls_set_context(context)
            client.tls_insecure_set(settings.tls_insecure)
        client.max_inflight_messages_set(settings.max_inflight)
        client.reconnect_delay_set(min_delay=max(1, round(reconnect_min_delay)),
                                   max_delay=max(1, round(reconnect_max_delay)))
        client.on_connect = self._handle_connect
        client.on_connect_fail = self._handle_connect_fail
        client.on_disconnect = self._handle_disconnect
        client.on_subscribe = lambda *_args: self._connected.set()
        client.on_message = self._handle_message
        self._client = client

    # --- lifecycle ------------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def wait_connected(self, timeout: float) -> bool:
        return self._connected.wait(timeout)

    def start(self) -> None:
        """Connect in the background; returns at once, also when the broker is not up yet."""
        if self._started:
            return
        self._client.connect_async(self.settings.host, self.settings.port, keepalive=self.settings.keep_alive_secs)
        self._client.loop_start()
        self._started = True

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        self._client.disconnect()
        self._client.loop_stop()
        self._connected.clear()

    def _handle_connect(self, client: mqtt.Client, _userdata, _flags, reason_code, _properties) -> None:
        self._answered = True
        if reason_code.is_failure:
            self.last_error = _refusal(reason_code)
            log.warning("voice bus %s:%s: %s", self.settings.host, self.settings.port, self.last_error)
            return
        self.last_error = None
        # "connected" means subscribed: set on the SUBACK, so nothing published after wait_connected is missed
        client.subscribe([(self.topics.pattern(kind), QOS[kind]) for kind in SUBSCRIBES[self.role]])
        log.info("voice bus connected to %s:%s as %s", self.settings.host, self.settings.port, self.role)

    def _handle_connect_fail(self, _client, _userdata) -> None:
        where = f"{self.settings.host}:{self.settings.port}"
        self.last_error = probe_broker(self.settings) or f"could not connect to the broker at {where}"
        log.warning("voice bus: %s; retrying with back-off", self.last_error)

    def _handle_disconnect(self, _client, _userdata, _flags, reason_code, _properties) -> None:
        self._connected.clear()
        if not self._answered:  # closed before any CONNACK: TLS expected, or not an MQTT broker
            where = f"{self.settings.host}:{self.settings.port}"
            self.last_error = probe_broker(self.settings) or (
                f"the broker at {where} closed the connection before answering"
                + ("" if self.settings.tls else " (a TLS port? then set tls = true)"))
        self._answered = False
        if self._started:
            log.warning("voice bus disconnected (%s); reconnecting with back-off", self.last_error or reason_code)

    # --- inbound --------------------------------------------------------------------------------------

    def _drop(self, kind: str, reason: str, topic: str, detail: str) -> None:
        self.dropped[(kind, reason)] += 1
        log.warning("voice bus dropped a message on %s: %s (%s)", topic, reason, detail)

    def _handle_message(self, _client, _userdata, message: mqtt.MQTTMessage) -> None:
        topic = message.topic
        parsed = None
        try:
            parsed = self.topics.parse(topic)
            if parsed is None:
                self._drop("unknown", "unknown_topic", topic, "not a voice bus topic")
                return
            kind, room_id = parsed
            payload = bytes(message.payload)
            if len(payload) > self.max_bytes[kind]:
                self._drop(kind.value, "oversized", topic, f"{len(payload)} > {self.max_bytes[kind]} bytes")
                return
            self._dispatch(kind, room_id, payload, topic)
        except Exception as exc:  # a bad message or callback must never stop the network thread
            self._drop(parsed[0].value if parsed else "unknown", "callback_error", topic, repr(exc))
            log.debug("voice bus callback error", exc_info=True)

    def _dispatch(self, kind: TopicKind, room_id: str, payload: bytes, topic: str) -> None:
        try:
            if kind is TopicKind.INPUT:
                item: object = check_pcm(payload)
            elif kind is TopicKind.OUTPUT:
                item = OutputFrame.from_bytes(payload)
            elif kind is TopicKind.WAKE:
                item = WakeEvent.from_bytes(payload)
            elif kind is TopicKind.CONTROL:
                item = ControlMessage.from_bytes(payload)
            else:
                item = StatusMessage.from_bytes(payload)
        except MessageError as exc:
            self._drop(kind.value, exc.reason, topic, str(exc))
            return
        if isinstance(item, WakeEvent | ControlMessage | StatusMessage) and item.room_id != room_id:
            self._drop(kind.value, "room_mismatch", topic, f"payload names room {item.room_id!r}")
            return
        if isinstance(item, ControlMessage) and item.origin == self.origin:
            return  # the echo of our own control message
        self.received[kind.value] += 1
        if kind is TopicKind.INPUT:
            self.on_audio(room_id, payload)
        elif kind is TopicKind.OUTPUT:
            self.on_output(room_id, item)  # type: ignore[arg-type]
        elif kind is TopicKind.WAKE:
            self.on_wake(item)  # type: ignore[arg-type]
        elif kind is TopicKind.CONTROL:
            self.on_control(item)  # type: ignore[arg-type]
        else:
            self.on_status(item)  # type: ignore[arg-type]

    # --- outbound -------------------------------------------------------------------------------------

    def _publish(self, kind: TopicKind, room_id: str, payload: bytes) -> bool:
        info = self._client.publish(self.topics.topic(kind, room_id), payload, qos=QOS[kind])
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            log.warning("voice bus could not publish on %s: %s", kind.value, mqtt.error_string(info.rc))
            return False
        return True

    def publish_output(self, room_id: str, pcm: bytes) -> int:
        """Send a synthesised reply as frames (QoS 1); returns the stream id (the last frame is flagged)."""
        stream_id = next(self._streams)
        for frame in output_frames(pcm, stream_id, self.output_chunk_bytes):
            self._publish(TopicKind.OUTPUT, room_id, frame.to_bytes())
        return stream_id

    def publish_wake(self, msg: WakeEvent) -> bool:
        return self._publish(TopicKind.WAKE, msg.room_id, msg.to_bytes())

    def publish_control(self, msg: ControlMessage) -> bool:
        return self._publish(TopicKind.CONTROL, msg.room_id, msg.to_bytes())

    def publish_audio(self, room_id: str, pcm: bytes) -> bool:
        """Satellite side: one chunk of microphone PCM on the input topic (QoS 0)."""
        return self._publish(TopicKind.INPUT, room_id, check_pcm(pcm))

    def publish_status(self, msg: StatusMessage) -> bool:
        """Satellite side: a heartbeat (QoS 0)."""
        return self._publish(TopicKind.STATUS, msg.room_id, msg.to_bytes())


class LoopbackBus:
    """An in-process stand-in for the broker and one satellite per room (notebooks, benchmarks, demos).

    It keeps what the pipeline publishes (``outputs`` as ``(room_id, pcm)``, ``wakes``, ``controls``) and,
    with ``auto_playback``, answers every reply at once with the satellite's ``playback_done``, so the
    session enters its follow-up window without waiting for the reply's duration.
    :meth:`send_audio` is the satellite's microphone. Like :class:`VoiceBus`, it delivers what a satellite
    sends to its ``on_audio`` and ``on_control`` callbacks.
    """

    connected = False  # no broker

    def __init__(self, *, auto_playback: bool = True):
        self.auto_playback = auto_playback
        self.outputs: list[tuple[str, bytes]] = []
        self.wakes: list[WakeEvent] = []
        self.controls: list[ControlMessage] = []
        self.on_audio: Callable[[str, bytes], None] = _ignore
        self.on_control: Callable[[ControlMessage], None] = _ignore
        self.on_status: Callable[[StatusMessage], None] = _ignore

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def send_audio(self, room_id: str, pcm: bytes) -> None:
        self.on_audio(room_id, pcm)

    def publish_output(self, room_id: str, pcm: bytes) -> int:
        self.outputs.append((room_id, pcm))
        if self.auto_playback:
            self.on_control(ControlMessage(room_id, ControlAction.COMMAND, "playback_done", "loopback"))
        return 1

    def publish_wake(self, msg: WakeEvent) -> bool:
        self.wakes.append(msg)
        return True

    def publish_control(self, msg: ControlMessage) -> bool:
        self.controls.append(msg)
        return True
