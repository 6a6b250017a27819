"""NVIDIA GPU checks: driver, Nouveau, inventory, modes, memory health, precision.

When the driver cannot be asked, `gpu.driver.loaded` is the one check that says why;
the others skip with that reason instead of repeating the failure.
"""

from __future__ import annotations

import re

from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.amd import amd
from dldoctor.facts.kmod import modules, nouveau_blacklist
from dldoctor.facts.nvidia import library_version, no_nvidia_device, nvidia
from dldoctor.facts.nvlink import NvLinks, nvlinks
from dldoctor.facts.pci import AMD, NVIDIA, pci_devices
from dldoctor.facts.services import fabricmanager
from dldoctor.facts.system import container
from dldoctor.facts.xid import xid_events
from dldoctor.model import Outcome, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check
from dldoctor.versions import at_least, matches

PASSTHROUGH = ("vfio-pci", "pci-stub")
WHY = {
    g.NO_DRIVER: "no NVIDIA driver installed",
    g.DRIVER_NOT_LOADED: "the NVIDIA driver is not loaded",
    g.VERSION_MISMATCH: "the NVIDIA driver library and kernel module differ",
    g.NO_PERMISSION: "no permission to talk to the NVIDIA driver",
    g.GPU_LOST: "a GPU is lost",
    g.TIMED_OUT: "the NVIDIA driver did not answer",
    g.PROBE_FAILED: "the NVIDIA driver's answer could not be read",
    g.NO_SOURCE: "neither NVML (nvidia-ml-py) nor nvidia-smi is available",
}
# The doctor could not ask the driver: nothing may be concluded about it.
UNASKED = (g.TIMED_OUT, g.PROBE_FAILED)

# Datacenter parts: persistence mode and ECC are expected on these. GeForce and workstation
# cards are judged more leniently (no ECC on most, persistence optional on a desktop).
DATACENTER = re.compile(
    r"\b(Tesla|A100|A800|A30|A40|A10G?|A16|A2|H100|H800|H200|H20|GH200|B100|B200|GB200|B300|"
    r"L40S?|L4|L20|T4|V100|P100|P40|P4|K80)\b"
)


def is_datacenter(gpu: g.Gpu) -> bool:
    return bool(DATACENTER.search(gpu.name))


def label(gpu: g.Gpu) -> str:
    name = f" {gpu.name}" if gpu.name else ""
    where = f" ({gpu.pci_bus_id})" if gpu.pci_bus_id else ""
    return f"GPU {gpu.index}{name}{where}"


def nvidia_gpus(facts: Facts) -> Outcome | None:
    """Requirement: the NVIDIA driver answers and reports GPUs; else a skip that says why."""
    stack = facts.get(nvidia)
    if not stack.usable:
        return skipped(WHY.get(stack.error, f"no GPU facts ({stack.error_message})"))
    if not stack.gpus:
        return skipped("the NVIDIA driver reports no GPUs")
    return None


def host_side(stack: g.NvidiaStack, what: str) -> tuple[list[g.Gpu], Outcome | None]:
    """The GPUs that can read `what` themselves. A vGPU guest's readings of the physical GPU
    (temperature 0, ECC, clocks, power) are not real: only the hypervisor host has them."""
    gpus = [x for x in stack.gpus if not x.vgpu_guest]
    if gpus:
        return gpus, None
    return [], skipped(f"a vGPU guest cannot read {what}; check it on the hypervisor host")


def reporting(
    facts: Facts, *fields: str, nobody: str, what: str = ""
) -> tuple[list[g.Gpu], Outcome | None]:
    """For a check that requires `nvidia_gpus`: the GPUs that report any of `fields`, or the
    skip that says why there are none. `what`: the reading a vGPU guest cannot make (its
    GPUs are left out)."""
    stack = facts.get(nvidia)
    candidates, skip = host_side(stack, what) if what else (list(stack.gpus), None)
    if skip:
        return [], skip
    gpus = [x for x in candidates if any(getattr(x, f) is not None for f in fields)]
    return gpus, None if gpus else skipped(nobody)


