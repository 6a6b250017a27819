"""Probes: what only the running interpreter, or a child of it, can answer.

Each returns JSON-able data, so a RecordingHost can store it and a ReplayHost can
give it back unchanged on another machine.
"""

from __future__ import annotations

import os
import platform
import shutil
import site
import sys
from collections.abc import Callable
from typing import Any

from dldoctor.host.live import ChildProbe
from dldoctor.pyenvshim import shim_target


def python_info() -> dict[str, Any]:
    """The interpreter that runs dldoctor, and the `python3` a user would get from PATH."""
    path_python3 = shutil.which("python3")
    return {
        "executable": sys.executable,
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "in_venv": sys.prefix != sys.base_prefix,
        "path_python3": path_python3,
        # The interpreter a pyenv shim there runs, so that it can be asked without the
        # shim's bash chain; None when python3 on PATH is no shim or pyenv's choice is not
        # certain from its files (children run from "/": LiveHost).
        "path_python3_exec": shim_target(path_python3, os.environ, "/"),
        # Where its packages live, so facts can read dist-info and version files through
        # the Host (replayable) instead of importing torch & co. (seconds each).
        "sys_path": [p for p in sys.path if p and os.path.isdir(p)],
        "site_packages": [p for p in site.getsitepackages() if os.path.isdir(p)],
    }


# A GPU's device file: /dev/nvidia<minor> (a MIG instance's process also holds one of
# /dev/nvidia-caps/). nvidiactl, nvidia-uvm and nvidia-modeset name no GPU.
GPU_DEVICE_PREFIX = "/dev/nvidia"
MAX_COMMAND_CHARS = 200  # a command line names the job; its arguments are not the point


def gpu_users(prefix: str = GPU_DEVICE_PREFIX, proc: str = "/proc") -> dict[str, Any]:
    """Who has a GPU's device file open, dldoctor and its own children left out: each
    process with its pid, user (and uid), name, command line and the GPU files it holds
    (read from /proc/<pid>/fd's links: psutil's open_files() leaves device files out).
    `unseen` counts the processes whose files could not be read (another user's, without
    root). `prefix` is where the device files are (tests hold files of a folder of their
    own)."""
    me = os.getpid()
    users, unseen = [], 0
    for pid in (int(name) for name in _listing(proc) if name.isdigit()):
        try:
            held = _gpu_files(f"{proc}/{pid}/fd", prefix)
        except PermissionError:
            unseen += 1
            continue
        except OSError:  # gone meanwhile
            continue
        if not held or pid == me:
            continue
        ppid, uid = _ppid_uid(f"{proc}/{pid}")
        if ppid == me:  # a command or probe of this run (the NVML child, a measurement)
            continue
        users.append(
            {
                "pid": pid,
                "user": _user_name(uid),
                "uid": uid,
                "name": _text(f"{proc}/{pid}/comm").strip(),
                "command": _text(f"{proc}/{pid}/cmdline")
                .replace("\0", " ")
                .strip()[:MAX_COMMAND_CHARS],
                "devices": ["/dev/" + path[len(prefix) - len("nvidia") :] for path in held],
            }
        )
    return {"users": users, "unseen": unseen, "prefix": prefix}


def _listing(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _gpu_files(fd_folder: str, prefix: str) -> list[str]:
    """The GPU device files among a process's open files, each once, sorted."""
    held = set()
    for fd in os.listdir(fd_folder):
        try:
            target = os.readlink(f"{fd_folder}/{fd}")
        except OSError:
            continue
        rest = target[len(prefix) :] if target.startswith(prefix) else None
        if rest is not None and (rest.isdigit() or rest.startswith("-caps/")):
            held.add(target)
    return sorted(held)


def _ppid_uid(folder: str) -> tuple[int | None, int | None]:
    ppid = uid = None
    for line in _text(f"{folder}/status").splitlines():
        key, _, value = line.partition(":")
        fields = value.split()
        if key == "PPid" and fields and fields[0].isdigit():
            ppid = int(fields[0])
        elif key == "Uid" and fields and fields[0].isdigit():
            uid = int(fields[0])
    return ppid, uid


def _user_name(uid: int | None) -> str:
    if uid is None:
        return "?"
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(64 * 1024).decode("utf-8", "replace")
    except OSError:
        return ""


PROBES: dict[str, Callable[[], Any] | ChildProbe] = {
    "python": python_info,
    # In a child process: an NVML call on a hung driver never returns, and a thread stuck
    # in a C call cannot be stopped; a child can be killed.
    "nvml": ChildProbe("dldoctor.nvml_probe"),
    # Who holds the GPUs open (dldoctor.facts.gpuusers): `gpu.processes` names them, and
    # the active tier measures no GPU they use without --force. Recorded, so a replay
    # judges the same.
    "gpu_users": gpu_users,
}
