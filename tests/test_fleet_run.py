"""`dldoctor fleet run` through ClusterShell: its exec worker runs tests/support/fleet_node.py once
per node (`%h` its name), each a fake node whose real dldoctor replays a fixture bundle, or
that is down, hangs or prints garbage; its ssh worker meets a closed port."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import uuid

import pytest

from tests.support.cli import run_dldoctor
from tests.support.marks import DEADLINES
from tests.support.paths import HOSTS, TESTS

NODE = f"exec {sys.executable} {TESTS / 'support' / 'fleet_node.py'} %h"
HEALTHY, OLD_DRIVER, GPU3_X8 = (
    str(HOSTS / h) for h in ("hgx-h100x8-healthy", "hgx-h100x8-driver535", "hgx-h100x8-gpu3-x8")
)


def plan(tmp_path, nodes: dict) -> dict:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(nodes))
    return {"FLEET_PLAN": str(path)}


@pytest.fixture
def groups(tmp_path):
    """A ClusterShell configuration with the group @gpu = node[001-050]."""
    cfg = tmp_path / "clustershell"
    (cfg / "groups.d").mkdir(parents=True)
    (cfg / "groups.conf").write_text("[Main]\ndefault: rack\nautodir: $CFGDIR/groups.d\n")
    (cfg / "groups.d" / "rack.yaml").write_text("rack:\n  gpu: 'node[001-050]'\n")
    return {"CLUSTERSHELL_CFGDIR": str(cfg)}


@DEADLINES  # eight nodes at once take every core
def test_a_sweep_of_50_nodes_names_exactly_the_odd_ones(tmp_path, groups):
    policy = tmp_path / "policy.toml"
    policy.write_text('[gpu]\nmin_driver = "550.54.15"\n')  # read by the nodes from stdin
    # The 50 nodes are the point, not 50 runs of one bundle: two healthy nodes run dldoctor,
    # the other healthy ones print again the report such a run printed.
    healthy = run_dldoctor("--check", "--json", "--from", HEALTHY, "--policy", str(policy))
    assert healthy.returncode == 0, healthy.stderr
    (tmp_path / "healthy.json").write_text(healthy.stdout)
    nodes = {f"node{i:03d}": {"report": str(tmp_path / "healthy.json")} for i in range(1, 51)}
    for node in ("node001", "node050"):
        nodes[node] = {"bundle": HEALTHY, "policy": True}
    nodes["node007"] = {"bundle": OLD_DRIVER, "policy": True}
    nodes["node013"] = {"bundle": GPU3_X8, "policy": True}
    nodes["node021"] = "unreachable"
    nodes["node042"] = "garbage"
    nodes["node045"] = {"bundle": HEALTHY, "policy": True, "snapshot": True}
    out = tmp_path / "sweep"
    proc = run_dldoctor(
        "fleet",
        "run",
        "-w",
        "@gpu",
        "--exec",
        NODE,
        "--fanout",
        "8",
        "--timeout",
        "300",
        "--policy",
        str(policy),
        "-o",
        str(out),
        "--json",
        env={**plan(tmp_path, nodes), **groups},
        timeout=600,
    )
    assert proc.returncode == 1, proc.stderr  # node013's link fails pci.link.width
    # A pipe: no progress bar, one line saying where the reports are.
    assert proc.stderr == f"dldoctor: 50 node(s) swept into {out}\n"
    doc = json.loads(proc.stdout)
    summary = doc["summary"]
    assert summary["nodes"]["nodeset"] == "node[001-050]"
    assert (summary["nodes"]["total"], summary["nodes"]["reported"]) == (50, 48)
    problems = {kind: p["nodes"] for kind, p in doc["problems"].items() if p["count"]}
    assert problems == {"unreachable": "node021", "not_a_report": "node042"}
    assert "No route to host" in doc["problems"]["unreachable"]["details"]["node021"]
    assert doc["problems"]["not_a_report"]["details"]["node042"].startswith("not JSON")
    odd = {(o["label"], o["value"], o["nodes"], o["majority"]) for o in doc["odd_ones_out"]}
    assert odd == {
        ("nvidia.driver", "535.161.08", "node007", "550.54.15"),
        ("nvidia.cuda_driver", "12.2", "node007", "12.4"),
        ("pcie.width 0000:48:00.0 (GPU 3)", "x8", "node013", "x16"),
    }
    checks = {c["id"]: c for c in doc["checks"]}
    assert checks["pci.link.width"]["nodes"] == {"fail": "node013"}
    assert checks["pci.link.width"]["counts"]["pass"] == 47
    # The policy crossed stdin: only node007's driver is older than its minimum.
    assert checks["gpu.driver.version"]["nodes"] == {"warn": "node007"}
    assert summary["failing"]["nodes"] == "node013"
    assert summary["odd"]["nodes"] == "node[007,013]"

    record = json.loads((out / "sweep.json").read_text())
    assert record["worker"] == "exec" and len(record["nodes"]) == 50
    assert record["nodes"]["node021"]["exit_code"] == 255
    files = sorted(p.name for p in out.iterdir())
    assert "node045.tar.gz" in files and "node042.out" in files
    assert len([f for f in files if f.endswith(".json")]) == 47 + 1  # and sweep.json
    # The folder is the sweep: `fleet report` on it says the same.
    again = run_dldoctor("fleet", "report", "--json", str(out))
    assert again.returncode == 1 and json.loads(again.stdout) == doc


def test_a_node_that_hangs_is_timed_out_and_killed(tmp_path):
    pid_file = tmp_path / "hang.pid"
    nodes = {"n1": "hang", "n2": "unreachable", "n3": "garbage"}
    env = {**plan(tmp_path, nodes), "FLEET_HANG_PID": str(pid_file)}
    proc = run_dldoctor(
        "fleet",
        "run",
        "-w",
        "n[1-3]",
        "--exec",
        NODE,
        "--timeout",
        "2",
        "--json",
        "-o",
        str(tmp_path / "out"),
        env=env,
        timeout=30,  # a hang guard: the node's 2 s timeout is what the report says below
    )
    assert proc.returncode == 3, proc.stderr  # no check failed; nodes not reported
    doc = json.loads(proc.stdout)
    assert doc["problems"]["timed_out"]["details"] == {"n1": "no answer within 2 s"}
    assert doc["problems"]["unreachable"]["nodes"] == "n2"
    assert doc["problems"]["not_a_report"]["nodes"] == "n3"
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # ClusterShell killed it at its timeout, and reaped it


def test_the_ssh_worker_reports_a_refused_connection_as_unreachable(tmp_path):
    proc = run_dldoctor(
        "fleet",
        "run",
        "-w",
        "127.0.0.1",
        "--ssh-options=-oPort=1",
        "--json",
        "-o",
        str(tmp_path / "out"),
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    found = doc["problems"]["unreachable"]["details"]
    assert list(found) == ["127.0.0.1"] and "Connection refused" in found["127.0.0.1"]
    record = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert record["worker"] == "ssh" and record["command"] == "dldoctor --check --json"


def test_a_terminal_gets_a_progress_bar(tmp_path):
    nodes = {"n1": "unreachable", "n2": "garbage"}
    main, child = pty.openpty()
    cmd = [
        sys.executable,
        "-m",
        "dldoctor",
        "fleet",
        "run",
        "-w",
        "n[1-2]",
        "--exec",
        NODE,
        "-o",
        str(tmp_path / "out"),
    ]
    env = {**os.environ, **plan(tmp_path, nodes), "COLUMNS": "100"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=child, env=env)
    os.close(child)
    seen = b""
    while True:
        ready, _, _ = select.select([main], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the pty's other side closed
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=60)
    os.close(main)
    assert b"dldoctor on the nodes" in seen
    assert b"swept into" in seen
    assert b"dldoctor on the nodes" not in out and b"not a report" in out


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["-w", "node[1-"], 2, "-w/-x"),
        (["-w", "node1", "-x", "node1"], 2, "no node in that node set"),
        (["-w", "node1", "--fanout", "0"], 2, "--fanout"),
        (["-w", "a/b"], 2, "is not a host name"),
        (["-w", "node1", "--policy", "/nonexistent.toml"], 4, "cannot read policy"),
    ],
)
def test_bad_arguments_are_refused_before_any_node_runs(tmp_path, args, code, message):
    env = plan(tmp_path, {})  # a node that ran would fail: it has no plan
    proc = run_dldoctor("fleet", "run", *args, "--exec", NODE, "-o", str(tmp_path / "o"), env=env)
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "o" / "sweep.json").exists()


def test_a_folder_that_is_not_empty_is_refused(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "node1.json").write_text("{}")
    proc = run_dldoctor("fleet", "run", "-w", "node1", "--exec", NODE, "-o", str(tmp_path / "o"))
    assert proc.returncode == 2 and "not empty" in proc.stderr


def test_a_node_command_past_its_timeout_is_killed_with_what_it_started(tmp_path):
    # `--exec` runs through /bin/sh: at the timeout the shell and the command it started
    # are killed, not the shell alone. The sleep's number is this test's alone.
    marker = f"600.{uuid.uuid4().int % 10**9:09d}"
    out = tmp_path / "out"
    proc = run_dldoctor("fleet", "run", "-w", "n[1-2]", "--exec", f"sleep {marker}; true",
                        "--timeout", "2", "-o", str(out))  # fmt: skip
    left = subprocess.run(["pgrep", "-f", f"^sleep {marker}"], capture_output=True, text=True)
    for pid in left.stdout.split():  # never left to the next tests, even when this one fails
        os.kill(int(pid), 9)
    assert proc.returncode == 3, proc.stderr
    assert json.loads((out / "sweep.json").read_text())["nodes"]["n2"]["outcome"] == "timed_out"
    assert left.stdout == ""


def test_a_percent_sign_clustershell_cannot_replace_is_refused_before_any_node_runs(tmp_path):
    proc = run_dldoctor("fleet", "run", "-w", "n1", "--exec", "date +%s", "-o", str(tmp_path / "o"))
    assert proc.returncode == 2, proc.stderr  # not 5: a command line is no internal error
    assert proc.stderr.startswith("dldoctor: --exec: ") and "%%" in proc.stderr
    assert not (tmp_path / "o").exists()
