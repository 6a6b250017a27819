"""`nvidia-smi -q -x` (XML) to the NVIDIA GPU model of `dldoctor.facts.gpu`.

The schema has changed with almost every driver branch (nvsmi_device_v10 ... v13): elements
were renamed (clocks_throttle_reasons -> clocks_event_reasons, power_readings ->
gpu_power_readings, power_draw -> average_power_draw/instant_power_draw), ECC counters were
regrouped, and any value may be a sentinel ("N/A", "[Not Supported]"). The parser reads every
spelling seen in real captures (tests/fixtures/corpus/nvidia-smi-xml) and never raises: what
it cannot read becomes None plus a note. Only the standard library is used; the document is
never asked to resolve entities (nvidia-smi declares none, so a document that does is refused).
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from typing import Any

from dldoctor.facts.gpu import (
    CLOCK_EVENT_REASONS,
    PROBE_FAILED,
    Gpu,
    GpuProcess,
    NvidiaStack,
    normalise_pci_bus_id,
)
from dldoctor.facts.reading import to_int

SOURCE = "nvidia-smi"
ROOT_TAG = "nvidia_smi_log"

# Sentinels nvidia-smi prints instead of a value (sometimes in brackets).
_NO_VALUE = {"n/a", "unknown", "requested functionality has been deprecated", ""}
_NOT_SUPPORTED = "not supported"
_TRUE = {"enabled", "yes", "active", "true"}
_FALSE = {"disabled", "no", "not active", "false"}

# Tag suffixes of clocks_event_reason_<name> / clocks_throttle_reason_<name> that differ from
# the model's names. The corpus only has `display_clocks_setting`; NVML's constant is
# DISPLAY_CLOCK_SETTING, so the singular spelling is accepted too.
_REASON_ALIASES = {"display_clock_setting": "display_clocks_setting"}
_REASON_PREFIXES = ("clocks_event_reason_", "clocks_throttle_reason_")
_KNOWN_REASONS = tuple(CLOCK_EVENT_REASONS.values())

# <gpu_virtualization_mode><virtualization_mode> words (nvidia-smi's StrVirt) -> model names.
VIRTUALIZATION_WORDS = {
    "none": "none",
    "pass-through": "passthrough",
    "vgpu": "vgpu",
    "host vgpu": "host_vgpu",
    "host vsga": "host_vsga",
}

_MEMORY_UNITS_MIB = {"kib": 1 / 1024, "mib": 1, "gib": 1024}


class _NotParseable(Exception):
    pass


def parse_nvidia_smi_xml(text: str) -> NvidiaStack:
    """The driver and GPUs an `nvidia-smi -q -x` document describes; never raises."""
    try:
        root, notes = _root_of(text)
    except _NotParseable as e:
        return _unparseable(str(e))
    try:
        return document_stack(root, notes)
    except Exception as e:  # a bug here must not cost the whole run its GPU facts
        return _unparseable(f"unexpected content ({type(e).__name__}: {e})")


def _unparseable(why: str) -> NvidiaStack:
    message = " ".join(f"nvidia-smi XML is not parseable: {why}".split())
    return NvidiaStack(source=SOURCE, error=PROBE_FAILED, error_message=message)


def _excerpt(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return repr(line[:60] + ("..." if len(line) > 60 else ""))


def _root_of(text: Any) -> tuple[ET.Element, list[str]]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise _NotParseable(f"expected text, got {type(text).__name__}")
    notes: list[str] = []
    body = text.lstrip("\ufeff").strip()
    if not body:
        raise _NotParseable("the output is empty")
    if not body.startswith("<"):
        # A warning printed before the document (stdout is shared) does not spoil it.
        start = min(
            (i for i in (body.find("<?xml"), body.find(f"<{ROOT_TAG}")) if i >= 0), default=-1
        )
        if start < 0:
            raise _NotParseable(f"the output is not XML (it begins {_excerpt(body)})")
        notes.append(f"text before the XML document was ignored: {_excerpt(body[:start])}")
        body = body[start:]
    end_tag = f"</{ROOT_TAG}>"
    end = body.rfind(end_tag)
    if end >= 0 and body[end + len(end_tag) :].strip():
        notes.append(
            f"text after the XML document was ignored: {_excerpt(body[end + len(end_tag) :])}"
        )
        body = body[: end + len(end_tag)]
    if "<!ENTITY" in body:
        raise _NotParseable("the document declares entities, which nvidia-smi never does")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as e:
        raise _NotParseable(str(e)) from None
    except (ValueError, LookupError) as e:  # e.g. an unknown encoding declaration
        raise _NotParseable(f"{type(e).__name__}: {e}") from None
    if root.tag != ROOT_TAG:
        raise _NotParseable(f"the root element is <{root.tag}>, not <{ROOT_TAG}>")
    return root, notes


def document_stack(root: ET.Element, notes: list[str]) -> NvidiaStack:
    """The stack an <nvidia_smi_log> element describes (also built from `nvidia-smi -q`
    text by facts/nvsmi_text.py); raises on what it cannot handle."""
    top = _Reader(root)
    driver = top.text(root, "driver_version", "driver_version") or ""
    cuda = top.text(root, "cuda_version", "cuda_driver_version") or ""
    attached = top.integer(root, "attached_gpus", "attached_gpus")
    notes.extend(top.notes)
    if root.find("driver_version") is None:
        notes.append("the document has no <driver_version>")
    gpus = []
    for index, element in enumerate(root.findall("gpu")):
        try:
            gpus.append(_gpu(index, element))
        except Exception as e:  # one odd GPU element must not hide the others
            bus = normalise_pci_bus_id(element.get("id", "")) or ""
            gpus.append(Gpu(index=index, pci_bus_id=bus, notes=(f"unreadable: {e!r}",)))
            notes.append(f"GPU {index}: its element could not be read ({type(e).__name__})")
    if attached is not None and attached != len(gpus):
        notes.append(f"attached_gpus is {attached} but the document describes {len(gpus)} GPU(s)")
    return NvidiaStack(
        source=SOURCE,
        driver_version=driver,
        cuda_driver_version=cuda,
        gpus=tuple(gpus),
        attached_gpus=attached,
        notes=tuple(notes),
    )


class _Reader:
    """Typed reads of one element's descendants, collecting notes and unsupported fields."""

    def __init__(self, element: ET.Element):
        self.element = element
        self.notes: list[str] = []
        self.unsupported: list[str] = []

    def mark_unsupported(self, field: str) -> None:
        if field not in self.unsupported:
            self.unsupported.append(field)

    def mark_supported(self, field: str) -> None:
        """One of several elements behind a field answered: the field is supported."""
        if field in self.unsupported:
            self.unsupported.remove(field)

    def classify(self, raw: str | None) -> tuple[str, str | None]:
        """("value", text) | ("absent" | "none" | "unsupported" | "error", None)."""
        if raw is None:
            return "absent", None
        value = " ".join(raw.split())
        bracketed = value.startswith("[") and value.endswith("]")
        if bracketed:
            value = value[1:-1].strip()
        lowered = value.lower()
        if lowered == _NOT_SUPPORTED:
            return "unsupported", None
        if lowered in _NO_VALUE:
            return "none", None
        if bracketed:  # "[Unknown Error]", "[Insufficient Permissions]", "[GPU requires reset]"
            return "error", value
        return "value", value

    def text(self, parent: ET.Element | None, path: str, field: str) -> str | None:
        """The value at `path` under `parent`, or None (sentinel, absent, or an error)."""
        element = parent.find(path) if parent is not None else None
        if element is not None and len(element):
            self.notes.append(f"{field}: <{path}> has child elements, expected a value")
            return None
        kind, value = self.classify(element.text or "" if element is not None else None)
        if kind == "unsupported":
            self.mark_unsupported(field)
        elif kind == "error":
            self.notes.append(f"{field}: nvidia-smi says [{value}]")
            return None
        return value if kind == "value" else None

    def number(
        self, parent: ET.Element | None, path: str, field: str, unit: str = ""
    ) -> float | None:
        value = self.text(parent, path, field)
        if value is None:
            return None
        pattern = r"(-?\d+(?:\.\d+)?)" + (rf"\s*{re.escape(unit)}" if unit else "")
        m = re.fullmatch(pattern, value, flags=re.IGNORECASE)
        if m is None:
            self.notes.append(
                f"{field}: cannot read {value!r} as a number{' of ' + unit if unit else ''}"
            )
            return None
        number = float(m.group(1))
        if not math.isfinite(number):  # 400 nines: float() says inf, int(inf) raises
            self.notes.append(f"{field}: {value[:40]!r} is out of range")
            return None
        return number

    def integer(
        self, parent: ET.Element | None, path: str, field: str, unit: str = ""
    ) -> int | None:
        value = self.number(parent, path, field, unit)
        if value is None:
            return None
        if value != int(value):
            self.notes.append(f"{field}: expected a whole number, got {value}")
            return None
        return int(value)

    def flag(self, parent: ET.Element | None, path: str, field: str) -> bool | None:
        value = self.text(parent, path, field)
        if value is None:
            return None
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        self.notes.append(f"{field}: unexpected value {value!r}")
        return None

    def container(self, path: str, fields: tuple[str, ...]) -> ET.Element | None:
        """A grouping element; None when absent or a bare sentinel such as `N/A`."""
        element = self.element.find(path)
        if element is None:
            return None
        if len(element) == 0:
            kind, value = self.classify(element.text or "")
            if kind == "unsupported":
                for field in fields:
                    self.mark_unsupported(field)
            elif kind in ("value", "error"):
                self.notes.append(f"<{path}> holds {value!r} instead of its values")
            return None
        return element


