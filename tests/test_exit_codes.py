"""docs/exit-codes.md is the one exit-code table of every mode: each cell with a meaning is
run here, as a user runs dldoctor (a child process), and must end with that code — and
every run listed here must be a cell of the table, so the two cannot drift apart."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_dldoctor
from tests.support.paths import HOSTS

TABLE = Path(__file__).parent.parent / "docs" / "exit-codes.md"
HEALTHY = str(HOSTS / "hgx-h100x8-healthy")
FAILING = str(HOSTS / "hgx-h100x8-gpu3-x8")  # one check fails (the x8 link)
WARNING = str(HOSTS / "hgx-h100x8-numa-balancing")  # warns, fails nothing
NOWHERE = "/dev/null/out"  # no one, root included, can make a folder in a device
NO_BUNDLE = "/no/such/bundle"
# Fails on any machine: more RAM than exists (the Slurm test's policy).
HUGE_RAM = "[memory]\nmin_total_gib = 1048576\n"


def documented() -> dict[str, set[int]]:
    """mode (the first `...` of its row) -> the codes its row gives a meaning."""
    rows: dict[str, set[int]] = {}
    lines = [ln for ln in TABLE.read_text(encoding="utf-8").splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for line in lines[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        mode = re.match(r"`([^`]*)`", cells[0]).group(1)
        rows[mode] = {int(code) for code, cell in zip(header[1:], cells[1:], strict=True) if cell}
    return rows


def write_policy(tmp_path: Path, text: str) -> str:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return str(path)


# (mode, code) -> the arguments (a function of tmp_path) and extra environment.
RUNS = {
    ("--check", 0): lambda t: ["--check", "--from", HEALTHY],
    ("--check", 1): lambda t: ["--check", "--json", "--from", FAILING],
    ("--check", 2): lambda t: ["--check", "--only", "no.such.check"],
    ("--check", 3): lambda t: ["--check", "--from", "INCOMPLETE"],
    ("--check", 4): lambda t: ["--check", "--from", NO_BUNDLE],
    ("--check", 6): lambda t: ["--check", "--from", HEALTHY, "--junit", NOWHERE],
    ("--format nagios", 0): lambda t: ["--format", "nagios", "--from", HEALTHY],
    ("--format nagios", 1): lambda t: ["--format", "nagios", "--from", WARNING],
    ("--format nagios", 2): lambda t: ["--format", "nagios", "--from", FAILING],
    ("--format nagios", 3): lambda t: ["--format", "nagios", "--from", NO_BUNDLE],
    ("--format npd", 0): lambda t: ["--format", "npd", "--from", HEALTHY],
    ("--format npd", 1): lambda t: ["--format", "npd", "--from", FAILING],
    ("--format npd", 2): lambda t: ["--format", "npd", "--from", "INCOMPLETE"],
    ("snapshot", 0): lambda t: ["snapshot", "--from", HEALTHY, "--dir", "-o", str(t / "b")],
    ("snapshot", 2): lambda t: ["snapshot", "--no-such-option"],
    # Its path goes to a stdout nobody reads, already full: still writing at the deadline.
    ("snapshot", 3): lambda t: [
        "snapshot", "--from", HEALTHY, "--deadline", "1", "--dir", "-o", str(t / "b"), ">full pipe"
    ],
    ("snapshot", 4): lambda t: ["snapshot", "--from", NO_BUNDLE, "-o", str(t / "b")],
    ("snapshot", 6): lambda t: ["snapshot", "--from", HEALTHY, "--dir", "-o", NOWHERE + "/b"],
    ("diff A B", 0): lambda t: ["diff", HEALTHY, HEALTHY],
    ("diff A B", 1): lambda t: ["diff", HEALTHY, FAILING],
    ("diff A B", 2): lambda t: ["diff", HEALTHY],
    ("diff A B", 4): lambda t: ["diff", HEALTHY, NO_BUNDLE],
    ("fix", 0): lambda t: ["fix", "--from", FAILING],
    ("fix", 1): lambda t: ["fix", "fix.no.such", "--from", HEALTHY],
    ("fix", 2): lambda t: ["fix", "--no-such-option"],
    ("fix", 4): lambda t: ["fix", "--from", NO_BUNDLE],
    ("genconf", 0): lambda t: ["genconf", "--from", HEALTHY],
    ("genconf", 1): lambda t: ["genconf", "--from", FAILING],
    ("genconf", 2): lambda t: ["genconf", "--from", HEALTHY, "--root", "/"],
    ("genconf", 4): lambda t: ["genconf", "--from", NO_BUNDLE],
    ("genconf", 6): lambda t: ["genconf", "--from", HEALTHY, "--output", NOWHERE],
    ("slurm-healthcheck", 0): lambda t: ["slurm-healthcheck", "--only", "system.kernel.version"],
    ("slurm-healthcheck", 1): lambda t: [
        "slurm-healthcheck", "--only", "system.memory", "--policy", write_policy(t, HUGE_RAM)
    ],
    ("slurm-healthcheck", 2): lambda t: ["slurm-healthcheck", "--deadline", "50"],
    ("slurm-healthcheck", 4): lambda t: ["slurm-healthcheck", "--policy", NO_BUNDLE],
    # The node must be drained and there is no scontrol to do it with.
    ("slurm-healthcheck", 7): lambda t: [
        "slurm-healthcheck", "--drain", "--node", "n1", "--only", "system.memory",
        "--policy", write_policy(t, HUGE_RAM),
    ],
}  # fmt: skip
RUNS.update({
    ("fleet run", 0): lambda t: ["fleet", "report", *node_reports(t, HEALTHY, HEALTHY)],
    ("fleet run", 1): lambda t: ["fleet", "report", *node_reports(t, HEALTHY, FAILING)],
    ("fleet run", 2): lambda t: ["fleet", "run", "-w", "node[", "-o", str(t / "sweep")],
    ("fleet run", 3): lambda t: ["fleet", "report", *node_reports(t, HEALTHY, "garbage")],
    ("fleet run", 4): lambda t: ["fleet", "report", NO_BUNDLE],
    ("fleet run", 6): lambda t: ["fleet", "report", *node_reports(t, HEALTHY), ">/dev/full"],
    ("diff A B", 6): lambda t: ["diff", HEALTHY, FAILING, ">/dev/full"],
    ("fix", 6): lambda t: ["fix", "--from", FAILING, ">/dev/full"],
    ("slurm-healthcheck", 6): lambda t: ["slurm-healthcheck", "--only", "system.kernel", ">/dev/full"],
})  # fmt: skip
# Runs that must not find scontrol (or anything else) on PATH.
EMPTY_PATH = {("slurm-healthcheck", 7)}
# Cells that need what a test cannot make on demand, and why.
NOT_RUN = {
    ("slurm-healthcheck", 3): "a live run whose probe times out: tests/test_slurm.py fakes one",
}


def node_reports(folder: Path, *hosts: str) -> list[str]:
    """One report file per host (`--check --json` of that fixture), or a file of garbage."""
    paths = []
    for i, host in enumerate(hosts):
        path = folder / f"node{i + 1:02d}.json"
        made = (
            "not a report"
            if host == "garbage"
            else run_dldoctor("--check", "--json", "--from", host).stdout
        )
        path.write_text(made)
        paths.append(str(path))
    return paths


@contextlib.contextmanager
def stdout_of(kind: str):
    """The shell's `> /dev/full` (every write fails, ENOSPC), or a pipe nobody reads whose
    buffer is already full (every write blocks)."""
    if kind == ">/dev/full":
        with open("/dev/full", "w") as full:
            yield full
        return
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(write_end, False)
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(write_end, b"x" * 65536)
        os.set_blocking(write_end, True)
        yield write_end
    finally:
        os.close(read_end)
        os.close(write_end)


def test_the_table_and_the_runs_name_the_same_cells():
    cells = {(mode, code) for mode, codes in documented().items() for code in codes}
    assert set(RUNS) | set(NOT_RUN) == cells


@pytest.mark.parametrize("cell", sorted(RUNS), ids=lambda c: f"{c[0]}={c[1]}")
def test_each_cell_of_the_table_is_the_code_dldoctor_exits_with(cell, tmp_path, incomplete_host):
    argv = [str(incomplete_host) if a == "INCOMPLETE" else a for a in RUNS[cell](tmp_path)]
    env = {"PATH": str(tmp_path)} if cell in EMPTY_PATH else None
    if argv[-1] in (">/dev/full", ">full pipe"):
        with stdout_of(argv[-1]) as stdout:
            proc = subprocess.run(
                [sys.executable, "-m", "dldoctor", *argv[:-1]],
                stdout=stdout,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "DLDOCTOR_NO_PLUGINS": "1"},
                timeout=60,
            )
        proc.stdout = ""
    else:
        proc = run_dldoctor(*argv, env=env)
    assert proc.returncode == cell[1], (argv, proc.stdout[-500:], proc.stderr[-500:])
    assert "Traceback" not in proc.stderr
    if cell[1] in (2, 4, 6) and not cell[0].startswith("--format"):
        assert proc.stderr.strip(), "a run that could not do its job says why, on stderr"


def test_the_readme_points_at_the_table():
    readme = (TABLE.parent.parent / "README.md").read_text(encoding="utf-8")
    assert "docs/exit-codes.md" in readme
