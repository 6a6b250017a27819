"""A stand-in for the `pynvml` module (nvidia-ml-py) with scripted GPUs.

It raises the binding's real error classes (`pynvml.NVMLError(code)` builds the same
subclasses, with the same codes, as a real driver's answers), so the probe meets exactly
the exceptions it meets on hardware. Only the C library behind pynvml is faked.
"""

from __future__ import annotations

import types
from typing import Any

import pynvml

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
FUNCTION_NOT_FOUND = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
INVALID_ARGUMENT = pynvml.NVML_ERROR_INVALID_ARGUMENT
GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
UNKNOWN = pynvml.NVML_ERROR_UNKNOWN


class Err:
    """In a script: this call raises NVMLError(code)."""

    def __init__(self, code: int):
        self.code = code


class PciInfo:
    def __init__(self, bus_id: str):
        self.busId = bus_id.encode()  # older bindings answer bytes


class MemoryInfo:
    # NVML's v1 `used` counts the driver's own reservation: an idle A10 on 535.129.03 says
    # 541917184 bytes (517 MiB; mayooot/detect-gpu#3), the stand-in's idle figure.
    def __init__(self, total: int, used: int = 517 * 2**20):
        self.total, self.used = total, used


class ProcessInfo:
    def __init__(self, pid: int, used: int | None):
        self.pid, self.usedGpuMemory = pid, used


def h100(index: int, **overrides: Any) -> dict[str, Any]:
    """A healthy H100 SXM as an R550 driver answers for it."""
    script: dict[str, Any] = {
        "nvmlDeviceGetName": "NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetUUID": f"GPU-{index:08d}-aaaa-bbbb-cccc-000000000000",
        "nvmlDeviceGetSerial": f"165032300{index:04d}",
        "nvmlDeviceGetPciInfo": PciInfo(f"00000000:{0x18 + 0x10 * index:02X}:00.0"),
        "nvmlDeviceGetMemoryInfo": MemoryInfo(81559 * 2**20),
        "nvmlDeviceGetVbiosVersion": "96.00.74.00.1F",
        "nvmlDeviceGetArchitecture": pynvml.NVML_DEVICE_ARCH_HOPPER,
        "nvmlDeviceGetCudaComputeCapability": (9, 0),
        "nvmlDeviceGetPersistenceMode": 1,
        "nvmlDeviceGetComputeMode": 0,
        "nvmlDeviceGetMigMode": [0, 0],
        "nvmlDeviceGetEccMode": [1, 1],
        "nvmlDeviceGetRetiredPages": Err(NOT_SUPPORTED),
        "nvmlDeviceGetRetiredPagesPendingStatus": Err(NOT_SUPPORTED),
        "nvmlDeviceGetRemappedRows": (0, 0, 0, 0),
        "nvmlDeviceGetTemperatureV": 34,
        "nvmlDeviceGetTemperatureThreshold": lambda sensor: {0: 92, 1: 89}[sensor],
        "nvmlDeviceGetCurrentClocksEventReasons": 0x1,
        "nvmlDeviceGetPowerUsage": 71_000,
        "nvmlDeviceGetEnforcedPowerLimit": 700_000,
        "nvmlDeviceGetCurrPcieLinkGeneration": 5,
        "nvmlDeviceGetMaxPcieLinkGeneration": 5,
        "nvmlDeviceGetCurrPcieLinkWidth": 16,
        "nvmlDeviceGetMaxPcieLinkWidth": 16,
        "nvmlDeviceGetPcieReplayCounter": 0,
        "nvmlDeviceGetNumaNodeId": 0 if index < 4 else 1,
        "nvmlDeviceGetCpuAffinity": [0xFFFF if index < 4 else 0xFFFF0000],
        "nvmlDeviceGetNvLinkState": lambda link: 1 if link < 18 else Err(INVALID_ARGUMENT),
        "nvmlDeviceGetNvLinkErrorCounter": lambda link, counter: 0,
        "nvmlDeviceGetTotalEccErrors": lambda err_type, counter: 0,
        "nvmlDeviceGetVirtualizationMode": pynvml.NVML_GPU_VIRTUALIZATION_MODE_NONE,
        "nvmlDeviceGetComputeRunningProcesses": [],  # an idle node
        "nvmlDeviceGetGraphicsRunningProcesses": [],
    }
    script.update(overrides)
    return script


class FakeNvml(types.ModuleType):
    NVMLError = pynvml.NVMLError
    NVML_NVLINK_MAX_LINKS = 18

    def __init__(self, gpus: list[dict[str, Any]], *, init: Err | None = None,
                 driver: str = "550.54.15", cuda: int = 12040, lost: tuple[int, ...] = (),
                 absent: tuple[str, ...] = ()):  # fmt: skip
        super().__init__("pynvml")
        self.gpus, self.init, self.driver, self.cuda, self.lost = gpus, init, driver, cuda, lost
        self.absent = set(absent)  # functions this "older binding" does not have
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        if not name.startswith("nvml") or name in self.absent:
            raise AttributeError(name)
        return lambda *args: self._answer(name, args)

    def _raise_or(self, value: Any, args: tuple) -> Any:
        if callable(value) and not isinstance(value, Err):
            value = value(*args)
        if isinstance(value, Err):
            raise pynvml.NVMLError(value.code)
        return value

    def _answer(self, name: str, args: tuple) -> Any:
        self.calls.append(name)
        system = {
            "nvmlInit": self.init or None,
            "nvmlShutdown": None,
            "nvmlSystemGetDriverVersion": self.driver,
            "nvmlSystemGetCudaDriverVersion_v2": self.cuda,
            "nvmlSystemGetNVMLVersion": "12." + self.driver,
            "nvmlDeviceGetCount": len(self.gpus),
        }
        if name in system:
            return self._raise_or(system[name], ())
        if name == "nvmlDeviceGetHandleByIndex":
            index = args[0]
            return self._raise_or(Err(GPU_IS_LOST) if index in self.lost else index, ())
        if name == "nvmlDeviceGetTopologyCommonAncestor":
            a, b = args
            return 10 if (a < 4) == (b < 4) else 40  # same switch / across the CPU
        handle, rest = args[0], args[1:]
        value = self.gpus[handle].get(name, Err(FUNCTION_NOT_FOUND))
        return self._raise_or(value, rest)