def _gpu(index: int, el: ET.Element) -> Gpu:
    r = _Reader(el)
    bus_id = _bus_id(r, el)
    ecc = _ecc_counts(r)
    sbe, dbe, pages_pending = _retired_pages(r)
    remap = _remapped_rows(r)
    power_draw, power_limit = _power(r)
    link = el.find("pci/pci_gpu_link_info")
    temp = el.find("temperature")
    fb_memory = el.find("fb_memory_usage")
    return Gpu(
        index=index,
        name=r.text(el, "product_name", "name") or "",
        uuid=r.text(el, "uuid", "uuid") or "",
        serial=r.text(el, "serial", "serial") or "",
        pci_bus_id=bus_id,
        memory_total_mib=_memory_mib(r, fb_memory),
        memory_used_mib=_memory_mib(r, fb_memory, "used", "memory_used_mib"),
        processes=_processes(r, el),
        vbios=r.text(el, "vbios_version", "vbios") or "",
        architecture=r.text(el, "product_architecture", "architecture") or "",
        compute_capability=_compute_capability(r, el),
        persistence_mode=r.flag(el, "persistence_mode", "persistence_mode"),
        compute_mode=r.text(el, "compute_mode", "compute_mode") or "",
        mig_current=r.flag(el, "mig_mode/current_mig", "mig_current"),
        mig_pending=r.flag(el, "mig_mode/pending_mig", "mig_pending"),
        ecc_current=r.flag(el, "ecc_mode/current_ecc", "ecc_current"),
        ecc_pending=r.flag(el, "ecc_mode/pending_ecc", "ecc_pending"),
        ecc_volatile_corrected=ecc[0],
        ecc_volatile_uncorrected=ecc[1],
        ecc_aggregate_corrected=ecc[2],
        ecc_aggregate_uncorrected=ecc[3],
        retired_pages_sbe=sbe,
        retired_pages_dbe=dbe,
        retired_pages_pending=pages_pending,
        remap_corrected=remap[0],
        remap_uncorrected=remap[1],
        remap_pending=remap[2],
        remap_failure=remap[3],
        temperature_c=r.integer(temp, "gpu_temp", "temperature_c", "C"),
        temp_slowdown_c=r.integer(temp, "gpu_temp_slow_threshold", "temp_slowdown_c", "C"),
        temp_shutdown_c=r.integer(temp, "gpu_temp_max_threshold", "temp_shutdown_c", "C"),
        clock_event_reasons=_clock_event_reasons(r),
        power_draw_w=power_draw,
        power_limit_w=power_limit,
        pcie_gen_current=r.integer(link, "pcie_gen/current_link_gen", "pcie_gen_current"),
        pcie_gen_max=r.integer(link, "pcie_gen/max_link_gen", "pcie_gen_max"),
        pcie_width_current=r.integer(
            link, "link_widths/current_link_width", "pcie_width_current", "x"
        ),
        pcie_width_max=r.integer(link, "link_widths/max_link_width", "pcie_width_max", "x"),
        pcie_replay_counter=r.integer(el, "pci/replay_counter", "pcie_replay_counter"),
        virtualization_mode=_virtualization_mode(r, el),
        vgpu_license=_vgpu_license(r, el),
        unsupported=tuple(r.unsupported),
        notes=tuple(r.notes),
    )


