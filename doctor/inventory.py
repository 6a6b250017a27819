"""The inventory: what a run learned of the host's parts, in the report (`inventory`).

What `dldoctor diff` and a fleet compare node against node (the key facts,
doctor/keyfacts.py), what `genconf` pins as a policy and what the Prometheus textfile
exports as gauges: GPUs and their telemetry, the driver / CUDA / cuDNN / NCCL stack, PCIe
links, RDMA ports, NVMe controllers, RAID arrays, mounts, kernel and firmware. It is built
only from facts the checks already computed (a run with `--only` reports what it looked at, and the
inventory never waits on a probe); a section whose fact was not computed or failed is
None — "not known", never "none".

`Inventory.from_facts` builds it; `to_dict()` is the report's `inventory` object
(doctor/schemas, docs/report-schema.md) and `from_dict()` reads one back. A report is an
untrusted file: `from_dict` keeps a section only when it has the right kind (an object, a
list of objects), and leaves a value of the wrong kind for its reader to judge.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar

from dldoctor.facts import Fact, Facts
from dldoctor.facts.cudalibs import cudnn as cudnn_fact
from dldoctor.facts.cudalibs import nccl as nccl_fact
from dldoctor.facts.frameworks import frameworks as frameworks_fact
from dldoctor.facts.mdraid import md_raid
from dldoctor.facts.net import nic_firmware
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.pcie import pcie_links
from dldoctor.facts.rdma import rdma_devices
from dldoctor.facts.storage import mounts as mounts_fact
from dldoctor.facts.storage import network_mounts
from dldoctor.facts.storage import nvme as nvme_fact
from dldoctor.facts.system import dmi, kernel, os_release
from dldoctor.facts.toolkit import toolkits as toolkits_fact
from dldoctor.facts.xid import xid_events

T = TypeVar("T")

# Local block filesystems worth pinning (a dataset's array, the scratch NVMe); virtual
# ones (proc, cgroup, overlay layers) differ between boots and say nothing of the host.
LOCAL_FSTYPES = frozenset({"ext4", "xfs", "btrfs", "zfs", "ext3", "f2fs", "bcachefs"})


def computed(facts: Facts, f: Fact[T]) -> T | None:
    """The fact's value if a check already computed it, else None: never waits on a probe."""
    return facts.peek(f.name)


# --- the rows -------------------------------------------------------------------------
# One NamedTuple per row (a tenth of the cost of a frozen dataclass at import); its fields
# are the JSON keys, in the JSON's order.


# The row fields whose JSON keys differ from their names.
_RENAMED: dict[str, dict[str, str]] = {"PcieDevice": {"class_code": "class"}}


@functools.cache  # a fleet report reads some 70 rows of each of 10,000 nodes
def _json_keys(cls: type) -> tuple[str, ...]:
    renamed = _RENAMED.get(cls.__name__, {})
    return tuple(renamed.get(name, name) for name in cls._fields)  # type: ignore[attr-defined]


def _row_dict(row: tuple) -> dict[str, Any]:
    """A row as its JSON object, keys in the fields' order."""
    return dict(zip(_json_keys(type(row)), row, strict=True))


def _row_of(cls: type[T], d: Mapping[str, Any]) -> T:
    """A row of a JSON object: a key it lacks is None."""
    return cls(*map(d.get, _json_keys(cls)))


class Driver(NamedTuple):
    version: str | None
    cuda: str | None  # the highest CUDA the driver supports
    source: str | None  # "nvml" or "nvidia-smi"


class Gpu(NamedTuple):
    index: int | None
    bus_id: str | None
    model: str | None
    memory_mib: int | None
    vbios: str | None
    pcie_gen: int | None
    pcie_gen_max: int | None
    pcie_width: int | None
    pcie_width_max: int | None
    temperature_c: float | None
    power_draw_w: float | None
    power_limit_w: float | None
    ecc_volatile_corrected: int | None
    ecc_volatile_uncorrected: int | None
    remapped_rows_corrected: int | None
    remapped_rows_uncorrected: int | None
    retired_pages_dbe: int | None
    xid_events: int | None  # None: the kernel log could not be read


class Framework(NamedTuple):
    name: str | None
    version: str | None
    cuda: str | None
    cudnn: str | None


class PcieDevice(NamedTuple):
    address: str | None
    vendor: str | None
    device: str | None
    class_code: str | None
    driver: str | None
    speed_gts: float | None
    speed_gts_max: float | None
    width: int | None
    width_max: int | None


class RdmaPort(NamedTuple):
    device: str | None
    port: int | None
    firmware: str | None
    board_id: str | None
    link_layer: str | None
    state: str | None
    rate_gbps: float | None
    netdev: str | None
    mtu: int | None


class NvmeController(NamedTuple):
    name: str | None
    model: str | None
    firmware: str | None


class Nic(NamedTuple):
    interface: str | None
    driver: str | None
    firmware: str | None
    bus_info: str | None


class RaidArray(NamedTuple):
    name: str | None
    level: str | None
    state: str | None
    raid_disks: int | None
    active_disks: int | None
    degraded: bool | None


