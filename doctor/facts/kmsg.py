"""The kernel log (the journal of the current boot, else dmesg), its NVIDIA Xid events and
its NVSwitch SXid events.

`kernel.log` reads the log once and keeps only the lines some fact parses (see
`KEPT_MARKERS`); `kernel.xid`, `kernel.sxid` and `pcie.bandwidth_limits` (facts/pcie.py)
parse from it.

The NVIDIA driver reports GPU faults as `NVRM: Xid (PCI:0000:3b:00): 79, pid=..., ...`
lines. Whether an Xid is the application's fault or the GPU's decides what to do, which
is what `XID_CATALOG` records. `parse_kernel_log` understands the timestamp formats of
dmesg, `dmesg --time-format=iso` and journalctl, and lines with no timestamp at all.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass, replace

from dldoctor.facts import FactContext, fact
from dldoctor.facts.gpu import normalise_pci_bus_id
from dldoctor.facts.reading import to_int
from dldoctor.host.base import DEFAULT_MAX_BYTES, NOT_CAPTURED, Answer, command_key

# --- the Xid catalogue ----------------------------------------------------------------

HARDWARE, APPLICATION, DRIVER = "hardware", "application", "driver"

# xid -> (kind, short description, action). Descriptions and the immediate/investigatory
# resolutions follow NVIDIA's Xid catalogue for Ampere and newer GPUs
# (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, as of late 2025; the
# older "Xid errors" whitepaper for the rest). The kind is dldoctor's reading of it:
# "hardware" means drain / reset / RMA territory, "application" that the GPU is fine and
# the program that faulted should be looked at, "driver" the driver or its firmware.
XID_CATALOG: dict[int, tuple[str, str, str]] = {
    13: (
        APPLICATION,
        "graphics engine exception (illegal instruction or out-of-range access in a kernel)",
        "restart the application; if it recurs, run it under compute-sanitizer",
    ),
    31: (
        APPLICATION,
        "GPU memory page fault (the application touched an address it does not own)",
        "restart the application; debug it with compute-sanitizer; if unrelated programs "
        "fault on this GPU, suspect the driver or the GPU",
    ),
    # NVIDIA: RESTART_APP, then CHECK_APP/CUDA. The old whitepaper also lists system
    # memory corruption, bus errors and heat as causes: "driver" is a judgement call.
    32: (
        DRIVER,
        "invalid or corrupted push buffer stream",
        "restart the application; if it recurs, check the driver, PCIe errors and cooling",
    ),
    38: (
        DRIVER,
        "driver firmware error (watchdog timeout)",
        "none right away; update the driver and contact NVIDIA support if it recurs",
    ),
    43: (
        APPLICATION,
        "GPU stopped processing: a channel was reset after an application fault",
        "none for the GPU; look at the application that stopped",
    ),
    45: (
        APPLICATION,
        "preemptive cleanup of a channel after an earlier error or an application kill",
        "follow the Xid that came before it; alone it is routine at application exit",
    ),
    48: (
        HARDWARE,
        "double-bit (uncorrectable) ECC error",
        "drain the GPU and reset it so the bad memory is retired or remapped; RMA if it recurs",
    ),
    # Marked "Unused" in NVIDIA's current catalogue (PMU_BREAKPOINT); older drivers used
    # it for an internal micro-controller breakpoint or warning, often before Xid 62.
    # The kind is not certain.
    61: (
        DRIVER,
        "internal micro-controller breakpoint or warning",
        "watch for Xid 62; reset the GPU if it stops working; update the driver",
    ),
    62: (
        HARDWARE,
        "internal micro-controller halt",
        "drain and reset the GPU; contact NVIDIA support if it recurs",
    ),
    63: (
        HARDWARE,
        "ECC page retirement or row remapping recorded",
        "none now (the repair is recorded); reset the GPU when convenient to apply it",
    ),
    64: (
        HARDWARE,
        "ECC page retirement or row remapping failed",
        "drain and reset the GPU; RMA if remapping keeps failing",
    ),
    68: (
        APPLICATION,
        "video decoder (NVDEC0) exception",
        "restart the application",
    ),
    69: (
        APPLICATION,
        "graphics engine class error",
        "restart the application; check the application and its CUDA version",
    ),
    74: (
        HARDWARE,
        "NVLink error",
        "drain; check the links (`nvidia-smi nvlink -e`), reset the GPU, and contact "
        "support if it recurs",
    ),
    79: (
        HARDWARE,
        "GPU has fallen off the bus (lost from PCIe)",
        "drain and reboot the node (a GPU reset does not bring it back); check power, "
        "cooling and seating; RMA if it recurs",
    ),
    92: (
        HARDWARE,
        "high single-bit (corrected) ECC error rate",
        "none right away; watch the ECC counters and contact support if they keep rising",
    ),
    94: (
        HARDWARE,
        "contained uncorrectable ECC error (only the affected application was stopped)",
        "restart the affected application; reset the GPU when convenient to remap the row",
    ),
    95: (
        HARDWARE,
        "uncontained uncorrectable ECC error (every application on the GPU is affected)",
        "drain and reset the GPU; RMA if it recurs",
    ),
    # NVIDIA: RESET_GPU, then CONTACT_SUPPORT. The old whitepaper blames the driver, memory
    # corruption, the bus or heat; "driver" is a judgement call.
    109: (
        DRIVER,
        "context switch timeout",
        "reset the GPU; contact NVIDIA support if it recurs",
    ),
    119: (
        HARDWARE,
        "GSP (GPU System Processor) RPC timeout",
        "drain and reset the GPU (or reboot); update the driver if it recurs",
    ),
    120: (
        HARDWARE,
        "GSP (GPU System Processor) error",
        "drain and reset the GPU (or reboot); update the driver if it recurs",
    ),
    # Grace Hopper chip-to-chip link. NVIDIA: IGNORE, then CONTACT_SUPPORT; the kind is
    # not certain.
    121: (
        HARDWARE,
        "C2C (chip-to-chip) link error",
        "none right away; contact NVIDIA support if it recurs",
    ),
    140: (
        HARDWARE,
        "unrecovered ECC error",
        "drain and reset the GPU; RMA if it recurs",
    ),
    154: (
        HARDWARE,
        "GPU recovery action changed (the driver says what the GPU needs)",
        "do what the message asks: GPU reset, node reboot, or drain",
    ),
}


def xid_info(xid: int | None) -> tuple[str, str, str]:
    """(kind, description, action) of an Xid; None is the Xid-less "fallen off the bus"."""
    if xid is None:
        return XID_CATALOG[79]
    return XID_CATALOG.get(xid, ("unknown", f"Xid {xid}", "look it up in NVIDIA's Xid catalogue"))


# --- the model ------------------------------------------------------------------------


@dataclass(frozen=True)
class XidEvent:
    xid: int | None  # None: the Xid-less "has fallen off the bus" message
    pci: str  # as printed: "0000:3b:00" in Xid lines, "0000:3b:00.0" in the other one
    message: str  # what follows the Xid number, pid= and name= left out
    age_s: float | None  # seconds before the log was read; None: no usable timestamp
    raw: str  # the log line(s), as read

    @property
    def kind(self) -> str:
        return xid_info(self.xid)[0]

    @property
    def description(self) -> str:
        return xid_info(self.xid)[1]

    @property
    def pci_bus_id(self) -> str:
        """Normalised like `Gpu.pci_bus_id` ("0000:3b:00.0"), for matching the two."""
        return normalise_pci_bus_id(self.pci) or self.pci.lower()


@dataclass(frozen=True)
class KernelLog:
    source: str  # the command line read; "" when none could be
    events: tuple[XidEvent, ...]
    readable: bool
    notes: tuple[str, ...] = ()


# --- the parser -----------------------------------------------------------------------

_HEX_ADDR = r"[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{1,2}:[0-9A-Fa-f]{1,2}"
# "PCI:" is missing in old drivers; MIG adds " GPU-I:05" inside the parentheses.
_XID = re.compile(
    rf"NVRM: Xid \((?:PCI:)?\s*({_HEX_ADDR}(?:\.[0-7])?)[^)]*\):\s*(\d+)\b\s*,?\s*(.*)$"
)
_PID_NAME = re.compile(r"^pid=('[^']*'|[^,\s]*)\s*(?:,\s*name=([^,]*))?\s*(?:,\s*|$)")
# `NVRM: The NVIDIA GPU 0000:3b:00.0` (begins the multi-line message) and
# `NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.` (newer drivers, after Xid 79).
_GPU_START = re.compile(rf"NVRM: (?:The NVIDIA )?GPU ({_HEX_ADDR}\.[0-7])\b")
_FALLEN = "fallen off the bus"
_FALLEN_SPAN = 4  # lines the fallen-off message may take
_SAME_EVENT_LINES = 8  # an Xid 79 this close (in NVRM lines) for the same GPU is the same

# 2024-05-01T10:00:00,123456+00:00 (dmesg --time-format=iso),
# 2024-05-01T10:00:00.123456+0000 (journalctl -o short-iso-precise), +00:00 in newer
# systemd, Z from other tools.
_ISO = re.compile(
    r"^\s*(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?(?=\s)"
)
_MONOTONIC = re.compile(r"\[\s*(\d+(?:\.\d+)?)\]")
_MAX_NOTES = 5


@dataclass
class _Line:
    raw: str
    body: str  # from "NVRM" on
    monotonic: float | None
    epoch: float | None


def _iso_epoch(m: re.Match) -> float | None:
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    zone = m.group(8)
    if zone is None:  # a local time in a zone we do not know
        return None
    if zone == "Z":
        offset = 0
    else:
        digits = zone[1:].replace(":", "")
        offset = (int(digits[:2]) * 60 + int(digits[2:])) * 60
        offset = -offset if zone[0] == "-" else offset
    try:
        stamp = _dt.datetime(
            year, month, day, hour, minute, second,
            tzinfo=_dt.timezone(_dt.timedelta(seconds=offset)),
        )  # fmt: skip
    except (ValueError, OverflowError):
        return None
    fraction = float(f"0.{m.group(7)}") if m.group(7) else 0.0
    return stamp.timestamp() + fraction


def _stamp(prefix: str) -> tuple[float | None, float | None, bool]:
    """(monotonic, epoch, looked like a stamp) from the text before "NVRM"."""
    m = _ISO.match(prefix)
    if m is not None:
        return None, _iso_epoch(m), True
    m = _MONOTONIC.search(prefix)
    if m is not None:
        return float(m.group(1)), None, True
    return None, None, False


def _read_lines(text: str, marker: str, body_from: str) -> tuple[list[_Line], int]:
    """The lines holding `marker`, with their stamps, and how many stamps were unusable.
    A line's body starts at `body_from` (or at `marker` when the line lacks it)."""
    lines: list[_Line] = []
    bad_stamps = 0
    for raw in text.split("\n"):
        raw = raw.rstrip("\r")
        at = raw.find(marker)
        if at < 0:
            continue
        start = raw.rfind(body_from, 0, at + 1)
        at = start if start >= 0 else at
        monotonic, epoch, stamped = _stamp(raw[:at])
        if stamped and monotonic is None and epoch is None:
            bad_stamps += 1
        if not stamped and lines and raw[:1].isspace():
            monotonic, epoch = lines[-1].monotonic, lines[-1].epoch
        lines.append(_Line(raw, raw[at:], monotonic, epoch))
    return lines, bad_stamps