def _bus_id(r: _Reader, el: ET.Element) -> str:
    """From <gpu id="..."> (every schema has it), else pci/pci_bus_id; normalised."""
    found: list[str] = []
    for raw in (el.get("id"), r.text(el, "pci/pci_bus_id", "pci_bus_id")):
        if not raw:
            continue
        bus = normalise_pci_bus_id(raw)
        if bus is None:
            r.notes.append(f"pci_bus_id: {raw!r} is not a PCI address")
            bus = raw.strip().lower()
        found.append(bus)
    if len(set(found)) > 1:
        r.notes.append(f"pci_bus_id: the gpu id says {found[0]}, pci/pci_bus_id {found[1]}")
    return found[0] if found else ""


def _virtualization_mode(r: _Reader, el: ET.Element) -> str:
    """In every schema of the corpus since v10; a vGPU guest says VGPU."""
    field = "virtualization_mode"
    value = r.text(el, "gpu_virtualization_mode/virtualization_mode", field)
    if value is None:
        return ""
    mode = VIRTUALIZATION_WORDS.get(value.lower())
    if mode is None:
        r.notes.append(f"{field}: unexpected value {value!r}")
    return mode or ""


def _vgpu_license(r: _Reader, el: ET.Element) -> str:
    """<vgpu_software_licensed_product>: "<product>: <status>" ("Licensed (Expiry: ...)")."""
    product = r.text(el, "vgpu_software_licensed_product/licensed_product_name", "vgpu_license")
    status = r.text(el, "vgpu_software_licensed_product/license_status", "vgpu_license")
    return ": ".join(x for x in (product, status) if x)


