"""The key facts a fleet compares node against node, read from a report's `inventory`.

Each reader takes the inventory (a dict from an untrusted file) and returns one value as
text, or {item: text} for facts that exist per GPU, device, port or array; None is "not
known" (the section is null, or the report predates the inventory), never a value that
differs. Names are those of `dldoctor diff` (doctor/diffing.py KEY_FACTS) where the fact
is the same, so `fleet report --since` compares with diff's own code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

KeyValue = str | dict[str, str | None] | None
MAX_VALUE_CHARS = 200  # a value is a version or a model name: a longer one is cut


def _text(value: Any) -> str | None:
    if type(value) is str:  # most are
        return value[:MAX_VALUE_CHARS] or None
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)[:MAX_VALUE_CHARS]


def _section(inv: Mapping, name: str, kind: type) -> Any:
    value = inv.get(name)
    return value if isinstance(value, kind) else None


def _rows(inv: Mapping, name: str) -> list[dict] | None:
    rows = _section(inv, name, list)
    return None if rows is None else [r for r in rows if isinstance(r, dict)]


def _per(rows: list[dict] | None, key: Callable[[dict], Any], value: Callable[[dict], Any]):
    if rows is None:
        return None
    return {str(_text(key(r))): _text(value(r)) for r in rows}


def _versions(inv: Mapping, name: str) -> str | None:
    cuda = _section(inv, "cuda", dict)
    found = None if cuda is None else cuda.get(name)
    if not isinstance(found, list):
        return None
    return ", ".join(sorted(str(_text(v)) for v in found))[:MAX_VALUE_CHARS] or "none"


def _driver(inv: Mapping, name: str) -> str | None:
    driver = _section(inv, "driver", dict)
    return None if driver is None else _text(driver.get(name))


def _toolkit_selected(inv: Mapping) -> str | None:
    cuda = _section(inv, "cuda", dict)
    if cuda is None or cuda.get("toolkits") is None:
        return None
    return _text(cuda.get("toolkit")) or "none selected"


def _frameworks(inv: Mapping):
    cuda = _section(inv, "cuda", dict)
    rows = None if cuda is None else cuda.get("frameworks")
    if not isinstance(rows, list):
        return None

    def value(f: dict) -> str:
        built = f", CUDA {_text(f['cuda'])}" if f.get("cuda") else ""
        return f"{_text(f.get('version'))}{built}"

    return _per([r for r in rows if isinstance(r, dict)], lambda f: f.get("name"), value)


def _gpu_count(inv: Mapping) -> str | None:
    gpus = _rows(inv, "gpus")
    return None if gpus is None else str(len(gpus))


def _gpus(inv: Mapping, field: str):
    gpu = lambda g: f"GPU {_text(g.get('index'))}"  # noqa: E731
    return _per(_rows(inv, "gpus"), gpu, lambda g: g.get(field))


def _links(inv: Mapping, value: Callable[[dict], Any]):
    return _per(_rows(inv, "pcie"), lambda d: d.get("address"), value)


def _width(d: dict) -> str | None:
    return None if _text(d.get("width")) is None else f"x{_text(d.get('width'))}"


def _speed(d: dict) -> str | None:
    return None if _text(d.get("speed_gts")) is None else f"{_text(d.get('speed_gts'))} GT/s"


def _ports(inv: Mapping, value: Callable[[dict], Any]):
    port = lambda p: f"{_text(p.get('device'))} port {_text(p.get('port'))}"  # noqa: E731
    return _per(_rows(inv, "rdma"), port, value)


def _rate(p: dict) -> str | None:
    return None if _text(p.get("rate_gbps")) is None else f"{_text(p.get('rate_gbps'))} Gb/s"


def _nic_count(inv: Mapping) -> str | None:
    ports = _rows(inv, "rdma")
    return None if ports is None else str(len({_text(p.get("device")) for p in ports}))


def _nic_firmware(inv: Mapping):
    return _per(_rows(inv, "rdma"), lambda p: p.get("device"), lambda p: p.get("firmware"))


def _firmware(inv: Mapping, *fields: str) -> str | None:
    dmi = _section(inv, "firmware", dict)
    if dmi is None:
        return None
    return _text(" ".join(str(_text(dmi[f])) for f in fields if _text(dmi.get(f))))


def _raid(inv: Mapping):
    def layout(a: dict) -> str:
        disks = f"{a.get('active_disks')}/{a.get('raid_disks')}" if a.get("raid_disks") else ""
        words = (a.get("level"), a.get("state"), disks, "degraded" if a.get("degraded") else "")
        return " ".join(str(_text(w)) for w in words if w)

    return _per(_rows(inv, "raid"), lambda a: a.get("name"), layout)


# In the order the report prints them: add a line to compare one more.
FLEET_FACTS: dict[str, Callable[[Mapping], KeyValue]] = {
    "nvidia.driver": lambda inv: _driver(inv, "version"),
    "nvidia.cuda_driver": lambda inv: _driver(inv, "cuda"),
    "cuda.toolkit.selected": _toolkit_selected,
    "cuda.toolkit": lambda inv: _versions(inv, "toolkits"),
    "cuda.cudnn": lambda inv: _versions(inv, "cudnn"),
    "cuda.nccl": lambda inv: _versions(inv, "nccl"),
    "python.frameworks": _frameworks,
    "gpu.count": _gpu_count,
    "gpu.model": lambda inv: _gpus(inv, "model"),
    "gpu.vbios": lambda inv: _gpus(inv, "vbios"),
    "pcie.width": lambda inv: _links(inv, _width),
    "pcie.speed": lambda inv: _links(inv, _speed),
    "nic.count": _nic_count,
    "rdma.rate": lambda inv: _ports(inv, _rate),
    "rdma.state": lambda inv: _ports(inv, lambda p: p.get("state")),
    "nic.firmware": _nic_firmware,
    "kernel.release": lambda inv: _text(inv.get("kernel")),
    "os.release": lambda inv: _text(inv.get("os")),
    "firmware.bios": lambda inv: _firmware(inv, "bios_vendor", "bios_version", "bios_date"),
    "system.product": lambda inv: _firmware(inv, "sys_vendor", "product_name"),
    "raid.md": _raid,
}


def key_facts(inventory: Any) -> dict[str, KeyValue]:
    """Every key fact of one node; one whose section is odd (a hostile or damaged report)
    is None, never a crash."""
    inv = inventory if isinstance(inventory, Mapping) else {}
    values: dict[str, KeyValue] = {}
    for name, read in FLEET_FACTS.items():
        try:
            values[name] = read(inv)
        except (TypeError, AttributeError, KeyError, ValueError, RecursionError):
            values[name] = None
    return values


def gpu_labels(inventory: Any) -> dict[str, str]:
    """PCIe item (its address) -> "GPU <index>", so a link row names its GPU, as in
    `diff`. NVML may write the domain with 8 digits (00000000:18:00.0), sysfs with 4."""
    if not isinstance(inventory, Mapping):
        return {}
    gpus = {
        g["bus_id"].lower()[-12:]: f"GPU {g.get('index')}"
        for g in _rows(inventory, "gpus") or ()
        if isinstance(g.get("bus_id"), str)
    }
    return {
        d["address"]: gpus[d["address"].lower()[-12:]]
        for d in _rows(inventory, "pcie") or ()
        if isinstance(d.get("address"), str) and d["address"].lower()[-12:] in gpus
    }