class _Clock:
    """Ages of stamped lines against "now"; counts the stamps later than now."""

    def __init__(self, now_monotonic: float | None, now_epoch: float | None):
        self.now_monotonic, self.now_epoch = now_monotonic, now_epoch
        self.in_future = 0

    def age(self, line: _Line) -> float | None:
        if line.epoch is not None:
            value = None if self.now_epoch is None else self.now_epoch - line.epoch
        elif line.monotonic is not None:
            # dmesg stamps leave out time suspended, /proc/uptime counts it: after a
            # suspend the age comes out too large, never too small.
            value = None if self.now_monotonic is None else self.now_monotonic - line.monotonic
        else:
            return None
        if value is not None and value < 0:
            if value < -2.0:  # `date +%s` has whole seconds; more than that is odd
                self.in_future += 1
                return None
            value = 0.0
        return value

    def notes(self, bad_stamps: int, middle: list[str]) -> list[str]:
        """Notes on the stamps read, around `middle` (the parser's own notes)."""
        notes = []
        if bad_stamps:
            notes.append(f"{bad_stamps} line(s) have a timestamp without a usable date or zone")
        notes += middle
        if self.in_future:
            notes.append(
                f"{self.in_future} event(s) are stamped later than the log was read (another "
                "boot, or the clock changed): their age is unknown"
            )
        return notes