def _memory_mib(
    r: _Reader, parent: ET.Element | None, tag: str = "total", field: str = "memory_total_mib"
) -> int | None:
    value = r.text(parent, tag, field)
    if value is None:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]iB)", value, flags=re.IGNORECASE)
    if m is None:
        r.notes.append(f"{field}: cannot read {value!r}")
        return None
    return round(float(m.group(1)) * _MEMORY_UNITS_MIB[m.group(2).lower()])


MAX_PROCESSES = 512  # per GPU; a GPU holds at most a few dozen contexts


def _processes(r: _Reader, el: ET.Element) -> tuple[GpuProcess, ...] | None:
    """<processes><process_info> (pid, type, process_name, used_memory); an empty
    <processes/> is "none", an absent one (older schemas, or `N/A`) None."""
    group = el.find("processes")
    if group is None:
        return None
    if len(group) == 0:
        return () if not (group.text or "").strip() else None  # "N/A": not reported
    found = []
    for info in group.findall("process_info")[:MAX_PROCESSES]:
        pid = r.integer(info, "pid", "processes")
        if pid is None or pid < 0:
            continue
        found.append(
            GpuProcess(
                pid=pid,
                kind=r.text(info, "type", "processes") or "",
                name=(r.text(info, "process_name", "processes") or "")[:200],
                used_mib=_memory_mib(r, info, "used_memory", "processes"),
            )
        )
    return tuple(found)


