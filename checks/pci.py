"""PCIe checks: links trained below what device and slot can do, AER errors, ACS redirect
between GPUs and NICs, and the IOMMU mode. None of these crash anything; they cost
bandwidth or hang NCCL."""

from __future__ import annotations

from itertools import combinations

from dldoctor.checks.needs import kernel_log_readable, needs
from dldoctor.facts import Facts
from dldoctor.facts.acs import bridges_between, iommu, pci_acs
from dldoctor.facts.net import interfaces
from dldoctor.facts.pci import pci_devices
from dldoctor.facts.pcie import (
    BandwidthLimits,
    PcieLink,
    PcieLinks,
    bandwidth_limits,
    pcie_links,
)
from dldoctor.facts.system import container
from dldoctor.host.base import NotCaptured
from dldoctor.model import Outcome, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check

KINDS = (
    ("03", "GPU"),
    ("0207", "InfiniBand NIC"),
    ("02", "NIC"),
    ("010802", "NVMe"),
    ("0680", "NVSwitch"),
    ("12", "accelerator"),
)


GPU_VENDORS = ("10de", "1002")  # NVIDIA, AMD; a BMC's ASPEED/Matrox VGA is no GPU


def kind(link: PcieLink) -> str:
    return kind_of(link.class_code, link.vendor)


def kind_of(class_code: str, vendor: str) -> str:
    """ "GPU", "InfiniBand NIC", "NVMe", ... of a PCI class code and vendor id."""
    if class_code.startswith("03") and vendor not in GPU_VENDORS:
        return "display controller"
    return next((name for prefix, name in KINDS if class_code.startswith(prefix)), "device")


def endpoints(links: PcieLinks) -> list[PcieLink]:
    return [link for link in links.links if not link.is_bridge]


def link_limit(links: PcieLinks, link: PcieLink) -> int | None:
    """The widest this device's upstream link can be: a link is as wide as the narrower of
    its two ends (the device and the port above it)."""
    port = links.get(link.upstream[0]) if link.upstream else None
    widths = [w for w in (link.max_width, port.max_width if port else None) if w]
    return min(widths) if widths else None


def switch_upstream_ports(links: PcieLinks) -> set[str]:
    """Ports that are a switch's upstream side. Above a device the chain alternates:
    downstream port, upstream port, ..., root port (last): the odd positions."""
    return {x.upstream[i] for x in endpoints(links) for i in range(1, len(x.upstream) - 1, 2)}


def label(link: PcieLink) -> str:
    return f"port {link.address}" if link.is_bridge else f"{kind(link)} {link.address}"


def pci_subject(address: str) -> str:
    """How a finding names a PCI device or port among its subjects (Outcome.subjects)."""
    return f"pci:{address.lower()}"


def pinned_widths(links: PcieLinks, policy: Policy) -> tuple[list[str], list[str]]:
    """Against [pci] expected_links: (the links narrower than pinned or not found, those
    whose width could not be read)."""
    short, unknown = [], []
    for pin in policy.pci.expected_links:
        link = links.get(pin.address.lower())
        want = f"the policy expects x{pin.width}"
        if link is None:
            short.append(f"{pin.address}: not found among the PCI devices ({want})")
        elif not link.current_width:
            unknown.append(f"{label(link)}: its link width could not be read ({want})")
        elif link.current_width < pin.width:
            short.append(f"{label(link)}: x{link.current_width}, {want}")
    return short, unknown


def pinned_outcome(
    short: list[str], unknown: list[str], more: list[str], subjects: list[str] = ()
) -> Outcome:
    if short:
        many = f"{len(short)} pinned link(s) narrower than the policy expects, or missing"
        return failed(
            short[0] if len(short) == 1 else many, short + unknown + more, subjects=subjects
        )
    return errored(
        f"{len(unknown)} pinned link width(s) could not be read", unknown + more, subjects=subjects
    )


