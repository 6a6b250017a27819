"""What a fix must not disturb: the processes holding the GPUs' device files (MIG
instances included: their processes hold /dev/nvidia-caps/*), and modules in use. A fix
that resets a GPU or changes what running jobs use refuses while they run, naming each
one; an undo that unloads a module refuses while the module has users."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from dldoctor.fixes.plan import FixError

DEVICE_PREFIX = "/dev/nvidia"


@dataclass(frozen=True)
class Holder:
    pid: int
    user: str
    command: str
    device: str  # the first /dev/nvidia* file it holds open

    def __str__(self) -> str:
        what = " (a MIG instance)" if "/nvidia-caps/" in self.device else ""
        return f"pid {self.pid} ({self.user}): {self.command} holds {self.device}{what}"


def gpu_holders(root: str = "/") -> list[Holder]:
    """Processes with a `<root>/dev/nvidia*` file open (psutil for who and what; the fd
    links from /proc, since psutil's open_files() leaves device files out)."""
    prefix = os.path.join(root, DEVICE_PREFIX.lstrip("/"))
    found = []
    for proc in psutil.process_iter(["pid", "username", "cmdline", "name"]):
        device = _held(proc.info["pid"], prefix)
        if device is None:
            continue
        command = " ".join(proc.info["cmdline"] or []) or proc.info["name"] or "?"
        found.append(Holder(proc.info["pid"], proc.info["username"] or "?", command, device))
    return found


def _held(pid: int, prefix: str) -> str | None:
    folder = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(folder)
    except OSError:  # gone, or another user's process and we are not root
        return None
    for fd in fds:
        try:
            target = os.readlink(f"{folder}/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            return target
    return None


def refuse_unloading_a_used_module(argv, target) -> None:
    """FixError when `argv` is a `modprobe -r` of a module /proc/modules shows in use: the
    kernel would refuse it halfway through an undo."""
    if not argv or os.path.basename(argv[0]) != "modprobe" or "-r" not in argv:
        return
    text = (target.read("/proc/modules") or b"").decode("ascii", "replace")
    users = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2].isdigit():
            users[fields[0]] = (int(fields[2]), fields[3].strip(",-").replace(",", ", "))
    for name in (a.replace("-", "_") for a in argv[1:] if not a.startswith("-")):
        count, by = users.get(name, (0, ""))
        if count:
            held = f" by {by}" if by else ""
            raise FixError(
                f"{name} is in use ({count}{held}): it cannot be unloaded; stop what uses it first"
            )


def verdict_lines(plan, root: str = "/") -> list[str]:
    """What the interlocks say of `plan` now, for a preview: the processes it would
    disturb, or why none matter."""
    if not plan.disturbs_gpus:
        return ["does not disturb running GPU work"]
    holders = gpu_holders(root)
    if not holders:
        return ["would disturb GPU work, and no process holds a GPU now"]
    force = " (--force allowed: running jobs may fail)" if plan.force_ok else ""
    return [f"refused while these run{force}:", *(f"  {h}" for h in holders)]
