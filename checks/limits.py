"""Resource limits that break distributed training: locked memory for RDMA, open files."""

from __future__ import annotations

from dldoctor.facts import Facts
from dldoctor.facts.limits import Limit, configured_limits, process_limits, systemd_limits
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
)
def memlock(facts: Facts, policy: Policy) -> Outcome:
    proc = facts.get(process_limits).memlock
    hcas = facts.get(interfaces).infiniband
    soft = proc[0] if proc else None
    if not hcas:
        return skipped(f"no RDMA device (memlock here: {shown(soft, 'bytes') if proc else '?'})")
    details = [
        f"this process: soft {shown(soft, 'bytes')}, hard {shown(proc[1], 'bytes')}"
        if proc
        else "this process: unknown"
    ]
    limited = [] if proc is None or soft is None else [f"this process ({shown(soft, 'bytes')})"]
    for entry in facts.get(configured_limits).entries:
        if entry.item == "memlock":
            details.append(
                f"{entry.file}:{entry.line}: {entry.domain} {entry.type} memlock {entry.raw}"
            )
    units = facts.get(systemd_limits)
    for unit in units.units:
        value = unit.limits.get("memlock", None)
        if "memlock" in unit.limits:
            details.append(f"{unit.unit}: LimitMEMLOCK {shown(value, 'bytes')}")
            if value is not None:
                limited.append(f"{unit.unit} ({shown(value, 'bytes')})")
    if limited:
        return warned(
            f"memlock is limited for {', '.join(limited)} on a host with RDMA ({', '.join(hcas)})",
            details + list(units.notes),
        )
    return passed(f"unlimited on a host with RDMA ({', '.join(hcas)})", details)


@check(
    "limits.nofile",
    "Open files",
    remediation="Raise the open-file limit (`* - nofile 1048576` in /etc/security/limits.d/, "
    "`LimitNOFILE=` for services): PyTorch DataLoader workers share tensors through file "
    "descriptors and fail with 'Too many open files'.",
)
def nofile(facts: Facts, policy: Policy) -> Outcome:
    proc = facts.get(process_limits).nofile
    if proc is None:
        return skipped("the open-file limit is unknown")
    soft, hard = proc
    want = policy.limits.min_nofile
    summary = f"soft {shown(soft)}, hard {shown(hard)}"
    if soft is not None and soft < want:
        return warned(f"{summary}: below {want}")
    return passed(summary)
