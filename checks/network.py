"""RDMA network checks: InfiniBand and RoCE port state and rate (the GPUs' rails named),
RoCE GIDs and MTU, GPUDirect RDMA, error counters, NIC firmware."""

from __future__ import annotations

import functools

from dldoctor.checks.firmware import Part, judge
from dldoctor.checks.needs import gpu_words
from dldoctor.checks.numa import shares_switch
from dldoctor.checks.pci import endpoints, kind
from dldoctor.facts import Facts
from dldoctor.facts.kmod import modules
from dldoctor.facts.net import nic_firmware
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.pci import NVIDIA, pci_devices
from dldoctor.facts.pcie import pcie_links
from dldoctor.facts.rdma import UNREAD, RdmaPort, gpudirect, rdma_devices
from dldoctor.facts.system import container, environ, kernel
from dldoctor.host.base import ProbeFailed
from dldoctor.model import Outcome, Status, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check
from dldoctor.versions import at_least

ROCE_MTU = 4200  # port MTU that lets RoCE use a 4096-byte active MTU
# Counters since the last reset, and what is worth a warning: a switch reboot or a few
# symbol errors over months of uptime are normal.
ERROR_COUNTERS = {
    "symbol_error": 10,
    "link_downed": 5,
    "link_error_recovery": 5,
    "port_rcv_errors": 100,
}


def ports(facts: Facts, *, roce: bool) -> list[RdmaPort]:
    # iWARP adapters (an E810 whose irdma driver loaded in its default mode) are RDMA
    # devices too, but neither InfiniBand nor RoCE: none of these checks apply to them.
    return [
        p
        for d in facts.get(rdma_devices)
        if not d.iwarp
        for p in d.ports
        if (p.roce if roce else p.infiniband)
    ]


def on_known_ports(fn):
    """The check's outcome, unless it passes or skips while some port's link layer is
    unknown: that port could be the one in trouble, so the check could not do its job."""

    @functools.wraps(fn)
    def judged(facts: Facts, policy: Policy) -> Outcome:
        outcome = fn(facts, policy)
        unread = [
            name(p) for d in facts.get(rdma_devices) for p in d.ports if p.link_layer == UNREAD
        ]
        if not unread or outcome.status not in (Status.PASS, Status.SKIP):
            return outcome
        return errored(
            f"the link layer of {len(unread)} RDMA port(s) could not be read "
            f"({', '.join(unread[:4])})",
            (outcome.summary, *outcome.details),
        )

    return judged


def name(p: RdmaPort) -> str:
    return f"{p.device}:{p.port}"


# The kernel's names of a port's logical state (ib_port_state_str, drivers/infiniband).
PORT_STATES = frozenset({"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"})


def rdma_ports(facts: Facts) -> list[RdmaPort]:
    """Every InfiniBand and RoCE port: the state and rate checks judge both link layers."""
    return [*ports(facts, roce=False), *ports(facts, roce=True)]


def gpu_rails(facts: Facts) -> dict[str, str]:
    """RDMA device -> "GPU 2-3": the GPUs that share a PCIe switch with it (the NIC NCCL
    gives those GPUs). Naming only: a bus that cannot be read names no rail."""
    devices = [d for d in facts.get(rdma_devices) if d.pci_address]
    if not devices:
        return {}
    try:
        links = {link.address: link for link in endpoints(facts.get(pcie_links))}
        stack = facts.get(nvidia)
    except ProbeFailed:
        return {}
    gpus = [link for link in links.values() if kind(link) == "GPU"]
    index = {gpu.pci_bus_id: gpu.index for gpu in stack.gpus if gpu.pci_bus_id}
    rails = {}
    for d in devices:
        nic = links.get(d.pci_address)
        near = [gpu for gpu in gpus if nic is not None and shares_switch(gpu, nic)]
        numbered = [index[gpu.address] for gpu in near if gpu.address in index]
        if near and len(numbered) == len(near):
            rails[d.name] = gpu_words(numbered)
        elif near:
            rails[d.name] = "GPU " + ", ".join(gpu.address for gpu in near)
    return rails