def parse_kernel_log(
    text: str, *, now_monotonic: float | None = None, now_epoch: float | None = None
) -> tuple[list[XidEvent], list[str]]:
    """Xid events in log order, and notes on what was not understood. Never raises.

    A line's age comes from its wall-clock stamp and `now_epoch`, or its monotonic
    `[ 1234.5]` stamp and `now_monotonic` (the uptime when the log was read); a line
    with neither, or without the matching `now_*`, has age None. A stampless line that
    is indented continues the line before it (journalctl prints the later lines of a
    multi-line message that way) and takes its stamp.
    """
    lines, bad_stamps = _read_lines(text, "NVRM", "NVRM")
    clock = _Clock(now_monotonic, now_epoch)
    age = clock.age

    found: dict[int, XidEvent] = {}
    unparsed: list[str] = []
    for i, line in enumerate(lines):
        if "NVRM: Xid" not in line.body:
            continue
        m = _XID.search(line.body)
        if m is None:
            unparsed.append(line.raw)
            continue
        try:
            xid = int(m.group(2))
        except ValueError:  # thousands of digits: past int()'s limit for strings
            unparsed.append(line.raw)
            continue
        found[i] = XidEvent(xid, m.group(1), _message(m.group(3)), age(line), line.raw)

    xid79_at: dict[str, list[int]] = {}
    for i, event in found.items():
        if event.xid == 79:
            xid79_at.setdefault(event.pci_bus_id, []).append(i)

    consumed: set[int] = set()
    for i, line in enumerate(lines):
        if i in consumed or i in found:
            continue
        m = _GPU_START.search(line.body)
        if m is None:
            continue
        end = _fallen_end(lines, i)
        if end is None:
            continue
        consumed.update(range(i, end + 1))
        address = m.group(1)
        near = xid79_at.get(normalise_pci_bus_id(address) or address.lower(), [])
        if any(i - _SAME_EVENT_LINES <= j <= end + _SAME_EVENT_LINES for j in near):
            continue  # the Xid 79 already tells it
        span = lines[i : end + 1]
        message = " ".join(_strip_nvrm(part.body) for part in span)
        raw = "\n".join(part.raw for part in span)
        found[i] = XidEvent(None, address, message, age(line), raw)

    notes = clock.notes(bad_stamps, _unrecognised(unparsed, "Xid"))
    return [found[i] for i in sorted(found)], notes


