"""What a fix must not disturb: the processes holding the GPUs' device files. A fix that
unloads a module or resets a GPU refuses while they run, naming each one."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

DEVICE_PREFIX = "/dev/nvidia"


@dataclass(frozen=True)
class Holder:
    pid: int
    user: str
    command: str
    device: str  # the first /dev/nvidia* file it holds open

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.user}): {self.command} holds {self.device}"


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
