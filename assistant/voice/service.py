"""The voice subsystem as the API sees it: rooms, sessions, speakers, status, and the audio pipeline.

Built only when the configuration has a ``[voice]`` section (:func:`build_voice` returns None
otherwise). Building loads no model and opens no connection: :meth:`VoiceService.start` (called by
``assistant serve`` through ``Services.start_background``, or by a notebook) builds and validates the
engines, connects the MQTT bus and starts the pipeline. Until then the engine and bus flags of
:class:`VoiceStatus` are False.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from typing import Any

from assistant.config import Settings, VoiceSettings
from assistant.crypto import Sealer
from assistant.storage.db import Database
from assistant.voice.rooms import ControlPublisher, NullControlPublisher, RoomStore
from assistant.voice.sessions import SessionManager
from assistant.voice.speaker import create_embedder
from assistant.voice.speakers import SpeakerRegistry, SpeakerStore
from assistant.voice.vad import create_vad
from assistant.voice.wake_thresholds import with_data_dir

log = logging.getLogger("assistant.voice")

VOICE_SYSTEM_PROMPT = (
    "You are a voice assistant: your answer is spoken aloud. Answer in one or two short sentences of plain "
    "text, without lists, markdown, code or URLs."
)
VOICE_MAX_TOKENS = 160
CHAT_TIMEOUT_S = 300.0


class ChatBridge:
    """Calls the async chat service from the voice worker threads, for the identified user.

    On the server's event loop once one is bound (the API binds it at startup, so the inference queue's
    asyncio lock is only ever used from one loop), else on a private loop thread (notebooks, scripts).
    Voice turns ask for a short, plain answer (:data:`VOICE_SYSTEM_PROMPT`, at most
    :data:`VOICE_MAX_TOKENS` tokens). A turn that is not ``personal`` (a speaker not confidently
    identified, :mod:`assistant.voice.worker`) uses no memories, learns nothing, and is offered only the
    tools that hold no personal data (:meth:`assistant.tools.catalog.Toolbox.shared_tools`; none when no
    such tool is registered).
    """

    def __init__(self, chat: Any, timeout_s: float = CHAT_TIMEOUT_S):
        self.chat = chat
        self.timeout_s = timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._own: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def _target_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is not None and self._loop.is_running():
            return self._loop
        with self._lock:
            if self._own is None:
                self._own = asyncio.new_event_loop()
                threading.Thread(target=self._own.run_forever, name="voice-chat-loop", daemon=True).start()
            return self._own

    def __call__(self, user_id: str, text: str, conversation_id: str | None, *, personal: bool) -> tuple[str, str]:
        future = asyncio.run_coroutine_threadsafe(self._ask(user_id, text, conversation_id, personal),
                                                  self._target_loop())
        return future.result(timeout=self.timeout_s)

    async def _ask(self, user_id: str, text: str, conversation_id: str | None, personal: bool) -> tuple[str, str]:
        from assistant.chat.service import ChatRequest
        from assistant.errors import NotFoundError

        toolbox = self.chat.toolbox
        tools = None if personal else (toolbox.shared_tools() if toolbox is not None else ())

        def request(cid: str | None) -> ChatRequest:
            return ChatRequest(text, conversation_id=cid, system_prompt=VOICE_SYSTEM_PROMPT,
                               max_tokens=VOICE_MAX_TOKENS, enabled_tools=tools, use_memories=personal,
                               learn=personal)

        try:
            reply = await self.chat.chat(user_id, request(conversation_id))
        except NotFoundError:
            if conversation_id is None:
                raise
            reply = await self.chat.chat(user_id, request(None))  # the conversation was deleted meanwhile
        return reply.content.strip(), reply.conversation_id

    def close(self) -> None:
        if self._own is not None:
            self._own.call_soon_threadsafe(self._own.stop)
            self._own = None


@dataclass(frozen=True)
class VoiceStatus:
    enabled: bool
    wake_word_available: bool
    speaker_id_available: bool
    mqtt_connected: bool
    active_rooms: int  # rooms online now
    active_sessions: int  # sessions not ended now

    @classmethod
    def disabled(cls) -> VoiceStatus:
        return cls(False, False, False, False, 0, 0)


class VoiceService:
    def __init__(self, settings: VoiceSettings, rooms: RoomStore, sessions: SessionManager, *,
                 speakers: SpeakerRegistry | None = None):
        self.settings = settings
        self.rooms = rooms
        self.sessions = sessions
        self.speakers = speakers
        self.wake_word_available = False
        self.speaker_id_available = False
        self.pipeline: Any = None  # assistant.voice.pipeline.VoicePipeline once started
        self.bus: Any = None  # assistant.voice.bus.VoiceBus once started
        self.bridge: ChatBridge | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def mqtt_connected(self) -> bool:
        return self.bus is not None and bool(self.bus.connected)

    def status(self) -> VoiceStatus:
        return VoiceStatus(True, self.wake_word_available, self.speaker_id_available, self.mqtt_connected,
                           self.rooms.online_count(), len(self.sessions.active_sessions()))

    def start(self, chat: Any, *, engines: Any = None, bus: Any = None, led: Any = None,
              respond: Any = None) -> Any:
        """Build and validate the engines (a broken one raises ConfigError before any audio flows), connect
        the bus, and start the pipeline. ``chat`` is the ChatService; the other arguments replace the
        configured parts (tests, notebooks). Returns the :class:`~assistant.voice.pipeline.VoicePipeline`."""
        from assistant.voice.bus import VoiceBus
        from assistant.voice.gpio import create_privacy_led
        from assistant.voice.pipeline import VoicePipeline, build_engines
        from assistant.voice.whisper import WhisperMode

        if self.pipeline is not None:
            return self.pipeline
        speakers = getattr(self, "speakers", None)
        engines = engines or build_engines(self.settings, speakers)
        self.wake_word_available = True  # built and run once above
        self.speaker_id_available = engines.speakers is not None
        self.bridge = ChatBridge(chat) if respond is None else None
        if self.bridge is not None and self._loop is not None:
            self.bridge.bind_loop(self._loop)
        self.bus = bus or VoiceBus(self.settings.mqtt)
        pipeline = VoicePipeline(self.settings, rooms=self.rooms, sessions=self.sessions, bus=self.bus,
                                 engines=engines, respond=respond or self.bridge,
                                 led=led if led is not None else create_privacy_led(self.settings.gpio),
                                 whisper=WhisperMode(self.settings.whisper_mode))
        self.bus.on_audio, self.bus.on_status, self.bus.on_control = (
            pipeline.handle_audio, pipeline.handle_status, pipeline.handle_control)
        self.rooms.publisher = pipeline
        self.pipeline = pipeline
        pipeline.start()
        self.bus.start()
        log.info("voice pipeline started: broker %s:%s, wake words %s", self.settings.mqtt.host,
                 self.settings.mqtt.port, ", ".join(engines.words))
        return pipeline

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The server's event loop: chat calls from the voice threads run there."""
        self._loop = loop
        if self.bridge is not None:
            self.bridge.bind_loop(loop)

    def dropped(self) -> dict[tuple[str, str], int]:
        """Messages dropped so far, by (topic kind, reason): the bus's (oversized, malformed, ...) and the
        pipeline's (``input``/``status`` of an unknown room, a full room queue)."""
        counts: dict[tuple[str, str], int] = {}
        if self.bus is not None:
            counts.update(getattr(self.bus, "dropped", {}))
        if self.pipeline is not None:
            for key, n in self.pipeline.dropped.items():
                counts[key] = counts.get(key, 0) + n
        return counts

    def speaker_unavailable(self) -> int:
        """Exchanges answered as an unknown speaker because the speaker engine failed or timed out."""
        return self.pipeline.speaker_unavailable if self.pipeline is not None else 0

    def stop(self) -> None:
        if self.bus is not None:
            self.bus.stop()
        if self.pipeline is not None:
            self.pipeline.stop()
        if self.bridge is not None:
            self.bridge.close()
        self.pipeline = None
        self.bus = None
        self.rooms.publisher = NullControlPublisher()

    def delete_room(self, room_id: str, owner: str | None = None) -> None:
        """Delete the room (with ``owner``: only that user's room); its active session, if any, ends
        (``room_deleted``)."""
        self.rooms.delete(room_id, owner)
        if self.sessions.get_active_session(room_id) is not None:
            self.sessions.end_session(room_id, "room_deleted")
        if self.pipeline is not None:
            self.pipeline.remove_room(room_id)

    def check_stale(self) -> list[str]:
        """The periodic presence check (every ``[voice.rooms] stale_check_interval_secs``)."""
        return self.rooms.check_stale()


def build_voice(settings: Settings, db: Database, publisher: ControlPublisher | None = None,
                sealer: Sealer | None = None) -> VoiceService | None:
    """The voice service, or None without a ``[voice]`` section. ``sealer`` seals speaker embeddings
    (biometric data); the speaker engine is created on first use."""
    voice = settings.voice
    if voice is None:
        return None
    voice = voice.model_copy(update={"wake_word": with_data_dir(voice.wake_word, settings.data_dir)})
    rooms = RoomStore(db, voice.rooms, publisher or NullControlPublisher())
    speakers = SpeakerRegistry(SpeakerStore(db, sealer), voice.speaker_id,
                               lambda: create_embedder(voice.speaker_id), vad=lambda: create_vad(voice.vad))
    return VoiceService(voice, rooms, SessionManager(voice.conversation), speakers=speakers)