def _unrecognised(raws: list[str], what: str) -> list[str]:
    notes = [f"unrecognised {what} line: {raw.strip()[:100]!r}" for raw in raws[:_MAX_NOTES]]
    if len(raws) > _MAX_NOTES:
        notes.append(f"... and {len(raws) - _MAX_NOTES} more unrecognised {what} lines")
    return notes


def _message(rest: str) -> str:
    rest = rest.strip()
    m = _PID_NAME.match(rest)
    return rest[m.end() :].strip() if m else rest


def _strip_nvrm(body: str) -> str:
    return body[len("NVRM:") :].strip() if body.startswith("NVRM:") else body.strip()


def _fallen_end(lines: list[_Line], start: int) -> int | None:
    """Index of the line that completes a "has fallen off the bus" message begun at
    `start`, or None when it is some other message about the GPU."""
    for j in range(start, min(start + _FALLEN_SPAN, len(lines))):
        body = lines[j].body
        if j > start and ("NVRM: Xid" in body or _GPU_START.search(body)):
            return None
        if _FALLEN in body:
            return j
    return None


# --- NVSwitch SXid events --------------------------------------------------------------

# The nvidia-nvswitch driver reports switch faults as three lines per event, e.g.
#   nvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Fatal, Link 30 LTSSM Fault Up
#   nvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Severity 1 Engine instance 30 ...
#   nvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Data {0x50610002, ...}
# The first says Fatal or Non-fatal itself; some (the SOE's) say neither.
SXID_FATAL, SXID_NON_FATAL, SXID_IGNORE = "fatal", "non-fatal", "ignore"

