"""NVIDIA driver and GPUs: NVML first, `nvidia-smi -q -x` when NVML cannot be used."""

from __future__ import annotations

import re
from typing import Any

from dldoctor.facts import FactContext, FactFailed, Facts, fact
from dldoctor.facts import gpu as g
from dldoctor.facts.gpu import Gpu, NvidiaStack, normalise_pci_bus_id, reasons_from_mask
from dldoctor.facts.reading import to_int
from dldoctor.host.base import AnswerStatus, ProbeFailed

SMI_XML_ARGV = ("nvidia-smi", "-q", "-x")

# NVML init error codes (nvidia-ml-py's NVML_ERROR_*) -> why there are no GPU facts.
INIT_ERRORS = {
    12: g.NO_DRIVER,  # LibraryNotFound: libnvidia-ml.so.1 absent
    9: g.DRIVER_NOT_LOADED,
    18: g.VERSION_MISMATCH,  # LibRmVersionMismatch
    4: g.NO_PERMISSION,
    15: g.GPU_LOST,
}

ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}

# Probe field -> the Gpu fields it fills (for `unsupported`).
FIELD_TARGETS = {
    "memory_total_bytes": ("memory_total_mib",),
    "memory_used_bytes": ("memory_used_mib",),
    "compute_processes": ("processes",),
    "graphics_processes": ("processes",),
    "mig_mode": ("mig_current", "mig_pending"),
    "ecc_mode": ("ecc_current", "ecc_pending"),
    "remapped_rows": ("remap_corrected", "remap_uncorrected", "remap_pending", "remap_failure"),
    "temperature": ("temperature_c",),
    "temp_shutdown": ("temp_shutdown_c",),
    "temp_slowdown": ("temp_slowdown_c",),
    "power_draw_mw": ("power_draw_w",),
    "power_limit_mw": ("power_limit_w",),
}

# nvidia-smi's words on stdout when it cannot talk to the driver.
SMI_ERRORS = (
    ("Driver/library version mismatch", g.VERSION_MISMATCH),
    ("couldn't communicate with the NVIDIA driver", g.DRIVER_NOT_LOADED),
    ("Insufficient Permissions", g.NO_PERMISSION),
    ("Unable to determine the device handle", g.GPU_LOST),
    ("GPU is lost", g.GPU_LOST),
)


def driver_cuda_version(value: int) -> str:
    return f"{value // 1000}.{(value % 1000) // 10}"


