"""PCIe Access Control Services (ACS) and the IOMMU: the two settings that decide whether
GPU peer-to-peer traffic goes straight through a PCIe switch or up to the root complex.

ACS with request or completion redirect enabled on a bridge between two GPUs (or a GPU and
a NIC) sends their peer-to-peer traffic up to the root complex and the IOMMU; NCCL then
hangs or crawls (NVIDIA/nccl#2079, #304, #606). An IOMMU in translated mode has the same
kind of cost. `lspci -vvv` is the portable way to read the ACS control register; it needs
root to read extended configuration space, and says `<access denied>` otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.gpu import normalise_pci_bus_id
from dldoctor.facts.reading import to_int
from dldoctor.facts.system import kernel_cmdline
from dldoctor.host.base import AnswerStatus

# --- ACS from lspci -vvv ----------------------------------------------------------------

# Bridges only (class 0604): ACS matters on switch and root ports, and a full -vvv reads
# every device's capabilities (VPD included), seconds on hosts with many NICs.
LSPCI_ARGV = ("lspci", "-vvv", "-D", "-d", "::0604")

# The flags lspci prints for ACSCap/ACSCtl, in its order (lib/header.h PCI_ACS_*).
ACS_FLAGS = (
    "SrcValid",
    "TransBlk",
    "ReqRedir",
    "CmpltRedir",
    "UpstreamFwd",
    "EgressCtrl",
    "DirectTrans",
)
REDIRECT_FLAGS = frozenset({"ReqRedir", "CmpltRedir"})

# A device header: "0000:3b:00.0 PCI bridge: ..." (-D) or "3b:00.0 PCI bridge: ...".
# Domains can be wider than 4 digits (Intel VMD puts devices in domain 10000).
_HEADER = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})"
    r"\.(?P<fn>[0-7])(?:\s+(?P<rest>.*))?$"
)
_FLAG = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)([+-])$")
_MAX_NOTES = 20


def normalise_address(address: str) -> str:
    """'3B:00.0' -> '0000:3b:00.0'; anything that is not a PCI address comes back stripped."""
    return normalise_pci_bus_id(address) or address.strip().lower()


class AcsState(NamedTuple):
    """One device with an ACS capability, as lspci showed it."""

    address: str  # "0000:3b:00.0"
    description: str = ""  # "PCI bridge: PLX Technology, Inc. PEX 8747 ..."
    capable: frozenset[str] = frozenset()  # ACSCap flags marked '+'
    enabled: frozenset[str] = frozenset()  # ACSCtl flags marked '+'

    @property
    def redirect(self) -> bool:
        """Request or completion redirect is on: peer-to-peer goes up to the root complex."""
        return bool(self.enabled & REDIRECT_FLAGS)

    @property
    def any_enabled(self) -> bool:
        return bool(self.enabled)


@dataclass(frozen=True)
class LspciAcs:
    devices: dict[str, AcsState] = field(default_factory=dict)
    restricted: bool = False  # lspci could not read extended config space (not root)
    notes: tuple[str, ...] = ()


def _flags(text: str) -> tuple[frozenset[str], list[str]]:
    """'SrcValid+ TransBlk- ...' -> the names marked '+', and the tokens not understood."""
    on, odd = set(), []
    for token in text.split():
        m = _FLAG.match(token)
        if not m:
            odd.append(token)
        elif m.group(2) == "+":
            on.add(m.group(1))
    return frozenset(on), odd


class _Block:
    __slots__ = ("address", "description", "acs", "capable", "enabled", "denied")

    def __init__(self, address: str, description: str):
        self.address = address
        self.description = description
        self.acs = False  # an "Access Control Services" capability header was seen
        self.capable: frozenset[str] | None = None
        self.enabled: frozenset[str] | None = None
        self.denied = False


def parse_lspci_acs(text: str) -> LspciAcs:
    """The ACS state of every device in `lspci -vvv` output that has an ACS capability.

    Device blocks start at a non-indented address line; their lines are indented (tabs
    from lspci, spaces when pasted through a web page). Devices without an ACS capability
    are left out. Never raises: what is not understood becomes a note.
    """
    notes: list[str] = []
    blocks: dict[str, _Block] = {}
    current: _Block | None = None
    orphans = 0  # ACS lines outside any device block (e.g. `lspci -vvv | grep ACSCtl`)
    denied_any = False
    ctl_any = False

    def note(message: str) -> None:
        if len(notes) < _MAX_NOTES:
            notes.append(message)
        elif len(notes) == _MAX_NOTES:
            notes.append("further notes left out")

    for number, raw in enumerate(str(text or "").splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            current = None
            continue
        if not line[0].isspace():
            m = _HEADER.match(line)
            if m and m.group("rest"):
                address = normalise_address(line.split(None, 1)[0])
                if address in blocks:
                    note(f"{address} appears more than once; the last block is used")
                current = blocks[address] = _Block(address, m.group("rest").strip())
            else:
                # Not lspci's: a pasted prompt, a wrapped line. Kept inside the block.
                note(f"line {number} is not a device line: {line[:60]!r}")
            continue
        body = line.strip()
        key, sep, rest = body.partition(":")
        if body.startswith("Capabilities:"):
            if "<access denied>" in body:
                denied_any = True
                if current is not None:
                    current.denied = True
            elif "Access Control Services" in body and current is not None:
                current.acs = True
            continue
        if sep and key in ("ACSCap", "ACSCtl"):
            if current is None:
                orphans += 1
                ctl_any = ctl_any or key == "ACSCtl"
                continue
            on, odd = _flags(rest)
            if odd:
                note(f"{current.address} {key}: not understood: {' '.join(odd)[:60]}")
            if key == "ACSCap":
                current.capable = on
            else:
                current.enabled = on
                ctl_any = True
            current.acs = True

    devices: dict[str, AcsState] = {}
    for address, block in blocks.items():
        if not block.acs:
            continue
        if block.enabled is None:
            note(f"{address} has an ACS capability but no readable ACSCtl line")
        devices[address] = AcsState(
            address, block.description, block.capable or frozenset(), block.enabled or frozenset()
        )
    if orphans:
        note(f"{orphans} ACS line(s) outside any device block (grep output?); not attributed")
    denied = sum(1 for b in blocks.values() if b.denied)
    restricted = denied_any and not ctl_any
    if restricted:
        note("lspci could not read extended configuration space (run as root to see ACS)")
    elif denied:
        note(f"{denied} device(s) showed <access denied>; their ACS state is unknown")
    return LspciAcs(devices, restricted, tuple(notes))


class AcsReport(NamedTuple):
    available: bool = False  # lspci ran and printed something
    restricted: bool = False  # it ran without the rights to read ACS (needs root)
    devices: tuple[AcsState, ...] = ()  # sorted by address
    notes: tuple[str, ...] = ()

    def device(self, address: str) -> AcsState | None:
        wanted = normalise_address(address)
        return next((d for d in self.devices if d.address == wanted), None)

    @property
    def redirecting(self) -> tuple[AcsState, ...]:
        return tuple(d for d in self.devices if d.redirect)


@fact("pci.acs")
def pci_acs(ctx: FactContext) -> AcsReport:
    answer = ctx.host.run(list(LSPCI_ARGV)).require()
    if answer.status == AnswerStatus.NOT_INSTALLED:
        return AcsReport(notes=("lspci is not installed (package pciutils)",))
    if not answer.ok:
        return AcsReport(notes=(answer.describe(),))
    result = answer.value
    notes: list[str] = []
    if result.returncode != 0:
        said = (result.stderr or b"").decode("utf-8", "replace").strip()
        first = said.splitlines()[0] if said else ""
        notes.append(
            f"lspci exited with status {result.returncode}" + (f": {first}" if first else "")
        )
        if not result.stdout.strip():
            return AcsReport(notes=tuple(notes))
    parsed = parse_lspci_acs(answer.text)
    devices = tuple(parsed.devices[a] for a in sorted(parsed.devices))
    return AcsReport(True, parsed.restricted, devices, (*notes, *parsed.notes))


def bridges_between(
    path_a: Sequence[str], path_b: Sequence[str], *, include_roots: bool = False
) -> tuple[str, ...]:
    """The bridges on the route between two devices, in route order from a to b.

    `path_a` and `path_b` are the devices' upstream chains, nearest bridge first (from
    sysfs: the PCI addresses between /sys/devices/pciDDDD:BB/ and the device). The route
    climbs a's chain up to and including the lowest common bridge, then descends b's.
    Two GPUs on one switch: (a's downstream port, the upstream port, b's downstream port).

    When the chains share no bridge the devices meet only at the root complex (or across
    CPU sockets) and the result is empty; with `include_roots=True` it is then both whole
    chains (a's up to its root port, b's down from its root port): ACS redirect on two
    root ports of one root complex also sends P2P through the IOMMU (NVIDIA/nccl#2079).
    """
    a = [normalise_address(x) for x in path_a if str(x).strip()]
    b = [normalise_address(x) for x in path_b if str(x).strip()]
    where_in_b = {address: i for i, address in reversed(list(enumerate(b)))}
    for i, address in enumerate(a):
        j = where_in_b.get(address)
        if j is not None:
            return (*a[: i + 1], *reversed(b[:j]))
    if include_roots and a and b:
        return (*a, *reversed(b))
    return ()


# --- IOMMU ------------------------------------------------------------------------------

IOMMU_CLASS = "/sys/class/iommu"
IOMMU_GROUPS = "/sys/kernel/iommu_groups"
CMDLINE_KEYS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough", "iommu.strict")
_TRUE = ("1", "on", "y", "yes", "true")
_FALSE = ("0", "off", "n", "no", "false")


def parse_cmdline_iommu(cmdline: str) -> dict[str, str]:
    """The IOMMU parameters of a kernel command line: {name: value}, the last one winning
    (as the kernel reads them). Quoted values and unrelated parameters are fine."""
    found: dict[str, str] = {}
    for token in str(cmdline or "").split():
        if token == "--":
            break  # the rest goes to init
        name, sep, value = token.partition("=")
        if name in CMDLINE_KEYS:
            found.pop(name, None)  # keep command-line order for the last occurrence
            found[name] = value.strip('"') if sep else ""
    return found


def _cmdline_mode(params: dict[str, str]) -> str:
    """What the command line alone says: "passthrough", "translated", "off" or ""."""
    iommu = {v.strip().lower() for v in params.get("iommu", "").split(",") if v.strip()}
    intel = {v.strip().lower() for v in params.get("intel_iommu", "").split(",") if v.strip()}
    amd = {v.strip().lower() for v in params.get("amd_iommu", "").split(",") if v.strip()}
    passthrough = params.get("iommu.passthrough", "").strip().lower()
    if "off" in iommu or "off" in intel or "off" in amd:
        return "off"
    if "pt" in iommu or passthrough in _TRUE:
        return "passthrough"
    if "nopt" in iommu or passthrough in _FALSE:
        return "translated"
    return ""


def _asks_for_iommu(params: dict[str, str], hinted: str) -> bool:
    if hinted in ("passthrough", "translated"):
        return True
    intel = {v.strip().lower() for v in params.get("intel_iommu", "").split(",")}
    amd = {v.strip().lower() for v in params.get("amd_iommu", "").split(",")}
    return bool(intel & {"on", "sm_on"} or amd & {"on", "force_enable"})


class Iommu(NamedTuple):
    enabled: bool | None = None  # None: sysfs could not be read
    mode: str = ""  # "passthrough", "translated", "off", "" (unknown)
    cmdline: tuple[str, ...] = ()  # the IOMMU parameters, as written: ("iommu=pt", ...)
    units: tuple[str, ...] = ()  # /sys/class/iommu entries: dmar0, ivhd0, ...
    groups: int | None = None  # entries of /sys/kernel/iommu_groups
    default_domain: str = ""  # the first group's type: identity, DMA, DMA-FQ, ...
    notes: tuple[str, ...] = ()


def _group_key(name: str) -> tuple[int, str]:
    number = to_int(name, minimum=0)
    return (number, "") if number is not None else (1 << 62, name)


@fact("iommu")
def iommu(ctx: FactContext) -> Iommu:
    host = ctx.host
    notes: list[str] = []
    cmd = ctx.get(kernel_cmdline)
    if not cmd.ok:
        notes.append(cmd.why)
    params = parse_cmdline_iommu(cmd.text)
    cmdline = tuple(f"{k}={v}" if v else k for k, v in params.items())
    hinted = _cmdline_mode(params)

    units_answer = host.listdir(IOMMU_CLASS).require()
    groups_answer = host.listdir(IOMMU_GROUPS).require()
    units: tuple[str, ...] = ()
    groups: int | None = None
    names: list[str] = []
    if units_answer.ok:
        units = tuple(sorted(units_answer.value))
    elif units_answer.status != AnswerStatus.MISSING:
        notes.append(units_answer.describe())
    if groups_answer.ok:
        names = sorted(groups_answer.value, key=_group_key)
        groups = len(names)
    elif groups_answer.status == AnswerStatus.MISSING:
        groups = 0 if units_answer.ok or units_answer.status == AnswerStatus.MISSING else None
    else:
        notes.append(groups_answer.describe())

    readable = units_answer.status in (AnswerStatus.OK, AnswerStatus.MISSING) or groups_answer.ok
    if units_answer.status == groups_answer.status == AnswerStatus.MISSING and hinted != "off":
        # Both folders absent: a kernel built without IOMMU support, or a bundle that did
        # not record them. Empty folders are the sure sign of "off".
        notes.append(f"neither {IOMMU_CLASS} nor {IOMMU_GROUPS} exists")
        readable = False
    # No unit registered says nothing while the groups could not be listed: they are the
    # other sign of an IOMMU at work.
    if not readable or (not units and groups is None):
        return Iommu(None, hinted, cmdline, units, groups, "", tuple(notes))
    if not units and not groups:
        if _asks_for_iommu(params, hinted):
            notes.append(f"the command line asks for the IOMMU ({' '.join(cmdline)}) but "
                         "the kernel registered no IOMMU")  # fmt: skip
        return Iommu(False, "off", cmdline, units, groups, "", tuple(notes))

    if units and not groups:
        notes.append("IOMMU units are registered but there are no IOMMU groups")
    domain = ""
    if names:
        answer = host.read(f"{IOMMU_GROUPS}/{names[0]}/type", max_bytes=256).require()
        domain = answer.text.strip() if answer.ok else ""
    by_domain = ""
    if domain == "identity":
        by_domain = "passthrough"
    elif domain.startswith("DMA"):
        by_domain = "translated"
    elif domain:
        notes.append(f"IOMMU group {names[0]} has default domain type {domain!r}")
    mode = by_domain or (hinted if hinted != "off" else "")
    if by_domain and hinted and hinted != by_domain:
        notes.append(f"the command line suggests {hinted}, but group {names[0]}'s default "
                     f"domain is {domain} ({by_domain})")  # fmt: skip
    if not mode:
        notes.append("IOMMU mode unknown: no usable default-domain type and no passthrough "
                     "parameter (distribution kernels usually translate by default)")  # fmt: skip
    return Iommu(True, mode, cmdline, units, groups, domain, tuple(notes))
