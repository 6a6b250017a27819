"""NVLink fabric checks: Fabric Manager on NVSwitch systems, and every GPU's links (state
and error counters). The switches' own SXid events are checks/nvswitch.py's."""

from __future__ import annotations

import re

from dldoctor.checks.needs import label, needs, nvidia_gpus, nvswitches_on_bus
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.nvlink import NvLinks, nvlinks
from dldoctor.facts.pci import PciDevice, pci_devices
from dldoctor.facts.services import fabricmanager
from dldoctor.facts.system import container
from dldoctor.model import Outcome, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check


@check(
    "gpu.fabricmanager",
    "Fabric Manager",
    remediation="NVSwitch systems need Fabric Manager at exactly the driver's version: install "
    "`nvidia-fabricmanager-<branch>` and `systemctl enable --now nvidia-fabricmanager`.",
)
@needs(nvswitches_on_bus)
def fabric_manager(facts: Facts, policy: Policy, switches: tuple[PciDevice, ...]) -> Outcome:
    state = facts.get(fabricmanager)
    details = [f"{len(switches)} NVSwitch(es)"]
    if not state.state and facts.get(container).in_container:
        return skipped("Fabric Manager runs on the host; it cannot be seen from a container")
    if state.active:
        return passed("nvidia-fabricmanager is active", details)
    if not state.state:
        return warned(f"cannot tell whether nvidia-fabricmanager runs ({state.note})", details)
    return failed(
        f"nvidia-fabricmanager is {state.state}: CUDA will not start on the GPUs", details
    )


# Boards whose NVLinks are wired on the baseboard (SXM, HGX): every link is expected up. A
# PCIe card needs a bridge for NVLink, and one without a bridge has all links down by design.
SXM = re.compile(r"SXM|HBM3|\b(?:H200|H20|H800|B200|B300|GB200|GH200)\b")
PCIE_FORM = re.compile(r"\bNVL\b|PCIe")
# Links per GPU of the SXM parts whose count is known; any other name is not compared. NVLink
# 3 gives an A100 12 links, NVLink 4 (Hopper) and 5 (Blackwell) 18; the export parts keep
# 400 GB/s of NVLink at 50 GB/s a link: 8. Sources in docs/checks.md (gpu.nvlink).
LINK_COUNTS = (
    (re.compile(r"\bH100\b"), "an H100 SXM", 18),
    (re.compile(r"\bH200\b"), "an H200", 18),
    (re.compile(r"\bH800\b"), "an H800 SXM", 8),
    (re.compile(r"\bA100-SXM4"), "an A100 SXM4", 12),
    (re.compile(r"\bA800-SXM4"), "an A800 SXM4", 8),
    (re.compile(r"\bB200\b"), "a B200", 18),
    (re.compile(r"\bGH200\b"), "a GH200", 18),
)


def is_sxm(gpu: g.Gpu) -> bool:
    return bool(SXM.search(gpu.name)) and not PCIE_FORM.search(gpu.name)


def expected_links(gpu: g.Gpu) -> tuple[str, int] | None:
    """(what the GPU is, its number of NVLinks) for an SXM part in LINK_COUNTS, else None."""
    if is_sxm(gpu):
        for pattern, part, count in LINK_COUNTS:
            if pattern.search(gpu.name):
                return part, count
    return None