def described(p: RdmaPort, rails: dict[str, str]) -> str:
    """ "mlx5_3:1 (RoCE, GPU rail of GPU 2-3)": the port, its link layer, its GPUs."""
    words = ["RoCE" if p.roce else "InfiniBand"]
    if p.device in rails:
        words.append(f"GPU rail of {rails[p.device]}")
    return f"{name(p)} ({', '.join(words)})"


def state_words(p: RdmaPort) -> str:
    return f"{p.state or '?'} ({p.phys_state or '?'})"


@check(
    "network.ib.state",
    "RDMA port state",
    remediation="INIT: no subnet manager configured the InfiniBand port — start opensm/UFM on "
    "the fabric or fix the switch. Polling/Disabled: no link — check the cable or transceiver "
    "and the switch port; on a RoCE port, Disabled is also its net interface set down "
    "(`ip link set <netdev> up`, and its network configuration).",
)
@on_known_ports
def ib_state(facts: Facts, policy: Policy) -> Outcome:
    every = rdma_ports(facts)
    if not every:
        return skipped("no InfiniBand or RoCE port")
    rails = gpu_rails(facts)
    wanted = set(policy.network.ib_ports)
    lines = [f"{described(p, rails)}: {state_words(p)}, {p.rate_text or '?'}" for p in every]
    init = [
        f"{described(p, rails)} is INIT — no subnet manager" for p in every if p.state == "INIT"
    ]
    # A state that could not be read, or is none of the kernel's words, is no state: not a
    # down port (its rail would fail on a failure to look).
    unread = [
        f"{described(p, rails)}: its state could not be read"
        + (f" ({p.state[:40]!r})" if p.state else "")
        for p in every
        if p.state not in PORT_STATES
    ]
    down_ports = [p for p in every if p.state in PORT_STATES and p.state not in ("ACTIVE", "INIT")]
    # The second port of a dual-port HCA is often left unplugged: a down port beside an
    # ACTIVE one is a note; a device with no ACTIVE port at all is a warning, and a failure
    # when it is a GPU's rail (those GPUs' traffic crosses the host to another NIC, or stops).
    active_devices = {p.device for p in every if p.state == "ACTIVE"}
    alone = [p for p in down_ports if p.device not in active_devices]
    rail_down = [
        f"{described(p, rails)} is {state_words(p)}"
        for p in alone
        if p.device in rails and name(p) not in wanted  # said below, as expected ACTIVE
    ]
    down = [f"{described(p, rails)} is {state_words(p)}" for p in alone if p.device not in rails]
    spare = [
        f"{described(p, rails)}: {state_words(p)}, beside an ACTIVE port"
        for p in down_ports
        if p.device in active_devices
    ]
    must = [
        f"{described(p, rails)} is {state_words(p)}, expected ACTIVE"
        for p in down_ports
        if name(p) in wanted
    ]
    absent = [f"{port}: not found" for port in sorted(wanted - {name(p) for p in every})]
    wrong = init + must + rail_down + absent
    # The devices whose ports are named above, for a picture of the host (Outcome.subjects).
    named = [
        f"rdma:{p.device}"
        for p in every
        if p.state == "INIT" or p in down_ports and (name(p) in wanted or p in alone)
    ]
    if wrong:
        return failed(
            wrong[0] if len(wrong) == 1 else f"{len(wrong)} RDMA port(s) not ACTIVE",
            wrong + unread + lines,
            subjects=named,
        )
    if down:
        # Without a list of expected ports, an unplugged port off the GPUs' rails may be on
        # purpose.
        return warned(
            down[0]
            if len(down) == 1
            else f"{len(down)} RDMA port(s) down (unused, or a cable " "problem)",
            down + unread + lines,
            remediation="List the ports that must be up in the policy's "
            "[network] ib_ports; check cables of those that should be.",
            subjects=named,
        )
    if unread:
        return errored(unread[0] if len(unread) == 1 else f"the state of {len(unread)} RDMA "
                       "port(s) could not be read", unread + lines)  # fmt: skip
    active = sum(1 for p in every if p.state == "ACTIVE")
    layers = sorted({"RoCE" if p.roce else "InfiniBand" for p in every})
    return passed(f"{active} {'/'.join(layers)} port(s) ACTIVE", lines + spare)


