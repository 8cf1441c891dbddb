"""Voice rooms: every room with its presence, volume and mute, the live voice sessions, and the voice status.

All data comes from a :class:`~dashboards.voice_client.VoiceClient` (the HTTP API or the package in
process: the same JSON), and the *Mute / unmute* button of each row acts through it (``PATCH
/v1/voice/rooms/{id}``); this module only lays it out and refreshes it every ``refresh_ms`` (a periodic
callback while the view is shown).

Served by ``assistant dashboards`` (or ``panel serve dashboards/voice_rooms.py --args [config.toml]``):
with ``ASSISTANT_API_URL`` and ``ASSISTANT_API_KEY`` it shows the server's rooms and live sessions (the
key's user's); otherwise it opens the configured data directory's database, so rooms and presence are
the server's, while voice sessions live in the memory of the process that runs the voice pipeline (a
separately served dashboard lists only its own: none). In a notebook, call ``pn.extension("tabulator")``
and show ``VoiceRooms(LocalVoiceClient(services.voice))``.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd
import panel as pn
import param

from assistant.voice.service import VoiceService
from dashboards.banner import serve_page
from dashboards.voice_client import HttpVoiceClient, LocalVoiceClient, VoiceClient

ROOM_COLUMNS = ["name", "online", "volume", "muted", "last_seen"]
SESSION_COLUMNS = ["room", "state", "speaker", "exchanges", "started"]
ONLINE = '<span title="online" style="color:#2e7d32">●</span>'
OFFLINE = '<span title="offline" style="color:#9e9e9e">●</span>'
DISABLED = "Voice is disabled: add a `[voice]` section to the configuration."


def rooms_frame(rooms: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"name": r["name"], "online": ONLINE if r["is_online"] else OFFLINE, "volume": r["volume"],
          "muted": r["muted"], "last_seen": r.get("last_seen") or "never"} for r in rooms],
        columns=ROOM_COLUMNS,
    )


def sessions_frame(sessions: list[dict[str, Any]], rooms: list[dict[str, Any]]) -> pd.DataFrame:
    names = {r["id"]: r["name"] for r in rooms}
    return pd.DataFrame(
        [{"room": names.get(s["room_id"], s["room_id"]), "state": s["state"], "speaker": s.get("speaker_id") or "unknown",
          "exchanges": s["exchange_count"], "started": s["started_at"]}
         for s in sorted(sessions, key=lambda s: s["started_at"])],
        columns=SESSION_COLUMNS,
    )


def status_markdown(status: dict[str, Any]) -> str:
    def flag(value: bool) -> str:
        return "yes" if value else "**no**"

    return (
        "| voice | status |\n|---|---|\n"
        f"| wake word engine available | {flag(status['wake_word_available'])} |\n"
        f"| speaker identification available | {flag(status['speaker_id_available'])} |\n"
        f"| MQTT connected | {flag(status['mqtt_connected'])} |\n"
        f"| rooms online | {status['active_rooms']} |\n"
        f"| active sessions | {status['active_sessions']} |\n"
    )


def _table(frame: pd.DataFrame, css: str, **options: Any) -> pn.widgets.Tabulator:
    return pn.widgets.Tabulator(frame, disabled=True, show_index=False, sizing_mode="stretch_width",
                                css_classes=[css], **options)


class VoiceRooms(pn.viewable.Viewer):
    """Rooms, live sessions and status through one :class:`VoiceClient`."""

    refresh_ms = param.Integer(2000, bounds=(250, None), doc="How often the tables are refreshed (ms)")

    def __init__(self, client: VoiceClient, **params):
        super().__init__(**params)
        self.client = client
        self.rooms: list[dict[str, Any]] = []
        self.rooms_table = _table(pd.DataFrame(columns=ROOM_COLUMNS), "voice-rooms", formatters={"online": {"type": "html"}},
                                  buttons={"mute": "Mute / unmute"})
        self.rooms_table.on_click(self._room_clicked)
        self.sessions_table = _table(pd.DataFrame(columns=SESSION_COLUMNS), "voice-sessions")
        self.status = pn.pane.Markdown(DISABLED, sizing_mode="stretch_width")
        self.message = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["voice-message"])
        self.callback: pn.io.callbacks.PeriodicCallback | None = None
        self.enabled = False
        self.refresh()

    def _try(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # the server gone, a refusal: say so, keep the page
            self.message.object = f"**{what} failed:** {html.escape(str(exc))}"
        return None

    def refresh(self) -> None:
        """Read rooms, sessions and status again and show them."""
        status = self._try("Reading the voice status", self.client.status)
        if status is None:
            return
        self.enabled = bool(status.get("enabled"))
        if not self.enabled:
            self.status.object = DISABLED
            return
        rooms = self._try("Reading the rooms", self.client.rooms)
        if rooms is None:
            return
        self.rooms = rooms
        self.rooms_table.value = rooms_frame(rooms)
        sessions = self._try("Reading the sessions", self.client.sessions, rooms)
        if sessions is not None:
            self.sessions_table.value = sessions_frame(sessions, rooms)
        self.status.object = status_markdown(status)

    def toggle_mute(self, room_id: str) -> dict[str, Any] | None:
        """Mute the room if it plays, unmute it if muted (through the client); the table shows it."""
        room = next((r for r in self.rooms if r["id"] == room_id), None)
        if room is None:
            return None
        changed = self._try("Muting the room", self.client.update, room_id, muted=not room["muted"])
        if changed is not None:
            self.message.object = f"Room *{html.escape(changed['name'])}* is now {'muted' if changed['muted'] else 'unmuted'}."
            self.refresh()
        return changed

    def _room_clicked(self, event: Any) -> None:
        if event.column == "mute" and event.row is not None and event.row < len(self.rooms):
            self.toggle_mute(self.rooms[event.row]["id"])

    def __panel__(self) -> pn.viewable.Viewable:
        if self.enabled and self.callback is None:
            self.callback = pn.state.add_periodic_callback(self.refresh, period=self.refresh_ms)
        return pn.Column(
            "## Voice rooms",
            self.message,
            pn.Row(pn.Column("### Rooms", self.rooms_table, sizing_mode="stretch_width"),
                   pn.Column("### Status", self.status, width=320), sizing_mode="stretch_width"),
            "### Live sessions",
            self.sessions_table,
            sizing_mode="stretch_width",
        )


def local_voice(config: str | None) -> LocalVoiceClient:
    """The voice service of the configured data directory, in process (None inside: voice is disabled)."""
    from assistant.config import Settings
    from assistant.services import DB_FILE
    from assistant.storage.db import Database
    from assistant.voice.service import build_voice

    key = f"voice_rooms:{config}"
    if key not in pn.state.cache:
        settings = Settings.load(config)
        pn.state.cache[key] = build_voice(settings, Database(settings.data_dir / DB_FILE))
    voice: VoiceService | None = pn.state.cache[key]
    return LocalVoiceClient(voice)


if pn.state.served:
    serve_page("Voice rooms", ("tabulator",), HttpVoiceClient, local_voice, VoiceRooms)