@check(
    "pci.link.width",
    "PCIe link width",
    remediation="Reseat the card, check the riser or cable and the slot's bifurcation setting "
    "in the BIOS, update retimer/firmware; a GPU in a slot wired x8 belongs in an x16 slot.",
)
def link_width(facts: Facts, policy: Policy) -> Outcome:
    links = facts.get(pcie_links)
    pins = policy.pci.expected_links
    if not links.readable and pins:
        return errored(f"the PCI bus is not readable: {len(pins)} pinned link(s) not judged")
    if not links.readable:
        return skipped("the PCI bus is not readable", links.notes)
    short, unknown = pinned_widths(links, policy)
    pinned = [pci_subject(pin.address) for pin in pins]
    # Each link is judged once, from its lower end: a device, or a switch's upstream port.
    # A root or downstream port's own width describes the link below it (judged with the
    # device there), so a root port at x4 of x8 above an x4 NVMe drive is not narrowed.
    upstream_ports = switch_upstream_ports(links)
    judged = [
        x
        for x in links.links
        if x.current_width and x.max_width and (not x.is_bridge or x.address in upstream_ports)
    ]
    devices = [x for x in judged if not x.is_bridge]
    if not devices and (short or unknown):
        return pinned_outcome(short, unknown, [], pinned)
    if not devices:
        return skipped("no GPU, NIC or NVMe drive reports a link width", links.notes)
    degraded, narrow_slot = [], []
    narrowed, in_narrow_slot = [], []  # their subjects
    for x in judged:
        limit = link_limit(links, x) or x.max_width
        if x.current_width < limit:
            degraded.append(f"{label(x)}: x{x.current_width}, can be x{limit}")
            narrowed.append(pci_subject(x.address))
        elif not x.is_bridge and limit < x.max_width:
            in_narrow_slot.append(pci_subject(x.address))
            narrow_slot.append(
                f"{label(x)}: x{x.current_width} in a slot of x{limit} "
                f"(the device can do x{x.max_width})"
            )
    lines = [f"{label(x)}: x{x.current_width} of x{x.max_width}" for x in devices]
    if short:
        return pinned_outcome(short, unknown, degraded + narrow_slot, pinned + narrowed)
    if degraded:
        return failed(
            f"{len(degraded)} link(s) trained narrower than they can be",
            degraded + narrow_slot,
            subjects=narrowed + in_narrow_slot,
        )
    if unknown:
        return pinned_outcome(short, unknown, lines, pinned)
    if narrow_slot and facts.get(container).virtualization:
        # A VM's virtual root ports often advertise x1: the guest cannot see the real slot.
        return passed(
            f"{len(devices)} device(s); the VM's virtual slots report narrower "
            "widths than the devices",
            narrow_slot + lines,
        )
    if narrow_slot:
        return warned(
            f"{len(narrow_slot)} device(s) in slots narrower than the device",
            narrow_slot,
            remediation="Move the device to a full-width slot if the board has one.",
            subjects=in_narrow_slot,
        )
    pinned = f"; {len(pins)} pinned link(s) as the policy expects" if pins else ""
    return passed(f"{len(devices)} device(s) at the full width of their slot{pinned}", lines)


@check(
    "pci.link.speed",
    "PCIe link speed",
    remediation="A NIC or NVMe drive below its maximum speed: check the BIOS slot "
    "generation setting, risers and retimers. For GPUs, measure under load first.",
)
def link_speed(facts: Facts, policy: Policy) -> Outcome:
    links = facts.get(pcie_links)
    devices = [d for d in endpoints(links) if d.current_gts and d.max_gts]
    if not devices:
        return skipped("no device reports a link speed")
    slow, idle, slow_at = [], [], []
    for dev in devices:
        port = links.get(dev.upstream[0]) if dev.upstream else None
        # A Gen5 card in a Gen4 slot runs at Gen4: that is the slot, not a fault.
        limit = min(x for x in (dev.max_gts, port.max_gts if port else None) if x)
        if dev.current_gts >= limit:
            continue
        what = f"{kind(dev)} {dev.address}: {dev.current_gts:g} of {limit:g} GT/s"
        # GPUs drop their link to 2.5 GT/s when idle (power saving) and come back under
        # load: a slow idle GPU link is normal, a slow NIC or NVMe link is not.
        (idle if kind(dev) == "GPU" else slow).append(what)
        if kind(dev) != "GPU":
            slow_at.append(pci_subject(dev.address))
    if slow:
        return warned(
            f"{len(slow)} link(s) below their maximum speed", slow + idle, subjects=slow_at
        )
    if idle:
        return passed(
            f"{len(idle)} GPU link(s) below maximum speed: normal while idle, re-check under load",
            idle,
        )
    return passed(f"{len(devices)} device(s) at full speed")