_RESET_ALL = "drain; reset all GPUs and NVSwitches (a node reboot does both)"
_ECC_SBE = (SXID_NON_FATAL, "single-bit ECC error, corrected by the switch", "none; watch for DBEs")

# sxid -> (class, meaning, action). Classes and meanings follow NVIDIA's Fabric Manager
# user guide, appendix "NVSwitch SXid errors" (DU-09883-001: D.4 non-fatal, D.5 potentially
# fatal, D.6 always fatal; as transcribed in leptonai/gpud's sxid catalogue). The class is
# what the guide expects; the Fatal / Non-fatal word of the line itself decides.
SXID_CATALOG: dict[int, tuple[str, str, str]] = {
    11004: (
        SXID_NON_FATAL,
        "ingress invalid ACL (a wrong Fabric Manager partition configuration)",
        "check the partition routing with the NVSwitch audit tool (nvswitch-audit); restart "
        "the jobs (they end with Xid 45)",
    ),
    **{
        n: _ECC_SBE
        for n in (
            11012,
            11021,
            11022,
            11023,
            12021,
            12023,
            15008,
            15011,
            19049,
            19055,
            19057,
            19059,
            19062,
            19065,
            19068,
            19071,
            24001,
            24002,
            24003,
        )
    },  # fmt: skip
    12028: (
        SXID_NON_FATAL,
        "egress non-posted PRIV error: NVLink traffic of the GPU behind it stalls",
        "restart the affected jobs (they end with Xid 45); reset the GPUs if it recurs",
    ),
    19084: (
        SXID_NON_FATAL,
        "AN1 heartbeat timeout (usually comes with a fatal SXid)",
        _RESET_ALL,
    ),
    20001: (
        SXID_NON_FATAL,
        "TX replay error: NVLink packets retransmitted, throughput of the port may drop",
        "none now; reseat or service the link if it keeps rising",
    ),
    22013: (SXID_IGNORE, "Minion link DLREQ interrupt", "none: NVIDIA says it can be ignored"),
    11001: (SXID_FATAL, "ingress invalid command", _RESET_ALL),
    11009: (SXID_FATAL, "ingress invalid VCSet", _RESET_ALL),
    11013: (SXID_FATAL, "ingress header double-bit ECC error", _RESET_ALL),
    11018: (SXID_FATAL, "ingress RID double-bit ECC error", _RESET_ALL),
    11019: (SXID_FATAL, "ingress RLAN double-bit ECC error", _RESET_ALL),
    11020: (SXID_FATAL, "ingress control parity error", _RESET_ALL),
    12001: (SXID_FATAL, "egress crossbar overflow", _RESET_ALL),
    12002: (SXID_FATAL, "egress packet route error", _RESET_ALL),
    12020: (SXID_FATAL, "egress sequence ID error (always fatal)", _RESET_ALL),
    12022: (SXID_FATAL, "egress input ECC double-bit error", _RESET_ALL),
    12024: (SXID_FATAL, "egress output ECC double-bit error", _RESET_ALL),
    12025: (SXID_FATAL, "egress credit overflow", _RESET_ALL),
    12026: (SXID_FATAL, "egress destination request ID error", _RESET_ALL),
    12027: (SXID_FATAL, "egress destination response ID error", _RESET_ALL),
    12030: (SXID_FATAL, "egress control parity error", _RESET_ALL),
    12031: (SXID_FATAL, "egress credit parity error", _RESET_ALL),
    12032: (SXID_FATAL, "egress flit type mismatch", _RESET_ALL),
    14017: (SXID_FATAL, "TS ATO timeout", _RESET_ALL),
    15001: (SXID_FATAL, "route buffer over/underflow", _RESET_ALL),
    15006: (SXID_FATAL, "route transdone over/underflow", _RESET_ALL),
    15009: (SXID_FATAL, "route GLT double-bit ECC error", _RESET_ALL),
    15010: (SXID_FATAL, "route parity error", _RESET_ALL),
    15012: (SXID_FATAL, "route incoming double-bit ECC error", _RESET_ALL),
    15013: (SXID_FATAL, "route credit parity error", _RESET_ALL),
    20034: (
        SXID_FATAL,
        "LTSSM fault up: the link went down from active",
        _RESET_ALL + "; if the same link fails again, report the GPU or baseboard",
    ),
    22003: (SXID_FATAL, "Minion halt (always fatal)", _RESET_ALL),
    22011: (SXID_FATAL, "Minion exterror (always fatal)", _RESET_ALL),
    22012: (
        SXID_FATAL,
        "Minion link NA interrupt (a broken connection or an uncoordinated shutdown)",
        _RESET_ALL + "; unless a shutdown explains it, check the link's mechanical connection",
    ),
    **{
        n: (SXID_FATAL, "ingress/egress SRC-VC or DST-VC buffer error (always fatal)", _RESET_ALL)
        for n in range(23001, 23009)
    },  # fmt: skip
    24004: (SXID_FATAL, "sourcetrack TCEN0 crumbstore double-bit ECC error", _RESET_ALL),
    24005: (SXID_FATAL, "sourcetrack TCEN0 TD crumbstore double-bit ECC error", _RESET_ALL),
    24006: (SXID_FATAL, "sourcetrack TCEN1 crumbstore double-bit ECC error", _RESET_ALL),
    24007: (SXID_FATAL, "sourcetrack timeout error", _RESET_ALL),
}