@check(
    "network.ib.rate",
    "RDMA port rate",
    remediation="A port below its expected rate trained down: check the cable/transceiver "
    "(and its supported speed) and the switch port.",
)
@on_known_ports
def ib_rate(facts: Facts, policy: Policy) -> Outcome:
    active = [p for p in rdma_ports(facts) if p.state == "ACTIVE"]
    if not active:
        return skipped("no ACTIVE InfiniBand or RoCE port")
    rails = gpu_rails(facts)
    floor = policy.network.min_rate_gbps
    below = [p for p in active if p.rate_gbps is not None and p.rate_gbps < floor]
    # A slow RoCE port off the GPUs' rails may be a front-end or storage NIC (every
    # ConnectX in Ethernet mode is an RDMA device): a warning; InfiniBand and rails fail.
    slow = [p for p in below if p.infiniband or p.device in rails]
    other = [p for p in below if p not in slow]
    shown = [f"{described(p, rails)}: {p.rate_text}" for p in slow + other]
    named = [f"rdma:{p.device}" for p in slow + other]
    if slow:
        return failed(f"{len(slow)} port(s) below {floor:g} Gb/s", shown, subjects=named)
    if other:
        return warned(
            f"{len(other)} RoCE port(s) off the GPUs' rails below {floor:g} Gb/s",
            shown,
            subjects=named,
            remediation="If the port carries training traffic, check its cable/transceiver "
            "and switch port; if it is a front-end or storage NIC, this is its speed.",
        )
    rates = sorted({p.rate_text for p in active if p.rate_text})
    return passed(f"{len(active)} port(s) at ≥ {floor:g} Gb/s ({', '.join(rates)})")


@check(
    "network.ib.errors",
    "RDMA error counters",
    remediation="Symbol errors and link recoveries point at a marginal cable or transceiver; "
    "link_downed counts flaps. Replace the cable, update firmware, and watch whether they rise.",
)
def ib_errors(facts: Facts, policy: Policy) -> Outcome:
    every = [p for d in facts.get(rdma_devices) for p in d.ports]
    counted = [p for p in every if p.counters]
    if not counted:
        return skipped("no RDMA port counters")
    bad, some = [], []
    for p in counted:
        over = [
            f"{c} {p.counters[c]}"
            for c, limit in ERROR_COUNTERS.items()
            if p.counters.get(c, 0) > limit
        ]
        few = [f"{c} {p.counters[c]}" for c in ERROR_COUNTERS if p.counters.get(c)]
        if over:
            bad.append(f"{name(p)}: {', '.join(over)}")
        elif few:
            some.append(f"{name(p)}: {', '.join(few)}")
    if bad:
        return warned(f"error counters high on {len(bad)} port(s) since the last reset", bad + some)
    if some:
        return passed(f"a few link errors on {len(some)} port(s) (below the thresholds)", some)
    return passed(f"no link errors on {len(counted)} port(s)")


def infiniband_carries_the_fabric(facts: Facts, eth: list[RdmaPort]) -> bool:
    """An InfiniBand fabric plus an Ethernet NIC (front end, storage): NCCL uses the
    InfiniBand ports, so the Ethernet one is not held to RoCE's rules."""
    named = facts.get(environ).get("NCCL_IB_HCA", "")
    return bool(ports(facts, roce=False)) and not any(p.device in named for p in eth)


