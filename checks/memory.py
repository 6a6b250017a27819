"""Memory checks: RAM against GPU memory, /dev/shm, transparent huge pages."""

from __future__ import annotations

from dldoctor.checks.needs import nvidia_gpus
from dldoctor.facts import Facts
from dldoctor.facts import system as sysfacts
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.shm import dev_shm as devshm
from dldoctor.facts.shm import transparent_hugepages as thp
from dldoctor.model import Outcome, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check

GIB = 1024**3


@check(
    "memory.gpu_ratio",
    "RAM for the GPUs",
    remediation="Add RAM: data loading, pinned host buffers and checkpoints need at least "
    "1.5 x the GPUs' memory (the policy's [memory] gpu_ratio).",
    requires=nvidia_gpus,
)
def gpu_ratio(facts: Facts, policy: Policy) -> Outcome:
    gpu_mib = [x.memory_total_mib for x in facts.get(nvidia).gpus if x.memory_total_mib]
    ram = facts.get(sysfacts.memory).total_bytes
    if not gpu_mib or not ram:
        return skipped("GPU or system memory size unknown")
    gpu_bytes = sum(gpu_mib) * 2**20
    limit = facts.get(sysfacts.cgroup_memory_limit)
    where = ""
    if limit and limit < ram and facts.get(sysfacts.container).in_container:
        # A container sees the host's MemTotal; what it may use is its cgroup's limit.
        ram, where = limit, " (the container's memory limit)"
    ratio = policy.memory.gpu_ratio
    have = ram / gpu_bytes
    summary = (
        f"{ram / GIB:.0f} GiB RAM{where} for {gpu_bytes / GIB:.0f} GiB of GPU memory ({have:.2f}x)"
    )
    if have < ratio:
        # A sizing rule, not a fault: small cloud instances work below it, more slowly.
        return warned(f"{summary}: below {ratio:g}x, needs {ratio * gpu_bytes / GIB:.0f} GiB")
    return passed(f"{summary} ≥ {ratio:g}x")


@check(
    "memory.devshm",
    "/dev/shm",
    remediation="Give the container more shared memory (`docker run --shm-size=16g` or "
    "`--ipc=host`; Kubernetes: an emptyDir with medium Memory at /dev/shm), or on a host "
    "`mount -o remount,size=50% /dev/shm`. PyTorch DataLoader workers and NCCL's shared-memory "
    "transport fail with 'Bus error' when it is too small.",
    fixes=["fix.memory.devshm"],
)
def dev_shm_size(facts: Facts, policy: Policy) -> Outcome:
    shm = facts.get(devshm)
    if shm.size_bytes is None:
        return skipped("/dev/shm size unknown", shm.notes)
    where = "container" if facts.get(sysfacts.container).in_container else "host"
    floor = policy.memory.min_devshm_gib
    size = shm.size_bytes
    shown = f"{size / 2**20:.0f} MiB" if size < GIB else f"{size / GIB:.0f} GiB"
    summary = f"{shown} ({where})"
    if not shm.mounted:
        return failed(f"/dev/shm is not a mounted tmpfs here ({summary})", shm.notes)
    if shm.size_bytes < floor * GIB:
        docker = " (Docker's default is 64 MiB)" if shm.size_bytes <= 64 * 2**20 else ""
        return failed(f"{summary}: below {floor:g} GiB{docker}", shm.notes)
    return passed(summary, shm.notes)


@check("memory.thp", "Transparent huge pages")
def thp_mode(facts: Facts, policy: Policy) -> Outcome:
    mode = facts.get(thp)
    if not mode.enabled:
        return skipped("transparent huge pages not exposed", mode.notes)
    return passed(f"enabled: {mode.enabled}, defrag: {mode.defrag or '?'}", mode.notes)
