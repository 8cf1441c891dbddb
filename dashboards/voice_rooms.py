"""Voice rooms: every room with its presence, volume and mute, the live voice sessions, and the voice status.

All data comes from :class:`assistant.voice.service.VoiceService` (``rooms.list()``,
``sessions.active_sessions()``, ``status()``); this module only lays it out and refreshes it every
``refresh_ms`` (a periodic callback while the view is shown).

Serve it with ``panel serve dashboards/voice_rooms.py --args [config.toml]``: it opens the configured data
directory's database, so rooms and presence are the server's; voice sessions live in the memory of the
process that runs the voice pipeline, so a separately served dashboard lists only its own (none). In a
notebook, call ``pn.extension("tabulator")`` and show ``VoiceRooms(services.voice)`` to see them all.
"""

from __future__ import annotations

import sys

import pandas as pd
import panel as pn
import param

from assistant.clock import iso
from assistant.voice.rooms import Room
from assistant.voice.service import VoiceService, VoiceStatus
from assistant.voice.sessions import VoiceSession

ROOM_COLUMNS = ["name", "online", "volume", "muted", "last_seen"]
SESSION_COLUMNS = ["room", "state", "speaker", "exchanges", "started"]
ONLINE = '<span title="online" style="color:#2e7d32">●</span>'
OFFLINE = '<span title="offline" style="color:#9e9e9e">●</span>'
DISABLED = "Voice is disabled: add a `[voice]` section to the configuration."


def rooms_frame(rooms: list[Room]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"name": r.name, "online": ONLINE if r.is_online else OFFLINE, "volume": r.volume, "muted": r.muted,
          "last_seen": r.last_seen or "never"} for r in rooms],
        columns=ROOM_COLUMNS,
    )


def sessions_frame(sessions: list[VoiceSession], rooms: list[Room]) -> pd.DataFrame:
    names = {r.id: r.name for r in rooms}
    return pd.DataFrame(
        [{"room": names.get(s.room_id, s.room_id), "state": s.state.value, "speaker": s.speaker_id or "unknown",
          "exchanges": s.exchange_count, "started": iso(s.started_at)}
         for s in sorted(sessions, key=lambda s: s.started_at)],
        columns=SESSION_COLUMNS,
    )


def status_markdown(status: VoiceStatus) -> str:
    def flag(value: bool) -> str:
        return "yes" if value else "**no**"

    return (
        "| voice | status |\n|---|---|\n"
        f"| wake word engine available | {flag(status.wake_word_available)} |\n"
        f"| speaker identification available | {flag(status.speaker_id_available)} |\n"
        f"| MQTT connected | {flag(status.mqtt_connected)} |\n"
        f"| rooms online | {status.active_rooms} |\n"
        f"| active sessions | {status.active_sessions} |\n"
    )


def _table(frame: pd.DataFrame, **formatters: dict) -> pn.widgets.Tabulator:
    return pn.widgets.Tabulator(frame, disabled=True, show_index=False, sizing_mode="stretch_width",
                                formatters=formatters)


class VoiceRooms(pn.viewable.Viewer):
    """Rooms, live sessions and status of one :class:`VoiceService` (None: voice is disabled)."""

    refresh_ms = param.Integer(2000, bounds=(250, None), doc="How often the tables are refreshed (ms)")

    def __init__(self, voice: VoiceService | None, **params):
        super().__init__(**params)
        self.voice = voice
        self.rooms_table = _table(pd.DataFrame(columns=ROOM_COLUMNS), online={"type": "html"})
        self.sessions_table = _table(pd.DataFrame(columns=SESSION_COLUMNS))
        self.status = pn.pane.Markdown(DISABLED, sizing_mode="stretch_width")
        self.callback: pn.io.callbacks.PeriodicCallback | None = None
        self.refresh()

    def refresh(self) -> None:
        """Read rooms, sessions and status again and show them."""
        if self.voice is None:
            return
        rooms = self.voice.rooms.list()
        self.rooms_table.value = rooms_frame(rooms)
        self.sessions_table.value = sessions_frame(self.voice.sessions.active_sessions(), rooms)
        self.status.object = status_markdown(self.voice.status())

    def __panel__(self) -> pn.viewable.Viewable:
        if self.voice is not None:
            self.callback = pn.state.add_periodic_callback(self.refresh, period=self.refresh_ms)
        return pn.Column(
            "## Voice rooms",
            pn.Row(pn.Column("### Rooms", self.rooms_table, sizing_mode="stretch_width"),
                   pn.Column("### Status", self.status, width=320), sizing_mode="stretch_width"),
            "### Live sessions",
            self.sessions_table,
            sizing_mode="stretch_width",
        )


def served_voice(config: str | None) -> VoiceService | None:
    """The voice service of the configured data directory (for ``panel serve``)."""
    from assistant.config import Settings
    from assistant.services import DB_FILE
    from assistant.storage.db import Database
    from assistant.voice.service import build_voice

    settings = Settings.load(config)
    return build_voice(settings, Database(settings.data_dir / DB_FILE))


if pn.state.served:
    pn.extension("tabulator")
    VoiceRooms(served_voice(sys.argv[1] if len(sys.argv) > 1 else None)).servable(title="Voice rooms")