def _compute_capability(r: _Reader, el: ET.Element) -> str:
    """Not in the v10-v13 schemas of the corpus; read when a newer schema names it."""
    for tag in ("compute_cap", "compute_capability", "cuda_compute_capability"):
        value = r.text(el, tag, "compute_capability")
        if value is None:
            continue
        if re.fullmatch(r"\d+\.\d+", value):
            return value
        r.notes.append(f"compute_capability: unexpected value {value!r}")
    return ""


# ECC counters. Each Gpu count is the total over all memory locations, as NVML's
# nvmlDeviceGetTotalEccErrors gives it, so both sources mean the same thing:
# - older schemas (<= v10): <volatile|aggregate>/<single_bit|double_bit> with per-location
#   counters (device_memory, register_file, l1_cache, ...) and their <total>: corrected =
#   single_bit/total, uncorrected = double_bit/total (the locations are summed only when
#   <total> is missing or not a number).
# - v11+: <volatile|aggregate> with sram_correctable, dram_correctable, sram_uncorrectable,
#   dram_uncorrectable: corrected = sram + dram correctable, uncorrected = sram + dram
#   uncorrectable. v13 splits sram_uncorrectable into sram_uncorrectable_parity and
#   sram_uncorrectable_secded; those two are summed when sram_uncorrectable is absent.
# Counters that are N/A are left out of a sum; a sum with no readable counter is None.
# sram_threshold_exceeded (Yes/No) and aggregate_uncorrectable_sram_sources (a breakdown
# of what is already counted) are not counts to add.
def _ecc_counts(r: _Reader) -> tuple[int | None, int | None, int | None, int | None]:
    fields = (
        "ecc_volatile_corrected",
        "ecc_volatile_uncorrected",
        "ecc_aggregate_corrected",
        "ecc_aggregate_uncorrected",
    )
    errors = r.container("ecc_errors", fields)
    counts: list[int | None] = []
    for field in fields:
        scope_name, kind = field.split("_")[1:3]
        scope = errors.find(scope_name) if errors is not None else None
        counts.append(_ecc_count(r, scope, kind, field) if scope is not None else None)
    return counts[0], counts[1], counts[2], counts[3]


def _ecc_count(r: _Reader, scope: ET.Element, kind: str, field: str) -> int | None:
    old = scope.find("single_bit" if kind == "corrected" else "double_bit")
    if old is not None:
        if old.find("total") is not None:
            total = _ecc_sum(r, old, ["total"], field)
            if total is not None:
                return total
        return _ecc_sum(r, old, [child.tag for child in old if child.tag != "total"], field)
    if kind == "corrected":
        tags = ["sram_correctable", "dram_correctable"]
    elif scope.find("sram_uncorrectable") is not None:
        tags = ["sram_uncorrectable", "dram_uncorrectable"]
    else:
        tags = ["sram_uncorrectable_parity", "sram_uncorrectable_secded", "dram_uncorrectable"]
    return _ecc_sum(r, scope, tags, field)


def _ecc_sum(r: _Reader, parent: ET.Element, tags: list[str], field: str) -> int | None:
    total: int | None = None
    unsupported = False
    for tag in tags:
        element = parent.find(tag)
        kind, value = r.classify(element.text or "" if element is not None else None)
        unsupported = unsupported or kind == "unsupported"
        if kind == "error":
            r.notes.append(f"{field}: <{tag}> says [{value}]")
        elif kind == "value" and value is not None:
            count = to_int(value, minimum=0)
            if count is not None:
                total = (total or 0) + count
            else:
                r.notes.append(f"{field}: <{tag}> is {value!r}, not a count")
    if total is None and unsupported:
        r.mark_unsupported(field)
    return total