@check(
    "pci.bandwidth_limited",
    "PCIe bandwidth at boot",
    remediation="The kernel saw these links come up narrower or slower than the device can "
    "run: reseat, check risers/cables and BIOS slot settings.",
)
@needs(kernel_log_readable(bandwidth_limits))
def bandwidth_limited(facts: Facts, policy: Policy, found: BandwidthLimits) -> Outcome:
    if not found.limits:
        return passed("the kernel reported no PCIe bandwidth limits this boot", found.notes)
    # The kernel's lines are the verdict; the links only tell a slot slower than its card
    # (as wired) from a link trained down, and a capture may lack them (a bug report).
    try:
        links = facts.get(pcie_links)
    except NotCaptured:
        links = None
    narrowed, by_slot, at = [], [], []
    for x in found.limits:
        line = (
            f"{x.device}: {x.available_gbps:g} of {x.capable_gbps:g} Gb/s, limited by the "
            f"{x.limited_by_gts or '?'} GT/s x{x.limited_by_width} link at {x.at}"
        )
        port = links.get(x.at) if links is not None else None
        # The limiting port runs at its own maximum: the slot is slower than the card.
        at_max = bool(
            port is not None
            and port.max_width
            and port.max_gts
            and x.limited_by_width >= port.max_width
            and (x.limited_by_gts or 0) >= port.max_gts
        )
        (by_slot if at_max else narrowed).append(line)
        if not at_max:
            at += [pci_subject(x.device), pci_subject(x.at)]
    unknown = ["the PCIe links were not captured: a slot slower than its card looks alike"]
    if narrowed:
        return warned(
            f"{len(narrowed)} device(s) came up with limited PCIe bandwidth",
            narrowed + by_slot + (unknown if links is None else []),
            rests_on=(bandwidth_limits,),
            subjects=at,
        )
    return passed(f"{len(by_slot)} device(s) limited by their slot, as wired", by_slot)


@check(
    "pci.aer",
    "PCIe errors (AER)",
    remediation="Rising AER errors point at a marginal link: reseat or replace the card, "
    "riser or cable; fatal errors usually come with a GPU or NIC falling off the bus.",
)
def aer(facts: Facts, policy: Policy) -> Outcome:
    links = facts.get(pcie_links)
    if links.source != "sysfs":  # lspci prints AER status bits, not the kernel's counters
        return skipped("AER counters not captured: the kernel keeps them in sysfs, not in lspci")
    counted = [x for x in links.links if x.aer_correctable is not None or x.aer_fatal is not None]
    if not counted:
        return skipped("the kernel keeps no AER counters for these devices")
    fatal = [f"{x.address}: {x.aer_fatal} fatal" for x in counted if x.aer_fatal]
    nonfatal = [f"{x.address}: {x.aer_nonfatal} non-fatal" for x in counted if x.aer_nonfatal]
    many = [
        f"{x.address}: {x.aer_correctable} correctable"
        for x in counted
        if (x.aer_correctable or 0) >= 100
    ]
    subjects = [
        pci_subject(x.address)
        for x in counted
        if x.aer_fatal or x.aer_nonfatal or (x.aer_correctable or 0) >= 100
    ]
    if fatal:
        return failed(
            f"fatal PCIe errors on {len(fatal)} device(s)",
            fatal + nonfatal + many,
            subjects=subjects,
        )
    if nonfatal or many:
        return warned("PCIe errors since boot", nonfatal + many, subjects=subjects)
    return passed(f"no uncorrected PCIe errors on {len(counted)} device(s)")


