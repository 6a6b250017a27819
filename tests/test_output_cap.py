"""A tool that prints without end costs a bounded amount of memory and time.

`dldoctor --check --json` runs with a fake `nvidia-smi` (NVML made absent, so that it is
the driver's source) or a fake `lspci` first on PATH that prints `yes` for ever, on stdout
or on stderr. The run must end within the command timeout + 2 s, with a peak RSS of at
most 100 MiB (its VmHWM, polled while it runs), leave no process
behind, and name the truncation in the finding that used the command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from dldoctor.host.base import DEFAULT_MAX_BYTES
from dldoctor.host.live import MAX_STDERR_BYTES
from tests.conftest import HOSTS
from tests.test_deadline import MARK, left_behind
from tests.test_host_live import fake_command

ROOT = HOSTS / "hgx-h100x8-healthy" / "files"
TIMEOUT = 2
CHECKS = {"nvidia-smi": "gpu.driver.loaded", "lspci": "pci.acs"}


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


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("tool", sorted(CHECKS))
def test_a_tool_printing_without_end_is_cut_and_named(tmp_path, tool, stream):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_command(bindir, tool, "exec yes" + (" >&2" if stream == "stderr" else ""))
    nvml = tmp_path / "nvml"
    nvml.mkdir()
    (nvml / "pynvml.py").write_text('raise ImportError("no pynvml in this test")\n')
    mark = uuid.uuid4().hex
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "DLDOCTOR_NO_PLUGINS": "1",
           "PYTHONPATH": str(nvml), MARK: mark}  # fmt: skip
    out_path = tmp_path / "report.json"
    began = time.monotonic()
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dldoctor", "--check", "--json", "--timeout", str(TIMEOUT),
             "--root", str(ROOT)],
            stdout=out, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        peak_kib = 0
        try:
            while True:
                peak_kib = max(peak_kib, _high_water_kib(proc.pid))
                pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                assert time.monotonic() - began < TIMEOUT + 30, "dldoctor did not end"
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
    assert elapsed < TIMEOUT + 2, f"took {elapsed:.1f} s"
    peak_mib = peak_kib / 1024
    assert peak_mib <= 100, f"peak RSS {peak_mib:.0f} MiB"
    assert proc.returncode in (1, 3), proc.returncode  # a report: failed or incomplete
    cap = DEFAULT_MAX_BYTES if stream == "stdout" else MAX_STDERR_BYTES
    finding = {f["id"]: f for f in json.loads(out_path.read_bytes())["findings"]}[CHECKS[tool]]
    said = " ".join([finding["summary"], *finding["details"]])
    assert finding["status"] == "error", finding
    assert f"`{tool} " in said and f"output truncated at {cap} bytes of {stream}" in said, said
