"""Fixes for the NUMA checks."""

from __future__ import annotations

import posixpath

from dldoctor.facts import Facts
from dldoctor.facts.numa import numa_topology
from dldoctor.facts.system import container
from dldoctor.fixes.looking import names_in
from dldoctor.fixes.plan import Plan, WriteAttribute, WriteFile
from dldoctor.policy import Policy

FIX = "fix.numa.balancing"
BALANCING = "/proc/sys/kernel/numa_balancing"
BALANCING_CONF = "/etc/sysctl.d/90-dldoctor-numa-balancing.conf"
# Where systemd-sysctl and `sysctl --system` look; /etc/sysctl.conf comes last of all.
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d",
               "/lib/sysctl.d")  # fmt: skip


def numa_balancing(facts: Facts, policy: Policy) -> Plan:
    """Automatic NUMA balancing off now (the sysctl written in place) and at every boot (a
    sysctl.d file, read by systemd-sysctl on Debian, Ubuntu and the RHEL family alike). A
    memory-tiering bit (2) is kept: it never moves the pages of the CPU nodes."""
    title = "turn automatic NUMA balancing off, now and at every boot"
    resolves = ("numa.balancing",)
    if facts.get(container).in_container is not False:
        return Plan(FIX, title, (), resolves=resolves, notes=(
            "the sysctl is the host's (a container sees the host's value and cannot set it): "
            f"on the host, `sysctl -w kernel.numa_balancing=0` and a line "
            f"`kernel.numa_balancing = 0` in {BALANCING_CONF}",
        ))  # fmt: skip
    now = facts.get(numa_topology).balancing
    value = str(now & 2) if now in (1, 3) else "0"
    conf = f"# written by dldoctor ({FIX})\nkernel.numa_balancing = {value}\n"
    return Plan(
        FIX,
        title,
        (WriteAttribute(BALANCING, value), WriteFile(BALANCING_CONF, conf.encode())),
        resolves=resolves,
        notes=tuple(_overridden_by(facts, value)),
    )


def _overridden_by(facts: Facts, value: str) -> list[str]:
    """The sysctl files read after ours that set another value: at boot, theirs wins."""
    host, ours = facts.host, BALANCING_CONF.rsplit("/", 1)[1]
    later = []
    for folder in SYSCTL_DIRS:
        later += [f"{folder}/{n}" for n in names_in(host, folder, ".conf") if n > ours]
    notes, judged = [], set()
    for path in [*later, "/etc/sysctl.conf"]:
        link = host.readlink(path)  # Debian and RHEL link 99-sysctl.conf to ../sysctl.conf
        real = path
        if link.ok and link.value:
            real = posixpath.normpath(posixpath.join(posixpath.dirname(path), link.value))
        if real in judged:
            continue
        judged.add(real)
        for line in host.read(path, max_bytes=1 << 20).text.splitlines():
            key, eq, setting = line.partition("=")
            # sysctl.d(5): "key = value"; a leading "-" ignores errors; "/" may stand for "."
            named = key.strip().lstrip("-").strip().replace("/", ".") == "kernel.numa_balancing"
            if eq and named and setting.strip() != value:
                said = f"{path} sets kernel.numa_balancing = {setting.strip()}"
                notes.append(f"{said} and is read after this file: change it there too")
                break
    return notes
