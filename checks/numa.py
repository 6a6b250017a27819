"""NUMA checks: where each GPU and NIC sits, how to bind to it, and the tools to do so."""

from __future__ import annotations

from dldoctor.checks.needs import NO_NODES, needs, numa_nodes
from dldoctor.checks.pci import endpoints, kind
from dldoctor.facts import Facts
from dldoctor.facts.numa import NumaTopology, numa_topology
from dldoctor.facts.numa import numactl as numactl_fact
from dldoctor.facts.pcie import PcieLink, pcie_links
from dldoctor.facts.system import container
from dldoctor.model import Outcome, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check


def shares_switch(a: PcieLink, b: PcieLink) -> bool:
    """Both below one PCIe switch (a common port that is not a root port's own chain end)."""
    return bool(a.upstream and b.upstream and set(a.upstream[:-1]) & set(b.upstream[:-1]))


@check("numa.topology", "NUMA topology")
@needs(numa_nodes)
def topology(facts: Facts, policy: Policy, topo: NumaTopology) -> Outcome:
    lines = [
        f"node {n.node}: CPUs {n.cpulist or 'none'}"
        + (f", {n.memory_total_bytes / 1024**3:.0f} GiB" if n.memory_total_bytes else "")
        for n in topo.nodes
    ]
    balancing = {0: "off", 1: "on", 2: "memory tiering"}.get(topo.balancing, "unknown")
    lines.append(f"automatic NUMA balancing: {balancing}")
    return passed(
        f"{len(topo.nodes)} NUMA node(s), {len(topo.cpu_nodes)} with CPUs", lines + list(topo.notes)
    )


@check(
    "numa.locality",
    "GPU and NIC locality",
    remediation="Bind each rank to its GPU's node (`numactl --cpunodebind=N --membind=N`, "
    "Slurm `--gpu-bind=closest --cpu-bind=cores`). A NUMA node of -1 means the firmware did "
    "not say: check the BIOS NUMA settings (NPS/SNC, ACPI SRAT).",
)
def locality(facts: Facts, policy: Policy) -> Outcome:
    topo = facts.get(numa_topology)
    devices = [
        d for d in endpoints(facts.get(pcie_links)) if kind(d) in ("GPU", "NIC", "InfiniBand NIC")
    ]
    gpus = [d for d in devices if kind(d) == "GPU"]
    if not gpus:  # said first: a host without GPUs has nothing to place, NUMA or not
        return skipped("no GPU on the PCI bus")
    # Nothing read (a VM without NUMA, an unreadable sysfs) is not "one node".
    known = numa_nodes(facts)
    if isinstance(known, Outcome):
        return known
    if len(topo.cpu_nodes) < 2:
        return passed("one NUMA node: every GPU is local to every CPU")
    unknown = [
        f"{kind(d)} {d.address}: the firmware gives no NUMA node"
        for d in devices
        if d.numa_node is None
    ]
    table = []
    for gpu in gpus:
        if gpu.numa_node is None:
            continue
        cpus = f" (CPUs {gpu.local_cpulist})" if gpu.local_cpulist else ""
        table.append(
            f"GPU {gpu.address}: numactl --cpunodebind={gpu.numa_node} "
            f"--membind={gpu.numa_node}{cpus}"
        )
    nics = [d for d in devices if d not in gpus]
    for gpu in gpus:
        near = [n.address for n in nics if shares_switch(gpu, n)]
        same = [
            n.address
            for n in nics
            if n.address not in near and n.numa_node is not None and n.numa_node == gpu.numa_node
        ]
        if near:
            table.append(f"GPU {gpu.address} shares a PCIe switch with NIC {', '.join(near)}")
        elif same:
            table.append(
                f"GPU {gpu.address} shares NUMA node {gpu.numa_node} with NIC {', '.join(same)}"
            )
    nowhere = [f"pci:{d.address}" for d in devices if d.numa_node is None]
    far = far_from_rails(gpus, nics)
    if unknown and facts.get(container).virtualization:
        return passed(
            f"{len(gpus)} GPU(s) in a VM that does not expose NUMA locality", unknown + table
        )
    if unknown:
        return warned(
            f"{len(unknown)} device(s) without a NUMA node on a {len(topo.cpu_nodes)}-node machine",
            unknown + table,
            subjects=nowhere,
        )
    if far:
        rails = sorted({n.numa_node for n in nics if is_rail(n)})
        return warned(
            f"{len(far)} GPU(s) with no RDMA NIC on their NUMA node (the NICs are on node(s) "
            f"{', '.join(map(str, rails))}): their GPUDirect RDMA traffic crosses the "
            "socket link",
            [f"GPU {g.address} on NUMA node {g.numa_node}: no RDMA NIC there" for g in far] + table,
            remediation="Put an RDMA NIC on each socket that holds GPUs (the vendor's "
            "reference layout pairs each GPU with a NIC under one PCIe switch); until then "
            "NCCL sends those GPUs' traffic to a NIC across the socket link, or with PXN "
            "through a peer GPU on the NIC's socket.",
            subjects=[f"pci:{g.address}" for g in far]
            + [f"pci:{n.address}" for n in nics if is_rail(n)],
        )
    return passed(
        f"{len(gpus)} GPU(s) over {len(topo.cpu_nodes)} NUMA nodes; binding in details", table
    )