@dataclass(frozen=True)
class SxidEvent:
    sxid: int
    pci: str  # the NVSwitch, as printed: "0000:a9:00.0"
    switch: str  # "nvidia-nvswitch0"; "" when the line does not say
    severity: str  # what the line says: "fatal", "non-fatal"; "" when it says neither
    link: int | None
    message: str  # after the severity and link: "LTSSM Fault Up"
    age_s: float | None
    raw: str  # the header line and the Severity/Data lines that follow it

    @property
    def verdict(self) -> str:
        """fatal, non-fatal, ignore (NVIDIA says so), or "" (neither the line nor the
        catalogue says)."""
        known = SXID_CATALOG.get(self.sxid)
        if self.severity == SXID_FATAL:
            return SXID_FATAL
        if known is not None and (self.severity == "" or known[0] == SXID_IGNORE):
            return known[0]
        return self.severity

    @property
    def description(self) -> str:
        known = SXID_CATALOG.get(self.sxid)
        return known[1] if known else (self.message or f"SXid {self.sxid}")

    @property
    def action(self) -> str:
        known = SXID_CATALOG.get(self.sxid)
        if known:
            return known[2]
        return _RESET_ALL if self.verdict == SXID_FATAL else "look it up in NVIDIA's SXid list"


@dataclass(frozen=True)
class SxidLog:
    source: str  # the command line read; "" when none could be
    events: tuple[SxidEvent, ...]
    readable: bool
    notes: tuple[str, ...] = ()


_SXID = re.compile(
    r"SXid \((?:PCI:)?\s*([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{1,2}:[0-9A-Fa-f]{1,2}(?:\.[0-7])?)\)"
    r"\s*:\s*(\d{1,9})\s*,\s*(.*)$"
)
_SWITCH = re.compile(r"(nvidia-nvswitch\d*):\s*$")
_SEVERITY = re.compile(r"(Fatal|Non-fatal)\s*(?:,\s*|$)(.*)$", re.IGNORECASE)
_LINK = re.compile(r"Link\s+(\d+)\s*(.*)$")
_FOLLOW_UP = re.compile(r"(?:Severity\s+\d+\s+Engine instance|Data\s*\{)")


