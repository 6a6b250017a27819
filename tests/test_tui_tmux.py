"""The app as a user meets it: `dldoctor` in a 120×40 tmux pane on this machine. Waits for
the run to end, reads the pane, checks that what `--check --json` found here is on it, then
presses q and checks the app ended cleanly with the run's exit code. The test starts its
own tmux server (a private socket) and kills it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from dldoctor.model import Status
from dldoctor.render.text import GLYPHS
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS
from tests.support.processes import gone

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (Debian package tmux)"
)


def _tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True,
                          timeout=10, check=True).stdout  # fmt: skip


def test_dldoctor_in_a_tmux_pane_shows_the_findings_and_quits_cleanly(tmp_path):
    expected = report_of(run_dldoctor("--check", "--json"))
    socket = f"dldoctor-test-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "exit-code"
    # COLUMNS and LINES from the test's own terminal would override the pane's size.
    command = (f"env -u COLUMNS -u LINES DLDOCTOR_NO_PLUGINS=1 XDG_CONFIG_HOME={tmp_path} {sys.executable} -m "
               f"dldoctor; echo $? > {done}; sleep 60")  # fmt: skip
    _tmux(socket, "new-session", "-d", "-x", "120", "-y", "40", "-s", "t", command)
    try:
        pane = ""
        deadline = time.monotonic() + 60
        while "· done" not in pane:
            assert time.monotonic() < deadline, f"no end of the run on the pane:\n{pane}"
            time.sleep(0.25)
            pane = _tmux(socket, "capture-pane", "-p", "-t", "t")
        counts = expected["summary"]["counts"]
        for status in ("fail", "error", "warn", "pass", "skip"):
            glyph = GLYPHS[Status(status)][0]
            assert f"{glyph} {counts[status]} {status}" in pane, pane
        problems = [
            f["id"] for f in expected["findings"] if f["status"] in ("fail", "warn", "error")
        ]
        for check_id in problems:  # worst first: every problem fits on the first screen
            assert check_id in pane, f"{check_id} not on the pane:\n{pane}"
        assert "this host, live" in pane
        _tmux(socket, "send-keys", "-t", "t", "q")
        code = _exit_code(done, "the app did not end after q")
        assert code == str(expected["summary"]["exit_code"])
        after = _tmux(socket, "capture-pane", "-p", "-t", "t")
        assert "Traceback" not in after
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)
    server = subprocess.run(["tmux", "-L", socket, "has-session"], capture_output=True, timeout=10)
    assert server.returncode != 0  # the server it started is stopped


def _exit_code(done, failure: str) -> str:
    """The exit code the pane's shell wrote (`echo $? > done`), once it is whole."""
    deadline = time.monotonic() + 10
    while not (done.exists() and done.read_text().endswith("\n")):
        assert time.monotonic() < deadline, failure
        time.sleep(0.1)
    return done.read_text().strip()


def _app_pid(socket: str) -> int:
    """The dldoctor process in the pane (the pane runs a shell that started it)."""
    shell = int(_tmux(socket, "display-message", "-p", "-t", "t", "#{pane_pid}").strip())
    children = subprocess.run(["pgrep", "-P", str(shell)], capture_output=True, text=True)
    return int(children.stdout.split()[0])


def _start(socket: str, tmp_path, done) -> None:
    command = (f"env -u COLUMNS -u LINES DLDOCTOR_NO_PLUGINS=1 XDG_CONFIG_HOME={tmp_path} "
               f"{sys.executable} -m dldoctor --from {HOSTS / 'hgx-h100x8-healthy'}; "
               f"echo $? > {done}; sleep 60")  # fmt: skip
    _tmux(socket, "new-session", "-d", "-x", "120", "-y", "40", "-s", "t", command)
    deadline = time.monotonic() + 60
    while "· done" not in _tmux(socket, "capture-pane", "-p", "-t", "t"):
        assert time.monotonic() < deadline, "no end of the run on the pane"
        time.sleep(0.25)


