"""Shared memory and transparent huge pages.

/dev/shm backs PyTorch DataLoader workers and NCCL's intra-node transport; Docker gives a
container 64 MiB of it unless told otherwise. Its size comes from statvfs; whether it is a
mount of its own (and not a folder of the root filesystem) from /proc/self/mountinfo.
"""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.mountinfo import MOUNTINFO, fstype_on, mount_table
from dldoctor.facts.reading import statvfs_sizes
from dldoctor.host.base import AnswerStatus

SHM = "/dev/shm"
THP = "/sys/kernel/mm/transparent_hugepage"
THP_RHEL6 = "/sys/kernel/mm/redhat_transparent_hugepage"


class SharedMemory(NamedTuple):
    size_bytes: int | None  # None when /dev/shm could not be looked at
    free_bytes: int | None  # available to unprivileged users (f_bavail)
    mounted: bool  # a mount of its own (tmpfs, normally)
    notes: tuple[str, ...] = ()
    fstype: str = ""  # from mountinfo; "" when not a mount point or unknown


@fact("shm.devshm")
def dev_shm(ctx: FactContext) -> SharedMemory:
    host = ctx.host
    notes: list[str] = []
    answer = host.statvfs(SHM).require()
    size = free = None
    if answer.ok:
        size, free, _, _, more = statvfs_sizes(answer.value)
        notes.extend(f"{n} for {SHM}" for n in more)
    elif answer.status == AnswerStatus.MISSING:
        notes.append(f"{SHM} does not exist")
        return SharedMemory(None, None, False, tuple(notes))
    else:
        notes.append(answer.describe())

    # Old Debian had /dev/shm -> /run/shm: the mount is on the link's target.
    points = [SHM]
    link = host.readlink(SHM)
    if link.ok and isinstance(link.value, str) and link.value:
        points.append(posixpath.normpath(posixpath.join(posixpath.dirname(SHM), link.value)))
    mountinfo = ctx.get(mount_table)
    table = mountinfo.mounts
    fstype = ""
    if table:
        found = [fstype_on(table, p) for p in points]
        listed = [f for f in found if f is not None]
        mounted = bool(listed)
        fstype = listed[-1] if listed else ""
        if not mounted and answer.ok:
            notes.append(f"{SHM} is not a mount point: its size is that of the filesystem it is on")
    else:
        mounted = answer.ok
        # No mount at all (not even /) is a mount table not understood, not an unmounted
        # /dev/shm.
        said = mountinfo.status if mountinfo.why else "no mount understood"
        notes.append(f"{MOUNTINFO}: {said}; mount not confirmed")
    return SharedMemory(size, free, mounted, tuple(notes), fstype)


# --- transparent huge pages -----------------------------------------------------------


class TransparentHugepages(NamedTuple):
    enabled: str  # "always", "madvise" or "never"; "" when the kernel has no THP
    defrag: str  # "always", "defer", "defer+madvise", "madvise", "never"; ""
    notes: tuple[str, ...] = ()


def parse_thp_mode(text: str) -> str:
    """`always [madvise] never` -> "madvise"; "" when no choice is bracketed."""
    m = re.search(r"\[([^\[\]\s]+)\]", text)  # no `[` inside: linear on "[[[["
    return m.group(1) if m else ""


@fact("memory.thp")
def transparent_hugepages(ctx: FactContext) -> TransparentHugepages:
    notes: list[str] = []
    values: dict[str, str] = {}
    for name in ("enabled", "defrag"):
        for folder in (THP, THP_RHEL6):
            answer = ctx.host.read(f"{folder}/{name}", max_bytes=256).require()
            if answer.status == AnswerStatus.MISSING:
                continue
            if not answer.ok:
                notes.append(answer.describe())
                break
            values[name] = parse_thp_mode(answer.text)
            if not values[name]:
                notes.append(f"{folder}/{name} reads {answer.text.strip()[:60]!r}")
            break
    if not values and not notes:
        notes.append(f"{THP} does not exist (kernel without transparent huge pages)")
    return TransparentHugepages(values.get("enabled", ""), values.get("defrag", ""), tuple(notes))