@check(
    "gpu.driver.loaded",
    "NVIDIA driver",
    remediation="Install the NVIDIA datacenter driver for this kernel (Ubuntu: "
    "`ubuntu-drivers install --gpgpu` or the CUDA repository's `nvidia-driver-<branch>`), "
    "then reboot; check `dkms status` and Secure Boot if the module does not load.",
)
def driver_loaded(facts: Facts, policy: Policy) -> Outcome:
    stack = facts.get(nvidia)
    if stack.usable:
        count = len(stack.gpus)
        cuda = f", CUDA {stack.cuda_driver_version}" if stack.cuda_driver_version else ""
        summary = (
            f"driver {stack.driver_version or '?'}{cuda}, {count} GPU{'s' * (count != 1)} "
            f"(via {stack.source})"
        )
        guests = [x for x in stack.gpus if x.vgpu_guest]
        if not guests:
            return passed(summary, stack.notes)
        # The profile is the name a guest sees ("NVIDIA A100-40C"); the host's driver branch
        # is not visible from inside the VM.
        profiles = ", ".join(sorted({x.name or "?" for x in guests}))
        licences = [f"{label(x)}: vGPU licence {x.vgpu_license}" for x in guests if x.vgpu_license]
        details = [*licences, "the hypervisor host's driver branch is not visible here"]
        summary += f"; vGPU guest (profile {profiles})"
        if any(x.vgpu_license.split(": ")[-1].lower().startswith("unlicensed") for x in guests):
            return warned(
                summary + ", unlicensed",
                [*details, *stack.notes],
                remediation="An unlicensed vGPU runs at reduced performance and may refuse "
                "CUDA work: point the guest at the license server (client configuration "
                "token under /etc/nvidia/ClientConfigToken, `nvidia-gridd` running).",
            )
        return passed(summary, [*details, *stack.notes])
    bus = facts.get(pci_devices)  # only now: a capture may hold the driver's answer, no bus
    on_bus = bus.gpus(NVIDIA)
    why = WHY.get(stack.error, "the NVIDIA driver could not be asked")
    details = [stack.error_message, *stack.notes] if stack.error_message else list(stack.notes)
    if stack.error == g.VERSION_MISMATCH:
        return failed(
            f"{why}: a driver update was installed without a reboot",
            details,
            remediation="Reboot, or stop every GPU process and reload the modules "
            "(`rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia`). "
            "Hold the driver packages (`apt-mark hold`) so unattended upgrades cannot do it again.",
        )
    if stack.error in (g.NO_DRIVER, g.NO_SOURCE) and not on_bus:
        return skipped(f"{why}, and no NVIDIA GPU on the PCI bus", details)
    if stack.error == g.NO_PERMISSION:
        return warned(
            why,
            details,
            remediation="Run as root, or give the user access to /dev/nvidia* (the `video` "
            "group on some distributions; `--gpus` in containers).",
        )
    gpus = f" ({len(on_bus)} NVIDIA GPU(s) on the PCI bus)" if on_bus else ""
    if stack.error in (g.NO_DRIVER, g.NO_SOURCE) and facts.get(container).in_container:
        # A container sees the host's PCI bus but only the driver files it was given.
        return warned(
            f"{why} in this container{gpus}",
            details,
            remediation="Start the container with the NVIDIA Container Toolkit "
            "(`docker run --gpus all`, or the nvidia runtime / device plugin in Kubernetes); "
            "a container meant for the CPU only can ignore this.",
        )
    if stack.error in UNASKED:
        # The doctor could not look: never a verdict on the driver. Only a bus read in full
        # rules the driver out.
        if not on_bus and bus.read_in_full:
            return skipped(f"no NVIDIA GPU on the PCI bus ({why})", details)
        if stack.error == g.TIMED_OUT and stack.source == "nvml":
            details.append(
                "NVML's first call initialises every GPU when persistence mode is off, about a "
                "second each: keep the driver loaded (`nvidia-persistenced`, or `nvidia-smi -pm "
                "1`), or raise the limit with --timeout or [timeouts] nvml_s (default 10 s)"
            )
        if stack.error == g.TIMED_OUT:
            details.append(
                "if it does not answer with a longer --timeout either, a GPU may have fallen off "
                "the bus or hung: look for Xid 79 / GPU lost in `dmesg`, drain the node, reboot"
            )
        return errored(f"{why}{gpus}", details)
    return failed(f"{why}{gpus}", details)


