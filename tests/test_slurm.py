"""`dldoctor slurm-healthcheck`: when it drains, when it resumes, and how long it takes.

The decisions are tested against a stand-in `scontrol` on PATH (a real program that records
its arguments and answers `show node` with real Slurm 22.05 output from tests/fixtures/slurm/);
the last test runs the wrapper as the HealthCheckProgram of a real one-node Slurm cluster
(munged, slurmctld and slurmd started here, tests/support/slurmcluster.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import pytest

from dldoctor.model import Finding, Status
from dldoctor.slurm import (
    MAX_REASON_CHARS,
    SCONTROL_TIMEOUT_S,
    SLURM_FAILED,
    drain_reason,
    parse_show_node,
)
from tests.support.cli import run_dldoctor
from tests.support.commands import fake_command
from tests.support.marks import DEADLINES
from tests.support.paths import FIXTURES
from tests.support.slurmcluster import Cluster, NotStarted, missing_programs

# Health-check runs that must end inside the default deadline, and Slurm's own timeouts.
pytestmark = DEADLINES

CAPTURES = FIXTURES / "slurm"
IDLE = CAPTURES / "show-node-idle.txt"
OURS = CAPTURES / "show-node-drained-by-dldoctor.txt"
ADMIN = CAPTURES / "show-node-drained-by-admin.txt"
NOT_FOUND = CAPTURES / "show-node-not-found.txt"
# Fails on any machine (1 PiB of RAM); the same check passes under the built-in policy.
FAILING = "[memory]\nmin_total_gib = 1048576\n"
MEMORY = ("--only", "system.memory")

FAKE_SCONTROL = """#!{python}
import json, os, sys, time
here = {here!r}
with open(os.path.join(here, "calls.jsonl"), "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if os.path.exists(os.path.join(here, "hang")):
    time.sleep(600)
if sys.argv[1:3] == ["show", "node"]:
    with open(os.path.join(here, "show-node.txt")) as f:
        sys.stdout.write(f.read())
    with open(os.path.join(here, "show-node.rc")) as f:
        sys.exit(int(f.read()))
"""


class Scontrol:
    """A stand-in scontrol in its own folder, to put first on PATH."""

    def __init__(self, folder: Path, answer: Path = IDLE, rc: int = 0, hang: bool = False):
        folder.mkdir()
        self.dir = folder
        path = folder / "scontrol"
        path.write_text(FAKE_SCONTROL.format(python=sys.executable, here=str(folder)))
        path.chmod(0o755)
        self.answer(answer.read_text(), rc)
        if hang:
            (folder / "hang").write_text("")

    def answer(self, text: str, rc: int = 0) -> None:
        (self.dir / "show-node.txt").write_text(text)
        (self.dir / "show-node.rc").write_text(str(rc))

    @property
    def calls(self) -> list[list[str]]:
        path = self.dir / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def env(self, **more: str) -> dict[str, str]:
        return {"PATH": f"{self.dir}:{os.environ['PATH']}", **more}


def healthcheck(scontrol: Scontrol, tmp_path: Path, *args: str, policy: str = "", env=None,
                timeout: float = 60):  # fmt: skip
    path = tmp_path / "policy.toml"
    path.write_text(policy)
    return run_dldoctor("slurm-healthcheck", "--policy", str(path), *args,
                        env={**scontrol.env(), **(env or {})}, timeout=timeout)  # fmt: skip


def sent_reason(calls: list[list[str]]) -> str:
    (update,) = [c for c in calls if c[0] == "update"]
    assert update[:3] == ["update", "nodename=vm", "state=drain"], update
    assert update[3].startswith("reason="), update
    return update[3].removeprefix("reason=")


# --- what scontrol says ------------------------------------------------------------------


def test_the_state_and_reason_of_real_scontrol_output():
    idle = parse_show_node(IDLE.read_text())
    assert (idle.state, idle.reason, idle.drained_by_us) == ("IDLE", "", False)
    ours = parse_show_node(OURS.read_text())
    assert ours.state == "IDLE+DRAIN" and ours.drained_by_us
    # Slurm's " [root@2026-12-01T17:31:19]" stamp is not part of the reason we wrote.
    assert ours.reason.endswith("below the policy's 1.04858e+06 GiB"), ours.reason
    admin = parse_show_node(ADMIN.read_text())
    assert (admin.state, admin.reason, admin.drained_by_us) == (
        "IDLE+DRAIN",
        "admin: new DIMMs",
        False,
    )
    assert parse_show_node(NOT_FOUND.read_text()) == parse_show_node("")
    # Brackets of a person's own are theirs: only the "[user@time]" stamp is Slurm's.
    assert parse_show_node("   Reason=see [ticket 12]\n").reason == "see [ticket 12]"


# --- the drain reason --------------------------------------------------------------------


def _finding(check_id: str, status: Status, summary: str) -> Finding:
    return Finding(id=check_id, title=check_id, category="x", status=status, summary=summary)


def test_the_reason_names_every_failed_check_and_the_first_summary_on_one_line():
    findings = [
        _finding("system.kernel.version", Status.WARN, "5.4 is older than 5.15"),
        _finding("gpu.count", Status.FAIL, "7 GPU(s),\nthe policy expects 8\t"),
        _finding("storage.raid", Status.FAIL, "md0 degraded"),
        _finding("system.libc", Status.ERROR, "`getconf` timed out"),
    ]
    assert drain_reason(findings) == (
        "dldoctor: gpu.count, storage.raid: 7 GPU(s), the policy expects 8"
    )
    assert drain_reason(findings, strict=True).startswith(
        "dldoctor: gpu.count, storage.raid, system.kernel.version: 7 GPU(s)"
    )
    assert drain_reason(findings[:1]) == ""
    assert drain_reason(findings[3:]) == ""  # an error is no verdict on the node


def test_a_long_reason_is_cut_and_loses_the_closing_quote_scontrol_would_drop():
    long = [_finding("storage.space", Status.FAIL, "x\x00y " + "/data/" * 200 + 'q"')]
    reason = drain_reason(long)
    assert len(reason) == MAX_REASON_CHARS and reason.endswith("...")
    assert reason.startswith("dldoctor: storage.space: x y /data/")
    assert reason.isprintable()
    assert drain_reason([_finding("a.b", Status.FAIL, 'quoted "x"')]) == 'dldoctor: a.b: quoted "x'


def test_a_real_run_with_a_long_summary_sends_a_capped_reason(tmp_path):
    scontrol = Scontrol(tmp_path / "bin")
    missing = "/nonexistent/" + "d" * 400
    policy = f'[storage]\ndata_paths = ["{missing}"]\n'
    proc = healthcheck(scontrol, tmp_path, "--only", "storage.space", "--drain", "--node", "vm",
                       policy=policy)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    reason = sent_reason(scontrol.calls)
    assert reason.startswith("dldoctor: storage.space: ") and "/nonexistent/ddd" in reason
    assert len(reason) <= MAX_REASON_CHARS and reason.endswith("...")


# --- drain and resume --------------------------------------------------------------------


def test_a_failing_run_drains_the_node_with_a_dldoctor_reason(tmp_path):
    scontrol = Scontrol(tmp_path / "bin", IDLE)
    proc = healthcheck(scontrol, tmp_path, *MEMORY, "--drain", "--node", "vm", policy=FAILING)
    assert proc.returncode == 1, proc.stderr
    assert scontrol.calls[0] == ["show", "node", "vm"]
    reason = sent_reason(scontrol.calls)
    assert reason.startswith("dldoctor: system.memory: ") and "GiB RAM" in reason
    assert proc.stdout.splitlines()[1].startswith("fail system.memory: ")
    assert proc.stdout.splitlines()[0].endswith(f"node vm: drained: {reason}")


def test_without_drain_slurm_is_never_asked(tmp_path):
    scontrol = Scontrol(tmp_path / "bin", IDLE)
    proc = healthcheck(scontrol, tmp_path, *MEMORY, "--node", "vm", policy=FAILING)
    assert proc.returncode == 1
    assert scontrol.calls == []
    assert "node vm: not changed (no --drain)" in proc.stdout


def test_a_node_drained_for_the_same_checks_is_not_updated_again(tmp_path):
    # The capture's summary says 22.9 GiB available; this run's will differ, and does not
    # matter: the same check failed.
    scontrol = Scontrol(tmp_path / "bin", OURS)
    proc = healthcheck(scontrol, tmp_path, *MEMORY, "--drain", "--node", "vm", policy=FAILING)
    assert proc.returncode == 1
    assert scontrol.calls == [["show", "node", "vm"]]
    assert "node vm: already drained: dldoctor: system.memory: 23.5 GiB RAM" in proc.stdout


def test_a_node_drained_for_other_checks_gets_the_new_reason(tmp_path):
    scontrol = Scontrol(tmp_path / "bin", OURS)
    proc = healthcheck(scontrol, tmp_path, "--only", "cpu.inventory", "--drain", "--node", "vm",
                       policy="[cpu]\nmin_cores = 100000\n")  # fmt: skip
    assert proc.returncode == 1
    reason = sent_reason(scontrol.calls)
    assert reason.startswith("dldoctor: cpu.inventory: ")
    assert reason.endswith("fewer than the policy's 100000 cores")


def test_a_passing_run_resumes_a_node_dldoctor_drained(tmp_path):
    scontrol = Scontrol(tmp_path / "bin", OURS)
    proc = healthcheck(scontrol, tmp_path, *MEMORY, "--drain", "--node", "vm")
    assert proc.returncode == 0, proc.stderr
    assert scontrol.calls == [["show", "node", "vm"], ["update", "nodename=vm", "state=resume"]]
    assert "node vm: resumed (dldoctor had drained it: dldoctor: system.memory" in proc.stdout


@pytest.mark.parametrize("policy", ["", FAILING], ids=["passing", "failing"])
def test_a_node_someone_else_drained_is_never_resumed_nor_its_reason_replaced(tmp_path, policy):
    scontrol = Scontrol(tmp_path / "bin", ADMIN)
    proc = healthcheck(scontrol, tmp_path, *MEMORY, "--drain", "--node", "vm", policy=policy)
    assert proc.returncode == (1 if policy else 0), proc.stderr
    assert scontrol.calls == [["show", "node", "vm"]]
    assert "its reason is someone else's: admin: new DIMMs" in proc.stdout


def test_a_passing_run_leaves_a_node_in_service_alone(tmp_path):
    scontrol = Scontrol(tmp_path / "bin", IDLE)
    proc = healthcheck(scontrol, tmp_path, *MEMORY, "--drain", "--node", "vm")
    assert proc.returncode == 0
    assert scontrol.calls == [["show", "node", "vm"]]


@pytest.mark.parametrize("answer", [IDLE, OURS], ids=["in-service", "drained-by-dldoctor"])
def test_a_run_that_could_not_finish_neither_drains_nor_resumes(tmp_path, answer):
    scontrol = Scontrol(tmp_path / "bin", answer)
    fake_command(scontrol.dir, "getconf", "exec sleep 600")  # system.libc asks it
    proc = healthcheck(scontrol, tmp_path, "--only", "system.libc", "--timeout", "1", "--drain",
                       "--node", "vm")  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert scontrol.calls == []
    assert proc.stdout.splitlines()[1].startswith(
        "error system.libc: `getconf GNU_LIBC_VERSION` did not answer"
    )
    assert "node vm: left as it is: the checks could not finish" in proc.stdout


def test_a_failed_check_beside_one_that_could_not_finish_still_drains(tmp_path):
    # As for `--check`: a host known to be broken is broken, whatever else was not seen.
    scontrol = Scontrol(tmp_path / "bin", IDLE)
    fake_command(scontrol.dir, "getconf", "exec sleep 600")
    proc = healthcheck(scontrol, tmp_path, "--only", "system.memory,system.libc", "--timeout",
                       "1", "--drain", "--node", "vm", policy=FAILING)  # fmt: skip
    assert proc.returncode == 1
    assert sent_reason(scontrol.calls).startswith("dldoctor: system.memory: ")


# --- which node --------------------------------------------------------------------------


def test_the_node_is_slurmds_name_then_the_flag_then_the_host_name(tmp_path):
    scontrol = Scontrol(tmp_path / "bin", IDLE)
    healthcheck(scontrol, tmp_path, *MEMORY, "--drain", env={"SLURMD_NODENAME": "gpu-17"})
    healthcheck(scontrol, tmp_path, *MEMORY, "--drain", "--node", "gpu-9",
                env={"SLURMD_NODENAME": "gpu-17"})  # fmt: skip
    healthcheck(scontrol, tmp_path, *MEMORY, "--drain", env={"SLURMD_NODENAME": ""})
    short = socket.gethostname().split(".")[0]
    assert [c[2] for c in scontrol.calls] == ["gpu-17", "gpu-9", short]


# --- scontrol failing, and time ----------------------------------------------------------


def test_a_node_slurm_does_not_know_is_exit_7(tmp_path):
    scontrol = Scontrol(tmp_path / "bin", NOT_FOUND, rc=1)
    proc = healthcheck(scontrol, tmp_path, *MEMORY, "--drain", "--node", "vm", policy=FAILING)
    assert proc.returncode == SLURM_FAILED
    assert proc.stdout.splitlines()[0].endswith(
        "node vm: not changed: `scontrol show node vm` exited 1: Node nosuch not found"
    )
    assert "problems found" in proc.stdout  # the verdict is still said


def test_no_scontrol_on_path_is_exit_7(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    policy = tmp_path / "policy.toml"
    policy.write_text(FAILING)
    proc = run_dldoctor("slurm-healthcheck", "--policy", str(policy), *MEMORY, "--drain",
                        "--node", "vm", env={"PATH": str(empty)})  # fmt: skip
    assert proc.returncode == SLURM_FAILED
    assert "node vm: not changed: `scontrol show node vm`: command not installed" in proc.stdout


def test_a_hung_scontrol_costs_its_timeout_and_no_more(tmp_path):
    scontrol = Scontrol(tmp_path / "bin", IDLE, hang=True)
    proc = healthcheck(scontrol, tmp_path, *MEMORY, "--drain", "--node", "vm", policy=FAILING)
    assert proc.returncode == SLURM_FAILED
    assert f"`scontrol show node vm` did not answer within {SCONTROL_TIMEOUT_S:g} s" in proc.stdout
    assert scontrol.calls == [["show", "node", "vm"]]  # no drain after a read that failed


def test_hung_checks_and_a_hung_scontrol_end_well_inside_slurms_60_s(tmp_path):
    # The worst case: the checks run into the deadline, then scontrol hangs.
    scontrol = Scontrol(tmp_path / "bin", IDLE, hang=True)
    fake_command(scontrol.dir, "getconf", "exec sleep 600")
    # Slurm kills a health check at 60 s: that is the bound, a hang guard as well.
    proc = healthcheck(scontrol, tmp_path, "--only", "system.memory,system.libc", "--timeout",
                       "300", "--deadline", "3", "--drain", "--node", "vm",
                       policy=FAILING, timeout=60)  # fmt: skip
    assert proc.returncode == SLURM_FAILED, proc.stdout + proc.stderr
    assert "error system.libc: did not finish before the run's deadline" in proc.stdout
    said = f"`scontrol show node vm` did not answer within {SCONTROL_TIMEOUT_S:g} s"
    assert said in proc.stdout, proc.stdout


def test_the_deadline_must_leave_room_before_slurms_kill(tmp_path):
    scontrol = Scontrol(tmp_path / "bin", IDLE)
    proc = healthcheck(scontrol, tmp_path, *MEMORY, "--drain", "--deadline", "50")
    assert proc.returncode == 2
    assert proc.stderr == (
        "dldoctor: --deadline 50: at most 40 s for slurm-healthcheck (slurmd kills it at 60 s)\n"
    )
    # A policy written for interactive runs is cut to fit, and says so.
    proc = healthcheck(scontrol, tmp_path, *MEMORY, "--node", "vm",
                       policy="[timeouts]\ndeadline_s = 300\n")  # fmt: skip
    assert proc.returncode == 0
    assert "timeouts.deadline_s (300 s) is cut to 40 s" in proc.stderr
    assert scontrol.calls == []


@pytest.mark.parametrize(
    ("args", "policy", "code"),
    [(("--only", "nosuch"), "", 2), (MEMORY, "[memory]\nmin_total_gib = -1\n", 4)],
    ids=["unknown-check", "bad-policy"],
)
def test_a_bad_command_line_or_policy_never_touches_the_node(tmp_path, args, policy, code):
    scontrol = Scontrol(tmp_path / "bin", OURS)
    proc = healthcheck(scontrol, tmp_path, *args, "--drain", "--node", "vm", policy=policy)
    assert proc.returncode == code, proc.stderr
    assert scontrol.calls == []


# --- a real cluster ----------------------------------------------------------------------

# Where the daemons would write by default: nothing may appear there.
SYSTEM_DIRS = (
    "/run/munge", "/var/run/munge", "/var/log/munge", "/var/lib/munge", "/etc/munge",
    "/run/slurm", "/var/run/slurm", "/var/spool/slurmd", "/var/spool/slurmctld",
    "/var/spool/slurm", "/var/lib/slurm", "/var/log/slurm", "/etc/slurm",
)  # fmt: skip


def _system_files() -> set[str]:
    found = set()
    for top in SYSTEM_DIRS:
        for folder, dirs, files in os.walk(top):
            found.update(os.path.join(folder, name) for name in dirs + files)
    return found


def _wait(what: str, ready, cluster: Cluster, within: float = 60.0) -> None:
    until = time.monotonic() + within
    while time.monotonic() < until:
        if ready():
            return
        time.sleep(0.25)
    log = cluster.dir / "healthcheck.log"
    pytest.fail(
        f"{what} within {within:g} s; sinfo: {cluster.sinfo('%T|%E')!r}; health checks: "
        f"{log.read_text() if log.exists() else '(none ran)'}; slurmd: {cluster.tail('slurmd')}"
    )


# The first line of each run (stderr's warnings also start with "dldoctor: ").
RUN_LINE = re.compile(
    r"dldoctor: (healthy|problems found|incomplete).* in [\d.]+ s \(exit \d+\); node "
)


def _runs(cluster: Cluster) -> list[str]:
    log = cluster.dir / "healthcheck.log"
    text = log.read_text() if log.exists() else ""
    return [line for line in text.splitlines() if RUN_LINE.match(line)]


def _logged(cluster: Cluster, text: str) -> None:
    _wait(f"no health check said {text!r}", lambda: any(text in r for r in _runs(cluster)),
          cluster, within=15)  # fmt: skip


def _set_policy(folder: Path, text: str) -> None:
    tmp = folder / "policy.toml.new"
    tmp.write_text(text)
    os.replace(tmp, folder / "policy.toml")  # a health check never reads half a file


@pytest.mark.slurm
def test_slurm_drains_the_node_on_a_failing_policy_and_resumes_it_on_a_passing_one():
    if os.geteuid() != 0:
        pytest.skip("munged, slurmctld and slurmd run as root here (SlurmUser=root)")
    if missing := missing_programs():
        pytest.skip(f"not installed: {', '.join(missing)}")
    before = _system_files()
    # Not pytest's tmp_path: munge's socket path must fit in sun_path (108 bytes).
    folder = Path(tempfile.mkdtemp(prefix="dldoctor-slurm-"))
    script = folder / "healthcheck.sh"
    # slurmd gives its HealthCheckProgram SLURMD_NODENAME alone: the wrapper finds PATH's
    # tools itself; SLURM_CONF is this test's (a site's is /etc/slurm/slurm.conf).
    script.write_text(
        "#!/bin/sh\n"
        f"export SLURM_CONF={folder / 'slurm.conf'} DLDOCTOR_NO_PLUGINS=1\n"
        f"exec {sys.executable} -m dldoctor slurm-healthcheck --drain --only system.memory "
        f"--policy {folder / 'policy.toml'} >> {folder / 'healthcheck.log'} 2>&1\n"
    )
    script.chmod(0o755)
    _set_policy(folder, "")
    cluster = Cluster(folder, script, interval=2)
    try:
        cluster.write_config()
        try:
            cluster.start()
        except NotStarted as exc:
            pytest.skip(f"the Slurm daemons did not start here: {exc}")
        node = cluster.node

        _set_policy(folder, FAILING)
        _wait(
            "the node was not drained by dldoctor",
            lambda: (cluster.sinfo("%T|%E") or "").startswith("drained|dldoctor: system.memory: "),
            cluster,
        )
        # The run prints once it has drained: its line may come just after sinfo's.
        _logged(cluster, f"node {node}: drained: dldoctor: system.memory: ")
        # slurmd saw the failing exit status (once the run that drained has ended).
        _wait(
            "slurmd logged no failed health check",
            lambda: "health_check failed: rc:1" in (folder / "slurmd.log").read_text(),
            cluster,
            within=15,
        )

        _set_policy(folder, "")
        _wait("the node did not return to idle", lambda: cluster.sinfo("%T|%E") == "idle|none",
              cluster)  # fmt: skip
        _logged(cluster, f"node {node}: resumed (dldoctor had drained it")

        # A drain that is not dldoctor's outlives passing health checks.
        done = len(_runs(cluster))
        took = cluster.scontrol("update", f"nodename={node}", "state=drain",
                                "reason=admin: new DIMMs")  # fmt: skip
        assert took.returncode == 0, took.stderr
        _wait("two more health checks did not run", lambda: len(_runs(cluster)) >= done + 2,
              cluster)  # fmt: skip
        assert cluster.sinfo("%T|%E") == "drained|admin: new DIMMs"
        assert _runs(cluster)[-1].endswith("its reason is someone else's: admin: new DIMMs")
        seconds = [
            float(m.group(1)) for r in _runs(cluster) if (m := re.search(r" in ([\d.]+) s", r))
        ]
        assert seconds and max(seconds) < 20, seconds  # the default deadline
    finally:
        cluster.stop()
        left = cluster.running_from_folder()
        shutil.rmtree(folder, ignore_errors=True)
    assert not left, f"still running after the daemons stopped: {left}"
    assert not any(proc.poll() is None for proc in cluster.procs.values())
    assert _system_files() == before, sorted(_system_files() ^ before)
