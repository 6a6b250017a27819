"""`nvidia-smi -q` (the text form) to the NVIDIA GPU model of `dldoctor.facts.gpu`.

nvidia-bug-report logs hold the text form, not the XML that dldoctor asks for on a live
host. Both print the same tree: the text indents `Label : value` lines under section
lines, where the XML nests elements. So the text is read into that tree, the labels the
GPU model needs are renamed to their XML tags (the table below, from captures of both
forms: tests/fixtures/corpus/nvidia-smi-q and -xml), and the XML reader of facts/nvsmi.py
reads it: one reader for the sentinels ("N/A", "[Not Supported]"), the ECC layouts of
each driver branch and the clock-event reasons. Labels not in the table are left out.
Never raises.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dldoctor.facts.gpu import PROBE_FAILED, NvidiaStack
from dldoctor.facts.nvsmi import ROOT_TAG, SOURCE, document_stack

BANNER = "NVSMI LOG"

# Drivers from 610 mark the first two deprecated ("610.62 [Deprecated; ...]") and print the
# plain value on a later line, which then wins.
TOP = {
    "driver version": "driver_version",
    "kmd version": "driver_version",
    "cuda version": "cuda_version",
    "cuda umd version": "cuda_version",
    "attached gpus": "attached_gpus",
}

# A GPU's labels (lower case, joined by "/") -> the XML path under <gpu>.
GPU_PATHS = {
    "product name": "product_name",
    "product architecture": "product_architecture",
    "persistence mode": "persistence_mode",
    "compute mode": "compute_mode",
    "serial number": "serial",
    "gpu uuid": "uuid",
    "vbios version": "vbios_version",
    "mig mode/current": "mig_mode/current_mig",
    "mig mode/pending": "mig_mode/pending_mig",
    "ecc mode/current": "ecc_mode/current_ecc",
    "ecc mode/pending": "ecc_mode/pending_ecc",
    "pci/bus id": "pci/pci_bus_id",
    "pci/gpu link info/pcie generation/max": "pci/pci_gpu_link_info/pcie_gen/max_link_gen",
    "pci/gpu link info/pcie generation/current": "pci/pci_gpu_link_info/pcie_gen/current_link_gen",
    "pci/gpu link info/link width/max": "pci/pci_gpu_link_info/link_widths/max_link_width",
    "pci/gpu link info/link width/current": "pci/pci_gpu_link_info/link_widths/current_link_width",
    "pci/replays since reset": "pci/replay_counter",
    "fb memory usage/total": "fb_memory_usage/total",
    "temperature/gpu current temp": "temperature/gpu_temp",
    "temperature/gpu shutdown temp": "temperature/gpu_temp_max_threshold",
    "temperature/gpu slowdown temp": "temperature/gpu_temp_slow_threshold",
    "retired pages": "retired_pages",
    "retired pages/single bit ecc": "retired_pages/multiple_single_bit_retirement/retired_count",
    "retired pages/double bit ecc": "retired_pages/double_bit_retirement/retired_count",
    "retired pages/pending page blacklist": "retired_pages/pending_blacklist",
    "retired pages/pending page retirement": "retired_pages/pending_retirement",
    "retired pages/pending": "retired_pages/pending_retirement",
    "remapped rows": "remapped_rows",
    "remapped rows/correctable error": "remapped_rows/remapped_row_corr",
    "remapped rows/uncorrectable error": "remapped_rows/remapped_row_unc",
    "remapped rows/pending": "remapped_rows/remapped_row_pending",
    "remapped rows/remapping failure occurred": "remapped_rows/remapped_row_failure",
    "gpu virtualization mode/virtualization mode": "gpu_virtualization_mode/virtualization_mode",
    "vgpu software licensed product/product name": (
        "vgpu_software_licensed_product/licensed_product_name"
    ),
    "vgpu software licensed product/license status": (
        "vgpu_software_licensed_product/license_status"
    ),
}
for _group in ("power readings", "gpu power readings"):
    GPU_PATHS[_group] = _group.replace(" ", "_")
    for _label, _tag in (
        ("power draw", "power_draw"),
        ("average power draw", "average_power_draw"),
        ("instantaneous power draw", "instant_power_draw"),
        ("enforced power limit", "enforced_power_limit"),
        ("current power limit", "current_power_limit"),
        ("power limit", "power_limit"),
    ):
        GPU_PATHS[f"{_group}/{_label}"] = f"{_group.replace(' ', '_')}/{_tag}"

# Subtrees whose labels are the XML tags written in words: "SRAM Uncorrectable SEC-DED"
# is <sram_uncorrectable_secded>, "Single Bit" <single_bit>, "Device Memory" <device_memory>.
WORDED = ("ecc errors",)
# "Clocks Event Reasons" (older: "Clocks Throttle Reasons") -> <clocks_event_reasons>, each
# reason <clocks_event_reason_<words>>; "Idle" is the gpu_idle reason. HW Thermal and HW
# Power Brake Slowdown are indented under HW Slowdown in the text, siblings in the XML.
REASON_GROUPS = {
    "clocks event reasons": ("clocks_event_reasons", "clocks_event_reason_"),
    "clocks throttle reasons": ("clocks_throttle_reasons", "clocks_throttle_reason_"),
}
REASON_WORDS = {"idle": "gpu_idle"}


def _tag(words: str) -> str:
    return "_".join(words.replace("-", "").replace(".", "").split())


class _Node:
    __slots__ = ("label", "value", "children")

    def __init__(self, label: str, value: str | None):
        self.label = label
        self.value = value  # None: a section line (no " : ")
        self.children: list[_Node] = []


def _tree(text: str) -> tuple[list[_Node], list[str]]:
    """The indented lines as nodes; a line's parent is the nearest line above it indented
    less."""
    roots: list[_Node] = []
    stack: list[tuple[int, _Node]] = []
    odd = 0
    for raw in text.replace("\r", "").split("\n"):
        if not raw.strip() or BANNER in raw:
            continue
        indent = len(raw) - len(raw.lstrip(" \t"))
        label, sep, value = raw.strip().partition(" : ")
        if not sep and raw.rstrip().endswith(" :"):
            label, value, sep = raw.strip()[:-2], "", " : "
        node = _Node(" ".join(label.split()), value.strip() if sep else None)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if stack:
            stack[-1][1].children.append(node)
        elif indent == 0:
            roots.append(node)
        else:
            odd += 1
            continue
        stack.append((indent, node))
    return roots, ([f"{odd} indented line(s) outside any section were left out"] if odd else [])


def _put(parent: ET.Element, path: str, value: str | None) -> None:
    element = parent
    for part in path.split("/"):
        child = element.find(part)
        element = child if child is not None else ET.SubElement(element, part)
    if value is not None:
        element.text = value


def _gpu_element(node: _Node, root: ET.Element) -> None:
    bus = node.label.split(None, 1)[1] if " " in node.label else ""
    gpu = ET.SubElement(root, "gpu", {"id": bus} if bus else {})

    def walk(children: list[_Node], path: tuple[str, ...]) -> None:
        for child in children:
            here = (*path, child.label.lower())
            key = "/".join(here)
            mapped = GPU_PATHS.get(key)
            if mapped is not None and (child.value is not None or not child.children):
                _put(gpu, mapped, child.value)
            if here[0] in WORDED:
                _put(gpu, "/".join(_tag(w) for w in here), child.value)
            elif here[0] in REASON_GROUPS:
                group, prefix = REASON_GROUPS[here[0]]
                if len(here) == 1:
                    _put(gpu, group, child.value)
                else:
                    words = REASON_WORDS.get(here[-1], _tag(here[-1]))
                    _put(gpu, f"{group}/{prefix}{words}", child.value)
            walk(child.children, here)

    walk(node.children, ())


def parse_nvidia_smi_text(text: str) -> NvidiaStack:
    """The driver and GPUs an `nvidia-smi -q` text describes; never raises."""
    try:
        roots, notes = _tree(text if isinstance(text, str) else "")
        if not any(n.label.lower() in TOP for n in roots):
            return _unreadable("it has no `Driver Version` or `Attached GPUs` line")
        root = ET.Element(ROOT_TAG)
        for node in roots:
            tag = TOP.get(node.label.lower())
            if tag is not None:
                _put(root, tag, node.value)
            elif node.label.startswith("GPU ") and node.value is None:
                _gpu_element(node, root)
        return document_stack(root, notes)
    except Exception as e:  # a bug here must not cost the whole run its GPU facts
        return _unreadable(f"unexpected content ({type(e).__name__}: {e})")


def _unreadable(why: str) -> NvidiaStack:
    return NvidiaStack(
        source=SOURCE, error=PROBE_FAILED, error_message=f"`nvidia-smi -q` text not read: {why}"
    )
