"""NVLink: the state of each GPU's links, and their error counters where the driver has them.

NVML answers both (they are in gpu.nvidia). When the GPU facts came from nvidia-smi, or NVML
could not read a GPU's links, `nvidia-smi nvlink -s` gives the states (not the counters).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from dldoctor.facts import FactContext, fact
from dldoctor.facts.gpu import Gpu, NvidiaStack
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.reading import to_int

NVLINK_STATUS_ARGV = ("nvidia-smi", "nvlink", "-s")
SOURCE_SMI = "nvidia-smi nvlink -s"

# `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`, then a tab-indented line per link:
# `Link 3: 26.562 GB/s` when up, `Link 3: <inactive>` when down; or one sentence instead.
# The UUID is looked for apart: a lazy name before an optional UUID and `\s*` was quadratic.
_GPU_LINE = re.compile(r"GPU (\d+): (.*)")
_UUID_AT_END = re.compile(r"\(UUID: (\S+)\)$")
_LINK_LINE = re.compile(r"Link (\d+): (.*)$")
_ALL_INACTIVE = "all links are inactive"  # "NVML: Unable to retrieve Nvlink ... inActive"
_NO_NVLINK = "does not have or support nvlink"


@dataclass(frozen=True)
class LinkStatus:
    """One GPU's block of `nvidia-smi nvlink -s`."""

    index: int
    uuid: str = ""
    states: tuple[bool, ...] | None = None  # () = "all links are inActive", count not said
    supported: bool = True  # False: "Device does not have or support Nvlink"
    said: str = ""  # a sentence nvidia-smi printed instead of links (MIG mode, errors)


# NVML_NVLINK_MAX_LINKS is 18; a few times that leaves room for later parts.
MAX_LINKS = 64


def parse_nvlink_status(text: str) -> tuple[tuple[LinkStatus, ...], tuple[str, ...]]:
    """`nvidia-smi nvlink -s` -> one LinkStatus per GPU, plus notes; never raises."""
    blocks: list[dict[str, Any]] = []
    notes: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        gpu = _GPU_LINE.fullmatch(line)
        index = to_int(gpu.group(1)) if gpu else None
        if gpu and index is not None:
            uuid = _UUID_AT_END.search(gpu.group(2))
            blocks.append({"index": index, "uuid": uuid.group(1) if uuid else "", "links": {}})
            continue
        if not blocks:
            notes.append(f"nvlink -s: text before the first GPU ignored: {line[:80]!r}")
            continue
        block = blocks[-1]
        link = _LINK_LINE.fullmatch(line)
        if link:
            number = to_int(link.group(1))
            if number is None or number >= MAX_LINKS:  # the states are a list up to it
                notes.append(f"nvlink -s: link number out of range ignored: {line[:80]!r}")
                continue
            block["links"][number] = "inactive" not in link.group(2).lower()
        elif _ALL_INACTIVE in line.lower():
            block["all_inactive"] = True
        elif _NO_NVLINK in line.lower():
            block["unsupported"] = True
        else:
            block["said"] = line
    statuses = []
    for b in blocks:
        links = b["links"]
        states = tuple(links.get(i, False) for i in range(max(links) + 1)) if links else None
        if states is None and b.get("all_inactive"):
            states = ()
        statuses.append(
            LinkStatus(b["index"], b["uuid"], states, not b.get("unsupported"), b.get("said", ""))
        )
    return tuple(statuses), tuple(notes)


@dataclass(frozen=True)
class NvLinks:
    gpus: tuple[Gpu, ...] = ()  # gpu.nvidia's GPUs, with nvlink_states from whichever source
    source: str = ""  # "nvml", "nvidia-smi", SOURCE_SMI, or "" when there are no GPU facts
    notes: tuple[str, ...] = ()


def _lacks_links(x: Gpu) -> bool:
    return x.nvlink_states is None and "nvlink_states" not in x.unsupported


def _merge(stack: NvidiaStack, statuses: tuple[LinkStatus, ...]) -> tuple[list[Gpu], list[str]]:
    by_uuid = {s.uuid: s for s in statuses if s.uuid}
    by_index = {s.index: s for s in statuses}
    gpus, notes = [], []
    for x in stack.gpus:
        status = by_uuid.get(x.uuid) if x.uuid else None
        status = status or by_index.get(x.index)
        if status is None or not _lacks_links(x):
            gpus.append(x)
            continue
        if status.said:
            notes.append(f"GPU {x.index}: nvidia-smi says {status.said!r}")
        unsupported = x.unsupported if status.supported else (*x.unsupported, "nvlink_states")
        gpus.append(dataclasses.replace(x, nvlink_states=status.states, unsupported=unsupported))
    return gpus, notes


@fact("gpu.nvlink")
def nvlinks(ctx: FactContext) -> NvLinks:
    stack = ctx.get(nvidia)
    if not stack.usable:
        return NvLinks()
    if not any(_lacks_links(x) for x in stack.gpus):
        return NvLinks(stack.gpus, stack.source)
    # A GPU still lacks its link states: nvidia-smi that timed out or broke is a failure to
    # look (the check's error), not "no NVLink"; one that is not installed is only a note.
    answer = ctx.host.run(list(NVLINK_STATUS_ARGV)).require()
    if not answer.ok:
        return NvLinks(stack.gpus, stack.source, (f"{SOURCE_SMI}: {answer.describe()}",))
    result = answer.value
    statuses, notes = parse_nvlink_status(answer.text)
    if result.returncode != 0 and not statuses:
        said = (result.stdout + result.stderr).decode("utf-8", "replace").strip()
        first = said.splitlines()[0] if said else f"exit status {result.returncode}"
        return NvLinks(stack.gpus, stack.source, (*notes, f"{SOURCE_SMI}: {first}"))
    gpus, merged = _merge(stack, statuses)
    return NvLinks(tuple(gpus), SOURCE_SMI, (*notes, *merged))
