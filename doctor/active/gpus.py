"""The need of every GPU measuring check: no GPU that another process uses is loaded,
unless `--force` (policy `perf.force`). Who uses them is a fact of its own
(dldoctor.facts.gpuusers: the `gpu_users` probe), which `gpu.processes` reads too.
"""

from __future__ import annotations

from dldoctor.checks.needs import nvidia_gpus
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.gpuusers import gpu_users, named_users
from dldoctor.facts.nvidia import nvidia
from dldoctor.model import Outcome, skipped
from dldoctor.policy import Policy


def idle_gpus(facts: Facts, policy: Policy) -> list[g.Gpu] | Outcome:
    """Need of every GPU measuring check (it takes the policy: `@needs` hands it both):
    the GPUs the NVIDIA driver reports, to be measured, when no other process uses any of
    them; else a skip that names who uses which ("GPU 0 is used by pid 1234 (python, user
    alice): not measured; --force to measure anyway"). A measurement beside a job slows
    the job and measures the job's load, not the GPU; one GPU in use is enough to refuse,
    since measurements share the host's PCIe, NVLink and power with it. With
    `policy.perf.force` (`--force`) the GPUs are measured all the same. It asks
    `checks.needs.nvidia_gpus` first (its skip: no driver, no GPU)."""
    skip = nvidia_gpus(facts)
    if skip is not None:
        return skip
    gpus = list(facts.get(nvidia).gpus)
    if policy.perf.force:
        return gpus
    users = facts.get(gpu_users)
    if not users.recorded:
        return skipped("who uses the GPUs was not recorded: not measured")
    busy = [(gpu, users.of(gpu)) for gpu in gpus]
    busy = [(gpu, who) for gpu, who in busy if who]
    if not busy:
        return gpus
    said = [f"GPU {gpu.index} is used by {named_users(who)}" for gpu, who in busy]
    more = f" (and {len(said) - 1} more GPUs)" if len(said) > 1 else ""
    details = [f"GPU {gpu.index}: {u}: {u.command or u.name}" for gpu, who in busy for u in who]
    return skipped(f"{said[0]}{more}: not measured; --force to measure anyway", details)


# `@needs` hands it the policy as well as the facts.
idle_gpus.takes_policy = True  # type: ignore[attr-defined]