def _gpu_from_probe(index: int, fields: dict[str, Any]) -> Gpu:
    values: dict[str, Any] = {}
    unsupported: list[str] = []
    notes: list[str] = []
    for key, answer in fields.items():
        if not isinstance(answer, dict):
            notes.append(f"{key}: malformed answer")
        elif "value" in answer:
            values[key] = answer["value"]
        elif answer.get("error") == "NotSupported":
            unsupported.extend(FIELD_TARGETS.get(key, (key,)))
        elif answer.get("error") not in ("FunctionNotFound", None):
            notes.append(f"{key}: {answer.get('error')} ({answer.get('message', '')})")

    def get(key: str, kind: type = int) -> Any:
        value = values.get(key)
        try:
            return kind(value) if value is not None else None
        except (TypeError, ValueError):
            notes.append(f"{key}: unexpected value {value!r}")
            return None

    def pair(key: str) -> tuple[Any, ...]:
        value = values.get(key)
        return tuple(value) if isinstance(value, list) else ()

    mig, ecc, rows, cc = (
        pair("mig_mode"),
        pair("ecc_mode"),
        pair("remapped_rows"),
        pair("compute_capability"),
    )
    links = values.get("nvlink_states") if isinstance(values.get("nvlink_states"), list) else None
    virt = get("virtualization_mode")
    mask = get("clock_event_reasons")
    numa = get("numa_node")
    memory = get("memory_total_bytes")
    used = get("memory_used_bytes")
    draw, limit = get("power_draw_mw", float), get("power_limit_mw", float)
    return Gpu(
        index=index,
        name=str(values.get("name", "")),
        uuid=str(values.get("uuid", "")),
        serial=str(values.get("serial", "")),
        pci_bus_id=normalise_pci_bus_id(str(values.get("pci_bus_id", ""))) or "",
        memory_total_mib=memory // 2**20 if memory is not None else None,
        memory_used_mib=used // 2**20 if used is not None else None,
        processes=_processes(values, notes),
        vbios=str(values.get("vbios", "")),
        architecture=ARCHITECTURES.get(get("architecture") or -1, ""),
        compute_capability=f"{cc[0]}.{cc[1]}" if len(cc) == 2 else "",
        persistence_mode=bool(values["persistence_mode"]) if "persistence_mode" in values else None,
        compute_mode=COMPUTE_MODES.get(get("compute_mode") or 0, "")
        if "compute_mode" in values
        else "",
        mig_current=bool(mig[0]) if len(mig) == 2 else None,
        mig_pending=bool(mig[1]) if len(mig) == 2 else None,
        ecc_current=bool(ecc[0]) if len(ecc) == 2 else None,
        ecc_pending=bool(ecc[1]) if len(ecc) == 2 else None,
        ecc_volatile_corrected=get("ecc_volatile_corrected"),
        ecc_volatile_uncorrected=get("ecc_volatile_uncorrected"),
        ecc_aggregate_corrected=get("ecc_aggregate_corrected"),
        ecc_aggregate_uncorrected=get("ecc_aggregate_uncorrected"),
        retired_pages_sbe=get("retired_pages_sbe"),
        retired_pages_dbe=get("retired_pages_dbe"),
        retired_pages_pending=bool(values["retired_pages_pending"])
        if "retired_pages_pending" in values
        else None,
        remap_corrected=int(rows[0]) if len(rows) == 4 else None,
        remap_uncorrected=int(rows[1]) if len(rows) == 4 else None,
        remap_pending=bool(rows[2]) if len(rows) == 4 else None,
        remap_failure=bool(rows[3]) if len(rows) == 4 else None,
        temperature_c=get("temperature"),
        temp_slowdown_c=get("temp_slowdown"),
        temp_shutdown_c=get("temp_shutdown"),
        clock_event_reasons=reasons_from_mask(mask) if mask is not None else None,
        power_draw_w=draw / 1000 if draw is not None else None,
        power_limit_w=limit / 1000 if limit is not None else None,
        pcie_gen_current=get("pcie_gen_current"),
        pcie_gen_max=get("pcie_gen_max"),
        pcie_width_current=get("pcie_width_current"),
        pcie_width_max=get("pcie_width_max"),
        pcie_replay_counter=get("pcie_replay_counter"),
        nvlink_states=_nvlink_states(links, fields.get("nvlink_states"), notes),
        nvlink_errors=_nvlink_errors(values.get("nvlink_errors"), notes),
        virtualization_mode=g.VIRTUALIZATION_MODES.get(virt, "") if virt is not None else "",
        numa_node=numa if numa is not None and numa >= 0 else None,
        unsupported=tuple(unsupported),
        notes=tuple(notes),
    )


