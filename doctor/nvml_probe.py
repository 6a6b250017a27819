"""The NVML probe: one pass over NVIDIA's management library, every field on its own.

The answer is plain JSON (it is `nvml.json` in a bundle): each field is either
`{"value": ...}` or `{"error": "NotSupported", "code": 3, "message": "..."}`, so one
field a GPU does not support never blanks the GPU, and a replay sees exactly what the
live host said. Parsing into Gpu objects happens in the facts (dldoctor.facts.nvidia).
"""

from __future__ import annotations

import os

# Annotations only: importing typing costs the child process as much as pynvml does.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Newer call first; older drivers lack the newer symbol and answer FunctionNotFound (an
# older binding lacks the Python function altogether).
FALLBACKS = {
    "temperature": ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),
    "clock_event_reasons": (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ),
    "cuda_driver_version": ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"),
}


def _plain(value: Any) -> Any:
    """NVML answers (bytes, ctypes structs, arrays, tuples) as JSON-able values."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    try:
        return [_plain(v) for v in value]  # ctypes arrays
    except TypeError:
        return str(value)


def _procs(processes: Any) -> list[list[Any]]:
    # usedGpuMemory is None where NVML says NVML_VALUE_NOT_AVAILABLE (no permission, MIG).
    return [[int(p.pid), p.usedGpuMemory] for p in processes]


class _Caller:
    def __init__(self, nvml: Any):
        self.nvml = nvml

    def error(self, exc: BaseException) -> dict[str, Any]:
        name = type(exc).__name__.removeprefix("NVMLError_")
        return {"error": name, "code": getattr(exc, "value", None), "message": str(exc)}

    def call(self, name: str, *args: Any, convert: Callable[[Any], Any] = _plain) -> dict[str, Any]:
        fn = getattr(self.nvml, name, None)
        if fn is None:  # an older binding: the same meaning as a driver without the symbol
            return {"error": "FunctionNotFound", "code": None, "message": f"no {name} in pynvml"}
        try:
            return {"value": convert(fn(*args))}
        except self.nvml.NVMLError as exc:
            return self.error(exc)

    def first(self, names: tuple[str, ...], *args: Any) -> dict[str, Any]:
        """Try the calls in order while the driver or binding lacks them."""
        answer: dict[str, Any] = {}
        for name in names:
            answer = self.call(name, *args)
            if answer.get("error") != "FunctionNotFound":
                return {**answer, "call": name}
        return answer


def _device_fields(c: _Caller, h: Any) -> dict[str, dict[str, Any]]:
    links = _nvlink_states(c, h)
    fields: dict[str, dict[str, Any]] = {
        "name": c.call("nvmlDeviceGetName", h),
        "uuid": c.call("nvmlDeviceGetUUID", h),
        "serial": c.call("nvmlDeviceGetSerial", h),
        "pci_bus_id": c.call("nvmlDeviceGetPciInfo", h, convert=lambda p: _plain(p.busId)),
        "memory_total_bytes": c.call("nvmlDeviceGetMemoryInfo", h, convert=lambda m: m.total),
        "memory_used_bytes": c.call("nvmlDeviceGetMemoryInfo", h, convert=lambda m: m.used),
        # [pid, used bytes or None] per process with a context: what a prolog looks for.
        "compute_processes": c.call("nvmlDeviceGetComputeRunningProcesses", h, convert=_procs),
        "graphics_processes": c.call("nvmlDeviceGetGraphicsRunningProcesses", h, convert=_procs),
        "vbios": c.call("nvmlDeviceGetVbiosVersion", h),
        "architecture": c.call("nvmlDeviceGetArchitecture", h),
        "compute_capability": c.call("nvmlDeviceGetCudaComputeCapability", h),
        "persistence_mode": c.call("nvmlDeviceGetPersistenceMode", h),
        "compute_mode": c.call("nvmlDeviceGetComputeMode", h),
        "mig_mode": c.call("nvmlDeviceGetMigMode", h),
        "ecc_mode": c.call("nvmlDeviceGetEccMode", h),
        "retired_pages_sbe": c.call("nvmlDeviceGetRetiredPages", h, 0, convert=len),
        "retired_pages_dbe": c.call("nvmlDeviceGetRetiredPages", h, 1, convert=len),
        "retired_pages_pending": c.call("nvmlDeviceGetRetiredPagesPendingStatus", h),
        "remapped_rows": c.call("nvmlDeviceGetRemappedRows", h),
        "temperature": c.first(FALLBACKS["temperature"], h, 0),
        "temp_shutdown": c.call("nvmlDeviceGetTemperatureThreshold", h, 0),
        "temp_slowdown": c.call("nvmlDeviceGetTemperatureThreshold", h, 1),
        "clock_event_reasons": c.first(FALLBACKS["clock_event_reasons"], h),
        "power_draw_mw": c.call("nvmlDeviceGetPowerUsage", h),
        "power_limit_mw": c.call("nvmlDeviceGetEnforcedPowerLimit", h),
        "pcie_gen_current": c.call("nvmlDeviceGetCurrPcieLinkGeneration", h),
        "pcie_gen_max": c.call("nvmlDeviceGetMaxPcieLinkGeneration", h),
        "pcie_width_current": c.call("nvmlDeviceGetCurrPcieLinkWidth", h),
        "pcie_width_max": c.call("nvmlDeviceGetMaxPcieLinkWidth", h),
        "pcie_replay_counter": c.call("nvmlDeviceGetPcieReplayCounter", h),
        "numa_node": c.first(("nvmlDeviceGetNumaNodeId",), h),
        "cpu_affinity": c.call("nvmlDeviceGetCpuAffinity", h, ((os.cpu_count() or 1) + 63) // 64),
        "nvlink_states": links,
        "nvlink_errors": _nvlink_errors(c, h, links),
        "virtualization_mode": c.call("nvmlDeviceGetVirtualizationMode", h),
    }
    for key, (err_type, counter) in {
        "ecc_volatile_corrected": (0, 0),
        "ecc_volatile_uncorrected": (1, 0),
        "ecc_aggregate_corrected": (0, 1),
        "ecc_aggregate_uncorrected": (1, 1),
    }.items():
        fields[key] = c.call("nvmlDeviceGetTotalEccErrors", h, err_type, counter)
    return fields


# The answers that mean "the GPU has no such link": they end the list of links.
NO_SUCH_LINK = ("InvalidArgument", "NotSupported")


def _nvlink_states(c: _Caller, h: Any) -> dict[str, Any]:
    """States of the links the GPU has: 1 up, 0 down, None where the read failed (the
    answer is in "errors", by link). Only "no such link" ends the list: a link that answered
    another error is still one of the GPU's links, and stopping there would hide the rest."""
    n = c.nvml
    states: list[int | None] = []
    errors: dict[str, dict[str, Any]] = {}
    for link in range(getattr(n, "NVML_NVLINK_MAX_LINKS", 18)):
        answer = c.call("nvmlDeviceGetNvLinkState", h, link)
        if "error" not in answer:
            states.append(int(answer["value"]))
        elif answer["error"] in NO_SUCH_LINK:
            break
        else:
            states.append(None)
            errors[str(link)] = answer
    if all(s is None for s in states):
        # NotSupported on link 0: a PCIe-only GPU; no link read at all: the first error.
        return next(iter(errors.values()), answer)
    return {"value": states, "errors": errors} if errors else {"value": states}


