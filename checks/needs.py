"""What a check needs before it can judge, named once: the GPUs that report a reading, the
NUMA nodes, a readable kernel log, a GPU on the bus.

A need is a function of the facts that answers what the check needs, or the Outcome that
stands instead of the check's (a skip that says why). `@needs(a, b)` asks them in order when
the check is called, and hands their answers to the check after `(facts, policy)` (a need
marked `takes_policy` is called with the policy too: dldoctor.active.gpus.idle_gpus):

    @check("gpu.ecc.mode", "ECC mode", requires=nvidia_gpus)
    @needs(reporting_gpus("ecc_current", nobody="no GPU reports an ECC mode", what="..."))
    def ecc_mode(facts, policy, capable): ...

The check stays a function of `(facts, policy)` that a test calls directly, and the facts a
need reads are the finding's evidence, as the check's own. A requirement (`requires=`)
answers None or an Outcome and hands nothing: the runner asks it before the check.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from dldoctor.facts import Fact, Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.numa import NumaTopology, numa_topology
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.pci import PciDevice, pci_devices
from dldoctor.model import Outcome, skipped

Need = Callable[[Facts], Any]  # what the check needs, or the Outcome that stands instead

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
NO_NODES = "the kernel shows no NUMA nodes"


def needs(*wants: Need) -> Callable[[Callable[..., Outcome]], Callable[..., Outcome]]:
    """Call the check with what each of `wants` answers, unless one answers an Outcome."""

    def wrap(fn: Callable[..., Outcome]) -> Callable[..., Outcome]:
        @functools.wraps(fn)
        def judge(facts: Facts, policy) -> Outcome:
            given = []
            for want in wants:
                # A need that judges by the policy too (`takes_policy`, e.g. the active
                # tier's idle_gpus: --force) is handed it.
                policed = getattr(want, "takes_policy", False)
                answer = want(facts, policy) if policed else want(facts)
                if isinstance(answer, Outcome):
                    return answer
                given.append(answer)
            return fn(facts, policy, *given)

        return judge

    return wrap


def label(gpu: g.Gpu) -> str:
    """How a finding names a GPU: `GPU 0 NVIDIA H100 80GB HBM3 (00000000:18:00.0)`."""
    name = f" {gpu.name}" if gpu.name else ""
    where = f" ({gpu.pci_bus_id})" if gpu.pci_bus_id else ""
    return f"GPU {gpu.index}{name}{where}"


def gpu_words(indexes: list[int]) -> str:
    """[0] -> "GPU 0"; [2, 3] -> "GPU 2-3"; [0, 2, 3] -> "GPU 0, 2-3"."""
    runs: list[list[int]] = []
    for i in sorted(set(indexes)):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return "GPU " + ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


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


def host_side_gpus(what: str) -> Need:
    """Need, after `nvidia_gpus`: the GPUs that read `what` themselves (not a vGPU guest's)."""

    def host_side_gpus(facts: Facts) -> list[g.Gpu] | Outcome:
        gpus, skip = host_side(facts.get(nvidia), what)
        return skip or gpus

    return host_side_gpus


def reporting_gpus(*fields: str, nobody: str, what: str = "") -> Need:
    """Need, after `nvidia_gpus`: the GPUs that report any of `fields` (a field not reported
    is None or ""), or the skip `nobody`. `what`: the reading a vGPU guest cannot make (its
    GPUs are left out)."""

    def reporting_gpus(facts: Facts) -> list[g.Gpu] | Outcome:
        stack = facts.get(nvidia)
        candidates, skip = host_side(stack, what) if what else (list(stack.gpus), None)
        if skip:
            return skip
        gpus = [x for x in candidates if any(getattr(x, f) not in (None, "") for f in fields)]
        return gpus or skipped(nobody)

    return reporting_gpus


def gpus_on_bus(vendor: str, name: str) -> Need:
    """Need: the GPUs of `vendor` (a PCI vendor id) on the PCI bus, or a skip that says none."""

    def gpus_on_bus(facts: Facts) -> tuple[PciDevice, ...] | Outcome:
        return facts.get(pci_devices).gpus(vendor) or skipped(f"no {name} GPU on the PCI bus")

    return gpus_on_bus


def nvswitches_on_bus(facts: Facts) -> tuple[PciDevice, ...] | Outcome:
    """Need: the NVSwitches on the PCI bus."""
    return facts.get(pci_devices).nvswitches or skipped("no NVSwitch on the PCI bus")


def numa_nodes(facts: Facts) -> NumaTopology | Outcome:
    """Need: the NUMA topology, with its nodes and their CPUs. None read (a VM without NUMA,
    an unreadable sysfs) is not "one node", nor is a node whose CPU list was unread one
    without CPUs."""
    topo = facts.get(numa_topology)
    if not topo.nodes:
        return skipped(NO_NODES, topo.notes)
    if topo.unread:
        nodes = ", ".join(map(str, topo.unread))
        return skipped(f"the CPU list of NUMA node(s) {nodes} could not be read", topo.notes)
    return topo


def kernel_log_readable(log: Fact) -> Need:
    """Need: what `log` (a fact of the kernel log with `readable` and `notes`) found."""

    def kernel_log_readable(facts: Facts) -> Any:
        found = facts.get(log)
        return found if found.readable else skipped("the kernel log is not readable", found.notes)

    return kernel_log_readable