@check(
    "gpu.driver.version",
    "NVIDIA driver version",
    remediation="Upgrade to a current datacenter branch (R535 LTS or newer; R580 for CUDA 13).",
    requires=nvidia_gpus,
)
def driver_version(facts: Facts, policy: Policy) -> Outcome:
    stack = facts.get(nvidia)
    minimum = policy.gpu.min_driver
    pin = policy.gpu.expected_driver
    if not stack.driver_version:
        return skipped(f"the driver did not report its version (via {stack.source})")
    if pin and matches(stack.driver_version, pin) is False:
        return failed(
            f"{stack.driver_version}, the policy pins {pin}",
            remediation=f"Install the fleet's driver {pin} ([gpu] expected_driver), or "
            "correct the policy if the fleet moved to this one.",
        )
    ok = at_least(stack.driver_version, minimum)
    if ok is None:
        return warned(f"cannot read the driver version {stack.driver_version!r}")
    if ok:
        pinned = f"; the policy pins {pin}" if pin else ""
        return passed(f"{stack.driver_version} (≥ {minimum}{pinned})")
    return warned(f"{stack.driver_version} is older than the policy's {minimum}")


@check(
    "gpu.driver.module",
    "Driver module and library",
    remediation="Reboot (or reload the nvidia modules) so the kernel module matches the "
    "installed user-space driver.",
)
def driver_module(facts: Facts, policy: Policy) -> Outcome:
    stack = facts.get(nvidia)
    mods = facts.get(modules)
    if stack.error == g.VERSION_MISMATCH:
        loaded = f" (loaded module {mods.nvidia_version})" if mods.nvidia_version else ""
        return failed(f"kernel module and user-space library differ{loaded}", [stack.error_message])
    if not stack.usable:
        return skipped(WHY.get(stack.error, "no GPU facts"))
    if not mods.readable:
        return skipped("the list of loaded modules is not available", mods.notes)
    if not mods.nvidia_version:
        return skipped("the loaded nvidia module does not say its version", mods.notes)
    library = facts.get(library_version)
    if not library:
        return skipped(
            "the user-space library's version is not known (no libnvidia-ml.so.<version>)"
        )
    if mods.nvidia_version != library:
        return failed(f"kernel module {mods.nvidia_version}, user-space library {library}")
    return passed(f"kernel module and user-space library are both {library}")


@check(
    "gpu.nouveau",
    "Nouveau",
    remediation="Blacklist Nouveau: write `blacklist nouveau` and `options nouveau modeset=0` "
    "to /etc/modprobe.d/blacklist-nouveau.conf, rebuild the initramfs "
    "(`update-initramfs -u` or `dracut -f`) and reboot.",
    fixes=["fix.gpu.blacklist_nouveau"],
)
def nouveau(facts: Facts, policy: Policy) -> Outcome:
    mods = facts.get(modules)
    bus = facts.get(pci_devices)
    held = [d.address for d in bus.devices if d.driver == "nouveau"]
    blacklist = facts.get(nouveau_blacklist)
    details = [*blacklist.files, *blacklist.cmdline]
    if held:
        return failed(f"Nouveau drives {', '.join(held)}: the NVIDIA driver cannot bind", details)
    if "nouveau" in mods.loaded:
        if no_nvidia_device(facts):  # it drives nothing here, and the fix is not needed
            return skipped("no NVIDIA device on the PCI bus (the nouveau module is loaded)")
        return failed("the nouveau module is loaded", details)
    if not bus.gpus(NVIDIA):
        return skipped("no NVIDIA GPU on the PCI bus")
    if facts.get(container).in_container:
        return passed("not loaded (the blacklist is the host's, not this container's)")
    if not blacklist.blacklisted:
        return warned(
            "Nouveau is not loaded but not blacklisted either: it may load on a "
            "kernel or driver update"
        )
    return passed("not loaded, blacklisted", details)