# NVML_NVLINK_ERROR_DL_REPLAY, _RECOVERY, _CRC_FLIT, _CRC_DATA (dldoctor.facts.gpu names them).
NVLINK_ERROR_COUNTERS = (0, 1, 2, 3)


def _nvlink_errors(c: _Caller, h: Any, links: dict[str, Any]) -> dict[str, Any]:
    """The DL error counters of each active link: {"<link>": {"<counter>": answer}}. A
    driver that supports none of them (Hopper+ moved some to field values) answers once."""
    if "error" in links:
        return links
    answers = {
        str(link): {
            str(counter): c.call("nvmlDeviceGetNvLinkErrorCounter", h, link, counter)
            for counter in NVLINK_ERROR_COUNTERS
        }
        for link, up in enumerate(links["value"])
        if up
    }
    every = [a for counters in answers.values() for a in counters.values()]
    if every and all("error" in a for a in every) and len({a["error"] for a in every}) == 1:
        return every[0]
    return {"value": answers}


def collect(nvml: Any = None) -> dict[str, Any]:
    """Everything NVML answers, as JSON. `nvml` is the pynvml module (tests pass a fake)."""
    if nvml is None:
        import pynvml as nvml  # noqa: PLC0415 - lazy: only the GPU facts need it
    c = _Caller(nvml)
    result: dict[str, Any] = {"binding": _binding_version(nvml)}
    init = c.call("nvmlInit")
    result["init"] = init
    if "error" in init:
        return result
    try:
        result["system"] = {
            "driver_version": c.call("nvmlSystemGetDriverVersion"),
            "cuda_driver_version": c.first(FALLBACKS["cuda_driver_version"]),
            "nvml_version": c.call("nvmlSystemGetNVMLVersion"),
        }
        count = c.call("nvmlDeviceGetCount")
        result["device_count"] = count
        handles: dict[int, Any] = {}
        devices = []
        for index in range(count.get("value") or 0):
            handle = c.call("nvmlDeviceGetHandleByIndex", index, convert=lambda h: h)
            entry: dict[str, Any] = {"index": index}
            if "error" in handle:
                entry["handle"] = handle  # e.g. GpuIsLost: this GPU only
            else:
                handles[index] = handle["value"]
                entry["fields"] = _device_fields(c, handle["value"])
            devices.append(entry)
        result["devices"] = devices
        result["topology"] = {
            f"{i},{j}": c.call("nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
            for i in handles
            for j in handles
            if i < j
        }
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down is best effort
            pass
    return result


def _binding_version(nvml: Any) -> str:
    # The dist-info folder beside pynvml.py: importlib.metadata would cost the child
    # process more than NVML itself on a host without a GPU.
    try:
        folder = os.path.dirname(nvml.__file__)
        for name in os.listdir(folder):
            if name.startswith("nvidia_ml_py-") and name.endswith(".dist-info"):
                return f"nvidia-ml-py {name[len('nvidia_ml_py-') : -len('.dist-info')]}"
    except Exception:  # noqa: BLE001 - informative only
        pass
    return ""


def main() -> None:
    """Entry point of the child process that LiveHost runs (host.live.ChildProbe): the
    answer as one JSON document on stdout, so a hung NVML call dies with the child."""
    import json
    import sys

    try:
        answer: dict[str, Any] = {"status": "ok", "value": collect()}
    except ImportError as exc:  # no nvidia-ml-py: the same meaning as in-process
        answer = {"status": "not_installed", "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the parent reports it as the probe's error
        answer = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    json.dump(answer, sys.stdout)
    sys.stdout.flush()


if __name__ == "__main__":  # run as a script by host.live.ChildProbe
    main()
