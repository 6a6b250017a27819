"""Resource limits that break distributed training: locked memory for RDMA, open files."""

from __future__ import annotations

from dldoctor.facts import Facts
from dldoctor.facts.limits import (
    Limit,
    configured_limits,
    job_launchers,
    process_limits,
    systemd_limits,
)
from dldoctor.facts.net import interfaces
from dldoctor.model import Outcome, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check


def shown(value: Limit, unit: str = "") -> str:
    if value is None:
        return "unlimited"
    if unit == "bytes":
        return f"{value // 1024} KiB" if value < 2**30 else f"{value / 2**30:.0f} GiB"
    return str(value)


@check(
    "limits.memlock",
    "Locked memory (RDMA)",
    remediation="RDMA registers memory that must stay locked: set `* - memlock unlimited` in "
    "/etc/security/limits.d/, `LimitMEMLOCK=infinity` for slurmd/docker/containerd "
    "(systemd drop-in), and `--ulimit memlock=-1` for containers. NCCL otherwise fails with "
    "'ibv_reg_mr ... Cannot allocate memory'.",
    fixes=["fix.limits.memlock"],
)
def memlock(facts: Facts, policy: Policy) -> Outcome:
    limits = facts.get(process_limits)
    proc = limits.memlock
    hcas = facts.get(interfaces).infiniband
    soft = proc[0] if proc else None
    unknown = f"unknown ({'; '.join(limits.notes)})" if limits.notes else "unknown"
    if not hcas:
        here = f" (memlock here: {shown(soft, 'bytes')})" if proc else f"; memlock here {unknown}"
        return skipped(f"no RDMA device{here}")
    details = [
        f"this process: soft {shown(soft, 'bytes')}, hard {shown(proc[1], 'bytes')}"
        if proc
        else f"this process: {unknown}"
    ]
    entries = [e for e in facts.get(configured_limits).entries if e.item == "memlock"]
    for entry in entries:
        details.append(
            f"{entry.file}:{entry.line}: {entry.domain} {entry.type} memlock {entry.raw}"
        )
    # limits.conf's wildcard does not apply to root (limits.conf(5)): a doctor run by root
    # from ssh or a timer can be limited while every user's job is not.
    wildcard_unlimited = any(e.domain == "*" and e.value is None for e in entries)
    wildcard_limited = any(e.value is not None for e in entries)
    process_limited = proc is not None and soft is not None
    limited = []
    if process_limited and (wildcard_limited or not wildcard_unlimited):
        limited.append(f"this process ({shown(soft, 'bytes')})")
    elif process_limited:
        details.append(
            "this process is limited, but limits.d makes users' sessions unlimited "
            "(the wildcard does not apply to root)"
        )
    units = facts.get(systemd_limits)
    launchers = job_launchers(units)
    for unit in units.units:
        value = unit.limits.get("memlock", None)
        if "memlock" in unit.limits:
            details.append(f"{unit.unit}: LimitMEMLOCK {shown(value, 'bytes')}")
        if unit in launchers and "memlock" in unit.limits and value is not None:
            limited.append(f"{unit.unit} ({shown(value, 'bytes')})")
    if limited:
        return warned(
            f"memlock is limited for {', '.join(limited)} on a host with RDMA ({', '.join(hcas)})",
            details + list(units.notes),
        )
    if proc is None:
        # The configuration alone does not say what this session's jobs get.
        return skipped(f"memlock of this process {unknown}", details + list(units.notes))
    return passed(f"unlimited on a host with RDMA ({', '.join(hcas)})", details)


# limits.d reaches login sessions only, and its wildcard skips root (limits.conf(5));
# services and their children (slurmd's jobs, containers) inherit their unit's limit.
def nofile_where(kind: str) -> str:
    """Where each kind of process gets its limit, and what to change there."""
    return (
        f"where it comes from: logins, `* {kind} nofile 1048576` in /etc/security/limits.d/ "
        f"plus a `root {kind} nofile 1048576` line (the wildcard skips root); services and "
        "what they start (slurmd, containerd), `LimitNOFILE=1048576` in the unit; Slurm "
        "jobs, the submitting shell's limit (PropagateResourceLimits) or `ulimit -n "
        "$(ulimit -Hn)` in the job script"
    )


NOFILE_WHY = (
    "PyTorch DataLoader workers share tensors through file descriptors and fail with 'Too "
    "many open files'."
)


@check(
    "limits.nofile",
    "Open files",
    remediation=f"Raise the open-file limit {nofile_where('-')}. {NOFILE_WHY}",
    fixes=["fix.limits.nofile"],
)
def nofile(facts: Facts, policy: Policy) -> Outcome:
    limits = facts.get(process_limits)
    proc = limits.nofile
    if proc is None:
        return skipped("the open-file limit is unknown", limits.notes)
    soft, hard = proc
    want = policy.limits.min_nofile
    summary = f"soft {shown(soft)}, hard {shown(hard)}"
    if hard is not None and hard < want:
        return warned(f"{summary}: the hard limit is below {want}")
    # DataLoader workers run into the soft limit: neither PyTorch nor Python raises it, and
    # Slurm hands the submitting shell's limits on to the job. That a job *could* raise it to
    # the hard limit does not help the jobs that do not.
    if soft is not None and soft < want:
        return warned(
            f"{summary}: the soft limit is below {want}",
            ["jobs get the soft limit unless their script raises it (`ulimit -n $(ulimit -Hn)`)"],
            remediation=f"Raise the soft open-file limit {nofile_where('soft')}. {NOFILE_WHY}",
        )
    return passed(summary)
