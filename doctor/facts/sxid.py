"""NVSwitch SXid events of the current boot, parsed from `kernel.log` (facts/kmsg.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dldoctor.facts import FactContext, fact
from dldoctor.facts.kmsg import LogClock, events_from_log, read_lines, unrecognised_notes
from dldoctor.facts.reading import to_int

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
    lines, bad_stamps = read_lines(text, "SXid", "nvidia-nvswitch")
    clock = LogClock(now_monotonic, now_epoch)
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
        replace(e, raw="\n".join(r)) if len(r) > 1 else e for e, r in zip(events, raws, strict=True)
    ]
    return events, clock.notes(bad_stamps, unrecognised_notes(unparsed, "SXid"))


# --- the fact -------------------------------------------------------------------------


@fact("kernel.sxid")
def sxid_events(ctx: FactContext) -> SxidLog:
    """NVSwitch SXid events of the current boot, with their ages, from `kernel.log`."""
    return events_from_log(ctx, parse_sxid, SxidLog)
