"""The key facts: what `dldoctor diff` and `dldoctor fleet report` compare host against
host, each read from the inventory (doctor/inventory.py). One table, KEY_FACTS, serves both:
a diff of two bundles (their inventories built from the replayed facts), of two report JSON
files (their `inventory` objects), and a fleet of node reports.

Each reader takes an Inventory and returns one value as text, or {item: text} for facts
that exist per GPU, device, port or array; None is "not known" (the section is null, or the
report predates the inventory), never a value that differs. A report is an untrusted file:
every value becomes text only through `_text`, which caps it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dldoctor.inventory import Gpu, Inventory

KeyValue = str | dict[str, str | None] | None
MAX_VALUE_CHARS = 200  # a value is a version or a model name: a longer one is cut


@dataclass(frozen=True)
class KeyFact:
    name: str  # what diff and fleet print, e.g. "nvidia.driver"
    label: str  # what the value is, as docs/diff.md's table says
    read: Callable[[Inventory], KeyValue]


def _text(value: Any) -> str | None:
    if type(value) is str:  # most are
        return value[:MAX_VALUE_CHARS] or None
    if value is None or isinstance(value, (dict, list, tuple)):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)[:MAX_VALUE_CHARS]


def _per(rows: Iterable | None, key: Callable[[Any], Any], value: Callable[[Any], Any]):
    if rows is None:
        return None
    return {str(_text(key(r))): _text(value(r)) for r in rows}


def _versions(found: tuple | None) -> str | None:
    if found is None:
        return None
    return ", ".join(sorted(str(_text(v)) for v in found))[:MAX_VALUE_CHARS] or "none"


def _driver(inv: Inventory, field: str) -> str | None:
    return None if inv.driver is None else _text(getattr(inv.driver, field))


def _toolkit_selected(inv: Inventory) -> str | None:
    if inv.cuda is None or inv.cuda.toolkits is None:
        return None
    return _text(inv.cuda.toolkit) or "none selected"


def _cuda_versions(inv: Inventory, field: str) -> str | None:
    return None if inv.cuda is None else _versions(getattr(inv.cuda, field))


def _frameworks(inv: Inventory):
    if inv.cuda is None:
        return None

    def value(f) -> str:
        built = f", CUDA {_text(f.cuda)}" if f.cuda else ""
        return f"{_text(f.version)}{built}"

    return _per(inv.cuda.frameworks, lambda f: f.name, value)


def _count(rows: tuple | None) -> str | None:
    return None if rows is None else str(len(rows))


def _gpus(inv: Inventory, field: str):
    return _per(inv.gpus, lambda g: f"GPU {_text(g.index)}", lambda g: getattr(g, field))


def _links(inv: Inventory, value: Callable[[Any], Any]):
    return _per(inv.pcie, lambda d: d.address, value)


def _unit(value: Any, before: str, after: str) -> str | None:
    return None if _text(value) is None else f"{before}{_text(value)}{after}"


def _ports(inv: Inventory, value: Callable[[Any], Any]):
    return _per(inv.rdma, lambda p: f"{_text(p.device)} port {_text(p.port)}", value)


def _nic_count(inv: Inventory) -> str | None:
    return None if inv.rdma is None else str(len({_text(p.device) for p in inv.rdma}))


def _nic_firmware(inv: Inventory):
    return _per(inv.rdma, lambda p: p.device, lambda p: p.firmware)


def _nvme_firmware(inv: Inventory):
    return _per(
        inv.nvme,
        lambda c: c.name,
        lambda c: " ".join(str(_text(s)) for s in (c.model, c.firmware) if s),
    )


def _ethtool_firmware(inv: Inventory):
    return _per(
        inv.nics,
        lambda n: n.interface,
        lambda n: " ".join(str(_text(s)) for s in (n.driver, n.firmware) if s),
    )


def _firmware(inv: Inventory, *fields: str) -> str | None:
    if inv.firmware is None:
        return None
    dmi = dict(inv.firmware)
    return _text(" ".join(str(_text(dmi[f])) for f in fields if _text(dmi.get(f))))


def _raid(inv: Inventory):
    def layout(a) -> str:
        disks = f"{a.active_disks}/{a.raid_disks}" if a.raid_disks else ""
        words = (a.level, a.state, disks, "degraded" if a.degraded else "")
        return " ".join(str(_text(w)) for w in words if w)

    return _per(inv.raid, lambda a: a.name, layout)


# In the order diff and the fleet report print them: add a line to compare one more.
KEY_FACTS: tuple[KeyFact, ...] = (
    KeyFact("nvidia.driver", "NVIDIA driver version", lambda inv: _driver(inv, "version")),
    KeyFact("nvidia.cuda_driver", "highest CUDA the driver supports", lambda i: _driver(i, "cuda")),
    KeyFact("cuda.toolkit.selected", "the CUDA toolkit the host selects", _toolkit_selected),
    KeyFact("cuda.toolkit", "CUDA toolkit versions found", lambda i: _cuda_versions(i, "toolkits")),
    KeyFact("cuda.cudnn", "cuDNN versions found", lambda inv: _cuda_versions(inv, "cudnn")),
    KeyFact("cuda.nccl", "NCCL versions found", lambda inv: _cuda_versions(inv, "nccl")),
    KeyFact("python.frameworks", "framework version and its CUDA", _frameworks),
    KeyFact("gpu.count", "number of GPUs the driver lists", lambda inv: _count(inv.gpus)),
    KeyFact("gpu.model", "GPU product name", lambda inv: _gpus(inv, "model")),
    KeyFact("gpu.vbios", "GPU VBIOS version", lambda inv: _gpus(inv, "vbios")),
    KeyFact(
        "pcie.width",
        "trained PCIe link width",
        lambda inv: _links(inv, lambda d: _unit(d.width, "x", "")),
    ),
    KeyFact(
        "pcie.speed",
        "trained PCIe link speed",
        lambda inv: _links(inv, lambda d: _unit(d.speed_gts, "", " GT/s")),
    ),
    KeyFact("nic.count", "number of RDMA devices", _nic_count),
    KeyFact(
        "rdma.rate",
        "RDMA port rate",
        lambda inv: _ports(inv, lambda p: _unit(p.rate_gbps, "", " Gb/s")),
    ),
    KeyFact("rdma.state", "RDMA port state", lambda inv: _ports(inv, lambda p: p.state)),
    KeyFact("nic.firmware", "RDMA device firmware", _nic_firmware),
    KeyFact("nvme.firmware", "NVMe model and firmware", _nvme_firmware),
    KeyFact("net.firmware", "NIC driver and firmware (ethtool -i)", _ethtool_firmware),
    KeyFact("kernel.release", "kernel release (uname -r)", lambda inv: _text(inv.kernel)),
    KeyFact("os.release", "operating system", lambda inv: _text(inv.os)),
    KeyFact(
        "firmware.bios",
        "BIOS vendor, version and date",
        lambda inv: _firmware(inv, "bios_vendor", "bios_version", "bios_date"),
    ),
    KeyFact(
        "system.product",
        "system vendor and product",
        lambda inv: _firmware(inv, "sys_vendor", "product_name"),
    ),
    KeyFact("raid.md", "md array level, state, disks, degraded", _raid),
)
NAMES = tuple(f.name for f in KEY_FACTS)


def typed(inventory: Any) -> Inventory:
    """An Inventory, from itself or a report's `inventory` object; one that cannot be read
    (a hostile or damaged report) knows nothing. Read once, it serves each function here."""
    if isinstance(inventory, Inventory):
        return inventory
    try:
        return Inventory.from_dict(inventory)
    except (TypeError, AttributeError, ValueError, RecursionError):
        return Inventory()


def key_facts(inventory: Any) -> dict[str, KeyValue]:
    """Every key fact of one host, from an Inventory or a report's `inventory` object;
    one whose section is odd (a hostile or damaged report) is None, never a crash."""
    inv = typed(inventory)
    values: dict[str, KeyValue] = {}
    for f in KEY_FACTS:
        try:
            values[f.name] = f.read(inv)
        except (TypeError, AttributeError, KeyError, ValueError, RecursionError):
            values[f.name] = None
    return values


def gpus_by_link(inventory: Any) -> dict[str, Gpu]:
    """PCIe device address -> the GPU at it. NVML may write the domain with 8 digits
    (00000000:18:00.0), sysfs with 4: they are matched on the rest."""
    inv = typed(inventory)
    gpus = {g.bus_id.lower()[-12:]: g for g in inv.gpus or () if isinstance(g.bus_id, str)}
    return {
        d.address: gpus[d.address.lower()[-12:]]
        for d in inv.pcie or ()
        if isinstance(d.address, str) and d.address.lower()[-12:] in gpus
    }


def gpu_labels(inventory: Any) -> dict[str, str]:
    """PCIe item (its address) -> "GPU <index>", so a link row names its GPU."""
    return {address: f"GPU {g.index}" for address, g in gpus_by_link(inventory).items()}