def parse_sxid(
    text: str, *, now_monotonic: float | None = None, now_epoch: float | None = None
) -> tuple[list[SxidEvent], list[str]]:
    """SXid events in log order, and notes; never raises. A `Severity ...` or `Data {...}`
    line belongs to the latest event of the same switch and SXid; one without such an event
    (the log was cut) is an event of its own, its severity unknown."""
    lines, bad_stamps = _read_lines(text, "SXid", "nvidia-nvswitch")
    clock = _Clock(now_monotonic, now_epoch)
    events: list[SxidEvent] = []
    raws: list[list[str]] = []  # each event's lines, joined once at the end: not per line
    latest: dict[tuple[str, int], int] = {}
    unparsed: list[str] = []
    for line in lines:
        m = _SXID.search(line.body)
        if m is None:
            unparsed.append(line.raw)
            continue
        pci, sxid, rest = m.group(1).lower(), int(m.group(2)), m.group(3).strip()
        before = _SWITCH.search(line.body[: m.start()])
        switch = before.group(1) if before else ""
        if _FOLLOW_UP.match(rest) and (pci, sxid) in latest:
            raws[latest[(pci, sxid)]].append(line.raw)
            continue
        severity, link, message = "", None, rest
        if _FOLLOW_UP.match(rest):
            message = ""
        elif sev := _SEVERITY.match(rest):
            severity, message = sev.group(1).lower(), sev.group(2).strip()
            if lk := _LINK.match(message):
                link, message = to_int(lk.group(1)), lk.group(2).strip()
        latest[(pci, sxid)] = len(events)
        events.append(
            SxidEvent(sxid, pci, switch, severity, link, message, clock.age(line), line.raw)
        )
        raws.append([line.raw])
    events = [
        replace(e, raw="\n".join(r)) if len(r) > 1 else e
        for e, r in zip(events, raws, strict=True)
    ]
    return events, clock.notes(bad_stamps, _unrecognised(unparsed, "SXid"))


# --- the facts ------------------------------------------------------------------------

JOURNAL_ARGV = ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise")
DMESG_ARGV = ("dmesg",)
DATE_ARGV = ("date", "+%s")

# A kernel log can be large; only the lines some fact parses are kept: the NVIDIA driver's
# (Xid events), the NVSwitch driver's (SXid events), the PCI core's "available PCIe
# bandwidth, limited by ..." and AER reports.
KEPT_MARKERS = (b"NVRM", b"SXid", b"PCIe bandwidth", b"AER:")


def kept_lines(data: bytes) -> str:
    """The lines of a kernel log that mention one of `KEPT_MARKERS`."""
    keep = [line for line in data.split(b"\n") if any(m in line for m in KEPT_MARKERS)]
    return b"\n".join(keep).decode("utf-8", "replace")


@dataclass(frozen=True)
class KernelLogText:
    """The kernel log of the current boot, cut to `KEPT_MARKERS` lines, as read once."""

    source: str  # the command line read; "" when none could be
    text: str  # the kept lines, in log order
    readable: bool
    # "Now" on the host's clock, for the ages of stamped lines: wall-clock seconds when the
    # journal was read, the uptime when dmesg was (its stamps are monotonic). None when
    # there was nothing to date or the host could not say.
    now_epoch: float | None = None
    now_monotonic: float | None = None
    notes: tuple[str, ...] = ()


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[0][:120] if text else ""


def _why_unusable(answer: Answer) -> str:
    """ "" when a command answered with exit status 0; otherwise why not."""
    if not answer.ok:
        return answer.describe()
    result = answer.value
    if result.returncode != 0:
        said = _first_line(result.stderr) or _first_line(result.stdout)
        return f"`{answer.key}` exited with status {result.returncode}" + (
            f": {said}" if said else ""
        )
    return ""


def _journal_has_entries(stdout: bytes) -> bool:
    # "-- No entries --" and "-- Journal begins at ... --" are journalctl's own lines.
    return any(line.strip() and not line.startswith(b"-- ") for line in stdout.split(b"\n"))


def _cut_note(answer: Answer) -> list[str]:
    if len(answer.value.stdout) >= DEFAULT_MAX_BYTES:
        return [f"`{answer.key}` printed more than was kept: the latest events may be missing"]
    return []


