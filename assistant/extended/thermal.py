"""The CPU temperature, read from Linux sysfs: what pauses the precache refresh when the machine is hot.

Two places hold temperatures, both in millidegrees Celsius:

- ``/sys/class/thermal/thermal_zone*/temp`` with the zone's kind in ``type`` (``x86_pkg_temp`` on Intel,
  ``cpu-thermal``/``cpu_thermal`` on a Raspberry Pi and other ARM boards, ``acpitz`` for the ACPI zone);
- ``/sys/class/hwmon/hwmon*/temp*_input`` with the chip's driver in ``name`` (``k10temp`` and ``zenpower``
  on AMD, ``coretemp`` on Intel, ``cpu_thermal`` on some ARM kernels).

:class:`SysfsThermal` reads the CPU's sensors (:data:`CPU_SENSORS`, or a name starting with ``cpu``)
and reports the hottest one; without any, the ACPI zone (``acpitz``, the board's reading near the
CPU on most PCs); without that either, nothing (``celsius`` None: no sensor, and then nothing pauses).
Other zones (Wi-Fi cards, batteries, NVMe drives, GPUs) are not the CPU and never count. A sensor
that cannot be read (some zones answer EIO while their device sleeps) is skipped.

The base directory (``/sys/class``) is a constructor argument so tests give a fake tree in ``tmp_path``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

SYSFS = Path("/sys/class")
CPU_SENSORS = frozenset({"x86_pkg_temp", "cpu-thermal", "cpu_thermal", "soc_thermal", "k10temp", "zenpower",
                         "coretemp"})
FALLBACK_SENSORS = frozenset({"acpitz"})


@dataclass(frozen=True)
class ThermalReading:
    """The hottest CPU sensor (``celsius``, its ``sensor`` kind and sysfs ``path``); all None without one."""

    celsius: float | None
    sensor: str | None = None
    path: str | None = None

    @property
    def available(self) -> bool:
        return self.celsius is not None


class ThermalSensor(Protocol):
    def read(self) -> ThermalReading:
        """The current CPU temperature, or a reading with ``celsius`` None when there is no sensor."""


def _text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _millidegrees(path: Path) -> float | None:
    raw = _text(path)
    try:
        return None if raw is None else int(raw) / 1000.0
    except ValueError:
        return None


def _is_cpu(kind: str) -> bool:
    return kind in CPU_SENSORS or kind.startswith("cpu")


class SysfsThermal:
    """:class:`ThermalSensor` over sysfs (``base`` is ``/sys/class``; a fake tree in tests)."""

    def __init__(self, base: Path = SYSFS):
        self.base = Path(base)

    def sensors(self) -> list[tuple[str, float, str]]:
        """Every readable temperature: ``(kind, celsius, path)``."""
        found: list[tuple[str, float, str]] = []
        for zone in sorted(self.base.glob("thermal/thermal_zone*")):
            kind, celsius = _text(zone / "type"), _millidegrees(zone / "temp")
            if kind and celsius is not None:
                found.append((kind, celsius, str(zone / "temp")))
        for chip in sorted(self.base.glob("hwmon/hwmon*")):
            kind = _text(chip / "name")
            if not kind:
                continue
            for sensor in sorted(chip.glob("temp*_input")):
                celsius = _millidegrees(sensor)
                if celsius is not None:
                    found.append((kind, celsius, str(sensor)))
        return found

    def read(self) -> ThermalReading:
        found = self.sensors()
        for accept in (_is_cpu, FALLBACK_SENSORS.__contains__):
            chosen = [s for s in found if accept(s[0])]
            if chosen:
                kind, celsius, path = max(chosen, key=lambda s: s[1])
                return ThermalReading(round(celsius, 3), kind, path)
        return ThermalReading(None)


def thermal_status(reading: ThermalReading, pause_celsius: float) -> str:
    """``"no sensor"``, ``"paused"`` (strictly above ``pause_celsius``: 65.0 itself does not pause) or ``"ok"``."""
    if reading.celsius is None:
        return "no sensor"
    return "paused" if reading.celsius > pause_celsius else "ok"