class Mount(NamedTuple):
    mount_point: str | None
    fstype: str | None
    source: str | None


class Cuda(NamedTuple):
    toolkit: str | None  # the selected toolkit's version
    toolkits: tuple[str, ...] | None
    cudnn: tuple[str, ...] | None
    nccl: tuple[str, ...] | None
    frameworks: tuple[Framework, ...] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "toolkit": self.toolkit,
            "toolkits": _list(self.toolkits),
            "cudnn": _list(self.cudnn),
            "nccl": _list(self.nccl),
            "frameworks": _dicts(self.frameworks),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Cuda:
        return cls(
            d.get("toolkit"),
            _tuple(d.get("toolkits")),
            _tuple(d.get("cudnn")),
            _tuple(d.get("nccl")),
            _rows(Framework, d.get("frameworks")),
        )


# --- the inventory --------------------------------------------------------------------


class Inventory(NamedTuple):
    kernel: str | None = None
    os: str | None = None
    firmware: tuple[tuple[str, str], ...] | None = None  # DMI (key, value), in its order
    driver: Driver | None = None
    gpus: tuple[Gpu, ...] | None = None
    cuda: Cuda | None = None
    pcie: tuple[PcieDevice, ...] | None = None  # the devices, not the bridges above them
    rdma: tuple[RdmaPort, ...] | None = None  # one row per port
    nvme: tuple[NvmeController, ...] | None = None  # serials are left out
    nics: tuple[Nic, ...] | None = None  # physical interfaces, as `ethtool -i` says them
    raid: tuple[RaidArray, ...] | None = None  # () with no md driver loaded
    mounts: tuple[Mount, ...] | None = None

    @classmethod
    def from_facts(cls, facts: Facts) -> Inventory:
        return cls(
            kernel=_kernel(facts),
            os=_os(facts),
            firmware=_firmware(facts),
            driver=_driver(facts),
            gpus=_gpus(facts),
            cuda=_cuda(facts),
            pcie=_pcie(facts),
            rdma=_rdma(facts),
            nvme=_nvme(facts),
            nics=_nics(facts),
            raid=_raid(facts),
            mounts=_mounts(facts),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "os": self.os,
            "firmware": None if self.firmware is None else dict(self.firmware),
            "driver": None if self.driver is None else _row_dict(self.driver),
            "gpus": _dicts(self.gpus),
            "cuda": None if self.cuda is None else self.cuda.to_dict(),
            "pcie": _dicts(self.pcie),
            "rdma": _dicts(self.rdma),
            "nvme": _dicts(self.nvme),
            "nics": _dicts(self.nics),
            "raid": _dicts(self.raid),
            "mounts": _dicts(self.mounts),
        }

    @classmethod
    def from_dict(cls, d: Any) -> Inventory:
        """The inventory of a report's `inventory` object; anything but an object (a
        report from before the inventory existed) is an inventory that knows nothing."""
        if not isinstance(d, Mapping):
            return cls()
        firmware = d.get("firmware")
        driver, cuda = d.get("driver"), d.get("cuda")
        return cls(
            kernel=d.get("kernel"),
            os=d.get("os"),
            firmware=tuple(firmware.items()) if isinstance(firmware, Mapping) else None,
            driver=_row_of(Driver, driver) if isinstance(driver, Mapping) else None,
            gpus=_rows(Gpu, d.get("gpus")),
            cuda=Cuda.from_dict(cuda) if isinstance(cuda, Mapping) else None,
            pcie=_rows(PcieDevice, d.get("pcie")),
            rdma=_rows(RdmaPort, d.get("rdma")),
            nvme=_rows(NvmeController, d.get("nvme")),
            nics=_rows(Nic, d.get("nics")),
            raid=_rows(RaidArray, d.get("raid")),
            mounts=_rows(Mount, d.get("mounts")),
        )


def _list(values: tuple | None) -> list | None:
    return None if values is None else list(values)


def _dicts(rows: tuple | None) -> list[dict[str, Any]] | None:
    return None if rows is None else [_row_dict(r) for r in rows]


def _tuple(values: Any) -> tuple | None:
    return tuple(values) if isinstance(values, list) else None


def _rows(row: type[T], values: Any) -> tuple[T, ...] | None:
    if not isinstance(values, list):
        return None
    return tuple(_row_of(row, v) for v in values if isinstance(v, Mapping))


# --- from the facts -------------------------------------------------------------------


def _kernel(facts: Facts) -> str | None:
    k = computed(facts, kernel)
    return k.release or None if k is not None else None


def _os(facts: Facts) -> str | None:
    found = computed(facts, os_release)
    return found.display or None if found is not None else None


def _firmware(facts: Facts) -> tuple[tuple[str, str], ...] | None:
    found = computed(facts, dmi)
    return None if found is None else tuple(found.items())


def _stack(facts: Facts):
    stack = computed(facts, nvidia)
    return stack if stack is not None and stack.usable else None


def _driver(facts: Facts) -> Driver | None:
    stack = _stack(facts)
    if stack is None:
        return None
    return Driver(stack.driver_version or None, stack.cuda_driver_version or None, stack.source)


