"""Temperatures the kernel reports: thermal zones and hwmon chips (CPU, NVMe, board).

/sys/class/thermal/thermal_zone*/temp and /sys/class/hwmon/hwmon*/temp*_input are in
millidegrees Celsius. Plenty of them are not real readings: an ACPI zone with no sensor
behind it answers -44 C or 0, a chip with a broken diode 255 C, a sensor the driver
cannot read fails with EIO or ENODATA. Such a reading comes back with `reliable=False`
and the reason, so a check does not judge it as a temperature.

Reads are bounded: MAX_ZONES zones, MAX_CHIPS hwmon chips and MAX_TEMPS temperatures per
chip (the rest is noted). Reads follow facts/reading.py's rule: a timeout stops the fact
(`ProbeFailed`), any other failed read leaves that value empty and is noted (a failed
temperature read is told by its Sensor instead).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.reading import SMALL, answer_text, read_listing, read_text
from dldoctor.host.base import Host

THERMAL_CLASS = "/sys/class/thermal"
HWMON_CLASS = "/sys/class/hwmon"

MAX_ZONES = 64
MAX_CHIPS = 64
MAX_TEMPS = 32  # temperatures per hwmon chip
MAX_TRIPS = 32  # trip points per zone

LOWEST_C = -40.0  # below: no sensor is there (ACPI zones answer -44 C, -273 C, ...)
HIGHEST_C = 150.0  # above: a broken or unconnected diode (127, 255 C), not silicon

# Zone types and hwmon chip names of CPU sensors, where exactly 0 C is "no reading".
CPU_ZONE_TYPES = frozenset({"x86_pkg_temp", "cpu-thermal", "cpu_thermal", "soc_thermal"})
CPU_CHIPS = frozenset({"coretemp", "k10temp", "zenpower", "k8temp", "cpu_thermal"})


class Sensor(NamedTuple):
    source: str  # "thermal_zone0", "hwmon2/temp1"
    label: str  # zone type ("acpitz"), or chip name and label ("coretemp Package id 0")
    celsius: float | None = None
    critical_c: float | None = None  # the zone's "critical" trip point, hwmon temp*_crit
    hot_c: float | None = None  # the zone's "hot" trip point, hwmon temp*_max
    reliable: bool = True
    why_unreliable: str = ""


class Sensors(tuple):
    """A tuple of Sensor, with `notes` about what was not read (caps, unreadable folders)."""

    notes: tuple[str, ...]

    def __new__(cls, sensors=(), notes=()):
        self = super().__new__(cls, sensors)
        self.notes = tuple(notes)
        return self


# --- parsers --------------------------------------------------------------------------

_MILLI = re.compile(r"^\s*(-?\d{1,9})\s*$")


def parse_millidegrees(text: str) -> float | None:
    """Celsius of a millidegree value: "49925" -> 49.925, "-44000" -> -44.0; else None."""
    m = _MILLI.match(text)
    return int(m.group(1)) / 1000.0 if m else None


def judge(celsius: float | None, *, cpu: bool = False) -> tuple[bool, str]:
    """Whether a reading can be judged as a temperature, and why not."""
    if celsius is None:
        return False, "no reading"
    if celsius < LOWEST_C:
        return False, f"{celsius:g} C is below {LOWEST_C:g} C: no sensor behind it"
    if celsius > HIGHEST_C:
        return False, f"{celsius:g} C is above {HIGHEST_C:g} C: a broken or absent sensor"
    if cpu and celsius == 0:
        return False, "0 C on a CPU sensor: the driver has no reading"
    return True, ""


def _threshold(celsius: float | None) -> float | None:
    """Trip points and limits of 0 or below are "not set" (some firmware writes -273 C)."""
    return celsius if celsius is not None and 0 < celsius < 1000 else None


# --- reading --------------------------------------------------------------------------


class _Reader:
    """The shared reading rule, bound to one host and the fact's notes."""

    def __init__(self, host: Host, notes: list[str]):
        self.host = host
        self.notes = notes

    def text(self, path: str) -> str | None:
        return read_text(self.host, path, self.notes, max_bytes=SMALL)

    def listing(self, path: str) -> tuple[str, ...] | None:
        return read_listing(self.host, path, self.notes)


