"""Policy: the expected state of a host and the thresholds, with built-in defaults.

The defaults below are the deployment guide's numbers (docs/policy.md lists every key).
A site's TOML file (`--policy`) overrides any subset; an unknown key or a value of the
wrong type is an error naming the key, never silently ignored.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dldoctor.versions import version_tuple


def toml_parser() -> Any:
    """tomllib (tomli on Ubuntu 22.04's Python 3.10), imported only when a policy is read:
    a run without a policy file would spend some 7 ms of CPU importing it."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    return tomllib


class PolicyError(Exception):
    """An unreadable or invalid policy file; the message is one line. `key`: the dotted
    key it is about (`firmware.minimums[1].min_version`), for the file's line number."""

    def __init__(self, message: str, key: str = ""):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class SupportedOs:
    id: str  # os-release ID
    min_version: str  # lowest VERSION_ID that is supported


@dataclass(frozen=True)
class OsPolicy:
    supported: tuple[SupportedOs, ...] = (
        SupportedOs("ubuntu", "22.04"),
        SupportedOs("rhel", "8"),
        SupportedOs("rocky", "8"),
        SupportedOs("almalinux", "8"),
        SupportedOs("debian", "12"),
    )


@dataclass(frozen=True)
class KernelPolicy:
    min_version: str = "5.15"


@dataclass(frozen=True)
class MemoryPolicy:
    min_total_gib: float = 0.0  # 0: any RAM present passes
    gpu_ratio: float = 1.5  # the guide: RAM >= 1.5 x total GPU memory
    min_devshm_gib: float = 1.0  # Docker's 64 MiB default breaks DataLoader workers and NCCL


@dataclass(frozen=True)
class CpuPolicy:
    min_cores: int = 0  # 0: any; a site pins its fleet's (physical cores, all sockets)
    model: str = ""  # "": any; else a substring the CPU model must contain
    governor: str = "performance"


@dataclass(frozen=True)
class LimitsPolicy:
    min_nofile: int = 65536  # DataLoader workers sharing tensors through file descriptors


@dataclass(frozen=True)
class PythonPolicy:
    min_version: str = "3.10"


@dataclass(frozen=True)
class LibcPolicy:
    # PyTorch wheels since 2.6 are manylinux_2_28: an older glibc cannot install them.
    min_glibc: str = "2.28"


@dataclass(frozen=True)
class GpuPolicy:
    min_driver: str = "535.154.02"  # the guide's floor
    expected_count: int = 0  # 0: any number; a site pins its fleet's count
    expected_model: str = ""  # "": any; else text every GPU's name must contain
    expected_driver: str = ""  # "": any; else the version a fleet pins ("550" a branch)
    # Xids older than this no longer fail a node (it was drained and repaired, or the log
    # is from before a reboot that fixed it).
    xid_window_hours: float = 72.0
    # gpu.processes: framebuffer memory in use above this, with no process owning it, is
    # held by nobody (a leaked context). Above the driver's own reservation, which NVML's
    # `used` counts: a few hundred MiB on an idle GPU (517 MiB on an A10), up to about 1 GiB
    # on B200-class parts; nvidia-smi's XML reports it apart since R525 (173-450 MiB).
    orphan_memory_mib: int = 2048
    # False: any process on a GPU (monitoring daemons aside) fails gpu.processes, as a
    # Slurm prolog or a node about to take a job wants; True: they are listed, a pass.
    processes_allowed: bool = True


@dataclass(frozen=True)
class CudaPolicy:
    expected_toolkit: str = ""  # "": any; else the selected toolkit's version ("12.4")


@dataclass(frozen=True)
class ExpectedLink:
    address: str  # PCI address as sysfs writes it: "0000:18:00.0"
    width: int  # lanes the link must train to at least


@dataclass(frozen=True)
class PciPolicy:
    expected_links: tuple[ExpectedLink, ...] = ()


@dataclass(frozen=True)
class ExpectedArray:
    name: str  # "md0"
    level: str = ""  # "raid1"; "": any level


@dataclass(frozen=True)
class ExpectedMount:
    mount_point: str  # "/data"
    fstype: str = ""  # "xfs"; "": any filesystem


@dataclass(frozen=True)
class StoragePolicy:
    data_paths: tuple[str, ...] = ()  # where datasets live (checked for space, layout)
    checkpoint_paths: tuple[str, ...] = ()
    warn_free_percent: float = 10.0
    fail_free_percent: float = 5.0
    expected_raid: tuple[ExpectedArray, ...] = ()  # md arrays that must be there
    expected_mounts: tuple[ExpectedMount, ...] = ()


@dataclass(frozen=True)
class FirmwareMinimum:
    match: str  # text in the GPU's name, the NIC's hca_type/board_id or driver, the NVMe model
    min_version: str


@dataclass(frozen=True)
class FirmwarePolicy:
    minimums: tuple[FirmwareMinimum, ...] = ()
    allow_mixed: bool = False  # parts of one model on other versions than their siblings


@dataclass(frozen=True)
class ContainerPolicy:
    # NVIDIA Container Toolkit 1.17.8 fixed CVE-2025-23266 and CVE-2025-23267 (container
    # escape through the toolkit's hooks); older releases warn.
    min_toolkit: str = "1.17.8"


@dataclass(frozen=True)
class NetworkPolicy:
    min_rate_gbps: float = 100.0  # the guide's floor for InfiniBand
    ib_ports: tuple[str, ...] = ()  # "mlx5_0:1", ...: ports that must be ACTIVE


@dataclass(frozen=True)
class PerfReference:
    """A figure a site expects of its hosts (genconf pins a healthy host's own)."""

    what: str  # the figure's name, as a report's `figures` write it: "hbm_copy", "seq_read"
    value: float  # in the figure's unit
    subject: str = ""  # one part only ("GPU 3", "/data"); "": every part measured so


@dataclass(frozen=True)
class PerfPolicy:
    """How the active tier judges what it measures (docs/active.md)."""

    references: tuple[PerfReference, ...] = ()  # a site's own, before the per-SKU table
    floor: float = 0.85  # a figure below this fraction of a site's own reference fails
    straggler: float = 0.90  # a part below this fraction of its siblings' median warns
    # Measure GPUs that other processes use (`--force` sets it): a site whose nodes are
    # drained before the check may say so once.
    force: bool = False


# Longer than any probe should take; past ~24 days the OS's poll() cannot even wait.
MAX_TIMEOUT_S = 3600.0
TIMEOUT_RANGE = f"must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds"


@dataclass(frozen=True)
class Timeouts:
    command_s: float = 10.0
    filesystem_s: float = 5.0
    # NVML's first call on a host without persistence mode initialises every GPU (about a
    # second each); longer than this means a hung driver (or persistence off: its own check).
    nvml_s: float = 10.0
    check_s: float = 30.0
    # The whole run ends by then, whatever hangs: within Slurm's 60 s HealthCheckProgram
    # limit and a Kubernetes probe's patience. Every probe ends by the longest of the three
    # limits above, so N hung tools cost one timeout, not N.
    deadline_s: float = 20.0
    # The active tier's whole budget (`--active`, docs/active.md), added to the deadline:
    # every measurement is sized to fit in it, and one that would not is not started.
    active_s: float = 120.0

    def __post_init__(self) -> None:
        for name in ("command_s", "filesystem_s", "nvml_s", "check_s", "deadline_s", "active_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
                raise PolicyError(f"timeouts.{name} {TIMEOUT_RANGE}", f"timeouts.{name}")

    @property
    def probe_window_s(self) -> float:
        """Every Host operation of a run ends within this of the run's start."""
        return max(self.command_s, self.filesystem_s, self.nvml_s)


@dataclass(frozen=True)
class Policy:
    os: OsPolicy = field(default_factory=OsPolicy)
    kernel: KernelPolicy = field(default_factory=KernelPolicy)
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    python: PythonPolicy = field(default_factory=PythonPolicy)
    libc: LibcPolicy = field(default_factory=LibcPolicy)
    gpu: GpuPolicy = field(default_factory=GpuPolicy)
    cuda: CudaPolicy = field(default_factory=CudaPolicy)
    pci: PciPolicy = field(default_factory=PciPolicy)
    cpu: CpuPolicy = field(default_factory=CpuPolicy)
    limits: LimitsPolicy = field(default_factory=LimitsPolicy)
    network: NetworkPolicy = field(default_factory=NetworkPolicy)
    storage: StoragePolicy = field(default_factory=StoragePolicy)
    firmware: FirmwarePolicy = field(default_factory=FirmwarePolicy)
    container: ContainerPolicy = field(default_factory=ContainerPolicy)
    perf: PerfPolicy = field(default_factory=PerfPolicy)
    timeouts: Timeouts = field(default_factory=Timeouts)


def _non_negative(value: float) -> str:
    return "" if value >= 0 else "must not be negative"


def _positive(value: float) -> str:
    return "" if value > 0 else "must be more than 0"


def _fraction(value: float) -> str:
    return "" if 0 < value <= 1 else "must be a fraction more than 0 and at most 1"


def _percent(value: float) -> str:
    return "" if 0 <= value <= 100 else "must be a percentage from 0 to 100"


def _version(value: str) -> str:
    # What versions.at_least compares: without a number every comparison would be "unknown".
    return "" if version_tuple(value) is not None else 'must be a version number such as "5.15"'


def _pin(value: str) -> str:
    return "" if not value else _version(value)


# PCIe link widths (lanes) that a link can train to.
PCIE_WIDTHS = (1, 2, 4, 8, 12, 16, 32)


def _width(value: int) -> str:
    return (
        "" if value in PCIE_WIDTHS else f"must be a PCIe width ({', '.join(map(str, PCIE_WIDTHS))})"
    )


# Domains past 0xffff exist (Intel VMD puts its NVMe drives in domain 10000).
_PCI_ADDRESS = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def _pci_address(value: str) -> str:
    ok = _PCI_ADDRESS.fullmatch(value)
    return "" if ok else 'must be a PCI address such as "0000:18:00.0"'


def _absolute(value: str) -> str:
    return "" if value.startswith("/") else "must be an absolute path"


def _named(value: str) -> str:
    return "" if value.strip() else "must not be empty"


# Checks on a policy file's values beyond their type, by key (list indexes left out).
RULES: dict[str, Callable[[Any], str]] = {
    "os.supported.min_version": _version,
    "kernel.min_version": _version,
    "python.min_version": _version,
    "libc.min_glibc": _version,
    "gpu.min_driver": _version,
    "container.min_toolkit": _version,
    "firmware.minimums.min_version": _version,
    "firmware.minimums.match": _named,
    "gpu.expected_count": _non_negative,
    "gpu.expected_driver": _pin,
    "cuda.expected_toolkit": _pin,
    "pci.expected_links.address": _pci_address,
    "pci.expected_links.width": _width,
    "storage.expected_raid.name": _named,
    "storage.expected_mounts.mount_point": _absolute,
    "gpu.xid_window_hours": _non_negative,
    "gpu.orphan_memory_mib": _non_negative,
    "memory.min_total_gib": _non_negative,
    "memory.gpu_ratio": _non_negative,
    "memory.min_devshm_gib": _non_negative,
    "cpu.min_cores": _non_negative,
    "limits.min_nofile": _non_negative,
    "network.min_rate_gbps": _non_negative,
    "storage.warn_free_percent": _percent,
    "storage.fail_free_percent": _percent,
    "perf.references.what": _named,
    "perf.references.value": _positive,
    "perf.floor": _fraction,
    "perf.straggler": _fraction,
}


# A policy is a few KiB (genconf writes about 2); tomllib is given no more than this.
MAX_POLICY_BYTES = 1024 * 1024


def load_policy(path: str | None) -> tuple[Policy, str]:
    """The policy and where it came from ("built-in" or the file's path)."""
    if path is None:
        return Policy(), "built-in"
    from dldoctor.tomllines import shape_problem

    tomllib = toml_parser()
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_POLICY_BYTES + 1)
        if len(raw) > MAX_POLICY_BYTES:
            raise PolicyError(f"policy {path} is larger than {MAX_POLICY_BYTES >> 20} MiB")
        text = raw.decode("utf-8")
        problem = shape_problem(text)
        if problem:
            raise PolicyError(f"policy {path} is not read: {problem}")
        data = tomllib.loads(text)
    except OSError as exc:
        raise PolicyError(f"cannot read policy {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        # tomllib's message already says "(at line N, column M)".
        raise PolicyError(f"policy {path} is not valid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer past int()'s 4,300 digits
        raise PolicyError(f"policy {path} is not valid TOML: {str(exc)[:200]}") from None
    try:
        return _build(Policy, data, ""), path
    except PolicyError as exc:
        from dldoctor.tomllines import line_of

        line = line_of(text, exc.key) if exc.key else None
        where = f"policy {path}, line {line}" if line else f"policy {path}"
        raise PolicyError(f"{where}: {exc}", exc.key) from None


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise PolicyError(f"[{where}] must be a table" if where else "must be a table", where)
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    unknown = sorted(set(data) - names)
    if unknown:
        place = f"[{where}]" if where else "top level"
        raise PolicyError(
            f"unknown key {unknown[0]!r} at {place} (known: {', '.join(sorted(names))})",
            f"{where}.{unknown[0]}" if where else unknown[0],
        )
    required = [
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    absent = [name for name in required if name not in data]
    if absent:
        raise PolicyError(f"{where} lacks the key {absent[0]!r}", where)
    values = {}
    for name, value in data.items():
        key = f"{where}.{name}" if where else name
        values[name] = _coerce(hints[name], value, key)
        problem = RULES.get(re.sub(r"\[\d+\]", "", key), lambda _: "")(values[name])
        if problem:
            raise PolicyError(f"{key} {problem}, not {repr(value)[:100]}", key)
    return cls(**values)


def _coerce(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    if origin is tuple:
        (item, _ellipsis) = typing.get_args(hint)
        if not isinstance(value, list):
            raise PolicyError(f"{where} must be a list", where)
        return tuple(_coerce(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _coerce(options[0], value, where)
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer of 309 digits or more
            number = math.inf
        if not math.isfinite(number):
            raise PolicyError(f"{where} must be a finite number", where)
        return number
    if hint is str and isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # `min_version = 8` means "8"; 22.10 must be quoted (float 22.1)
    if not isinstance(value, hint) or (hint is not bool and isinstance(value, bool)):
        article = "an" if hint.__name__[0] in "aeiou" else "a"
        raise PolicyError(
            f"{where} must be {article} {hint.__name__}, not {type(value).__name__}", where
        )
    return value
