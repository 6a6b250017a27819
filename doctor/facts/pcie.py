"""PCIe link state of the devices whose bandwidth matters, and of the ports above them.

A GPU that trained at x8 instead of x16, or at 8 GT/s instead of 32, works and passes
every functional test; only its copies to and from the host are slow. sysfs says what
each link trained at (`current_link_*`) and the most it can do (`max_link_*`), and the
kernel says it at boot ("... available PCIe bandwidth, limited by ..."). The narrow hop
is often a switch or root port rather than the device itself, so the ports between each
device and the root complex are read too.
"""

from __future__ import annotations

import math
import posixpath
import re
from dataclasses import dataclass, field
from functools import cached_property

from dldoctor.facts import FactContext, fact
from dldoctor.facts.kmsg import kernel_log
from dldoctor.facts.pci import AMD, DEVICES, NVIDIA, PciDevice, pci_devices
from dldoctor.facts.reading import read_text, to_int
from dldoctor.host.base import AnswerStatus, Host, ProbeFailed

# A PCI address as sysfs and the kernel print it. VMD domains have 5 hex digits.
_ADDR = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_ADDRESS = re.compile(rf"^{_ADDR}$")

# The widths and rates the PCIe specifications define. A value outside them is an
# all-ones read of a device that no longer answers (width 63), or a kernel we do not know.
PCIE_WIDTHS = frozenset({0, 1, 2, 4, 8, 12, 16, 32})  # 0: the link is down
PCIE_RATES_GTS = frozenset({2.5, 5.0, 8.0, 16.0, 32.0, 64.0})


# --- parsers --------------------------------------------------------------------------

_SPEED = re.compile(r"^\s*(\d{1,3}(?:\.\d{1,3})?)\s*GT/s\b")
_WIDTH = re.compile(r"^\s*[xX]?(\d{1,6})\s*$")


def parse_link_speed(text: str) -> float | None:
    """GT/s of a sysfs `*_link_speed` ("16.0 GT/s PCIe"; "8 GT/s" before Linux 4.19).

    None for "Unknown" (the kernel's word for a link it cannot read), "" and the rest.
    """
    m = _SPEED.match(text)
    if m is None:
        return None
    value = float(m.group(1))
    return value if math.isfinite(value) and value > 0 else None


def parse_link_width(text: str) -> int | None:
    """Lanes of a sysfs `*_link_width` ("16"; "x16" as lspci and the kernel log print it)."""
    m = _WIDTH.match(text)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class AerCounters:
    total: int | None  # None: nothing understood
    counters: dict[str, int] = field(default_factory=dict)  # per error kind, TOTAL_* left out
    notes: tuple[str, ...] = ()


_AER_LINE = re.compile(r"^\s*(\S+)\s+(\d{1,20})\s*$")  # the kernel prints u64 counters


def parse_aer_counters(text: str) -> AerCounters:
    """A sysfs `aer_dev_correctable` / `aer_dev_nonfatal` / `aer_dev_fatal` file.

    Lines are `RxErr 0` ... `TOTAL_ERR_COR 2`. The TOTAL_ line counts error reports; one
    report can set several kinds, so it is used as it is when present, and the kinds are
    summed only when it is not.
    """
    counters: dict[str, int] = {}
    total: int | None = None
    odd = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _AER_LINE.match(line)
        if m is None:
            odd += 1
            continue
        name, value = m.group(1), int(m.group(2))
        if name.startswith("TOTAL_"):
            total = value
        else:
            counters[name] = value
    if total is None and counters:
        total = sum(counters.values())
    notes = (f"{odd} line(s) not understood",) if odd else ()
    return AerCounters(total, counters, notes)


def parse_upstream(link_target: str, address: str) -> tuple[str, ...] | None:
    """The ports above a device, nearest first, from where /sys/bus/pci/devices/<address>
    points (`../../../devices/pci0000:00/0000:00:03.1/0000:03:00.0/0000:17:00.0`).

    Every PCI address in the path before the device's own is a bridge or switch port;
    `pci0000:00` (the host bridge) and non-PCI parts are not. None when the path does
    not end at `address`.
    """
    parts = [p.lower() for p in posixpath.normpath(link_target).split("/") if _ADDRESS.match(p)]
    if not parts or parts[-1] != address.lower():
        return None
    return tuple(reversed(parts[:-1]))


