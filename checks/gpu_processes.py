"""Processes holding the GPUs (gpu.processes): what a Slurm prolog, or a node about to take
a job, wants to know.

Two sources say who holds a GPU: the driver's own lists of the processes with a context
on it (NVML's running-process calls, nvidia-smi's <processes>), and the processes with its
/dev/nvidia<minor> open (the `gpu_users` probe, dldoctor.facts.gpuusers). Memory in use above
`gpu.orphan_memory_mib` that neither names an owner of is held by nobody: a context leaked
by a job killed mid-teardown, a zombie whose memory the driver has not freed. Inside a
container both sources see only its own PID namespace, so an empty list there is no proof:
said, never called orphaned. Monitoring daemons (WATCHERS) hold every GPU and load nothing:
they are not holders.
"""

from __future__ import annotations

import posixpath

from dldoctor.checks.needs import gpu_words, nvidia_gpus
from dldoctor.facts import FactFailed, Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.gpuusers import WATCHERS, GpuUser, GpuUsers, gpu_users
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.system import container
from dldoctor.host.base import ProbeFailed
from dldoctor.model import Outcome, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check

NAMED = 3  # holders a summary names; the details name all


def _watcher(name: str) -> bool:
    """nvidia-smi's process_name is a path with arguments; comm is cut at 15 characters."""
    words = name.split()
    return bool(words) and posixpath.basename(words[0])[:15] in WATCHERS


def _users(facts: Facts) -> tuple[GpuUsers, str]:
    """Who holds /dev/nvidia*, or an empty answer and why it is not known."""
    try:
        users = facts.get(gpu_users)
    except (FactFailed, ProbeFailed) as exc:  # a probe that failed is no verdict
        return GpuUsers(recorded=False), f"who holds /dev/nvidia* could not be read ({exc})"
    if not users.recorded:
        return users, "who holds /dev/nvidia* was not recorded"
    if users.unseen:
        return users, (f"the open files of {users.unseen} process(es) could not be read "
                       "(not root): the /dev/nvidia* holders may be incomplete")  # fmt: skip
    return users, ""


def _contained(facts: Facts) -> str:
    """Why the process lists may be partial here ("" on a host): a container's PID
    namespace hides the processes of the host and of other containers."""
    try:
        seen = facts.get(container)
    except (FactFailed, ProbeFailed):
        return ""
    if seen.in_container:
        return f"running inside a container ({seen.runtime or 'unknown runtime'})"
    if seen.in_container is None and seen.signs:
        return "perhaps inside a container (" + "; ".join(seen.signs[:2]) + ")"
    return ""


class _Holder:
    """One process on one GPU, as both sources describe it."""

    def __init__(self, pid: int, listed: g.GpuProcess | None, user: GpuUser | None):
        self.pid, self.listed, self.user = pid, listed, user

    def line(self, gpu: g.Gpu) -> str:
        name = (self.user.name if self.user else "") or (
            posixpath.basename(self.listed.name.split()[0]) if self.listed and self.listed.name
            else "?")  # fmt: skip
        who = f", user {self.user.user}" if self.user else ""
        used = self.listed.used_mib if self.listed else None
        size = f", {used} MiB" if used is not None else ""
        kind = f", {self.listed.kind}" if self.listed and self.listed.kind else ""
        command = (self.user.command if self.user else "") or (
            self.listed.name if self.listed else "")  # fmt: skip
        return f"GPU {gpu.index}: pid {self.pid} ({name}{who}{kind}{size}): {command[:200]}"

    def short(self) -> str:
        name = self.user.name if self.user else ""
        if not name and self.listed and self.listed.name:
            name = posixpath.basename(self.listed.name.split()[0])
        who = f", user {self.user.user}" if self.user else ""
        return f"pid {self.pid} ({name or '?'}{who})"


def holders(gpu: g.Gpu, users: GpuUsers) -> list[_Holder]:
    """The processes on `gpu` (watchers left out), by pid: the driver's list and the
    /dev/nvidia holders merged."""
    held = {u.pid: u for u in users.of(gpu)} if users.recorded else {}
    watching = {u.pid for u in users.watchers}
    listed = {p.pid: p for p in gpu.processes or ()
              if not _watcher(p.name) and p.pid not in watching}  # fmt: skip
    return [_Holder(pid, listed.get(pid), held.get(pid)) for pid in sorted({*held, *listed})]


