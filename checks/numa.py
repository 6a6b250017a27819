"""NUMA checks: where each GPU and NIC sits, how to bind to it, and the tools to do so."""

from __future__ import annotations

from dldoctor.checks.pci import endpoints, kind
from dldoctor.facts import Facts
from dldoctor.facts.numa import numa_topology
from dldoctor.facts.numa import numactl as numactl_fact
from dldoctor.facts.pcie import PcieLink, pcie_links
from dldoctor.facts.system import container
from dldoctor.model import Outcome, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check

NO_NODES = "the kernel shows no NUMA nodes"


def shares_switch(a: PcieLink, b: PcieLink) -> bool:
    """Both below one PCIe switch (a common port that is not a root port's own chain end)."""
    return bool(a.upstream and b.upstream and set(a.upstream[:-1]) & set(b.upstream[:-1]))


@check("numa.topology", "NUMA topology")
def topology(facts: Facts, policy: Policy) -> Outcome:
    topo = facts.get(numa_topology)
    if not topo.nodes:
        return skipped(NO_NODES, topo.notes)
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
    if not gpus:
        return skipped("no GPU on the PCI bus")
    if not topo.nodes:  # nothing read (a VM without NUMA, an unreadable sysfs): not "one node"
        return skipped(NO_NODES, topo.notes)
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
    if unknown and facts.get(container).virtualization:
        return passed(
            f"{len(gpus)} GPU(s) in a VM that does not expose NUMA locality", unknown + table
        )
    if unknown:
        return warned(
            f"{len(unknown)} device(s) without a NUMA node on a {len(topo.cpu_nodes)}-node machine",
            unknown + table,
        )
    return passed(
        f"{len(gpus)} GPU(s) over {len(topo.cpu_nodes)} NUMA nodes; binding in details", table
    )


@check(
    "numa.numactl",
    "numactl",
    remediation="Install numactl (`apt install numactl` / `dnf install numactl`) to bind "
    "processes to a GPU's NUMA node.",
)
def numactl(facts: Facts, policy: Policy) -> Outcome:
    topo = facts.get(numa_topology)
    if not topo.nodes:
        return skipped(NO_NODES, topo.notes)
    if len(topo.cpu_nodes) < 2:
        return skipped("one NUMA node: nothing to bind")
    found = facts.get(numactl_fact)
    if found.path:
        return passed(f"installed ({found.path})", found.notes)
    return warned(f"not installed on a {len(topo.cpu_nodes)}-node machine", found.notes)