@check(
    "gpu.count",
    "GPU count",
    remediation="A GPU on the bus that the driver does not show: check `dmesg` for NVRM "
    "errors, reseat or RMA it. Fewer GPUs on the bus than expected: check the BIOS, risers "
    "and power.",
)
def gpu_count(facts: Facts, policy: Policy) -> Outcome:
    # GPUs handed to VMs (vfio-pci) are not the host driver's to see.
    bus = [d for d in facts.get(pci_devices).gpus(NVIDIA) if d.driver not in PASSTHROUGH]
    stack = facts.get(nvidia)
    expected = policy.gpu.expected_count
    seen = len(stack.gpus) if stack.usable else None
    details = [f"PCI bus: {len(bus)} NVIDIA GPU(s)"]
    if seen is not None:
        details.append(f"driver ({stack.source}): {seen}")
    in_container = facts.get(container).in_container
    if in_container and seen is not None:
        # sysfs shows the host's bus; the container was given some of its GPUs.
        details.append("in a container: the driver shows the GPUs given to it")
        bus = [d for d in bus if d.address in {x.pci_bus_id for x in stack.gpus}]
    if seen is not None and seen < len(bus):
        missing = sorted({d.address for d in bus} - {x.pci_bus_id for x in stack.gpus})
        return failed(
            f"the driver sees {seen} of the {len(bus)} NVIDIA GPUs on the PCI bus",
            [*details, *(f"not seen by the driver: {a}" for a in missing)],
        )
    lost = [label(x) + ": " + x.notes[0] for x in stack.gpus if not x.name and x.notes]
    if lost:
        return failed(
            f"the driver cannot open {len(lost)} of its {seen} GPU(s)",
            [*details, *lost],
            remediation="A lost GPU (often after Xid 79) needs the node drained and "
            "rebooted; check power and seating, RMA if it recurs.",
        )
    if stack.error in UNASKED:
        return errored(f"{WHY[stack.error]}; {len(bus)} NVIDIA GPU(s) on the PCI bus", details)
    count = seen if seen is not None else len(bus)
    model = policy.gpu.expected_model
    other = [label(x) for x in stack.gpus if model and model.lower() not in x.name.lower()]
    if model and seen is None:
        details.append(f"the GPU model was not compared: {WHY.get(stack.error, stack.error)}")
    if expected and count != expected:
        return failed(f"{count} GPU(s), the policy expects {expected}", [*details, *other])
    if other:
        return failed(
            f"{len(other)} of {count} GPU(s) are not the policy's {model!r}",
            [*(f"{x}: not {model}" for x in other), *details],
            remediation="A different GPU than the fleet's ([gpu] expected_model): a board "
            "swapped in a repair, or a node in the wrong pool.",
        )
    if not bus and seen is None:
        return skipped("no NVIDIA GPU on the PCI bus")
    summary = f"{count} GPU(s)" + (" as expected" if expected else "")
    return passed(summary + (f", all {model}" if model and seen else ""), details)


@check(
    "gpu.persistence",
    "Persistence mode",
    remediation="Enable the persistence daemon: `systemctl enable --now nvidia-persistenced` "
    "(or `nvidia-smi -pm 1`, which does not survive a reboot).",
    fixes=["fix.gpu.persistence"],
    requires=nvidia_gpus,
)
def persistence(facts: Facts, policy: Policy) -> Outcome:
    known, skip = reporting(
        facts, "persistence_mode", nobody="persistence mode not reported", what="persistence mode"
    )
    if skip:
        return skip
    off = [label(x) for x in known if is_datacenter(x) and x.persistence_mode is False]
    if off:
        return warned(f"off on {len(off)} datacenter GPU(s)", off)
    on = sum(1 for x in known if x.persistence_mode)
    if on < len(known):
        return passed(f"on for {on} of {len(known)} GPU(s); optional outside datacenter GPUs")
    return passed(f"on for all {on} GPU(s)")


@check(
    "gpu.mig.pending",
    "MIG mode",
    remediation="A MIG mode change waits for a GPU reset: stop its processes and run "
    "`nvidia-smi -r -i <index>`, or reboot.",
    requires=nvidia_gpus,
)
def mig_pending(facts: Facts, policy: Policy) -> Outcome:
    capable, skip = reporting(
        facts, "mig_current", nobody="no GPU supports MIG", what="the GPU's MIG mode"
    )
    if skip:
        return skip
    pending = [
        f"{label(x)}: {'on' if x.mig_current else 'off'} → {'on' if x.mig_pending else 'off'}"
        for x in capable
        if x.mig_pending is not None and x.mig_pending != x.mig_current
    ]
    if pending:
        return warned(f"{len(pending)} GPU(s) wait for a reset to change MIG mode", pending)
    on = sum(1 for x in capable if x.mig_current)
    return passed(f"MIG on for {on} of {len(capable)} capable GPU(s), no change pending")