def test_sigterm_ends_the_app_with_143_and_a_closed_terminal_ends_it_too(tmp_path):
    socket = f"dldoctor-test-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "exit-code"
    try:
        _start(socket, tmp_path, done)
        os.kill(_app_pid(socket), signal.SIGTERM)
        assert _exit_code(done, "SIGTERM did not end the app") == "143"
        assert "Traceback" not in _tmux(socket, "capture-pane", "-p", "-t", "t")
        _tmux(socket, "kill-server")

        socket = f"{socket}-2"  # a server of its own: the first one's socket may linger
        _start(socket, tmp_path, tmp_path / "second")
        pid = _app_pid(socket)
        _tmux(socket, "kill-server")  # the terminal goes away under the app
        assert gone(pid, within=10), f"dldoctor (pid {pid}) outlived its terminal"
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)


def _hang_up(socket: str, command: str, shown: str, before) -> None:
    """`command` in a pane until `shown` is on it; `before()`; then the terminal closed
    under the app (`tmux kill-session`), and the app ended."""
    _tmux(socket, "new-session", "-d", "-x", "120", "-y", "40", "-s", "t", command)
    deadline = time.monotonic() + 60
    while shown not in (pane := _tmux(socket, "capture-pane", "-p", "-t", "t")):
        assert time.monotonic() < deadline, f"{shown!r} never on the pane:\n{pane}"
        time.sleep(0.25)
    pid = _app_pid(socket)
    before()
    _tmux(socket, "kill-session", "-t", "t")
    assert gone(pid, within=10), f"dldoctor (pid {pid}) outlived its terminal: {_stuck(pid)}"


def _stuck(pid: int) -> str:
    """Where each thread of `pid` waits: what a failure needs to be understood."""
    said = []
    for task in sorted(os.listdir(f"/proc/{pid}/task")):
        folder = f"/proc/{pid}/task/{task}"
        parts = []
        for name in ("comm", "wchan", "stat", "stack"):
            try:
                with open(f"{folder}/{name}") as f:
                    parts.append(f.read().strip().replace("\n", " | ")[:300])
            except OSError as exc:
                parts.append(type(exc).__name__)
        said.append(f"[{task}] " + " ; ".join(parts))
    return "\n".join(said)


def test_a_closed_terminal_removes_the_unpacked_copy_of_a_packed_bundle(tmp_path):
    """A hangup (the terminal closed: `tmux kill-session`) ends the app at once, yet the
    copy of a packed bundle it unpacked (unredacted content, for a sos report) is removed
    as on SIGTERM. A private TMPDIR shows what the run left."""
    from dldoctor.snapshots.archive import write_archive

    archive = tmp_path / "healthy.tar.gz"
    write_archive(str(HOSTS / "hgx-h100x8-healthy"), str(archive))
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()

    def unpacked() -> None:  # the copy the app reads from
        assert [p.name[:16] for p in tmpdir.iterdir()] == ["dldoctor-bundle-"]

    socket = f"dldoctor-test-{uuid.uuid4().hex[:8]}"
    command = (f"env -u COLUMNS -u LINES DLDOCTOR_NO_PLUGINS=1 XDG_CONFIG_HOME={tmp_path} "
               f"TMPDIR={tmpdir} {sys.executable} -m dldoctor --from {archive}; sleep 60")  # fmt: skip
    try:
        _hang_up(socket, command, "· done", unpacked)
        assert sorted(p.name for p in tmpdir.iterdir()) == []
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)


def test_a_closed_terminal_kills_the_commands_still_running(tmp_path):
    """The hangup's immediate end skips atexit: the commands still running (every tool
    hangs here, each in a session of its own) are killed on the way out all the same."""
    from tests.support.processes import MARK, ROOT, hanging_tools, left_behind, marked_processes

    mark = uuid.uuid4().hex

    def hanging() -> None:
        assert any("sleep 600" in p for p in marked_processes(mark))

    socket = f"dldoctor-test-{uuid.uuid4().hex[:8]}"
    command = (f"env -u COLUMNS -u LINES DLDOCTOR_NO_PLUGINS=1 XDG_CONFIG_HOME={tmp_path} "
               f"{MARK}={mark} PATH={hanging_tools(tmp_path / 'bin')}:{os.environ['PATH']} "
               f"{sys.executable} -m dldoctor --root {ROOT} --timeout 300; sleep 60")  # fmt: skip
    try:
        # "waiting on": the app is up (a signal before that is handled as in --check).
        _hang_up(socket, command, "waiting on", hanging)
        left = left_behind(mark)
        for line in left:  # never left to the next tests, even when this one fails
            os.kill(int(line.split()[0]), signal.SIGKILL)
        assert not left, f"processes left behind: {left}"
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)