@dataclass(frozen=True)
class BandwidthLimit:
    """The PCI core's boot message about a device that gets less than it could."""

    device: str  # the device the message is about ("0000:9c:00.0")
    available_gbps: float
    limited_by_gts: float | None  # None: "Unknown"
    limited_by_width: int
    at: str  # the link that limits it: the device itself or a port above it
    capable_gbps: float
    capable_gts: float | None
    capable_width: int
    raw: str = ""  # the log line


# drivers/pci/pci.c, __pcie_print_link_status():
#   "%u.%03u Gb/s available PCIe bandwidth, limited by %s x%d link at %s (capable of
#    %u.%03u Gb/s with %s x%d link)", printed as "<driver> <address>: ...".
_LIMITED = re.compile(
    rf"({_ADDR}):\s+(\d{{1,9}}(?:\.\d{{1,9}})?) Gb/s available PCIe bandwidth, "
    rf"limited by (.{{1,40}}?) x(\d{{1,3}}) link at ({_ADDR}) "
    rf"\(capable of (\d{{1,9}}(?:\.\d{{1,9}})?) Gb/s with (.{{1,40}}?) x(\d{{1,3}}) link\)"
)
LIMITED_MARKER = "available PCIe bandwidth, limited by"


def parse_bandwidth_limited(text: str) -> list[BandwidthLimit]:
    """Every "available PCIe bandwidth, limited by" line of a kernel log, in log order.

    The full-bandwidth form ("... available PCIe bandwidth (16.0 GT/s PCIe x16 link)")
    is not a limit and is left out. Never raises.
    """
    found = []
    for line in text.split("\n"):
        if LIMITED_MARKER not in line:
            continue
        m = _LIMITED.search(line)
        if m is None:
            continue
        found.append(
            BandwidthLimit(
                device=m.group(1).lower(),
                available_gbps=float(m.group(2)),
                limited_by_gts=parse_link_speed(m.group(3)),
                limited_by_width=int(m.group(4)),
                at=m.group(5).lower(),
                capable_gbps=float(m.group(6)),
                capable_gts=parse_link_speed(m.group(7)),
                capable_width=int(m.group(8)),
                raw=line.rstrip("\r"),
            )
        )
    return found


# --- the model ------------------------------------------------------------------------


@dataclass(frozen=True)
class PcieLink:
    address: str
    vendor: str
    device: str
    class_code: str
    driver: str  # "" for ports (not read) and unbound devices
    current_gts: float | None  # None: no such file (virtual devices, old kernels), "Unknown"
    max_gts: float | None
    current_width: int | None
    max_width: int | None
    upstream: tuple[str, ...]  # the ports above, nearest first
    aer_correctable: int | None  # None: the kernel keeps no AER counters for it
    aer_nonfatal: int | None
    aer_fatal: int | None
    numa_node: int | None  # None: one node, the firmware did not say, or a port
    local_cpulist: str  # "" for ports (not read)
    notes: tuple[str, ...] = ()

    @property
    def is_bridge(self) -> bool:
        return self.class_code.startswith("0604")


@dataclass(frozen=True)
class PcieLinks:
    links: tuple[PcieLink, ...] = ()  # the devices worth a check and their ports, by address
    notes: tuple[str, ...] = ()
    readable: bool = True  # False: /sys/bus/pci/devices could not be listed
    unplaced: tuple[str, ...] = ()  # devices whose ports above could not be read
    source: str = "sysfs"  # or the lspci command lines (no AER counters there)

    @cached_property
    def _by_address(self) -> dict[str, PcieLink]:
        # Checks look up the port above every link: a scan each time is quadratic in links.
        index: dict[str, PcieLink] = {}
        for link in self.links:
            index.setdefault(link.address, link)
        return index

    def get(self, address: str) -> PcieLink | None:
        return self._by_address.get(address)

    def chain(self, link: PcieLink) -> tuple[PcieLink, ...]:
        """The link and the ports above it that were read, nearest first."""
        above = (self.get(a) for a in link.upstream)
        return (link, *(port for port in above if port is not None))


@dataclass(frozen=True)
class BandwidthLimits:
    source: str  # the command the kernel log came from; "" when none could be read
    limits: tuple[BandwidthLimit, ...]
    readable: bool
    notes: tuple[str, ...] = ()


# --- reading --------------------------------------------------------------------------