def low_mtu(facts: Facts) -> dict[str, int]:
    """netdev -> its MTU, for the RoCE ports network.roce finds below ROCE_MTU."""
    eth = ports(facts, roce=True)
    if infiniband_carries_the_fabric(facts, eth):
        return {}
    return {p.netdev: p.mtu for p in eth if p.netdev and p.mtu is not None and p.mtu < ROCE_MTU}


@check(
    "network.roce",
    "RoCE",
    remediation="RoCE needs a RoCE v2 GID on a routable address (configure an IP on the "
    "netdev), a port MTU of at least 4200 on the NIC and the switches (active MTU 4096), and "
    "NCCL_IB_GID_INDEX pointing at a RoCE v2 GID when set.",
    fixes=["fix.network.roce_mtu"],
)
@on_known_ports
def roce(facts: Facts, policy: Policy) -> Outcome:
    eth = ports(facts, roce=True)
    if not eth:
        return skipped("no RoCE (Ethernet link layer) port")
    if infiniband_carries_the_fabric(facts, eth):
        return skipped(
            "InfiniBand carries the fabric; Ethernet RDMA ports are not named in NCCL_IB_HCA",
            [f"{name(p)} ({p.netdev})" for p in eth],
        )
    index = facts.get(environ).get("NCCL_IB_GID_INDEX", "").strip()
    mtu_low: list[str] = []
    problems, unread, lines = [], [], []
    for p in eth:
        v2 = [g for g in p.gids if g.type == "RoCE v2" and not g.link_local]
        lines.append(
            f"{name(p)} ({p.netdev or 'no netdev'}): MTU {p.mtu or '?'}, "
            f"{len(v2)} routable RoCE v2 GID(s)"
        )
        # A RoCE port always holds its link-local default GIDs: none at all means the
        # table was not read, and no GID's absence can be judged from it.
        table_read = bool(p.gids) and all(g.type != UNREAD for g in p.gids)
        if not table_read:
            unread.append(f"{name(p)}: its GID table could not be read")
        elif not v2:
            problems.append(f"{name(p)}: no routable RoCE v2 GID")
        if table_read and index:
            chosen = next((g for g in p.gids if str(g.index) == index), None)
            if chosen is None or chosen.type != "RoCE v2":
                what = chosen.type if chosen else "empty"
                problems.append(f"{name(p)}: NCCL_IB_GID_INDEX={index} is {what}, not RoCE v2")
        if p.mtu is None:  # every RoCE port has a netdev: not found, or its MTU unread
            unread.append(f"{name(p)}: the MTU of {p.netdev or 'its netdev'} could not be read")
        elif p.mtu < ROCE_MTU:
            mtu_low.append(f"{name(p)}: {p.netdev} MTU {p.mtu} (needs ≥ {ROCE_MTU})")
    if problems:
        return failed(
            f"{len(problems)} RoCE problem(s)",
            problems + mtu_low + unread + lines,
            fixes=None if mtu_low else (),  # the MTU fix is no answer to a missing GID
        )
    if mtu_low:
        return warned(
            f"MTU below {ROCE_MTU} on {len(mtu_low)} RoCE port(s): the active MTU "
            "cannot reach 4096",
            mtu_low + unread + lines,
        )
    if unread:
        return errored(f"{len(unread)} RoCE reading(s) failed", unread + lines)
    return passed(f"{len(eth)} RoCE port(s) with RoCE v2 GIDs and MTU ≥ {ROCE_MTU}", lines)


