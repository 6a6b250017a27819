"""A run is bounded in time and leaves nothing behind, whatever hangs.

Every external tool dldoctor runs is replaced by one that sleeps for ten minutes, on an
8-GPU fixture root with two NVMe controllers and two md arrays (so per-item loops run too);
NVML is replaced by a binding whose first call never returns. Each run must end in about
one command timeout (or at the deadline), name what hung, and leave no process behind: the
children carry a marker in their environment, looked for in /proc afterwards.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.marks import DEADLINES
from tests.support.paths import HOSTS
from tests.support.processes import MARK, ROOT, finish, hanging_tools, marked_processes

pytestmark = DEADLINES


def blocking_nvml(folder: Path) -> Path:
    """A pynvml whose nvmlInit never returns, as on a hung driver: stuck in a C call that
    holds the interpreter lock (pause(2) through ctypes.PyDLL), which no thread of the
    process could ever interrupt."""
    folder.mkdir(exist_ok=True)
    (folder / "pynvml.py").write_text(
        "import ctypes\n"
        "class NVMLError(Exception):\n    pass\n"
        "def nvmlInit():\n    ctypes.PyDLL(None).pause()\n"
    )
    return folder


def start(tmp_path: Path, *args: str, nvml: bool = False, stdout=subprocess.PIPE):
    mark = uuid.uuid4().hex
    env = {
        **os.environ,
        "PATH": f"{hanging_tools(tmp_path / 'bin')}:{os.environ['PATH']}",
        "DLDOCTOR_NO_PLUGINS": "1",
        MARK: mark,
    }
    if nvml:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(blocking_nvml(tmp_path / "nvml")), env.get("PYTHONPATH", "")]
        )
    proc = subprocess.Popen(
        [sys.executable, "-m", "dldoctor", "--check", "--json", "--root", str(ROOT), *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=env,
    )
    return proc, mark


def by_id(out: bytes) -> dict[str, dict]:
    return {f["id"]: f for f in json.loads(out)["findings"]}


def test_all_tools_hanging_cost_one_command_timeout(tmp_path):
    proc, mark = start(tmp_path, "--timeout", "2", "--deadline", "20")
    out, err = finish(proc, mark, 20)
    # Fifteen hung tools, per-array and per-controller loops: one timeout, not fifteen. One
    # after the other (30 s) the 20 s deadline would cut them off (exit 3, "did not finish
    # before the run's deadline") instead of each one's own 2 s timeout ending it.
    assert proc.returncode == 1, err  # the degraded RAID still fails: sysfs answered
    findings = by_id(out)
    assert findings["storage.raid"]["status"] == "fail"
    for check_id, tool in {
        "system.python": "`python3 -I -c",
        "system.libc": "`getconf GNU_LIBC_VERSION`",
        "numa.numactl": "`numactl --show`",
        "pci.acs": "`lspci -vvv -D -d ::0604`",
        "gpu.xid": "`journalctl -k -b",
    }.items():
        f = findings[check_id]
        assert f["status"] == "error", f
        assert f["summary"].startswith(tool), f["summary"]
        # Asked late (after the sysfs walk it needs), a probe gets what is left of the window.
        assert re.search(r"did not answer within (2|1\.\d) s \(timed out\)$", f["summary"]), f


def test_the_deadline_ends_the_run_and_names_what_each_check_waits_on(tmp_path):
    proc, mark = start(tmp_path, "--timeout", "300", "--deadline", "3")
    out, err = finish(proc, mark, 3)  # a hang guard: nothing but the deadline ends it
    assert proc.returncode == 3, err
    report = json.loads(out)
    assert report["host"]["hostname"] == "hgx-h100-10"  # asked at once, not after the cut-off
    findings = by_id(out)
    # The RAID fact asks `mdadm --detail` of each array: hung, so no verdict.
    assert findings["storage.raid"]["status"] == "error"
    assert "waiting on `mdadm --detail /dev/md" in findings["storage.raid"]["summary"]
    libc = findings["system.libc"]
    assert libc["status"] == "error"
    # Its limit is what the deadline left it when it started: at most 2.5 s (the deadline
    # less the report's 0.5 s, less the start-up a loaded machine makes longer), never the
    # 300 s of --timeout.
    said = re.fullmatch(
        r"did not finish before the run's deadline: waiting on `getconf GNU_LIBC_VERSION` "
        r"\((\d\.\d+|\d) s limit\)",
        libc["summary"],
    )
    assert said and 0 < float(said.group(1)) <= 2.5, libc["summary"]
    waiting = [f for f in findings.values() if "before the run's deadline" in f["summary"]]
    assert len(waiting) >= 8
    assert all(f["status"] == "error" and "waiting on " in f["summary"] for f in waiting)


def test_an_nvml_call_that_never_returns_is_killed_with_its_child(tmp_path):
    proc, mark = start(tmp_path, "--only", "gpu.driver", "--deadline", "3", nvml=True)
    out, err = finish(proc, mark, 3)
    assert proc.returncode == 3, err
    findings = by_id(out).values()
    for f in findings:
        assert f["status"] == "error", f
        assert f["summary"].startswith("did not finish before the run's deadline"), f
    # The hung NVML call is named; on a loaded machine a check may still be computing
    # something else at the cut-off ("abandoned: it was still computing").
    assert any("waiting on probe nvml" in f["summary"] for f in findings)


def test_a_full_run_with_a_hung_nvml_and_hung_tools_ends_at_the_deadline(tmp_path):
    # No --only: NVML and PATH's python3 are started early, while the checks load.
    proc, mark = start(tmp_path, "--deadline", "3", nvml=True)
    out, err = finish(proc, mark, 3)
    findings = by_id(out)
    assert findings["gpu.driver.loaded"]["status"] == "error"
    summary = findings["gpu.driver.loaded"]["summary"]
    assert summary.startswith("did not finish before the run's deadline"), summary
    assert "waiting on probe nvml" in summary


def test_the_watchdog_ends_a_run_whose_report_nobody_reads(tmp_path):
    # The report does not fit in the pipe, and nobody reads it: writing it blocks. The
    # watchdog ends the process just after the deadline, children killed. The pipe holds
    # one page: a run cut short on a loaded machine writes a shorter report (its findings
    # "did not finish"), which once fitted in the default 64 KiB and exited 3 unwatched.
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    try:
        proc, mark = start(tmp_path, "--timeout", "300", "--deadline", "2", stdout=write_end)
    finally:
        os.close(write_end)
    try:
        proc.wait(timeout=2 + 30)  # a hang guard: the watchdog's exit is what is asserted
    finally:
        proc.kill()
        os.close(read_end)
    assert proc.returncode == 3
    assert b"still running past the deadline" in proc.stderr.read()
    finish(proc, mark, 1)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_the_run_and_its_children(tmp_path, sig, code):
    proc, mark = start(tmp_path, "--timeout", "300", "--deadline", "300", nvml=True)

    def running() -> bool:  # a hung tool and the NVML child, whatever else runs
        seen = " | ".join(marked_processes(mark))
        return "sleep 600" in seen and "nvml_probe" in seen

    deadline = time.monotonic() + 30
    while not running() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not running():
        seen = marked_processes(mark)
        proc.kill()
        proc.communicate()  # reaped, its pipes closed: nothing left to the next tests
        for line in marked_processes(mark):
            os.kill(int(line.split()[0]), signal.SIGKILL)
        pytest.fail(f"the hung tools and the NVML child never ran: {seen}")
    proc.send_signal(sig)
    _, err = finish(proc, mark, 5)  # the deadline is 300 s: only the signal ends it
    assert proc.returncode == code
    assert err.decode().strip().splitlines()[-1] in (
        "dldoctor: terminated",
        "dldoctor: interrupted",
    )


def test_a_closed_pipe_leaves_no_child_behind(tmp_path):
    read_end, write_end = os.pipe()
    proc, mark = start(tmp_path, "--timeout", "300", "--deadline", "2", stdout=write_end)
    os.close(write_end)
    os.close(read_end)  # the reader went away before the report
    finish(proc, mark, 2)
    assert proc.returncode in (0, 1, 3)


GIL_HOG = """
import ctypes