@fact("kernel.log")
def kernel_log(ctx: FactContext) -> KernelLogText:
    """The kernel messages of the current boot: the journal's, else dmesg's.

    The journal keeps the whole boot; the dmesg ring buffer only its latest part. "Now"
    comes from the host's own clock (`date +%s`) or uptime (/proc/uptime), read through
    the Host like everything else, so a replayed bundle gives the same ages; it is only
    asked for when some line was kept.
    """
    notes: list[str] = []
    journal = ctx.host.run(list(JOURNAL_ARGV)).require(uncaptured_ok=True)
    if journal.status == NOT_CAPTURED:  # an nvidia-bug-report has dmesg, not the journal
        ctx.replaced(journal)
    why = _why_unusable(journal)
    if not why and not _journal_has_entries(journal.value.stdout):
        why = "the journal has no kernel messages for this boot"
        hint = _first_line(journal.value.stderr)
        why += f" ({hint})" if hint else ""
    if not why:
        text = kept_lines(journal.value.stdout)
        now_epoch = None
        if text:
            now_epoch, clock_note = _now_epoch(ctx)
            notes += clock_note
        notes += _cut_note(journal)
        source = command_key(JOURNAL_ARGV)
        return KernelLogText(source, text, True, now_epoch=now_epoch, notes=tuple(notes))

    notes.append(f"journal not used: {why}")
    dmesg = ctx.host.run(list(DMESG_ARGV)).require()
    why = _why_unusable(dmesg)
    if why:
        if dmesg.ok and b"not permitted" in dmesg.value.stderr.lower():
            why += " (kernel.dmesg_restrict=1: run as root or with CAP_SYSLOG)"
        notes.append(f"dmesg not read: {why}")
        return KernelLogText("", "", False, notes=tuple(notes))
    if not dmesg.value.stdout.strip():
        notes.append("dmesg printed nothing (the ring buffer may have been cleared)")
    text = kept_lines(dmesg.value.stdout)
    now_monotonic = None
    if text:
        now_monotonic, uptime_note = _now_monotonic(ctx)
        notes += uptime_note
    notes += _cut_note(dmesg)
    source = command_key(DMESG_ARGV)
    return KernelLogText(source, text, True, now_monotonic=now_monotonic, notes=tuple(notes))


@fact("kernel.xid")
def xid_events(ctx: FactContext) -> KernelLog:
    """Xid events of the current boot, with their ages, from `kernel.log`."""
    return _events(ctx, parse_kernel_log, KernelLog)


def _events(ctx: FactContext, parse, make):
    """`make(source, events, readable, notes)` of what `parse` finds in `kernel.log`."""
    log = ctx.get(kernel_log)
    if not log.readable:
        return make("", (), False, log.notes)
    events, parse_notes = parse(log.text, now_monotonic=log.now_monotonic, now_epoch=log.now_epoch)
    return make(log.source, tuple(events), True, log.notes + tuple(parse_notes))


def _now_epoch(ctx: FactContext) -> tuple[float | None, list[str]]:
    answer = ctx.host.run(list(DATE_ARGV)).require()
    why = _why_unusable(answer)
    if not why:
        text = answer.text.strip()
        if re.fullmatch(r"\d+", text):
            return float(text), []
        why = f"`{answer.key}` printed {text[:40]!r}"
    return None, [f"the host's clock could not be read ({why}): event ages are unknown"]


def _now_monotonic(ctx: FactContext) -> tuple[float | None, list[str]]:
    answer = ctx.host.read("/proc/uptime", max_bytes=256).require(uncaptured_ok=True)
    if answer.status == NOT_CAPTURED:  # the ages are unknown, the events are still there
        ctx.replaced(answer)
    if answer.ok:
        first = answer.text.split()[:1]
        try:
            uptime = float(first[0])
        except (IndexError, ValueError):
            uptime = math.nan
        if math.isfinite(uptime) and uptime >= 0:
            return uptime, []
        why = f"/proc/uptime reads {answer.text.strip()[:40]!r}"
    else:
        why = answer.describe()
    return None, [f"the uptime could not be read ({why}): event ages are unknown"]


@fact("kernel.sxid")
def sxid_events(ctx: FactContext) -> SxidLog:
    """NVSwitch SXid events of the current boot, with their ages, from `kernel.log`."""
    return _events(ctx, parse_sxid, SxidLog)