@check(
    "network.gpudirect",
    "GPUDirect RDMA",
    remediation="Load nvidia_peermem (`modprobe nvidia-peermem`, and add it to "
    "/etc/modules-load.d/); without it NCCL logs 'GPU Direct RDMA Disabled' and inter-node "
    "bandwidth drops several-fold. In containers, pass /dev/infiniband (`--device`).",
    fixes=["fix.network.load_peermem"],
)
def gpu_direct(facts: Facts, policy: Policy) -> Outcome:
    hcas = facts.get(rdma_devices)
    gpus = facts.get(pci_devices).gpus(NVIDIA)
    if not hcas or not gpus:
        return skipped("GPUDirect RDMA needs both NVIDIA GPUs and RDMA devices")
    gd = facts.get(gpudirect)
    details = [
        f"GPUDirect Storage (nvidia_fs): {'loaded' if gd.nvidia_fs else 'not loaded'}",
        *gd.notes,
    ]
    if facts.get(container).in_container and not gd.uverbs:
        # Many containers are single-node on purpose; a multi-node one needs the devices.
        return warned(
            "RDMA devices on the host, but no /dev/infiniband/uverbs* in this container: "
            "multi-node jobs here fall back to TCP",
            details,
            fixes=(),  # the container's devices are given at its start, not loaded in it
        )
    if not gd.modules_readable:
        return skipped("the loaded modules are not readable", details)
    mods = facts.get(modules)
    if not gd.peermem and mods.nvidia_open and at_least(facts.get(kernel).release, "5.12"):
        return passed(
            "no nvidia_peermem, but the open GPU kernel modules on kernel ≥ 5.12 give NCCL "
            "the DMA-BUF path",
            details,
        )
    if not gd.peermem:
        return warned(
            "nvidia_peermem is not loaded: GPUDirect RDMA only works through "
            "DMA-BUF (open kernel modules, recent NCCL)",
            details,
        )
    return passed(
        f"{gd.peermem} loaded for {len(gpus)} GPU(s) and {len(hcas)} RDMA device(s)", details
    )


def nic_parts(facts: Facts) -> tuple[list[Part], list[str]]:
    """Every RDMA device by its sysfs fw_ver (model: hca_type and board_id), and every other
    physical NIC by `ethtool -i` (model: its driver and PCI id); the notes of what ethtool
    did not answer; the fw_ver reads that failed."""
    hcas = facts.get(rdma_devices)
    parts = [
        Part(d.name, " ".join(w for w in (d.hca_type, d.board_id) if w) or "?", d.fw_ver)
        for d in hcas
    ]
    # A fw_ver that did not answer (noted by the fact) is unknown, not "not reported".
    unread = [f"{d.name}: {n}" for d in hcas if not d.fw_ver for n in d.notes if "fw_ver" in n]
    behind_hcas = {d.pci_address for d in hcas if d.pci_address}
    found = facts.get(nic_firmware)
    others = [n for n in found.nics if n.bus_info not in behind_hcas]
    ids = {}
    if any(n.bus_info for n in others):
        ids = {d.address: f"{d.vendor}:{d.device}" for d in facts.get(pci_devices).devices}
    for n in others:
        model = " ".join(w for w in (n.driver, ids.get(n.bus_info, "")) if w) or "?"
        parts.append(Part(n.interface, model, n.firmware))
    return parts, list(found.notes), unread


@check(
    "network.firmware",
    "NIC firmware",
    remediation="Update the NIC's firmware to the version named (NVIDIA/Mellanox: "
    "`mlxfwmanager -u` or `flint`; Intel: the NVM update tool; Broadcom: `niccli`), then "
    "reset the NIC or reboot.",
)
def firmware(facts: Facts, policy: Policy) -> Outcome:
    """RDMA HCAs and other physical NICs against [firmware] minimums; HCAs of one
    hca_type/board_id (or NICs of one driver and PCI id) on other versions (mixed)."""
    parts, notes, unread_fw = nic_parts(facts)
    unread = facts.get(nic_firmware).unread
    none = (
        f"the firmware of {len(unread)} physical NIC(s) was not read ({', '.join(unread[:4])})"
        if unread
        else "no RDMA device or physical NIC"
    )
    return judge(parts, policy, what="NIC(s)", none=none, notes=notes, unread=unread_fw)