@check(
    "gpu.fabricmanager",
    "Fabric Manager",
    remediation="NVSwitch systems need Fabric Manager at exactly the driver's version: install "
    "`nvidia-fabricmanager-<branch>` and `systemctl enable --now nvidia-fabricmanager`.",
)
def fabric_manager(facts: Facts, policy: Policy) -> Outcome:
    switches = facts.get(pci_devices).nvswitches
    if not switches:
        return skipped("no NVSwitch on the PCI bus")
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
        return failed(summary, [line for _, line in down] + unread + errors + spare + notes)
    if unread:
        return errored(_unread_summary(unread), unread + errors + spare + notes)
    if errors:
        return warned(f"NVLink error counters are not zero on {len(errors)} GPU(s)", errors + notes)
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


@check(
    "gpu.ecc.mode",
    "ECC mode",
    remediation="Enable ECC (`nvidia-smi -e 1`, then reboot); a pending change also waits for "
    "a reboot.",
    requires=nvidia_gpus,
)
def ecc_mode(facts: Facts, policy: Policy) -> Outcome:
    capable, skip = reporting(
        facts,
        "ecc_current",
        nobody="no GPU reports an ECC mode (consumer cards have no ECC)",
        what="the ECC mode",
    )
    if skip:
        return skip
    pending = [
        label(x) for x in capable if x.ecc_pending is not None and x.ecc_pending != x.ecc_current
    ]
    off = [label(x) for x in capable if not x.ecc_current and is_datacenter(x)]
    if pending:
        return warned(f"an ECC mode change waits for a reboot on {len(pending)} GPU(s)", pending)
    if off:
        return warned(f"ECC is off on {len(off)} datacenter GPU(s)", off)
    on = sum(1 for x in capable if x.ecc_current)
    return passed(f"ECC on for {on} of {len(capable)} capable GPU(s)")


@check(
    "gpu.ecc.errors",
    "ECC errors",
    remediation="Uncorrectable ECC errors since boot: drain the node, reset the GPU "
    "(`nvidia-smi -r`) or reboot, and RMA the GPU if they come back.",
    requires=nvidia_gpus,
)
def ecc_errors(facts: Facts, policy: Policy) -> Outcome:
    counted, skip = reporting(
        facts,
        "ecc_volatile_uncorrected",
        "ecc_aggregate_uncorrected",
        nobody="no ECC error counters (ECC off or not supported)",
        what="the ECC error counters",
    )
    if skip:
        return skip
    volatile = [
        f"{label(x)}: {x.ecc_volatile_uncorrected} uncorrectable since boot"
        for x in counted
        if (x.ecc_volatile_uncorrected or 0) > 0
    ]
    if volatile:
        return failed(f"uncorrectable ECC errors on {len(volatile)} GPU(s)", volatile)
    lifetime = [
        f"{label(x)}: {x.ecc_aggregate_uncorrected} uncorrectable in its lifetime"
        for x in counted
        if (x.ecc_aggregate_uncorrected or 0) > 0
    ]
    if lifetime:
        return warned(
            f"past uncorrectable ECC errors on {len(lifetime)} GPU(s)",
            lifetime,
            remediation="Past errors only: watch this GPU; RMA if they recur.",
        )
    return passed(f"no uncorrectable ECC errors on {len(counted)} GPU(s)")


