"""The inventory: what a run learned of the host's parts, in the report (`inventory`).

What a fleet compares node against node (`dldoctor fleet report`), what `genconf` pins
as a policy and what the Prometheus textfile exports as gauges: GPUs and their telemetry,
the driver / CUDA / cuDNN / NCCL stack, PCIe links, RDMA ports, RAID arrays, mounts,
kernel and firmware. It is built only from facts the checks already computed (a run with
`--only` reports what it looked at, and the inventory never waits on a probe); a section
whose fact was not computed or failed is null — "not known", never "none".
"""

from __future__ import annotations

from typing import Any

from dldoctor.facts import Facts
from dldoctor.facts.storage import network_mounts

# Local block filesystems worth pinning (a dataset's array, the scratch NVMe); virtual
# ones (proc, cgroup, overlay layers) differ between boots and say nothing of the host.
LOCAL_FSTYPES = frozenset({"ext4", "xfs", "btrfs", "zfs", "ext3", "f2fs", "bcachefs"})


def build_inventory(facts: Facts) -> dict[str, Any]:
    return {
        "kernel": _kernel(facts),
        "os": _os(facts),
        "firmware": facts.peek("system.dmi"),
        "driver": _driver(facts),
        "gpus": _gpus(facts),
        "cuda": _cuda(facts),
        "pcie": _pcie(facts),
        "rdma": _rdma(facts),
        "raid": _raid(facts),
        "mounts": _mounts(facts),
    }


def _kernel(facts: Facts) -> str | None:
    k = facts.peek("kernel")
    return k.release or None if k is not None else None


def _os(facts: Facts) -> str | None:
    os_release = facts.peek("os.release")
    return os_release.display or None if os_release is not None else None


def _stack(facts: Facts):
    stack = facts.peek("gpu.nvidia")
    return stack if stack is not None and stack.usable else None


def _driver(facts: Facts) -> dict[str, Any] | None:
    stack = _stack(facts)
    if stack is None:
        return None
    return {
        "version": stack.driver_version or None,
        "cuda": stack.cuda_driver_version or None,
        "source": stack.source,
    }


def _gpus(facts: Facts) -> list[dict[str, Any]] | None:
    stack = _stack(facts)
    if stack is None:
        return None
    xids = _xid_counts(facts)
    return [
        {
            "index": g.index,
            "bus_id": g.pci_bus_id or None,
            "model": g.name or None,
            "memory_mib": g.memory_total_mib,
            "vbios": g.vbios or None,
            "pcie_gen": g.pcie_gen_current,
            "pcie_gen_max": g.pcie_gen_max,
            "pcie_width": g.pcie_width_current,
            "pcie_width_max": g.pcie_width_max,
            "temperature_c": g.temperature_c,
            "power_draw_w": g.power_draw_w,
            "power_limit_w": g.power_limit_w,
            "ecc_volatile_corrected": g.ecc_volatile_corrected,
            "ecc_volatile_uncorrected": g.ecc_volatile_uncorrected,
            "remapped_rows_corrected": g.remap_corrected,
            "remapped_rows_uncorrected": g.remap_uncorrected,
            "retired_pages_dbe": g.retired_pages_dbe,
            "xid_events": None if xids is None else xids.get(g.pci_bus_id, 0),
        }
        for g in stack.gpus
    ]


def _xid_counts(facts: Facts) -> dict[str, int] | None:
    log = facts.peek("kernel.xid")
    if log is None or not log.readable:
        return None
    counts: dict[str, int] = {}
    for event in log.events:
        counts[event.pci_bus_id] = counts.get(event.pci_bus_id, 0) + 1
    return counts


def _cuda(facts: Facts) -> dict[str, Any] | None:
    toolkits = facts.peek("cuda.toolkits")
    cudnn = facts.peek("cuda.cudnn")
    nccl = facts.peek("cuda.nccl")
    frameworks = facts.peek("python.frameworks")
    if toolkits is None and cudnn is None and nccl is None and frameworks is None:
        return None
    selected = toolkits.get(toolkits.selected) if toolkits is not None else None
    return {
        "toolkit": selected.version or None if selected is not None else None,
        "toolkits": None
        if toolkits is None
        else sorted({t.version for t in toolkits.toolkits if t.version}),
        "cudnn": None if cudnn is None else sorted({c.version for c in cudnn if c.version}),
        "nccl": None if nccl is None else sorted({n.version for n in nccl if n.version}),
        "frameworks": None
        if frameworks is None
        else [
            {"name": f.name, "version": f.version, "cuda": f.cuda, "cudnn": f.cudnn}
            for f in frameworks
        ],
    }


def _pcie(facts: Facts) -> list[dict[str, Any]] | None:
    links = facts.peek("pcie.links")
    if links is None or not links.readable:
        return None
    return [
        {
            "address": link.address,
            "vendor": link.vendor,
            "device": link.device,
            "class": link.class_code,
            "driver": link.driver or None,
            "speed_gts": link.current_gts,
            "speed_gts_max": link.max_gts,
            "width": link.current_width,
            "width_max": link.max_width,
        }
        for link in links.links
        if not link.is_bridge
    ]


def _rdma(facts: Facts) -> list[dict[str, Any]] | None:
    devices = facts.peek("rdma.devices")
    if devices is None:
        return None
    return [
        {
            "device": d.name,
            "port": p.port,
            "firmware": d.fw_ver or None,
            "board_id": d.board_id or None,
            "link_layer": p.link_layer or None,
            "state": p.state or None,
            "rate_gbps": p.rate_gbps,
            "netdev": p.netdev or None,
            "mtu": p.mtu,
        }
        for d in devices
        for p in d.ports
    ]


def _raid(facts: Facts) -> list[dict[str, Any]] | None:
    md = facts.peek("raid.md")
    if md is None:
        return None
    if md.mdstat is None:
        return []  # no md driver loaded: no arrays
    return [
        {
            "name": a.name,
            "level": a.level or None,
            "state": a.state,
            "raid_disks": a.raid_disks,
            "active_disks": a.active_disks,
            "degraded": a.degraded,
        }
        for a in md.mdstat.arrays
    ]


def _mounts(facts: Facts) -> list[dict[str, Any]] | None:
    table = facts.peek("storage.mounts")
    if not table:  # () when /proc/self/mountinfo could not be read
        return None
    chosen = {m.mount_point: m for m in table if m.fstype in LOCAL_FSTYPES}
    chosen.update((m.mount_point, m) for m in network_mounts(table))
    return [
        {"mount_point": m.mount_point, "fstype": m.fstype, "source": m.source}
        for m in sorted(chosen.values(), key=lambda m: m.mount_point)
    ]
