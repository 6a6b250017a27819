"""Fixes for the CPU checks."""

from __future__ import annotations

import re

from dldoctor.facts import Facts
from dldoctor.facts.cpu import CPU_ROOT
from dldoctor.fixes.looking import names_in
from dldoctor.fixes.plan import Plan, RunCommand, WriteAttribute, WriteFile
from dldoctor.fixes.systemd import enabled
from dldoctor.policy import Policy

TMPFILES_CONF = "/etc/tmpfiles.d/dldoctor-cpu-governor.conf"
TUNED_PROFILE = "/etc/tuned/active_profile"
# Daemons that set the governor themselves at boot: the tmpfiles line would lose to them.
OVERRIDERS = {
    "power-profiles-daemon.service": "power-profiles-daemon sets its own governor: "
    "`powerprofilesctl set performance`, or disable it",
    "cpufrequtils.service": "cpufrequtils sets GOVERNOR= from /etc/default/cpufrequtils at "
    "boot: set it to {} there",
    "cpupower.service": "cpupower.service sets the governor from /etc/sysconfig/cpupower at "
    "boot: set it to {} there",
}


def tmpfiles_lines(governor: str) -> bytes:
    """systemd-tmpfiles writes `w` lines at every boot, globs included: no daemon and no
    package (cpufrequtils, cpupower) needed, the same on Debian and the RHEL family."""
    return (
        "# written by dldoctor (fix.cpu.governor)\n"
        f"w /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor - - - - {governor}\n"
    ).encode()


def governor(facts: Facts, policy: Policy) -> Plan:
    """The policy's governor (performance unless a site says otherwise) now, on each CPU's
    scaling_governor, and at every boot: through tuned where it runs (it would set its
    profile's governor back), otherwise a tmpfiles.d line."""
    host, want = facts.host, policy.cpu.governor
    cpus = [c for c in names_in(host, CPU_ROOT) if re.fullmatch(r"cpu\d+", c)]
    cpus.sort(key=lambda c: int(c[3:]))
    steps: list = []
    unavailable = []
    for cpu in cpus:
        path = f"{CPU_ROOT}/{cpu}/cpufreq/scaling_governor"
        now = host.read(path, max_bytes=64)
        if not now.ok or now.text.strip() == want:
            continue
        offered = host.read(f"{CPU_ROOT}/{cpu}/cpufreq/scaling_available_governors").text
        if offered and want not in offered.split():
            unavailable.append(cpu)
            continue
        steps.append(WriteAttribute(path, want))
    notes = []
    if unavailable:
        notes.append(f"{len(unavailable)} CPU(s) offer no {want} governor (the cpufreq "
                     f"driver's choice): set the BIOS power profile to {want}")  # fmt: skip
    tuned = host.read(TUNED_PROFILE, max_bytes=256)
    tuned_profile = tuned.text.split()[0] if tuned.ok and tuned.text.strip() else ""
    if tuned_profile and want == "performance":
        steps.append(
            RunCommand(
                ("tuned-adm", "profile", "throughput-performance"),
                undo_argv=("tuned-adm", "profile", tuned_profile),
            )
        )
    else:
        steps.append(WriteFile(TMPFILES_CONF, tmpfiles_lines(want)))
        if tuned_profile:  # no tuned profile is known to dldoctor for another governor
            notes.append(f"tuned sets its profile's governor at boot ({tuned_profile}): "
                         f"choose one whose governor is {want}")  # fmt: skip
        for unit, advice in OVERRIDERS.items():
            if enabled(host, unit):
                notes.append(advice.format(want))
    return Plan(
        "fix.cpu.governor",
        f"the {want} CPU governor, now and at every boot",
        tuple(steps),
        resolves=("cpu.governor",),
        notes=tuple(notes),
    )
