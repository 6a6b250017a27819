"""NVIDIA Xid events of the current boot, parsed from `kernel.log` (facts/kmsg.py).

The NVIDIA driver reports GPU faults as `NVRM: Xid (PCI:0000:3b:00): 79, pid=..., ...`
lines. Whether an Xid is the application's fault or the GPU's decides what to do, which
is what `XID_CATALOG` records.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.gpu import normalise_pci_bus_id
from dldoctor.facts.kmsg import LogClock, LogLine, events_from_log, read_lines, unrecognised_notes

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


class XidEvent(NamedTuple):
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


class KernelLog(NamedTuple):
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
    lines, bad_stamps = read_lines(text, "NVRM", "NVRM")
    clock = LogClock(now_monotonic, now_epoch)
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

    notes = clock.notes(bad_stamps, unrecognised_notes(unparsed, "Xid"))
    return [found[i] for i in sorted(found)], notes


def _message(rest: str) -> str:
    rest = rest.strip()
    m = _PID_NAME.match(rest)
    return rest[m.end() :].strip() if m else rest


def _strip_nvrm(body: str) -> str:
    return body[len("NVRM:") :].strip() if body.startswith("NVRM:") else body.strip()


def _fallen_end(lines: list[LogLine], start: int) -> int | None:
    """Index of the line that completes a "has fallen off the bus" message begun at
    `start`, or None when it is some other message about the GPU."""
    for j in range(start, min(start + _FALLEN_SPAN, len(lines))):
        body = lines[j].body
        if j > start and ("NVRM: Xid" in body or _GPU_START.search(body)):
            return None
        if _FALLEN in body:
            return j
    return None


# --- the fact -------------------------------------------------------------------------


@fact("kernel.xid")
def xid_events(ctx: FactContext) -> KernelLog:
    """Xid events of the current boot, with their ages, from `kernel.log`."""
    return events_from_log(ctx, parse_kernel_log, KernelLog)