def numbers(values: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _links_down(x: g.Gpu) -> str:
    """What is wrong with a GPU's links (the ones read), or ""."""
    states = x.nvlink_states or ()
    if not states:
        return f"{label(x)}: all links inactive"
    off = [i for i, up in enumerate(states) if up is False]
    expected = expected_links(x)
    short = expected[1] - len(states) if expected else 0
    problems = [f"link{'s' * (len(off) > 1)} {numbers(off)} inactive"] if off else []
    if expected and short > 0:
        problems.append(f"{len(states)} links reported, {expected[0]} has {expected[1]}")
    if not problems:
        return ""
    return f"{label(x)}: {'; '.join(problems)} ({x.nvlink_active} of {len(states)} up)"


def _links_unread(links: NvLinks) -> list[str]:
    """The GPUs (and links) whose state could not be read where NVLink is expected: a
    failure to look, not a verdict. An SXM board wires its links, so a missing answer there
    is not "no NVLink"; in MIG mode or in a vGPU guest NVLink is not offered."""
    lines = []
    for x in links.gpus:
        unread = [i for i, up in enumerate(x.nvlink_states or ()) if up is None]
        if unread:
            lines.append(f"{label(x)}: link{'s' * (len(unread) > 1)} {numbers(unread)} unread")
            lines += [f"{label(x)}: {n}" for n in x.notes if n.startswith("nvlink_states:")]
        elif (
            x.nvlink_states is None
            and "nvlink_states" not in x.unsupported
            and is_sxm(x)
            and not (x.vgpu_guest or x.mig_current)
        ):
            lines.append(f"{label(x)}: link states unknown")
    return lines


@check(
    "gpu.nvlink",
    "NVLink",
    remediation="On an NVSwitch system check Fabric Manager first (gpu.fabricmanager); then "
    "reset the GPU (`nvidia-smi -r -i <index>`) or reboot. Links that stay down need the "
    "baseboard serviced; on PCIe cards reseat the NVLink bridge. Rising replay, recovery or "
    "CRC counters (`nvidia-smi nvlink -e`) mean a marginal link: RMA if they keep rising.",
    requires=nvidia_gpus,
)
def nvlink(facts: Facts, policy: Policy) -> Outcome:
    stack = facts.get(nvidia)
    links = facts.get(nvlinks)
    notes = [f"link states via {links.source}", *links.notes]
    unread = _links_unread(links)
    known = [x for x in links.gpus if x.nvlink_states is not None]
    if not known:
        if unread:
            return errored(_unread_summary(unread), unread + notes)
        if all(x.vgpu_guest for x in stack.gpus):
            return skipped("no vGPU reports NVLink (only some profiles give a VM NVLink peers)")
        return skipped("no GPU reports NVLink (PCIe-only boards)", list(links.notes))
    nvswitch = bool(facts.get(pci_devices).nvswitches)
    # A PCIe card with every link down has no bridge fitted: not a fault.
    bridgeless = [
        x
        for x in known
        if all(up is False for up in x.nvlink_states or ()) and not (nvswitch or is_sxm(x))
    ]
    wired = [x for x in known if x not in bridgeless]
    spare = [f"{label(x)}: no NVLink bridge (all links inactive)" for x in bridgeless]
    if not wired and not unread:
        return skipped("no NVLink in use: every link is inactive (no NVLink bridge)", spare)
    down = [(x.index, line) for x in wired if (line := _links_down(x))]
    errors = [
        f"{label(x)}: "
        + ", ".join(f"link {link} {name} {n}" for link, name, n in x.nvlink_errors or () if n)
        for x in wired
        if any(n for _, _, n in x.nvlink_errors or ())
    ]
    if down:
        indices = [i for i, _ in down]
        summary = f"inactive NVLinks on GPU{'s' * (len(indices) > 1)} {numbers(indices)}"
        if nvswitch and not any(any(x.nvlink_states or ()) for x in wired):
            summary += ": every link of every GPU is down, is Fabric Manager running?"
            notes.append(
                "all links down on every GPU of an NVSwitch system usually means Fabric "
                "Manager is not running (see gpu.fabricmanager)"
            )
        erring = [x.index for x in wired if any(n for _, _, n in x.nvlink_errors or ())]
        return failed(
            summary,
            [line for _, line in down] + unread + errors + spare + notes,
            subjects=[f"gpu:{i}" for i in (*indices, *erring)],
        )
    if unread:
        return errored(_unread_summary(unread), unread + errors + spare + notes)
    if errors:
        return warned(
            f"NVLink error counters are not zero on {len(errors)} GPU(s)",
            errors + notes,
            subjects=[
                f"gpu:{x.index}" for x in wired if any(n for _, _, n in x.nvlink_errors or ())
            ],
        )
    counted = [x for x in wired if x.nvlink_errors is not None]
    if counted:
        notes.append(f"replay, recovery and CRC counters are zero on {len(counted)} GPU(s)")
    if len(counted) < len(wired):
        notes.append(f"error counters not reported for {len(wired) - len(counted)} GPU(s)")
    sizes = sorted({len(x.nvlink_states or ()) for x in wired})
    each = f"all {sizes[0]} links" if len(sizes) == 1 else "all links"
    return passed(f"{each} up on {len(wired)} GPU(s)", spare + notes)


def _unread_summary(unread: list[str]) -> str:
    return f"the state of NVLinks could not be read on {len(unread)} GPU(s)"