SPEED_FILES = ("current_link_speed", "max_link_speed")
WIDTH_FILES = ("current_link_width", "max_link_width")
AER_FILES = ("aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal")


def worth_a_link_check(dev: PciDevice) -> bool:
    """GPUs and other display controllers, network controllers (Ethernet, InfiniBand),
    NVMe drives, NVSwitches and processing accelerators (class 12, e.g. Gaudi)."""
    klass = dev.class_code
    return (
        klass.startswith(("03", "02", "12", "010802"))
        or (dev.vendor == NVIDIA and klass.startswith("0680"))  # NVSwitch
    )


def _pci_devices_read_extras(dev: PciDevice) -> bool:
    # pci.devices reads driver and numa_node for these devices only (keep in step).
    return dev.vendor in (NVIDIA, AMD) and dev.class_code.startswith(("03", "0680"))


def _read(host: Host, path: str, notes: list[str], max_bytes: int = 64) -> str | None:
    # An error is a note, not a failed fact: a device the kernel marked disconnected
    # answers EINVAL for its link files, and that must not hide every other link.
    return read_text(host, path, notes, max_bytes=max_bytes)


@dataclass(frozen=True)
class LinkFiles:
    """What a PCI device's own sysfs folder says about its link and its AER counters."""

    current_gts: float | None = None
    max_gts: float | None = None
    current_width: int | None = None
    max_width: int | None = None
    aer_correctable: int | None = None
    aer_nonfatal: int | None = None
    aer_fatal: int | None = None
    notes: tuple[str, ...] = ()


def read_link_files(host: Host, base: str) -> LinkFiles:
    """The link and AER files of the device whose sysfs folder is `base`."""
    notes: list[str] = []
    speeds, widths, aer = [], [], []
    for name in SPEED_FILES:
        text = _read(host, f"{base}/{name}", notes)
        value = None if text is None else parse_link_speed(text)
        if text is not None and (value is None or value not in PCIE_RATES_GTS):
            notes.append(f"{name} reads {text.strip()[:40]!r}")
        speeds.append(value)
    for name in WIDTH_FILES:
        text = _read(host, f"{base}/{name}", notes)
        value = None if text is None else parse_link_width(text)
        if text is not None and (value is None or value not in PCIE_WIDTHS):
            notes.append(f"{name} reads {text.strip()[:40]!r}: not a PCIe link width")
        widths.append(value)
    for name in AER_FILES:
        text = _read(host, f"{base}/{name}", notes, max_bytes=4096)
        counts = None if text is None else parse_aer_counters(text)
        if counts is not None:
            notes.extend(f"{name}: {note}" for note in counts.notes)
        aer.append(None if counts is None else counts.total)
    return LinkFiles(*speeds, *widths, *aer, notes=tuple(notes))


def _link(host: Host, dev: PciDevice, upstream: tuple[str, ...], *, port: bool) -> PcieLink:
    base = f"{DEVICES}/{dev.address}"
    files = read_link_files(host, base)
    notes = list(files.notes)
    driver, numa, cpulist = dev.driver, dev.numa_node, ""
    # A port's driver (pcieport), node and CPUs say nothing about its link: not read.
    if not port:
        if not _pci_devices_read_extras(dev):
            link = host.readlink(f"{base}/driver")
            if link.status == AnswerStatus.TIMEOUT:
                raise ProbeFailed(link)
            driver = posixpath.basename(link.value.rstrip("/")) if link.ok else ""
            numa = to_int(_read(host, f"{base}/numa_node", notes), minimum=0)  # -1: not said
        cpulist = _read(host, f"{base}/local_cpulist", notes, max_bytes=4096) or ""
    return PcieLink(
        dev.address, dev.vendor, dev.device, dev.class_code, driver,
        files.current_gts, files.max_gts, files.current_width, files.max_width,
        upstream, files.aer_correctable, files.aer_nonfatal, files.aer_fatal,
        numa, cpulist, tuple(notes),
    )  # fmt: skip


def _upstream(host: Host, address: str, notes: list[str]) -> tuple[str, ...] | None:
    """The ports above `address`, nearest first; None (noted) when they cannot be known."""
    answer = host.readlink(f"{DEVICES}/{address}")
    if answer.status == AnswerStatus.TIMEOUT:
        raise ProbeFailed(answer)
    if not answer.ok:
        notes.append(f"{address}: ports above unknown ({answer.describe()})")
        return None
    upstream = parse_upstream(answer.value, address)
    if upstream is None:
        notes.append(f"{address}: ports above unknown ({DEVICES}/{address} -> {answer.value})")
    return upstream


