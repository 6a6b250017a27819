"""Child processes of a run: tools that hang, and the processes a run left behind (found by
a marker in their environment)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.support.commands import fake_command
from tests.support.paths import HOSTS

ROOT = HOSTS / "hgx-h100x8-raid-degraded" / "files"


# Every command a fact runs (doctor/facts/*: host.run and the *_ARGV tuples).
TOOLS = (
    "nvidia-smi", "lspci", "python3", "getconf", "systemctl", "journalctl", "dmesg", "date",
    "numactl", "rocm-smi", "mdadm", "nvcc", "ldconfig", "nvme", "smartctl",
)  # fmt: skip


MARK = "DLDOCTOR_TEST_MARK"


def hanging_tools(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    for tool in TOOLS:
        fake_command(folder, tool, "exec sleep 600")
    return folder


def marked_processes(mark: str) -> list[str]:
    """Processes whose environment carries `mark` (children of a run, at any depth)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if f"{MARK}={mark}".encode() in env.split(b"\0"):
            found.append(f"{pid} {cmd.decode(errors='replace')}")
    return found


def left_behind(mark: str, grace: float = 2.0) -> list[str]:
    """The marked processes still alive `grace` seconds on: the backstop watcher (a fork
    of dldoctor, so marked too) takes a moment to see dldoctor gone and exit."""
    until = time.monotonic() + grace
    while (left := marked_processes(mark)) and time.monotonic() < until:
        time.sleep(0.05)
    return left


def finish(proc: subprocess.Popen, mark: str, limit: float) -> tuple[bytes, bytes]:
    """The run's stdout and stderr once it ends, asserting that it left no marked process
    behind. `limit` is the run's own deadline; 30 s more is a hang guard, not a bound the
    tests assert: they assert how the run ended (exit code, what it said)."""
    try:
        out, err = proc.communicate(timeout=limit + 30)
    finally:
        proc.kill()
    left = left_behind(mark)
    for line in left:  # never leave them to the next test, even when this one fails
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert not left, f"processes left behind: {left}"
    return out, err


def gone(pid: int, within: float) -> bool:
    """Whether process `pid` has ended (exited, or a zombie) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False
