"""Processes that outlive what started them. On Linux the program is the child subreaper
of its descendants: a grandchild that leaves its command's process group (`setsid`, a
daemonising helper) is reparented to dldoctor instead of init, and `orphans` finds it."""

from __future__ import annotations

import os
import sys
from collections.abc import Collection

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_reaping = False  # set for the program only: a library caller's other children are not ours


def become_subreaper() -> None:
    """Make this process the subreaper of its descendants (Linux; a no-op elsewhere)."""
    global _reaping
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        _reaping = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        pass


def orphans(started: Collection[int]) -> list[int]:
    """Our children outside our session that are not in `started` (each command we start
    leads a session of its own): descendants of a command, reparented to us."""
    if not _reaping:
        return []
    ours = os.getsid(0)
    return [pid for pid in _children() if pid not in started and _session(pid) not in (ours, None)]


def end_tree(pid: int, *, reap: bool = True) -> None:
    """Kill `pid` and every descendant of it. All are listed before any is killed: a
    process killed first would have its children reparented, out of the tree's reach.
    `reap` False: `pid` is left for its Popen to reap."""
    import psutil

    try:
        top = psutil.Process(pid)
        tree = [top, *top.children(recursive=True)]
    except psutil.Error:
        return
    for proc in tree:
        try:
            proc.kill()
        except psutil.Error:
            pass
    # Our children among them are reaped, or they would stay zombies (a grandchild that is
    # reparented to us later is reaped by the next sweep). Only ours: psutil waits out its
    # whole timeout on another's zombie.
    ours = [p for p in (tree if reap else tree[1:]) if _parent(p) == os.getpid()]
    psutil.wait_procs(ours, timeout=1.0)


def _parent(proc) -> int | None:
    import psutil

    try:
        return proc.ppid()
    except psutil.Error:
        return None


def _children() -> list[int]:
    """Our children's pids: a few small reads of /proc (psutil scans every process). Their
    pids cannot be reused while they are ours and unreaped."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):  # no CONFIG_PROC_CHILDREN
        import psutil

        return [p.pid for p in psutil.Process().children()]
    pids: list[int] = []
    for tid in os.listdir("/proc/self/task"):  # a child belongs to the thread that forked it
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                pids += map(int, f.read().split())
        except (OSError, ValueError):  # a thread that ended meanwhile
            continue
    return pids


def _session(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[3])  # state ppid pgrp session
    except (OSError, IndexError, ValueError):
        return None