@fact("pcie.links")
def pcie_links(ctx: FactContext) -> PcieLinks:
    """Link state of the devices `worth_a_link_check` and of every port above them.

    The bus listing, vendors and classes come from `pci.devices`; only the chosen
    devices and their ports get the link reads.
    """
    bus = ctx.get(pci_devices)
    if not bus.readable:
        return PcieLinks((), bus.notes, readable=False)
    if bus.source != "sysfs":
        return _links_from_lspci(ctx, bus)
    listed = {dev.address: dev for dev in bus.devices}
    links: dict[str, PcieLink] = {}
    ports: dict[str, tuple[str, ...]] = {}  # port -> the ports above it
    notes: list[str] = []
    unplaced: list[str] = []
    for dev in bus.devices:
        if not worth_a_link_check(dev):
            continue
        upstream = _upstream(ctx.host, dev.address, notes)
        if upstream is None:
            unplaced.append(dev.address)
            upstream = ()
        links[dev.address] = _link(ctx.host, dev, upstream, port=False)
        for i, address in enumerate(upstream):
            ports.setdefault(address, upstream[i + 1 :])
    for address, above in ports.items():
        if address in links:
            continue
        dev = listed.get(address)
        if dev is None:  # only in assembled or damaged trees
            notes.append(f"{address}: a port above a device, but not in {DEVICES}")
            continue
        links[address] = _link(ctx.host, dev, above, port=True)
    return PcieLinks(tuple(links[a] for a in sorted(links)), tuple(notes), unplaced=tuple(unplaced))


def _links_from_lspci(ctx: FactContext, bus) -> PcieLinks:
    """What a capture's lspci says: LnkSta as the current link, LnkCap as its maximum."""
    from dldoctor.facts.lspci import lspci_bus

    listing = ctx.get(lspci_bus)
    by_address = {d.address: d for d in listing.devices}
    chosen = {d.address: () for d in bus.devices if worth_a_link_check(d)}
    unplaced = []
    for address in list(chosen):
        upstream = listing.upstream(by_address[address])
        if upstream is None:
            unplaced.append(address)
        chosen[address] = upstream or ()
        for i, port in enumerate(upstream or ()):
            chosen.setdefault(port, upstream[i + 1 :])
    links = []
    for address, upstream in sorted(chosen.items()):
        d = by_address.get(address)
        if d is None or not d.link_from:
            continue  # lspci printed no link for it (no PCI Express capability)
        links.append(
            PcieLink(
                address=address, vendor=d.vendor, device=d.device, class_code=d.class_code,
                driver=d.driver, current_gts=d.current_gts, max_gts=d.max_gts,
                current_width=d.current_width, max_width=d.max_width, upstream=upstream,
                aer_correctable=None, aer_nonfatal=None, aer_fatal=None,
                numa_node=d.numa_node, local_cpulist="",
                notes=(f"link from lspci ({d.link_from})",),
            )
        )  # fmt: skip
    notes = list(bus.notes)
    if unplaced:
        notes.append(f"{len(unplaced)} device(s): the ports above are not in the lspci output")
    return PcieLinks(tuple(links), tuple(notes), unplaced=tuple(unplaced), source=bus.source)


@fact("pcie.bandwidth_limits")
def bandwidth_limits(ctx: FactContext) -> BandwidthLimits:
    """The kernel's "available PCIe bandwidth, limited by" messages of this boot."""
    log = ctx.get(kernel_log)
    if not log.readable:
        return BandwidthLimits("", (), False, log.notes)
    parsed = parse_bandwidth_limited(log.text)
    notes = list(log.notes)
    odd = sum(LIMITED_MARKER in line for line in log.text.split("\n")) - len(parsed)
    if odd:
        notes.append(f"{odd} bandwidth line(s) not understood")
    # A driver reloaded in the same boot prints the same message again.
    seen: dict[tuple, BandwidthLimit] = {}
    for limit in parsed:
        key = (limit.device, limit.available_gbps, limit.limited_by_gts, limit.limited_by_width,
               limit.at, limit.capable_gbps, limit.capable_gts, limit.capable_width)  # fmt: skip
        seen.setdefault(key, limit)
    return BandwidthLimits(log.source, tuple(seen.values()), True, tuple(notes))