def _retired_pages(r: _Reader) -> tuple[int | None, int | None, bool | None]:
    """Page retirement (pre-Ampere): counts of retired pages, and whether any is pending."""
    fields = ("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending")
    pages = r.container("retired_pages", fields)
    if pages is None:
        return None, None, None
    sbe = r.integer(pages, "multiple_single_bit_retirement/retired_count", fields[0])
    dbe = r.integer(pages, "double_bit_retirement/retired_count", fields[1])
    # Older drivers say pending_retirement, some pending_blacklist, newer both.
    flags = [r.flag(pages, tag, fields[2]) for tag in ("pending_blacklist", "pending_retirement")]
    pending = True if True in flags else False if False in flags else None
    if pending is not None:
        r.mark_supported(fields[2])
    return sbe, dbe, pending


def _remapped_rows(r: _Reader) -> tuple[int | None, int | None, bool | None, bool | None]:
    """Row remapping (Ampere+); a bare `N/A` on GPUs without it."""
    fields = ("remap_corrected", "remap_uncorrected", "remap_pending", "remap_failure")
    rows = r.container("remapped_rows", fields)
    if rows is None:
        return None, None, None, None
    return (
        r.integer(rows, "remapped_row_corr", fields[0]),
        r.integer(rows, "remapped_row_unc", fields[1]),
        r.flag(rows, "remapped_row_pending", fields[2]),
        r.flag(rows, "remapped_row_failure", fields[3]),
    )


def _clock_event_reasons(r: _Reader) -> tuple[str, ...] | None:
    """Active reasons, in CLOCK_EVENT_REASONS order; None when none could be read."""
    field = "clock_event_reasons"
    group = None
    for path in ("clocks_event_reasons", "clocks_throttle_reasons"):
        group = r.container(path, (field,))
        if group is not None:
            break
    if group is None:
        return None
    states: dict[str, bool] = {}
    for child in group:
        prefix = next((p for p in _REASON_PREFIXES if child.tag.startswith(p)), None)
        name = child.tag[len(prefix) :] if prefix else child.tag
        name = _REASON_ALIASES.get(name, name)
        if prefix is None or name not in _KNOWN_REASONS:
            # Older drivers list e.g. clocks_throttle_reason_unknown; say so only when it
            # matters (active, or an odd value).
            kind, value = r.classify(child.text or "")
            if kind in ("value", "error") and (value or "").lower() not in _FALSE:
                r.notes.append(f"{field}: unknown reason <{child.tag}> is {value!r}")
            continue
        state = r.flag(group, child.tag, field)
        if state is not None:
            states[name] = state
    if not states:
        return None
    r.mark_supported(field)
    return tuple(name for name in _KNOWN_REASONS if states.get(name))


def _power(r: _Reader) -> tuple[float | None, float | None]:
    """Board power draw and the enforced limit, in watts.

    power_readings (<= v11): power_draw, enforced_power_limit (power_limit is the one set by
    the user; enforced is what applies). gpu_power_readings (v12+): power_draw (v12) or
    average_power_draw/instant_power_draw (v13), and current_power_limit (the enforced one).
    The average is preferred: nvidia-smi's own power.draw is the 1 s average on Ampere+.
    """
    readings = None
    for path in ("gpu_power_readings", "power_readings"):
        readings = r.container(path, ("power_draw_w", "power_limit_w"))
        if readings is not None:
            break
    if readings is None:
        return None, None
    draw = _first(
        r, readings, ("power_draw", "average_power_draw", "instant_power_draw"), "power_draw_w"
    )
    limit = _first(
        r, readings, ("enforced_power_limit", "current_power_limit", "power_limit"), "power_limit_w"
    )
    return draw, limit


def _first(r: _Reader, parent: ET.Element, tags: tuple[str, ...], field: str) -> float | None:
    for tag in tags:
        value = r.number(parent, tag, field, "W")
        if value is not None:
            r.mark_supported(field)
            return value
    return None
