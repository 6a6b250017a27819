"""NVIDIA driver checks: is it loaded, which version, does its module match its library;
Nouveau; the GPUs it shows against the bus and the policy; its modes (persistence, MIG);
each GPU's VBIOS.

When the driver cannot be asked, `gpu.driver.loaded` is the one check that says why;
the others skip with that reason instead of repeating the failure.
"""

from __future__ import annotations

import re

from dldoctor.checks.firmware import Part, judge
from dldoctor.checks.needs import (
    UNASKED,
    WHY,
    label,
    needs,
    nvidia_gpus,
    reporting_gpus,
)
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.kmod import modules, nouveau_blacklist
from dldoctor.facts.nvidia import library_version, no_nvidia_device, nvidia
from dldoctor.facts.pci import NVIDIA, pci_devices
from dldoctor.facts.system import container
from dldoctor.host.base import ProbeFailed
from dldoctor.model import Outcome, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check
from dldoctor.versions import at_least, matches

PASSTHROUGH = ("vfio-pci", "pci-stub")


# Datacenter parts: persistence mode and ECC are expected on these. GeForce and workstation
# cards are judged more leniently (no ECC on most, persistence optional on a desktop).
DATACENTER = re.compile(
    r"\b(Tesla|A100|A800|A30|A40|A10G?|A16|A2|H100|H800|H200|H20|GH200|B100|B200|GB200|B300|"
    r"L40S?|L4|L20|T4|V100|P100|P40|P4|K80)\b"
)


def is_datacenter(gpu: g.Gpu) -> bool:
    return bool(DATACENTER.search(gpu.name))


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
    if held:
        why = f"Nouveau drives {', '.join(held)}: the NVIDIA driver cannot bind"
        return failed(why, _blacklist_details(facts), subjects=[f"pci:{a}" for a in held])
    if "nouveau" in mods.loaded:
        if no_nvidia_device(facts):  # it drives nothing here, and the fix is not needed
            return skipped("no NVIDIA device on the PCI bus (the nouveau module is loaded)")
        return failed("the nouveau module is loaded", _blacklist_details(facts))
    if not bus.gpus(NVIDIA):
        return skipped("no NVIDIA GPU on the PCI bus")
    blacklist = facts.get(nouveau_blacklist)  # an unread command line: no verdict (error)
    details = [*blacklist.files, *blacklist.cmdline]
    if facts.get(container).in_container:
        return passed("not loaded (the blacklist is the host's, not this container's)")
    if not blacklist.blacklisted:
        return warned(
            "Nouveau is not loaded but not blacklisted either: it may load on a "
            "kernel or driver update"
        )
    return passed("not loaded, blacklisted", details)


def _blacklist_details(facts: Facts) -> list[str]:
    """What blacklists Nouveau, beside a failure that stands without it (Nouveau holds the
    GPU whatever the command line says)."""
    try:
        blacklist = facts.get(nouveau_blacklist)
    except ProbeFailed as exc:
        return [f"the blacklists are not known: {exc}"]
    return [*blacklist.files, *blacklist.cmdline]


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
@needs(
    reporting_gpus(
        "persistence_mode", nobody="persistence mode not reported", what="persistence mode"
    )
)
def persistence(facts: Facts, policy: Policy, known: list[g.Gpu]) -> Outcome:
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
@needs(reporting_gpus("mig_current", nobody="no GPU supports MIG", what="the GPU's MIG mode"))
def mig_pending(facts: Facts, policy: Policy, capable: list[g.Gpu]) -> Outcome:
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
    "gpu.compute_mode",
    "Compute mode",
    remediation="Set the default compute mode (`nvidia-smi -i <index> -c DEFAULT`); it does not "
    "survive a reboot, so look for whatever set it (a scheduler prolog, a drain script).",
    requires=nvidia_gpus,
)
@needs(reporting_gpus("compute_mode", nobody="no GPU reports its compute mode"))
def compute_mode(facts: Facts, policy: Policy, known: list[g.Gpu]) -> Outcome:
    # Prohibited: no process may open a CUDA context, so every job fails with "all
    # CUDA-capable devices are busy or unavailable". An exclusive mode is a choice (MPS, one
    # rank per GPU) where a second process on the GPU gets that error.
    prohibited = [label(x) for x in known if x.compute_mode == "Prohibited"]
    exclusive = [f"{label(x)}: {x.compute_mode}" for x in known if "Exclusive" in x.compute_mode]
    if prohibited:
        return failed(
            f"{len(prohibited)} GPU(s) in the Prohibited compute mode: CUDA cannot use them",
            prohibited + exclusive,
        )
    if exclusive:
        return passed(
            f"{len(exclusive)} of {len(known)} GPU(s) take one process at a time", exclusive
        )
    return passed(f"Default on {len(known)} GPU(s)")


@check(
    "gpu.vbios",
    "GPU VBIOS",
    remediation="Update the GPU firmware with the vendor's bundle for the board (HGX/DGX: "
    "NVIDIA's firmware update container or the OEM's; PCIe cards: the OEM's VBIOS tool), "
    "every GPU of the board to one version, then power-cycle the node.",
    requires=nvidia_gpus,
)
def vbios(facts: Facts, policy: Policy) -> Outcome:
    """Each GPU's VBIOS against [firmware] minimums (matched in its name), and GPUs of one
    model on other VBIOS versions than their siblings (mixed: a partial update)."""
    parts = [vbios_part(x) for x in facts.get(nvidia).gpus]
    return judge(parts, policy, what="GPU(s)", none="the NVIDIA driver reports no GPUs")


def vbios_part(gpu: g.Gpu) -> Part:
    return Part(f"GPU {gpu.index}", gpu.name or "?", gpu.vbios)
