"""/proc/self/mountinfo, parsed once for every fact that asks what is mounted where."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.host.base import AnswerStatus

MOUNTINFO = "/proc/self/mountinfo"
# A Kubernetes node with thousands of mounts writes a few MiB of it.
MOUNTINFO_BYTES = 4 * 1024 * 1024


class Mount(NamedTuple):
    mount_point: str
    fstype: str  # "ext4", "nfs4", "fuse.sshfs"
    source: str  # "/dev/nvme0n1p2", "server:/export", "none"
    options: str  # per-mount options: "rw,relatime"
    major_minor: str  # "259:2"; st_dev of files on it (0:N for network filesystems)
    root: str = "/"  # the folder of the filesystem mounted there (bind mounts)
    super_options: str = ""  # per-superblock options: "rw,vers=4.2,hard,..."


_OCTAL = re.compile(r"\\([0-7]{3})")
_MAJOR_MINOR = re.compile(r"\d{1,10}:\d{1,10}")


def _unescape(text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\040 \\011 \\012 \\134."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text: str) -> tuple[Mount, ...]:
    """/proc/<pid>/mountinfo (proc(5)): `id parent major:minor root mount-point options
    [optional fields...] - fstype source super-options`. Lines that do not fit are skipped."""
    mounts = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if not sep or len(fields) < 6 or not _MAJOR_MINOR.fullmatch(fields[2]):
            continue
        rest = tail.split(" ")
        if len(rest) < 2:
            continue
        mounts.append(
            Mount(
                mount_point=_unescape(fields[4]),
                fstype=rest[0],
                source=_unescape(rest[1]),
                options=fields[5],
                major_minor=fields[2],
                root=_unescape(fields[3]),
                super_options=" ".join(rest[2:]).strip(),
            )
        )
    return tuple(mounts)


def fstype_on(mounts: Iterable[Mount], mount_point: str) -> str | None:
    """The filesystem type of the last mount on `mount_point` (it hides the earlier
    ones); None when nothing is mounted there."""
    fstype = None
    for m in mounts:
        if m.mount_point == mount_point:
            fstype = m.fstype
    return fstype


class MountTable(NamedTuple):
    """/proc/self/mountinfo as read once. A read that timed out, failed or was not captured
    raises instead: it is never an empty table."""

    mounts: tuple[Mount, ...]
    status: AnswerStatus = AnswerStatus.OK  # ok, missing or permission_denied
    why: str = ""  # what the read said when it is not ok


@fact("mountinfo")
def mount_table(ctx: FactContext) -> MountTable:
    answer = ctx.host.read(MOUNTINFO, max_bytes=MOUNTINFO_BYTES).require()
    if not answer.ok:
        return MountTable((), answer.status, answer.describe())
    return MountTable(parse_mountinfo(answer.text))