from dldoctor.model import passed
from dldoctor.registry import check


@check("site.native", "Stuck in native code")
def stuck(facts, policy):
    ctypes.PyDLL(None).pause()  # holds the interpreter lock: no thread of dldoctor runs
    return passed("never")
"""


def test_the_backstop_ends_a_run_stuck_in_native_code(tmp_path):
    # A check stuck in C while holding the interpreter lock (what a quadratic regex does)
    # stops the watchdog thread too; the forked backstop kills dldoctor and its commands.
    from tests.support.plugins import install_fake_distribution

    install_fake_distribution(tmp_path, "dldoctor-native", GIL_HOG, "dldoctor_native_checks")
    mark = uuid.uuid4().hex
    env = {**os.environ, "PATH": f"{hanging_tools(tmp_path / 'bin')}:{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "DLDOCTOR_NO_PLUGINS": "", MARK: mark}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "dldoctor", "--check", "--json", "--deadline", "3",
         "--timeout", "300", "--root", str(HOSTS / "hgx-h100x8-healthy" / "files")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = finish(proc, mark, 3 + 3)
    assert proc.returncode == -signal.SIGKILL
    assert err.decode().strip().splitlines()[-1] == (
        "dldoctor: stuck in native code past the deadline: killed"
    )


def test_a_signal_the_kernel_hands_to_another_thread_still_ends_the_run(tmp_path):
    # A process-directed signal may land on any thread; Python runs its handler in the
    # main thread only, when that thread next runs Python code. The runner's wait (here
    # up to 300 s: every tool hangs) must come round for it in time.
    import ctypes

    proc, mark = start(tmp_path, "--timeout", "300", "--deadline", "300", nvml=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "sleep 600" not in " ".join(marked_processes(mark)):
        time.sleep(0.1)
    others = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
    assert others, "dldoctor runs its checks in threads"
    tgkill = 234 if os.uname().machine == "x86_64" else 131  # SYS_tgkill: x86_64, arm64
    assert ctypes.CDLL(None, use_errno=True).syscall(tgkill, proc.pid, others[-1],
                                                     signal.SIGTERM) == 0  # fmt: skip
    _, err = finish(proc, mark, 5)
    assert proc.returncode == 143
    assert err.decode().strip().splitlines()[-1] == "dldoctor: terminated"