@check(
    "gpu.processes",
    "Processes holding the GPUs",
    remediation="Memory held with no owner: look for a job's leftovers (`ps -eo "
    "pid,stat,user,cmd | awk '$2 ~ /[ZD]/'`: a zombie or a process stuck in the kernel), "
    "stop them, and if the memory stays held, drain the node and reset the GPU "
    "(`nvidia-smi -r -i <index>`) or reboot. Stray processes before a job: stop them, or "
    "let the prolog drain the node.",
    requires=nvidia_gpus,
)
def gpu_processes(facts: Facts, policy: Policy) -> Outcome:
    """Memory in use that no process owns (fail), and the processes on the GPUs (listed;
    a fail with `gpu.processes_allowed = false`). Judged from the driver's process lists
    and the /dev/nvidia* holders, whichever were read; inside a container an empty list
    is said to prove nothing."""
    gpus = list(facts.get(nvidia).gpus)
    users, unknown = _users(facts)
    notes = [unknown] if unknown else []
    if not users.recorded and all(x.processes is None and x.memory_used_mib is None for x in gpus):
        return skipped("the driver reports neither the memory in use nor the processes on "
                       "the GPUs, and who holds /dev/nvidia* was not recorded", notes)  # fmt: skip
    limit = policy.gpu.orphan_memory_mib
    on: dict[int, list[_Holder]] = {}
    orphaned: list[str] = []
    unjudged: list[str] = []
    for gpu in gpus:
        found = holders(gpu, users)
        if found:
            on[gpu.index] = found
            continue
        used = gpu.memory_used_mib
        if used is None or used <= limit:
            continue
        # Nobody owns it, if either source could have named an owner: the driver's list
        # was read, or every process's /dev/nvidia* files were.
        if gpu.processes is None and (not users.recorded or users.unseen):
            unjudged.append(f"GPU {gpu.index}: {used} MiB in use; no source could name its "
                            "owner")  # fmt: skip
        else:
            orphaned.append(f"GPU {gpu.index}: {used} MiB in use, above the policy's "
                            f"{limit} MiB, and no process holds it")  # fmt: skip
    lines = [h.line(x) for x in gpus for h in on.get(x.index, ())]
    everyone = {h.pid: h for hs in on.values() for h in hs}
    named = ", ".join(h.short() for h in list(everyone.values())[:NAMED])
    named += f" and {len(everyone) - NAMED} more" if len(everyone) > NAMED else ""
    where = gpu_words(list(on))
    # Asked only when it matters: a foreign capture (a bug report) lacks the signs, and
    # a check that asked for them would be skipped for want of them.
    caged = _contained(facts) if orphaned else ""
    if caged:
        notes.append(f"{caged}: the process lists show only its own PID namespace")
    if orphaned and caged:
        return warned(
            f"GPU memory in use with no process visible from here ({gpu_words_of(orphaned)}): "
            f"{caged}; look from the host",
            orphaned + lines + notes,
        )
    also = f"; {len(everyone)} process(es) on {where}: {named}" if everyone else ""
    if orphaned:
        return failed(
            f"memory held with no owner on {gpu_words_of(orphaned)}{also}",
            orphaned + lines + unjudged + notes,
        )
    if everyone and not policy.gpu.processes_allowed:
        return failed(
            f"{len(everyone)} process(es) on {where}, and the policy allows none: {named}",
            lines + unjudged + notes,
        )
    if unjudged:
        return skipped(f"memory in use on {gpu_words_of(unjudged)} whose owner no source "
                       "could name", unjudged + lines + notes)  # fmt: skip
    if everyone:
        return passed(f"{len(everyone)} process(es) on {where}: {named}", lines + notes)
    most = max((x.memory_used_mib for x in gpus if x.memory_used_mib is not None), default=None)
    shown = f"at most {most} MiB in use" if most is not None else "the memory in use unknown"
    unlisted = [x.index for x in gpus if x.processes is None] if not users.recorded else []
    if len(unlisted) == len(gpus):
        # Memory alone cannot say a GPU is free: a small job fits under the threshold.
        return skipped(f"the processes on the GPUs are not reported ({shown})", notes)
    if unlisted:
        notes.append(f"{gpu_words(unlisted)}: the driver did not list the processes")
    return passed(f"no process holds a GPU; {shown}", notes)


def gpu_words_of(lines: list[str]) -> str:
    """The GPUs ("GPU 0-1") of lines that begin "GPU <index>:"."""
    return gpu_words([int(line.split(":", 1)[0].removeprefix("GPU ")) for line in lines])
