"""Nothing a tool starts outlives dldoctor, even a grandchild that escapes the tool's
process group into a session of its own (`setsid`, as a daemonising helper does): the
program is its descendants' subreaper (Linux), so such a grandchild is reparented to it,
and found and ended when a command times out and at the end of the run.

Every tool dldoctor runs is replaced by one that double-forks a `setsid sleep` and exits,
the grandchild holding the tool's pipes (the command then times out) or closing them (the
command answers at once). The grandchildren carry the test's marker in their environment.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from tests.support.commands import fake_command
from tests.support.marks import DEADLINES
from tests.support.processes import MARK, ROOT, TOOLS, finish, marked_processes

pytestmark = DEADLINES

ESCAPES = {
    "holding": "(setsid sleep 600 &)",
    "closing": "(setsid sleep 600 </dev/null >/dev/null 2>&1 &)",
}


def escaping_tools(folder, how: str):
    folder.mkdir()
    for tool in TOOLS:
        fake_command(folder, tool, ESCAPES[how])
    return folder


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's")
@pytest.mark.parametrize("how", sorted(ESCAPES))
def test_grandchildren_that_escape_into_their_own_session_are_ended(tmp_path, how):
    mark = uuid.uuid4().hex
    env = {
        "PATH": f"{escaping_tools(tmp_path / 'bin', how)}:/usr/bin:/bin",
        "DLDOCTOR_NO_PLUGINS": "1",
        "HOME": str(tmp_path),
        MARK: mark,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "dldoctor", "--check", "--json", "--root", str(ROOT),
         "--timeout", "2", "--deadline", "20"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    escaped = []
    while proc.poll() is None and not escaped:  # the escapes happen: the test can see them
        escaped = [p for p in marked_processes(mark) if "sleep 600" in p]
        time.sleep(0.05)
    out, err = finish(proc, mark, 20)  # asserts that no marked process is left
    assert escaped, "no tool's grandchild was seen running"
    assert proc.returncode == 1, err  # the degraded RAID still fails: sysfs answered
    assert b'"storage.raid"' in out