@check(
    "pci.acs",
    "PCIe ACS",
    remediation="ACS redirect on a switch between GPUs and NICs sends peer-to-peer traffic up "
    "to the root complex (slow) or makes NCCL hang: disable ACS in the BIOS, or at runtime "
    "with `setpci -s <bridge> ECAP_ACS+6.w=0000` (not persistent; not in VMs that need it).",
)
def acs(facts: Facts, policy: Policy) -> Outcome:
    links = facts.get(pcie_links)
    peers = [x for x in endpoints(links) if kind(x) in ("GPU", "NIC", "InfiniBand NIC")]
    if len(peers) < 2:
        return skipped("fewer than two GPUs or NICs: no peer-to-peer traffic to break")
    report = facts.get(pci_acs)
    if not report.available:
        return skipped("lspci is not available (install pciutils)", report.notes)
    if report.restricted:
        return skipped("reading ACS needs root (extended config space)", report.notes)
    redirecting = {s.address for s in report.redirecting}
    # bridge -> the GPU/NIC pairs whose peer-to-peer route crosses it
    crossing: dict[str, list[str]] = {}
    peers_of: dict[str, set[str]] = {}  # bridge -> the GPUs/NICs of those pairs
    # The pairs grow with the square of the devices: none to look at without a redirect.
    for a, b in combinations(peers, 2) if redirecting else ():
        # Only switch ports count: with an IOMMU on, the kernel sets redirect on every root
        # port, and traffic between root ports crosses the root complex anyway.
        for bridge in bridges_between(a.upstream, b.upstream):
            if bridge in redirecting:
                crossing.setdefault(bridge, []).append(f"{a.address} ↔ {b.address}")
                peers_of.setdefault(bridge, set()).update((a.address, b.address))
    if crossing:
        pairs = {p for found in crossing.values() for p in found}
        lines = []
        for bridge, found in sorted(crossing.items()):
            more = f" and {len(found) - 3} more" if len(found) > 3 else ""
            lines.append(f"{bridge} redirects: {', '.join(found[:3])}{more}")
        # The bridges first: a picture marks them; then the devices whose P2P they cross.
        around = sorted({a for found in peers_of.values() for a in found})
        return failed(
            f"ACS redirect on {len(crossing)} bridge(s) between {len(pairs)} GPU/NIC pair(s)",
            lines,
            subjects=[pci_subject(b) for b in sorted(crossing)] + [pci_subject(a) for a in around],
        )
    unplaced = [x.address for x in peers if x.address in links.unplaced]
    if unplaced and redirecting:
        # A device of unknown place may sit behind any of the redirecting bridges.
        return errored(
            f"the PCIe path of {len(unplaced)} GPU/NIC(s) could not be read "
            f"({', '.join(unplaced[:4])}): ACS between them not judged",
            [*links.notes, *report.notes],
            subjects=[pci_subject(a) for a in unplaced],
        )
    return passed(f"no ACS redirect between {len(peers)} GPUs and NICs", report.notes)


@check(
    "pci.iommu",
    "IOMMU",
    remediation="Add `iommu=pt` to the kernel command line (passthrough for the host's own "
    "devices keeps GPU peer-to-peer and GPUDirect RDMA at full speed), update the "
    "bootloader and reboot.",
    fixes=["fix.pci.iommu_passthrough"],
)
def iommu_mode(facts: Facts, policy: Policy) -> Outcome:
    state = facts.get(iommu)
    details = [*(f"kernel parameter {p}" for p in state.cmdline), *state.notes]
    if state.enabled is None:
        return skipped("IOMMU state unknown", details)
    if not state.enabled or state.mode == "off":
        return passed("IOMMU off", details)
    if state.mode == "passthrough":
        return passed("IOMMU in passthrough mode", details)
    if state.mode == "translated":
        links = facts.get(pcie_links)
        gpus = [x for x in endpoints(links) if kind(x) == "GPU"]
        rdma = facts.get(interfaces).infiniband
        if len(gpus) >= 2 or (gpus and rdma):
            return warned(
                f"IOMMU translates DMA ({state.default_domain or 'DMA'}): GPU "
                "peer-to-peer and GPUDirect RDMA lose bandwidth or hang",
                details,
            )
        bus = facts.get(pci_devices)
        if not bus.read_in_full:  # a device that did not answer may be a GPU
            return skipped(
                "IOMMU translates DMA; the PCI bus was not read in full, so whether GPUs "
                "here use peer-to-peer is unknown",
                [*details, *bus.notes],
            )
        return passed("IOMMU translates DMA; no GPU peer-to-peer here to slow down", details)
    return skipped("IOMMU mode unknown", details)
