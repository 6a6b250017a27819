"""System checks: distribution, kernel, memory, Python, C library, container."""

from __future__ import annotations

from dldoctor.facts import Facts
from dldoctor.facts import system as sysfacts
from dldoctor.model import Outcome, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check
from dldoctor.versions import at_least


def gib(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB"


def against_minimum(shown: str, found: str, minimum: str, details=()) -> Outcome:
    """Pass when `found` is at least `minimum`, else warn; `shown` names it in the summary."""
    ok = at_least(found, minimum)
    if ok is None:
        return warned(f"cannot read a version number from {shown!r}", details)
    if ok:
        return passed(f"{shown} (≥ {minimum})", details)
    return warned(f"{shown} is older than {minimum}", details)


@check(
    "system.os.release",
    "Operating system",
    remediation="Move training hosts to a release the policy supports, or list this one in "
    "the policy's [os] supported table.",
)
def os_release(facts: Facts, policy: Policy) -> Outcome:
    supported = {s.id: s.min_version for s in policy.os.supported}
    wanted = ", ".join(f"{s.id} ≥ {s.min_version}" for s in policy.os.supported)
    # The policy in force says what is supported, not the built-in list.
    advice = (
        f"Move training hosts to a release the policy supports ({wanted}), or list this one "
        "in the policy's [os] supported table."
    )
    rel = facts.get(sysfacts.os_release)
    if not rel.id:
        return warned(
            "distribution unknown: no readable os-release",
            rel.notes,
            remediation="Every supported distribution ships /etc/os-release (or "
            "/usr/lib/os-release): restore it from the base-files / systemd package; dldoctor "
            "judges the distribution by it.",
        )
    name = rel.display or rel.id
    if rel.id not in supported:
        return warned(
            f"{name} is not a supported distribution", [f"supported: {wanted}"], remediation=advice
        )
    minimum = supported[rel.id]
    if not rel.version_id:
        return warned(
            f"{name} has no VERSION_ID: a testing or rolling release, not a supported one",
            [f"supported: {wanted}"],
            remediation=advice,
        )
    if at_least(rel.version_id, minimum):
        return passed(f"{name} (supported: {rel.id} ≥ {minimum})", rel.notes)
    return warned(
        f"{name} is older than the supported {rel.id} {minimum}",
        [f"VERSION_ID={rel.version_id or '(none)'}", *rel.notes],
        remediation=advice,
    )


@check(
    "system.kernel.version",
    "Kernel",
    remediation="Upgrade to the distribution's newer kernel line (Ubuntu: the HWE or 22.04 "
    "kernel); NVIDIA's open kernel modules and recent RDMA stacks expect 5.15 or newer.",
)
def kernel_version(facts: Facts, policy: Policy) -> Outcome:
    k = facts.get(sysfacts.kernel)
    minimum = policy.kernel.min_version
    if not k.release:
        return skipped("kernel release not available")
    if k.enterprise_el:
        return passed(f"{k.release} (enterprise kernel with backports; judged by its OS release)")
    return against_minimum(k.release, k.release, minimum)


@check(
    "system.memory",
    "System memory",
    remediation="Add RAM, or lower [memory] min_total_gib in the policy if this host's "
    "role needs less.",
)
def system_memory(facts: Facts, policy: Policy) -> Outcome:
    mem = facts.get(sysfacts.memory)
    if mem.total_bytes is None:
        return skipped("memory size not available", mem.notes)
    if mem.total_bytes == 0:
        return failed("the kernel reports no RAM (MemTotal is 0)", mem.notes)
    summary = f"{gib(mem.total_bytes)} RAM"
    if mem.available_bytes is not None:
        summary += f", {gib(mem.available_bytes)} available"
    if mem.swap_total_bytes:
        summary += f"; swap {gib(mem.swap_total_bytes)}"
    elif mem.swap_total_bytes == 0:
        summary += "; no swap"
    details = list(mem.notes)
    if mem.hugepages_total and mem.hugepage_size_bytes:
        size = mem.hugepages_total * mem.hugepage_size_bytes
        details.append(f"{mem.hugepages_total} huge pages reserved ({gib(size)})")
    floor = policy.memory.min_total_gib
    if floor and mem.total_bytes < floor * 1024**3:
        return failed(f"{summary}: below the policy's {floor:g} GiB", details)
    return passed(summary, details)


@check(
    "system.python",
    "Python",
    remediation="Use Python 3.10 or newer for training environments (current PyTorch, "
    "TensorFlow and JAX releases need it), e.g. in a virtual environment.",
)
def python_version(facts: Facts, policy: Policy) -> Outcome:
    py = facts.get(sysfacts.python)
    if not py.version and not py.path_version:
        return skipped("no Python version available", py.notes)
    details = list(py.notes)
    if py.version:
        where = "virtual environment" if py.in_venv else "system interpreter"
        details.insert(0, f"dldoctor runs in {py.executable} ({where})")
    if py.path_version:
        details.append(
            f"python3 on PATH: {py.path_python3 or 'python3'} (Python {py.path_version})"
        )
    elif py.version and not py.path_python3:
        details.append("no python3 on PATH")
    minimum = policy.python.min_version
    # The interpreter dldoctor is installed in is the training environment's; the platform
    # python3 (3.6 on RHEL 8, 3.9 on RHEL 9) is only judged when nothing else is known.
    judged = py.version or py.path_version
    if at_least(judged, minimum) is False:
        return warned(f"Python {judged} is older than {minimum}", details)
    if py.version and py.path_version and at_least(py.path_version, minimum) is False:
        details.append(f"python3 on PATH is older than {minimum}: use a virtual environment")
    return passed(f"Python {judged}", details)


@check(
    "system.libc",
    "C library",
    remediation="Binary wheels of PyTorch and the CUDA libraries need glibc 2.28 or newer "
    "(manylinux_2_28); move to a newer distribution release or run in a container.",
)
def libc_version(facts: Facts, policy: Policy) -> Outcome:
    libc = facts.get(sysfacts.libc)
    minimum = policy.libc.min_glibc
    if not libc.answered:
        return skipped("C library version not available", libc.notes)
    if not libc.name:
        return warned("not glibc, or glibc did not say its version", libc.notes)
    return against_minimum(f"{libc.name} {libc.version}", libc.version, minimum, libc.notes)


@check("system.container", "Container")
def container(facts: Facts, policy: Policy) -> Outcome:
    c = facts.get(sysfacts.container)
    details = list(c.signs)
    if c.virtualization:
        details.append(f"running in a {c.virtualization}")
    if c.in_container:
        return passed(f"in a {c.runtime or 'container'} container", details)
    if c.blind:
        return errored("could not tell whether this is a container", [*c.unread, *details])
    if c.in_container is None:
        return passed("possibly in a container: the signs disagree", details)
    where = f" ({c.virtualization})" if c.virtualization else ""
    return passed(f"not in a container{where}", details)