def _numbered(names, prefix: str, suffix: str = "") -> list[tuple[int, str]]:
    pattern = re.compile(rf"^{re.escape(prefix)}(\d{{1,6}}){re.escape(suffix)}$")
    found = [(int(m.group(1)), n) for n in names if (m := pattern.match(n))]
    return sorted(found)


def _reading(reader: _Reader, path: str, *, cpu: bool) -> tuple[float | None, bool, str]:
    answer = reader.host.read(path, max_bytes=SMALL)
    text = answer_text(answer, None)  # the sensor itself says why it has no reading
    if text is None:
        return None, False, f"could not be read ({answer.status})"
    celsius = parse_millidegrees(text)
    if celsius is None:
        return None, False, f"{text[:40]!r} is not a temperature"
    reliable, why = judge(celsius, cpu=cpu)
    return celsius, reliable, why


def _zone(reader: _Reader, name: str) -> Sensor:
    base = f"{THERMAL_CLASS}/{name}"
    kind = reader.text(f"{base}/type")
    label = kind or f"{name} (unlabelled)"
    celsius, reliable, why = _reading(reader, f"{base}/temp", cpu=kind in CPU_ZONE_TYPES)
    trips: dict[str, float] = {}
    entries = reader.listing(base) or ()
    for _, entry in _numbered(entries, "trip_point_", "_type")[:MAX_TRIPS]:
        trip_kind = reader.text(f"{base}/{entry}")
        if trip_kind in ("critical", "hot") and trip_kind not in trips:
            value = reader.text(f"{base}/{entry.removesuffix('_type')}_temp")
            limit = _threshold(parse_millidegrees(value or ""))
            if limit is not None:
                trips[trip_kind] = limit
    return Sensor(name, label, celsius, trips.get("critical"), trips.get("hot"), reliable, why)


def _chip(reader: _Reader, name: str) -> list[Sensor]:
    base = f"{HWMON_CLASS}/{name}"
    entries = reader.listing(base) or ()
    if "name" not in entries and not any(e.endswith("_input") for e in entries):
        # Before Linux 3.x (and some drivers still) the attributes sit in device/.
        device_entries = reader.listing(f"{base}/device") or ()
        if any(e.startswith("temp") for e in device_entries):
            base, entries = f"{base}/device", device_entries
    chip = reader.text(f"{base}/name")
    chip = chip or name
    temps = _numbered(entries, "temp", "_input")
    if len(temps) > MAX_TEMPS:
        reader.notes.append(f"{base}: {len(temps)} temperatures; only the first {MAX_TEMPS} read")
    sensors = []
    for number, _ in temps[:MAX_TEMPS]:
        prefix = f"{base}/temp{number}"
        own = reader.text(f"{prefix}_label") if f"temp{number}_label" in entries else None
        label = f"{chip} {own}" if own else f"{chip} temp{number} (unlabelled)"
        celsius, reliable, why = _reading(reader, f"{prefix}_input", cpu=chip in CPU_CHIPS)
        if reliable and f"temp{number}_fault" in entries:
            fault = reader.text(f"{prefix}_fault")
            if fault == "1":
                reliable, why = False, "the chip reports a sensor fault"
        limits = {}
        for attr in ("crit", "max"):
            if f"temp{number}_{attr}" in entries:
                value = reader.text(f"{prefix}_{attr}")
                limits[attr] = _threshold(parse_millidegrees(value or ""))
        source = f"{name}/temp{number}"
        sensors.append(
            Sensor(source, label, celsius, limits.get("crit"), limits.get("max"), reliable, why)
        )
    return sensors


@fact("thermal.sensors")
def thermal_sensors(ctx: FactContext) -> Sensors:
    """Every thermal zone, then every hwmon temperature; empty when there are none."""
    notes: list[str] = []
    reader = _Reader(ctx.host, notes)
    found: list[Sensor] = []

    zones = _numbered(reader.listing(THERMAL_CLASS) or (), "thermal_zone")
    if len(zones) > MAX_ZONES:
        notes.append(f"{len(zones)} thermal zones; only the first {MAX_ZONES} read")
    found.extend(_zone(reader, name) for _, name in zones[:MAX_ZONES])

    chips = _numbered(reader.listing(HWMON_CLASS) or (), "hwmon")
    if len(chips) > MAX_CHIPS:
        notes.append(f"{len(chips)} hwmon chips; only the first {MAX_CHIPS} read")
    for _, name in chips[:MAX_CHIPS]:
        found.extend(_chip(reader, name))
    return Sensors(found, notes)