def _processes(values: dict[str, Any], notes: list[str]) -> tuple[g.GpuProcess, ...] | None:
    """The compute and graphics lists as one ("C+G" for a pid in both); None when neither
    list was read."""
    lists = {k: values.get(f"{k}_processes") for k in ("compute", "graphics")}
    if not any(isinstance(v, list) for v in lists.values()):
        return None
    kinds: dict[int, str] = {}
    used: dict[int, int | None] = {}
    for kind, items in lists.items():
        for item in items if isinstance(items, list) else ():
            pid = item[0] if isinstance(item, list) and len(item) == 2 else None
            if not isinstance(pid, int) or isinstance(pid, bool) or pid < 0:
                notes.append(f"{kind}_processes: not a process: {str(item)[:60]}")
                continue
            letter = kind[0].upper()
            kinds[pid] = "C+G" if kinds.get(pid, letter) != letter else letter
            size = item[1] if isinstance(item[1], int) and item[1] >= 0 else None
            used[pid] = (
                max(used.get(pid) or 0, size // 2**20) if size is not None else used.get(pid)
            )
    return tuple(g.GpuProcess(pid, kinds[pid], "", used[pid]) for pid in sorted(kinds))


def _nvlink_states(
    links: list[Any] | None, answer: Any, notes: list[str]
) -> tuple[bool | None, ...] | None:
    """The probe's link list -> states; a link whose read failed is None, with a note."""
    if links is None:
        return None
    errors = answer.get("errors") if isinstance(answer, dict) else None
    for link, error in errors.items() if isinstance(errors, dict) else ():
        what = error.get("error") if isinstance(error, dict) else error
        notes.append(f"nvlink_states: link {link} could not be read ({what})")
    return tuple(None if s is None else bool(s) for s in links)


def _nvlink_errors(value: Any, notes: list[str]) -> tuple[tuple[int, str, int], ...] | None:
    """{"<link>": {"<counter>": answer}} -> (link, counter name, count) of each one read."""
    if not isinstance(value, dict):
        return None
    read: list[tuple[int, int, int]] = []
    for link, counters in value.items():
        for counter, answer in counters.items() if isinstance(counters, dict) else ():
            link_no, counter_no = to_int(str(link), minimum=0), to_int(str(counter), minimum=0)
            known = link_no is not None and counter_no in g.NVLINK_COUNTERS
            count = answer.get("value") if isinstance(answer, dict) else None
            if known and isinstance(count, int):
                read.append((link_no, counter_no, count))
            elif isinstance(answer, dict) and answer.get("error") not in ("NotSupported", None):
                notes.append(f"nvlink_errors: link {link} counter {counter}: {answer['error']}")
    return tuple((link, g.NVLINK_COUNTERS[c], n) for link, c, n in sorted(read))


def parse_nvml_probe(data: Any) -> NvidiaStack:
    """nvml.json's value -> NvidiaStack. Never raises: odd data becomes notes or an error."""
    try:
        return _parse_nvml_probe(data)
    except Exception as exc:  # noqa: BLE001 - a hand-edited nvml.json must not crash checks
        message = f"NVML probe answer is malformed ({type(exc).__name__}: {exc})"
        return NvidiaStack("nvml", error=g.PROBE_FAILED, error_message=message)


def _parse_nvml_probe(data: Any) -> NvidiaStack:
    if not isinstance(data, dict) or not isinstance(data.get("init"), dict):
        return NvidiaStack(
            "nvml", error=g.PROBE_FAILED, error_message="NVML probe answer is malformed"
        )
    init = data["init"]
    if "error" in init:
        code = init.get("code")
        return NvidiaStack(
            "nvml",
            error=INIT_ERRORS.get(code, g.UNKNOWN) if isinstance(code, int) else g.UNKNOWN,
            error_message=f"{init.get('error')}: {init.get('message', '')}".strip(": "),
        )
    system = data.get("system") if isinstance(data.get("system"), dict) else {}
    driver = system.get("driver_version", {}).get("value", "")
    cuda = system.get("cuda_driver_version", {}).get("value")
    gpus, notes = [], []
    for entry in data.get("devices", []) if isinstance(data.get("devices"), list) else []:
        index = entry.get("index", len(gpus)) if isinstance(entry, dict) else len(gpus)
        if not isinstance(entry, dict) or not isinstance(entry.get("fields"), dict):
            handle = entry.get("handle", {}) if isinstance(entry, dict) else {}
            problem = f"{handle.get('error', 'no answer')} {handle.get('message', '')}".strip()
            gpus.append(Gpu(index=index, notes=(f"NVML cannot open this GPU: {problem}",)))
            continue
        gpus.append(_gpu_from_probe(index, entry["fields"]))
    count = data.get("device_count", {})
    if "error" in count:
        notes.append(f"device count: {count.get('error')} {count.get('message', '')}".strip())
    return NvidiaStack(
        "nvml",
        driver_version=str(driver or ""),
        cuda_driver_version=driver_cuda_version(cuda) if isinstance(cuda, int) else "",
        gpus=tuple(gpus),
        attached_gpus=count.get("value") if isinstance(count.get("value"), int) else None,
        notes=tuple(notes),
    )


def _from_nvidia_smi(ctx: FactContext, why: str) -> NvidiaStack | None:
    """The second source. None when nvidia-smi is not there either."""
    from dldoctor.facts.nvsmi import parse_nvidia_smi_xml

    answer = ctx.host.run(list(SMI_XML_ARGV))
    if answer.status == AnswerStatus.NOT_CAPTURED:
        ctx.replaced(answer)
        return _from_nvidia_smi_text(ctx)
    if answer.status in (AnswerStatus.NOT_INSTALLED, AnswerStatus.MISSING):
        return None
    if answer.status == AnswerStatus.TIMEOUT:  # a hung driver, or a too short --timeout: no verdict
        return NvidiaStack("nvidia-smi", error=g.TIMED_OUT, error_message=answer.describe())
    if not answer.ok:
        return NvidiaStack("nvidia-smi", error=g.PROBE_FAILED, error_message=answer.describe())
    result = answer.value
    if result.returncode != 0:
        said = (result.stdout + result.stderr).decode("utf-8", "replace").strip()
        kind = next((k for text, k in SMI_ERRORS if text.lower() in said.lower()), g.UNKNOWN)
        first = said.splitlines()[0] if said else f"exit status {result.returncode}"
        return NvidiaStack("nvidia-smi", error=kind, error_message=first)
    stack = parse_nvidia_smi_xml(answer.text)
    return NvidiaStack(**{**stack.__dict__, "notes": (*stack.notes, f"NVML not used: {why}")})


def _from_nvidia_smi_text(ctx: FactContext) -> NvidiaStack:
    """A capture's `nvidia-smi -q` text (an nvidia-bug-report holds no XML and no NVML);
    NotCaptured when it lacks that too. Its exit status is not recorded: a driver that did
    not answer is known by what nvidia-smi printed."""
    from dldoctor.facts.nvsmi_text import BANNER, parse_nvidia_smi_text

    answer = ctx.host.run(["nvidia-smi", "-q"]).require()
    if not answer.ok:
        return NvidiaStack("nvidia-smi", error=g.PROBE_FAILED, error_message=answer.describe())
    said = answer.text.strip()
    if BANNER not in said:
        kind = next((k for text, k in SMI_ERRORS if text.lower() in said.lower()), None)
        if kind is not None:
            return NvidiaStack("nvidia-smi", error=kind, error_message=said.splitlines()[0])
    stack = parse_nvidia_smi_text(said)
    note = "from the `nvidia-smi -q` text of a capture (it holds no NVML or XML answer)"
    return NvidiaStack(**{**stack.__dict__, "notes": (*stack.notes, note)})


def no_nvidia_device(ctx: FactContext | Facts) -> bool:
    """The PCI bus, read in full, shows no NVIDIA device at all."""
    from dldoctor.facts.pci import NVIDIA, pci_devices

    try:
        bus = ctx.get(pci_devices)
    except (ProbeFailed, FactFailed):
        return False
    return bus.read_in_full and not bus.has_vendor(NVIDIA)


@fact("gpu.nvidia")
def nvidia(ctx: FactContext) -> NvidiaStack:
    probe = ctx.host.probe("nvml")
    stack: NvidiaStack | None = None
    if probe.ok:
        stack = parse_nvml_probe(probe.value)
        # nvidia-smi links the same library: it can only help when NVML's Python side or
        # its library lookup is what failed, or NVML did not answer in time.
        if stack.error not in (g.NO_DRIVER, g.UNKNOWN, g.PROBE_FAILED):
            return stack
        why = stack.error_message
    elif probe.status == AnswerStatus.TIMEOUT:
        # nvidia-smi links the same library on the same hung driver: it could only hang too.
        return NvidiaStack("nvml", error=g.TIMED_OUT, error_message=probe.describe())
    elif probe.status in (
        AnswerStatus.ERROR,
        AnswerStatus.PERMISSION_DENIED,
    ):  # a broken child or bundle entry
        why = probe.describe()
        stack = NvidiaStack("nvml", error=g.PROBE_FAILED, error_message=why)
    else:  # pynvml not installed, or no nvml.json in a bundle (or a foreign capture)
        if probe.status == AnswerStatus.NOT_CAPTURED:
            ctx.replaced(probe)
        why = f"pynvml {probe.status}" + (f": {probe.error}" if probe.error else "")
    if stack is not None and stack.error == g.NO_DRIVER and no_nvidia_device(ctx):
        return stack  # nvidia-smi could only say the same (or hang, on a broken install)
    fallback = _from_nvidia_smi(ctx, why)
    # A hung nvidia-smi says more than NVML's "no library": something is installed and stuck.
    if fallback is not None and (fallback.usable or stack is None or fallback.error == g.TIMED_OUT):
        return fallback
    if stack is not None:
        return stack
    return NvidiaStack("", error=g.NO_SOURCE, error_message=f"{why}; nvidia-smi not installed")


_NVML_SONAME = re.compile(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$")


@fact("gpu.nvidia.library")
def library_version(ctx: FactContext) -> str:
    """Version of the user-space driver library (libnvidia-ml.so.<version>); "" if unknown.

    NVML reports the kernel driver's version, so this is the independent side of the
    "module = library" comparison: the file the library link points at.
    """
    from dldoctor.facts.cudalibs import libraries

    found = ctx.get(libraries).named("libnvidia-ml")
    for soname in found:
        m = _NVML_SONAME.search(soname)
        if m:
            return m.group(1)
    for path in found.get("libnvidia-ml.so.1", ()):
        link = ctx.host.readlink(path)
        m = _NVML_SONAME.search(link.value) if link.ok else None
        if m:
            return m.group(1)
    return ""
