"""The NVIDIA GPU model shared by both sources of GPU facts: NVML and `nvidia-smi -q -x`.

Every field is optional (None or ""): one source lacks a field, an older driver lacks a
call, a GPU answers "Not Supported". `unsupported` names the fields a GPU said it does not
support, so a check can tell "not supported on this SKU" from "could not be read".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

# Clock-event ("throttle") reasons, NVML bit -> name used throughout dldoctor. The names
# match nvidia-smi's XML tags `clocks_event_reason_<name>` (older: clocks_throttle_reason_).
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks_setting",
}


# nvmlGpuVirtualizationMode_t -> name used throughout dldoctor. nvidia-smi's XML spells them
# "None", "Pass-Through", "VGPU", "Host VGPU", "Host VSGA" (see nvsmi.VIRTUALIZATION_WORDS).
VIRTUALIZATION_MODES = {0: "none", 1: "passthrough", 2: "vgpu", 3: "host_vgpu", 4: "host_vsga"}
VGPU_GUEST = "vgpu"  # a VM's slice of a GPU; its host-side readings are the hypervisor's

# nvmlNvLinkErrorCounter_t (NVML_NVLINK_ERROR_DL_*) -> counter name.
NVLINK_COUNTERS = {0: "replay", 1: "recovery", 2: "crc_flit", 3: "crc_data"}


def normalise_pci_bus_id(raw: str) -> str | None:
    """`00000000:3B:00.0` (nvidia-smi, NVML), `PCI:0000:3b:00` (kernel log Xid lines, which
    leave out the function: GPUs are function 0) to `0000:3b:00.0` (sysfs); None if it is
    not a bus id."""
    m = re.fullmatch(
        r"(?:PCI:)?(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?",
        raw.strip(),
    )
    if m is None:
        return None
    domain = int(m.group(1) or "0", 16)
    bus, device = int(m.group(2), 16), int(m.group(3), 16)
    return f"{domain:04x}:{bus:02x}:{device:02x}.{m.group(4) or '0'}"


def reasons_from_mask(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit)


class GpuProcess(NamedTuple):
    """A process the driver says has a context on a GPU (NVML's running-process lists,
    nvidia-smi's <processes>). Inside a container's PID namespace the driver lists only
    that namespace's processes."""

    pid: int
    kind: str = "C"  # "C" compute, "G" graphics, "C+G" both
    name: str = ""  # nvidia-smi's process_name (a path); NVML gives none
    used_mib: int | None = None  # None: not reported (no permission, a MIG instance)


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str = ""
    uuid: str = ""
    serial: str = ""
    pci_bus_id: str = ""  # normalised: "0000:3b:00.0" (4-digit domain, lower case)
    memory_total_mib: int | None = None
    # Framebuffer memory in use. Since R525 the driver's own reservation is reported apart
    # (<reserved>: 300-450 MiB on the captures) and `used` of an idle GPU is a few MiB;
    # older drivers count it in `used` (an idle one still under 100 MiB on the captures).
    memory_used_mib: int | None = None
    # The processes the driver lists on the GPU, compute and graphics; None: not reported.
    processes: tuple[GpuProcess, ...] | None = None
    vbios: str = ""
    architecture: str = ""  # "Ampere", "Hopper", ... when the source says
    compute_capability: str = ""  # "9.0"; "" when unknown (old XML schemas lack it)
    persistence_mode: bool | None = None
    compute_mode: str = ""  # "Default", "Exclusive_Process", "Prohibited"
    mig_current: bool | None = None
    mig_pending: bool | None = None
    ecc_current: bool | None = None
    ecc_pending: bool | None = None
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    retired_pages_sbe: int | None = None  # pre-Ampere page retirement
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remap_corrected: int | None = None  # Ampere+ row remapping
    remap_uncorrected: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    temperature_c: int | None = None
    temp_slowdown_c: int | None = None
    temp_shutdown_c: int | None = None
    clock_event_reasons: tuple[str, ...] | None = None  # active reasons (names above)
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replay_counter: int | None = None
    # Per link number, True = up, None = that link's state could not be read. None: not
    # known or no NVLink (see `unsupported`); () from nvidia-smi's "all links are inActive",
    # which does not say how many links there are.
    nvlink_states: tuple[bool | None, ...] | None = None
    # (link, counter, count) for each counter read (NVLINK_COUNTERS names); None: not read.
    nvlink_errors: tuple[tuple[int, str, int], ...] | None = None
    virtualization_mode: str = ""  # a VIRTUALIZATION_MODES name; "" when not reported
    vgpu_license: str = ""  # a vGPU guest's licence: "<product>: <status>", when reported
    numa_node: int | None = None
    unsupported: tuple[str, ...] = ()  # field names the GPU said are not supported
    notes: tuple[str, ...] = ()

    @property
    def vgpu_guest(self) -> bool:
        return self.virtualization_mode == VGPU_GUEST

    @property
    def nvlink_active(self) -> int | None:
        return sum(1 for s in self.nvlink_states if s) if self.nvlink_states is not None else None

    @property
    def nvlink_total(self) -> int | None:
        return len(self.nvlink_states) if self.nvlink_states is not None else None


# Why NVIDIA GPU facts could not be had. "" = fine.
NO_DRIVER = "no_driver"  # libnvidia-ml not found: no NVIDIA driver installed
DRIVER_NOT_LOADED = "driver_not_loaded"  # library present, kernel module not loaded
VERSION_MISMATCH = "version_mismatch"  # userspace library != kernel module (reboot)
NO_PERMISSION = "no_permission"
GPU_LOST = "gpu_lost"
TIMED_OUT = "timeout"  # the probe did not answer in time: the doctor could not look
# The source's answer could not be had or read (a malformed nvml.json, a probe that crashed,
# unparseable nvidia-smi XML): the doctor could not look either; no verdict on the driver.
PROBE_FAILED = "probe_failed"
NO_SOURCE = "no_source"  # neither pynvml nor nvidia-smi available
UNKNOWN = "unknown"


@dataclass(frozen=True)
class NvidiaStack:
    """What the NVIDIA driver says about itself and its GPUs."""

    source: str  # "nvml", "nvidia-smi", or "" when neither answered
    driver_version: str = ""
    cuda_driver_version: str = ""  # highest CUDA the driver supports: "12.2"
    gpus: tuple[Gpu, ...] = ()
    error: str = ""  # one of the constants above
    error_message: str = ""
    attached_gpus: int | None = None  # what the source says, may exceed len(gpus)
    notes: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        return not self.error and bool(self.source)