@check(
    "gpu.memory.retired_pages",
    "Retired pages",
    remediation="A page retirement is pending until the GPU is reset: drain the node and "
    "reboot. 60 or more retired pages (or any recurring double-bit errors) call for an RMA.",
    requires=nvidia_gpus,
)
def retired_pages(facts: Facts, policy: Policy) -> Outcome:
    # Page retirement is the pre-Ampere mechanism; Ampere and newer remap rows instead.
    gpus, skip = reporting(
        facts,
        "retired_pages_pending",
        "retired_pages_dbe",
        nobody="no GPU reports page retirement (Ampere and newer remap rows instead)",
        what="retired pages",
    )
    if skip:
        return skip
    pending = [label(x) for x in gpus if x.retired_pages_pending]
    if pending:
        return failed(f"page retirement pending a reset on {len(pending)} GPU(s)", pending)
    many = [
        f"{label(x)}: {(x.retired_pages_sbe or 0) + (x.retired_pages_dbe or 0)} pages"
        for x in gpus
        if (x.retired_pages_sbe or 0) + (x.retired_pages_dbe or 0) >= 60
    ]
    if many:
        return failed(f"{len(many)} GPU(s) at the RMA threshold of retired pages", many)
    some = [
        f"{label(x)}: {x.retired_pages_sbe or 0} single-bit, {x.retired_pages_dbe or 0} double-bit"
        for x in gpus
        if (x.retired_pages_sbe or 0) + (x.retired_pages_dbe or 0)
    ]
    if some:
        return warned(f"retired pages on {len(some)} GPU(s)", some)
    return passed(f"no retired pages on {len(gpus)} GPU(s)")


@check(
    "gpu.memory.remapped_rows",
    "Row remapping",
    remediation="Pending remaps take effect at the next GPU reset: drain, then "
    "`nvidia-smi -r -i <index>` or reboot. A remapping failure means the GPU is out of spare "
    "rows: RMA it.",
    requires=nvidia_gpus,
)
def remapped_rows(facts: Facts, policy: Policy) -> Outcome:
    gpus, skip = reporting(
        facts,
        "remap_pending",
        nobody="no GPU reports row remapping (it exists from Ampere on)",
        what="row remapping",
    )
    if skip:
        return skip
    failure = [label(x) for x in gpus if x.remap_failure]
    if failure:
        return failed(f"row remapping failed on {len(failure)} GPU(s): RMA", failure)
    pending = [label(x) for x in gpus if x.remap_pending]
    if pending:
        return failed(f"row remapping pending a GPU reset on {len(pending)} GPU(s)", pending)
    remapped = [
        f"{label(x)}: {x.remap_uncorrected} uncorrectable, {x.remap_corrected} correctable"
        for x in gpus
        if x.remap_uncorrected or x.remap_corrected
    ]
    if remapped:
        return passed(f"remapped rows on {len(remapped)} GPU(s), none pending", remapped)
    return passed(f"no remapped rows on {len(gpus)} GPU(s)")


# Compute capability -> the precisions its tensor cores run natively.
PRECISIONS = (("7.0", "FP16"), ("8.0", "BF16"), ("8.0", "TF32"), ("8.9", "FP8"))
# When only the architecture is known (nvidia-smi's XML): its lowest compute capability.
ARCH_CC = {
    "Pascal": "6.0",
    "Volta": "7.0",
    "Turing": "7.5",
    "Ampere": "8.0",
    "Ada": "8.9",
    "Ada Lovelace": "8.9",
    "Hopper": "9.0",
    "Blackwell": "10.0",
}


def precisions(cc: str) -> list[str]:
    return [name for minimum, name in PRECISIONS if at_least(cc, minimum)]


@check("gpu.precision", "Mixed precision", requires=nvidia_gpus)
def mixed_precision(facts: Facts, policy: Policy) -> Outcome:
    stack = facts.get(nvidia)
    lines, known = [], set()
    for x in stack.gpus:
        cc = x.compute_capability or ARCH_CC.get(x.architecture, "")
        if not cc:
            lines.append(f"{label(x)}: compute capability unknown")
            continue
        known.add(cc)
        shown = f"sm_{cc.replace('.', '')}" if x.compute_capability else f"{x.architecture}"
        fast = precisions(cc)
        lines.append(f"{label(x)}: {shown}, tensor cores: {', '.join(fast) or 'none (FP32 only)'}")
    if not known:
        return skipped("compute capability not reported", lines)
    common = precisions(min(known, key=lambda cc: [int(p) for p in cc.split(".")]))
    if "BF16" in common:
        summary = f"AMP with BF16 runs natively ({', '.join(common)})"
    elif "FP16" in common:
        summary = (
            "AMP with FP16 runs natively; BF16 is emulated (slow) before compute capability 8.0"
        )
    else:
        summary = "no tensor cores: mixed precision brings little"
    return passed(summary, lines)


