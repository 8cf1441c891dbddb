"""The CPU temperature from a fake sysfs tree in tmp_path (thermal zones and hwmon chips)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.extended.thermal import SysfsThermal, ThermalReading, thermal_status

PAUSE = 65.0  # precache_prediction.thermal_pause_celsius


def zone(base: Path, n: int, kind: str, millidegrees: str) -> None:
    path = base / "thermal" / f"thermal_zone{n}"
    path.mkdir(parents=True)
    (path / "type").write_text(kind + "\n")
    (path / "temp").write_text(millidegrees + "\n")


def hwmon(base: Path, n: int, name: str, *millidegrees: str) -> None:
    path = base / "hwmon" / f"hwmon{n}"
    path.mkdir(parents=True)
    (path / "name").write_text(name + "\n")
    for i, value in enumerate(millidegrees, start=1):
        (path / f"temp{i}_input").write_text(value + "\n")


@pytest.mark.parametrize(("millidegrees", "status"), [("64999", "ok"), ("65000", "ok"), ("65001", "paused")])
def test_the_pause_is_strictly_above_65_0(tmp_path: Path, millidegrees: str, status: str) -> None:
    zone(tmp_path, 0, "x86_pkg_temp", millidegrees)
    reading = SysfsThermal(tmp_path).read()
    assert reading == ThermalReading(int(millidegrees) / 1000, "x86_pkg_temp",
                                     str(tmp_path / "thermal" / "thermal_zone0" / "temp"))
    assert thermal_status(reading, PAUSE) == status


def test_the_hottest_cpu_sensor_counts_and_other_devices_do_not(tmp_path: Path) -> None:
    zone(tmp_path, 0, "iwlwifi_1", "91000")  # a Wi-Fi card: not the CPU
    zone(tmp_path, 1, "cpu-thermal", "52500")
    zone(tmp_path, 2, "acpitz", "60000")  # the board's zone: only without a CPU sensor
    hwmon(tmp_path, 0, "nvme", "70000")
    hwmon(tmp_path, 1, "k10temp", "48000", "55250")
    reading = SysfsThermal(tmp_path).read()
    assert (reading.celsius, reading.sensor) == (55.25, "k10temp")
    assert thermal_status(reading, PAUSE) == "ok"


def test_hwmon_alone_and_the_acpi_fallback(tmp_path: Path) -> None:
    hwmon(tmp_path, 0, "coretemp", "66000")
    assert thermal_status(SysfsThermal(tmp_path).read(), PAUSE) == "paused"
    other = tmp_path / "other"
    zone(other, 0, "acpitz", "40000")
    zone(other, 1, "battery", "30000")
    assert SysfsThermal(other).read().sensor == "acpitz"


def test_no_sensor_means_no_pause(tmp_path: Path) -> None:
    assert SysfsThermal(tmp_path / "missing").read() == ThermalReading(None)
    zone(tmp_path, 0, "cpu-thermal", "not a number")  # unreadable: skipped
    zone(tmp_path, 1, "iwlwifi_1", "99000")
    reading = SysfsThermal(tmp_path).read()
    assert reading.celsius is None and not reading.available
    assert thermal_status(reading, PAUSE) == "no sensor"
