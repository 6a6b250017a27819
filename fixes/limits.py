"""Fixes for the resource-limit checks: locked memory and open files raised for login
sessions (a limits.d file, read by pam_limits) and for the services that start jobs (a
systemd drop-in per unit). The same files on Debian, Ubuntu and the RHEL family."""

from __future__ import annotations

from dataclasses import replace

from dldoctor.facts import FactFailed, Facts
from dldoctor.facts.limits import (
    LIMITS_D,
    Limit,
    configured_limits,
    job_launchers,
    systemd_limits,
)
from dldoctor.facts.reading import to_int
from dldoctor.fixes.plan import FixError, Plan, RunCommand, WriteFile
from dldoctor.host.base import ProbeFailed
from dldoctor.policy import Policy

# fs.nr_open's default, the highest open-file limit the kernel takes: pam_limits fails the
# login and systemd the service start when asked for more. The fix's target unless the
# policy's limits.min_nofile is higher.
NOFILE = 1048576
NR_OPEN = "/proc/sys/fs/nr_open"


def limits_file(item: str) -> str:
    return f"{LIMITS_D}/90-dldoctor-{item}.conf"


def drop_in(unit: str, item: str) -> str:
    return f"/etc/systemd/system/{unit}.d/90-dldoctor-{item}.conf"


def below(value: Limit, wanted: Limit) -> bool:
    """A limit lower than the one wanted (None: unlimited)."""
    return value is not None and (wanted is None or value < wanted)


def memlock(facts: Facts, policy: Policy) -> Plan:
    """Locked memory unlimited, which RDMA needs to register (pin) its buffers."""
    return raise_limit(facts, "memlock", None, "locked memory unlimited, for RDMA")


def nofile(facts: Facts, policy: Policy) -> Plan:
    """1048576 open files, for DataLoader workers that share tensors through descriptors;
    more where the policy's floor asks more (the check judges by it)."""
    answer = facts.host.read(NR_OPEN)
    most = to_int(answer.text.strip()) if answer.ok else None
    floor = policy.limits.min_nofile
    wanted = min(max(NOFILE, floor), most) if most else max(NOFILE, floor)
    notes: tuple[str, ...] = ()
    if most and most < floor:
        notes = (
            f"the policy asks for {floor} open files, more than fs.nr_open ({most}) lets a "
            f"limit be: raise it first (`sysctl -w fs.nr_open={floor}` and a sysctl.d line)",
        )
    plan = raise_limit(facts, "nofile", wanted, f"{wanted} open files, for DataLoader workers")
    return replace(plan, notes=(*notes, *plan.notes))


def raise_limit(facts: Facts, item: str, wanted: Limit, title: str) -> Plan:
    """`item` raised to `wanted` for logins (limits.d; `root` named, since the wildcard
    skips it) and, by a drop-in and a daemon-reload, for each unit jobs inherit from that
    has less. Nothing is restarted: the change reaches a service at its restart, a login
    at its next session."""
    fix_id = f"fix.limits.{item}"
    header = f"# written by dldoctor ({fix_id})\n"
    try:
        systemd, configured = facts.get(systemd_limits), facts.get(configured_limits)
    except (FactFailed, ProbeFailed) as exc:
        raise FixError(f"{fix_id}: cannot plan without the current limits: {exc}") from None
    value = "unlimited" if wanted is None else str(wanted)
    lines = "".join(
        f"{who} {kind} {item} {value}\n" for who in ("*", "root") for kind in ("soft", "hard")
    )
    steps: list = [WriteFile(limits_file(item), (header + lines).encode())]
    launchers = job_launchers(systemd)
    units = [u.unit for u in launchers if below(u.limits.get(item), wanted)]
    setting = f"Limit{item.upper()}={'infinity' if wanted is None else wanted}\n"
    steps += [WriteFile(drop_in(u, item), f"{header}[Service]\n{setting}".encode()) for u in units]
    notes = []
    if units:
        steps.append(RunCommand(("systemctl", "daemon-reload"), regenerate=True))
        notes.append(
            "running services keep their limit until they restart; dldoctor does not restart "
            f"them (they run jobs): once the node is drained, `systemctl restart {' '.join(units)}`"
        )
    elif not systemd.available:
        notes.append("systemd did not answer here: no service was looked at or changed")
    notes.append(
        f"new login sessions get {item} {value}; sessions open now, and the jobs they started, "
        "keep theirs. A reboot makes both certain"
    )
    if any(u.unit == "slurmd.service" for u in launchers):
        notes.append(
            "Slurm gives a job the limits of the shell that submitted it "
            "(PropagateResourceLimits): apply this on the login nodes too, or set "
            f"PropagateResourceLimitsExcept={item.upper()} in slurm.conf so jobs get slurmd's"
        )
    notes += overridden(configured.entries, item, wanted)
    return Plan(
        fix_id, title, tuple(steps), resolves=(f"limits.{item}",), reboot=True, notes=tuple(notes)
    )


def overridden(entries, item: str, wanted: Limit) -> list[str]:
    """The lines that keep a lower limit over ours: pam_limits lets a user or group line
    win over `*` (and only `root` lines reach root), and a later file over an earlier one."""
    ours = limits_file(item)
    notes = []
    for e in entries:
        later = e.file.startswith(f"{LIMITS_D}/") and e.file > ours
        wins = later or (e.domain not in ("*", "root") and e.file != ours)
        if e.item == item and below(e.value, wanted) and wins:
            notes.append(
                f"{e.file}:{e.line} ({e.domain} {e.type} {item} {e.raw}) still applies over "
                f"{ours}: change it yourself"
            )
    return notes