def _gpus(facts: Facts) -> tuple[Gpu, ...] | None:
    stack = _stack(facts)
    if stack is None:
        return None
    xids = _xid_counts(facts)
    return tuple(
        Gpu(
            index=g.index,
            bus_id=g.pci_bus_id or None,
            model=g.name or None,
            memory_mib=g.memory_total_mib,
            vbios=g.vbios or None,
            pcie_gen=g.pcie_gen_current,
            pcie_gen_max=g.pcie_gen_max,
            pcie_width=g.pcie_width_current,
            pcie_width_max=g.pcie_width_max,
            temperature_c=g.temperature_c,
            power_draw_w=g.power_draw_w,
            power_limit_w=g.power_limit_w,
            ecc_volatile_corrected=g.ecc_volatile_corrected,
            ecc_volatile_uncorrected=g.ecc_volatile_uncorrected,
            remapped_rows_corrected=g.remap_corrected,
            remapped_rows_uncorrected=g.remap_uncorrected,
            retired_pages_dbe=g.retired_pages_dbe,
            xid_events=None if xids is None else xids.get(g.pci_bus_id, 0),
        )
        for g in stack.gpus
    )


def _xid_counts(facts: Facts) -> dict[str, int] | None:
    log = computed(facts, xid_events)
    if log is None or not log.readable:
        return None
    counts: dict[str, int] = {}
    for event in log.events:
        counts[event.pci_bus_id] = counts.get(event.pci_bus_id, 0) + 1
    return counts


def _cuda(facts: Facts) -> Cuda | None:
    toolkits = computed(facts, toolkits_fact)
    cudnn = computed(facts, cudnn_fact)
    nccl = computed(facts, nccl_fact)
    frameworks = computed(facts, frameworks_fact)
    if toolkits is None and cudnn is None and nccl is None and frameworks is None:
        return None
    selected = toolkits.get(toolkits.selected) if toolkits is not None else None
    return Cuda(
        toolkit=selected.version or None if selected is not None else None,
        toolkits=None if toolkits is None else _versions(toolkits.toolkits),
        cudnn=None if cudnn is None else _versions(cudnn),
        nccl=None if nccl is None else _versions(nccl),
        frameworks=None
        if frameworks is None
        else tuple(Framework(f.name, f.version, f.cuda, f.cudnn) for f in frameworks),
    )


def _versions(found) -> tuple[str, ...]:
    return tuple(sorted({x.version for x in found if x.version}))


def _pcie(facts: Facts) -> tuple[PcieDevice, ...] | None:
    links = computed(facts, pcie_links)
    if links is None or not links.readable:
        return None
    return tuple(
        PcieDevice(
            address=link.address,
            vendor=link.vendor,
            device=link.device,
            class_code=link.class_code,
            driver=link.driver or None,
            speed_gts=link.current_gts,
            speed_gts_max=link.max_gts,
            width=link.current_width,
            width_max=link.max_width,
        )
        for link in links.links
        if not link.is_bridge
    )


def _rdma(facts: Facts) -> tuple[RdmaPort, ...] | None:
    devices = computed(facts, rdma_devices)
    if devices is None:
        return None
    return tuple(
        RdmaPort(
            device=d.name,
            port=p.port,
            firmware=d.fw_ver or None,
            board_id=d.board_id or None,
            link_layer=p.link_layer or None,
            state=p.state or None,
            rate_gbps=p.rate_gbps,
            netdev=p.netdev or None,
            mtu=p.mtu,
        )
        for d in devices
        for p in d.ports
    )


def _nvme(facts: Facts) -> tuple[NvmeController, ...] | None:
    controllers = computed(facts, nvme_fact)
    if controllers is None:
        return None
    return tuple(NvmeController(c.name, c.model or None, c.firmware or None) for c in controllers)


def _nics(facts: Facts) -> tuple[Nic, ...] | None:
    found = computed(facts, nic_firmware)
    if found is None:
        return None
    return tuple(
        Nic(n.interface, n.driver or None, n.firmware or None, n.bus_info or None)
        for n in found.nics
    )


def _raid(facts: Facts) -> tuple[RaidArray, ...] | None:
    md = computed(facts, md_raid)
    if md is None:
        return None
    if md.mdstat is None:
        return ()  # no md driver loaded: no arrays
    return tuple(
        RaidArray(
            name=a.name,
            level=a.level or None,
            state=a.state,
            raid_disks=a.raid_disks,
            active_disks=a.active_disks,
            degraded=a.degraded,
        )
        for a in md.mdstat.arrays
    )


def _mounts(facts: Facts) -> tuple[Mount, ...] | None:
    table = computed(facts, mounts_fact)
    if not table:  # () when /proc/self/mountinfo could not be read
        return None
    chosen = {m.mount_point: m for m in table if m.fstype in LOCAL_FSTYPES}
    chosen.update((m.mount_point, m) for m in network_mounts(table))
    return tuple(
        Mount(m.mount_point, m.fstype, m.source)
        for m in sorted(chosen.values(), key=lambda m: m.mount_point)
    )