# Mellanox / NVIDIA networking: the ConnectX and BlueField adapters that carry the RDMA
# rails of GPU clusters, in InfiniBand or in Ethernet (RoCE) mode. Other vendors' Ethernet
# NICs are mostly the management port, which belongs on any socket.
RAIL_VENDORS = frozenset({"15b3"})


def is_rail(nic: PcieLink) -> bool:
    return kind(nic) == "InfiniBand NIC" or nic.vendor in RAIL_VENDORS


# A fabric for GPUDirect RDMA has a NIC per GPU or per pair; a host with one such NIC
# uses it as its front-end port (an inference box, a single node), on whichever socket.
MIN_RAILS = 2


def far_from_rails(gpus: list[PcieLink], nics: list[PcieLink]) -> list[PcieLink]:
    """The GPUs on a NUMA node that holds none of the host's RDMA NICs (none without a
    fabric of MIN_RAILS or more)."""
    rails = [n for n in nics if is_rail(n) and n.numa_node is not None]
    if len(rails) < MIN_RAILS:
        return []
    nodes = {n.numa_node for n in rails}
    return [g for g in gpus if g.numa_node is not None and g.numa_node not in nodes]


@check(
    "numa.numactl",
    "numactl",
    remediation="Install numactl (`apt install numactl` / `dnf install numactl`) to bind "
    "processes to a GPU's NUMA node.",
)
@needs(numa_nodes)
def numactl(facts: Facts, policy: Policy, topo: NumaTopology) -> Outcome:
    if len(topo.cpu_nodes) < 2:
        return skipped("one NUMA node: nothing to bind")
    found = facts.get(numactl_fact)
    if found.path:
        return passed(f"installed ({found.path})", found.notes)
    return warned(f"not installed on a {len(topo.cpu_nodes)}-node machine", found.notes)


BALANCING = "/proc/sys/kernel/numa_balancing"
# The sysctl is a bit mask: 1 moves pages between nodes toward the CPUs that touch them,
# 2 (memory tiering) only promotes pages from slower memory-only nodes (CXL, PMEM) and never
# scans the pages of the CPU nodes (mm/mprotect.c skips top-tier nodes without bit 1).
BALANCING_MODES = {0: "off", 1: "on", 2: "memory tiering only", 3: "on (and memory tiering)"}


@check(
    "numa.balancing",
    "Automatic NUMA balancing",
    remediation="Turn automatic NUMA balancing off on GPU hosts whose jobs are bound to "
    "their GPU's node (`sysctl -w kernel.numa_balancing=0`, and "
    "`kernel.numa_balancing = 0` in /etc/sysctl.d/ for the next boots). The kernel's own "
    "documentation says to disable it when the workload is already bound to NUMA nodes.",
    fixes=["fix.numa.balancing"],
)
def balancing(facts: Facts, policy: Policy) -> Outcome:
    topo = facts.get(numa_topology)
    value = topo.balancing if topo.balancing is not None else -1
    mode = BALANCING_MODES.get(value)
    if mode and not value & 1:  # off is a pass with or without NUMA nodes
        return passed(mode)
    if not topo.nodes:
        return skipped(NO_NODES, topo.notes)
    if mode is None:
        said = "not read" if topo.balancing is None else f"reads {value}"
        return skipped(f"automatic NUMA balancing unknown ({BALANCING} {said})", topo.notes)
    if len(topo.nodes) < 2:
        return passed(f"{mode}, with one NUMA node: no page has another node to move to")
    gpus = [d for d in endpoints(facts.get(pcie_links)) if kind(d) == "GPU"]
    if not gpus:
        return skipped(f"{mode}, but no GPU on the PCI bus")
    # Balancing unmaps pages to sample who touches them and migrates them between nodes:
    # hint faults and copies in the data loaders and pageable host buffers of ranks that
    # numactl already bound to their GPU's node (the guide's advice), i.e. latency spikes.
    details = [f"{BALANCING} = {value}"]
    if facts.get(container).in_container:
        details.append("in a container: this is the host's setting, to change on the host")
    return warned(
        f"{mode}, with {len(topo.nodes)} NUMA nodes and {len(gpus)} GPU(s): the kernel moves "
        "pages under jobs bound to their GPU's node (latency spikes)",
        details,
    )
