"""Fixes for the memory checks."""

from __future__ import annotations

import math
import re

from dldoctor.facts import Facts
from dldoctor.facts.shm import SHM, dev_shm
from dldoctor.facts.system import cgroup_memory_limit, container, memory
from dldoctor.fixes.plan import Plan, RunCommand, WriteFile
from dldoctor.host.base import AnswerStatus
from dldoctor.policy import Policy

FIX = "fix.memory.devshm"
FSTAB = "/etc/fstab"
GIB = 2**30
# nosuid,nodev as systemd mounts /dev/shm: `defaults` alone would drop them at the next boot.
SHM_LINE = "tmpfs /dev/shm tmpfs defaults,nosuid,nodev,size={} 0 0\n"
# The options field of an fstab line: spec, file and type before it, dump and pass after.
_OPTIONS = re.compile(r"([ \t]*(?:\S+[ \t]+){3})(\S+)(.*)", re.S)


def shm_gib(facts: Facts, policy: Policy) -> int:
    """Half of the memory there is (a container's: under its cgroup limit), tmpfs's own
    default for a new mount, in whole GiB and never below the policy's floor, which the
    check judges by. tmpfs takes memory only for what is stored in it: the size is a
    ceiling, not a reservation."""
    ram = facts.get(memory).total_bytes or 0
    limit = facts.get(cgroup_memory_limit)
    if limit and limit < ram and facts.get(container).in_container:
        ram = limit
    return max(ram // 2 // GIB, math.ceil(policy.memory.min_devshm_gib))


def tmpfs_size(n: int) -> str:
    """Bytes as tmpfs's size= takes them: 64m, 1024g."""
    for unit, scale in (("g", GIB), ("m", 2**20), ("k", 2**10)):
        if n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def devshm(facts: Facts, policy: Policy) -> Plan:
    """/dev/shm remounted at the new size now, and the size in /etc/fstab for the boots
    (systemd remounts /dev/shm with its fstab options). In a container /dev/shm is sized
    by whoever starts it: advice only."""
    gib = shm_gib(facts, policy)
    size = f"{gib}g"

    def plan(steps, *notes: str) -> Plan:
        title = f"give /dev/shm {size} (PyTorch DataLoader workers and NCCL use it)"
        return Plan(FIX, title, tuple(steps), resolves=("memory.devshm",), notes=notes)

    where = facts.get(container)
    if where.in_container is not False:
        return plan((), *_advice(where, gib))
    by_hand = f"by hand: `mount -o remount,size={size} /dev/shm`, and size={size} in {FSTAB}"
    shm = facts.get(dev_shm)
    if shm.size_bytes is None:
        return plan((), f"the size of /dev/shm is unknown, so nothing to undo to; {by_hand}")
    if shm.mounted and shm.size_bytes >= gib * GIB:
        return plan((), f"/dev/shm is {tmpfs_size(shm.size_bytes)} already: nothing to change")
    if shm.mounted:
        old = tmpfs_size(shm.size_bytes)
        now = RunCommand(("mount", "-o", f"remount,size={size}", SHM),
                         undo_argv=("mount", "-o", f"remount,size={old}", SHM))  # fmt: skip
    else:  # a folder of the root filesystem: a tmpfs mounted over it
        now = RunCommand(("mount", "-t", "tmpfs", "-o", f"nosuid,nodev,size={size}", "tmpfs", SHM),
                         undo_argv=("umount", SHM))  # fmt: skip
    answer = facts.host.read(FSTAB)
    if not answer.ok and answer.status != AnswerStatus.MISSING:
        return plan((now,), f"{answer.describe()}: left as it is; {by_hand}")
    fstab = with_shm_size(answer.value if answer.ok else b"", size)
    if fstab is None:
        return plan((now,), f"{FSTAB} mounts something other than a tmpfs on /dev/shm: left "
                            f"as it is, so the next boot brings the old size back")  # fmt: skip
    # fstab first: `mount -o remount` merges the fstab line's options with its own.
    return plan((WriteFile(FSTAB, fstab), now))


def with_shm_size(fstab: bytes, size: str) -> bytes | None:
    """`fstab` with size=`size` on its tmpfs /dev/shm line(s), or such a line appended;
    every other byte kept (surrogateescape carries bytes that are not UTF-8 through). None
    when a /dev/shm line is not a tmpfs."""
    text = fstab.decode("utf-8", "surrogateescape")
    lines = text.splitlines(keepends=True)
    found = False
    for i, line in enumerate(lines):
        fields = line.split()
        if len(fields) < 3 or fields[0].startswith("#") or fields[1] != SHM:
            continue
        if fields[2] != "tmpfs":
            return None
        found = True
        m = _OPTIONS.match(line)
        if m is None:  # no options field: the defaults
            body = line.rstrip("\r\n")
            lines[i] = f"{body} defaults,size={size}{line[len(body) :]}"
            continue
        kept = [o for o in m.group(2).split(",") if not o.startswith(("size=", "nr_blocks="))]
        lines[i] = m.group(1) + ",".join([*kept, f"size={size}"]) + m.group(3)
    if not found:
        tail = "" if not text or text.endswith("\n") else "\n"
        lines.append(f"{tail}# written by dldoctor ({FIX})\n{SHM_LINE.format(size)}")
    return "".join(lines).encode("utf-8", "surrogateescape")


def _advice(where, gib: int) -> tuple[str, ...]:
    if where.in_container is None:
        first = "dldoctor cannot tell whether this is a container, so it changes nothing"
    else:
        runtime = f"{where.runtime} " if where.runtime else ""
        first = (f"in a {runtime}container: /dev/shm is sized from outside it, when the "
                 "container starts; dldoctor changes nothing here")  # fmt: skip
    return (
        first,
        f"Docker or Podman: `docker run --shm-size={gib}g ...` (Compose: `shm_size: {gib}g`), "
        "or `--ipc=host` to use the host's /dev/shm (and share its IPC namespace)",
        "Kubernetes: an emptyDir volume with `medium: Memory` and "
        f"`sizeLimit: {gib}Gi` mounted at /dev/shm (volumeMounts: mountPath: /dev/shm)",
        f"with --ipc=host it is the host's /dev/shm that counts: `dldoctor fix {FIX}` on the host",
    )
