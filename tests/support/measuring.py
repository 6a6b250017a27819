"""A dldoctor run measured: its exit code, wall time and peak resident memory, with every
tool it runs misbehaving."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from dldoctor.snapshots.take import EXTRAS
from tests.support.faults import misbehaving_tools
from tests.support.processes import MARK, TOOLS, left_behind

# A hang guard, not a bound: the longest deadline a measured run has (a snapshot's 20 s)
# and a minute more.
HANG_GUARD_S = 80


def _high_water_kib(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM). Not wait4's ru_maxrss: Linux
    carries the forking parent's resident size over fork and exec into it, and pytest's
    own is well past 100 MiB by the time this runs."""
    try:
        with open(f"/proc/{pid}/status") as f:
            line = next((ln for ln in f if ln.startswith("VmHWM:")), "VmHWM: 0 kB")
    except OSError:  # exited between two polls
        return 0
    return int(line.split()[1])


def measured(
    tmp_path: Path, *args: str, bindir: Path | None = None
) -> tuple[int, float, float, bytes, bytes]:
    """(exit code, seconds, peak MiB, stdout, stderr) of `dldoctor *args`, with the tools
    of `bindir` (by default every tool misbehaving) first on PATH."""
    if bindir is None:
        tools = sorted({*TOOLS, *(argv[0] for argv in EXTRAS)})
        bindir = misbehaving_tools(tmp_path / "bin", tools)
    nvml = tmp_path / "nvml"
    nvml.mkdir()
    (nvml / "pynvml.py").write_text('raise ImportError("no pynvml in this test")\n')
    mark = uuid.uuid4().hex
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "DLDOCTOR_NO_PLUGINS": "1",
           "PYTHONPATH": str(nvml), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           MARK: mark}  # fmt: skip
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    began = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "dldoctor", *args], stdout=out,
                                stderr=err, env=env, cwd=tmp_path)  # fmt: skip
        peak_kib, pid = 0, 0
        try:
            while True:
                peak_kib = max(peak_kib, _high_water_kib(proc.pid))
                pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                assert time.monotonic() - began < HANG_GUARD_S, "dldoctor did not end"
                time.sleep(0.02)
        finally:
            if not pid:
                proc.kill()
                proc.wait()
    elapsed = time.monotonic() - began
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4, not by Popen
    left = left_behind(mark)
    for line in left:  # never leave them to the next test, even when this one fails
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert not left, f"processes left behind: {left}"
    return proc.returncode, elapsed, peak_kib / 1024, out_path.read_bytes(), err_path.read_bytes()