# Hardware Xids whose recorded action is "watch", not "drain": 63 records a row remap
# (gpu.memory.remapped_rows judges it), 92 is a high corrected-error rate, 94 a contained
# ECC error (only the application died), 121 a C2C link error NVIDIA says to ignore first.
XID_WATCH = frozenset({63, 92, 94, 121})


@check(
    "gpu.xid",
    "Xid errors",
    remediation="Hardware Xids (48, 63/64, 74, 79, 92, 94/95, 119/120, ...): drain the node; "
    "reset the GPU or reboot; check power, cooling and seating; RMA if they recur. "
    "Application Xids (13, 31, 43, ...) point at the program that ran.",
)
def xid_errors(facts: Facts, policy: Policy) -> Outcome:
    log = facts.get(xid_events)
    # Events are a verdict whatever the driver says now: a bug report cut short by an
    # nvidia-smi that hung on a lost GPU has its dmesg, not its nvidia-smi section.
    if not log.events and not facts.get(pci_devices).gpus(NVIDIA):
        stack = facts.get(nvidia)
        if stack.error in (g.NO_DRIVER, g.NO_SOURCE):
            # NVRM lines come from the NVIDIA kernel module: without it there are none.
            return skipped(WHY[stack.error])
    if not log.readable:
        return skipped("the kernel log is not readable", log.notes)
    window_s = policy.gpu.xid_window_hours * 3600
    recent = [e for e in log.events if e.age_s is None or e.age_s <= window_s]
    older = len(log.events) - len(recent)
    hours = f"{policy.gpu.xid_window_hours:g} h"
    old_note = [f"{older} older Xid event(s) outside the {hours} window"] if older else []

    def line(e) -> str:
        when = "time unknown" if e.age_s is None else f"{e.age_s / 3600:.1f} h ago"
        what = f"Xid {e.xid}" if e.xid is not None else "fallen off the bus"
        return f"{e.pci_bus_id}: {what} ({e.description}), {when}"

    hardware = [
        e for e in recent if (e.kind == "hardware" and e.xid not in XID_WATCH) or e.xid is None
    ]
    if hardware:
        codes = sorted({str(e.xid) if e.xid is not None else "bus" for e in hardware})
        return failed(
            f"{len(hardware)} hardware Xid event(s) in the last {hours}: {', '.join(codes)}",
            [line(e) for e in recent] + old_note + list(log.notes),
        )
    if recent:
        return warned(
            f"{len(recent)} Xid event(s) in the last {hours} that do not call for a drain",
            [line(e) for e in recent] + old_note + list(log.notes),
            remediation="Usually the program's fault (illegal memory access, timeout): check "
            "the job that ran then; repeated driver Xids warrant a driver update.",
        )
    return passed(
        f"no Xid events in the last {hours} ({log.source.split()[0]})", old_note + list(log.notes)
    )


@check(
    "gpu.amd.inventory",
    "AMD GPUs",
    remediation="Install the ROCm stack with its amdgpu-dkms driver (amdgpu-install "
    "--usecase=rocm), then reboot.",
)
def amd_inventory(facts: Facts, policy: Policy) -> Outcome:
    on_bus = facts.get(pci_devices).gpus(AMD)
    if not on_bus:
        return skipped("no AMD GPU on the PCI bus")
    stack = facts.get(amd)
    unbound = [f"{d.address}: driver {d.driver or 'none'}" for d in on_bus if d.driver != "amdgpu"]
    rocm = f", ROCm {stack.rocm_version}" if stack.rocm_version else ", ROCm not found"
    details = [f"{x.pci_bus_id or x.card}: {x.series}" for x in stack.gpus] + list(stack.notes)
    if unbound:
        summary = f"{len(unbound)} of {len(on_bus)} AMD GPU(s) not bound to amdgpu{rocm}"
        return failed(summary, unbound + details)
    series = sorted({x.series for x in stack.gpus if x.series})
    names = f" ({', '.join(series)})" if series else ""
    driver = f", amdgpu {stack.driver_version}" if stack.driver_version else ""
    if not stack.rocm_version:
        return warned(
            f"{len(on_bus)} AMD GPU(s){names}{driver}, but no ROCm installation found", details
        )
    return passed(f"{len(on_bus)} AMD GPU(s){names}{driver}{rocm}", details)
