"""fix.network.load_peermem through `dldoctor fix`, under a temporary root copied from the
no-peermem fixture host; a fake modprobe first on PATH loads the module the way the kernel
would show it: a line in (the root's) /proc/modules."""

from __future__ import annotations

import os
import shutil

from dldoctor.fixes.network import PEERMEM_CONF
from tests.support.cli import report_of, run_dldoctor
from tests.support.commands import fake_command
from tests.support.paths import HOSTS
from tests.support.trees import tree

HOST = HOSTS / "hgx-h100x8-no-peermem"
FIX = "fix.network.load_peermem"


def test_the_finding_offers_the_fix():
    report = report_of(run_dldoctor("--check", "--json", "--from", str(HOST)))
    (finding,) = [f for f in report["findings"] if f["id"] == "network.gpudirect"]
    assert finding["status"] == "warn" and finding["fixes"] == [FIX]


def test_load_peermem_applied_fixed_and_undone(tmp_path):
    root = tmp_path / "root"
    shutil.copytree(HOST / "files", root, symlinks=True)
    modules = root / "proc/modules"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_command(
        bindir,
        "modprobe",
        f"""
if [ "$1" = -r ]; then grep -v '^nvidia_peermem ' {modules} > {modules}.new; mv {modules}.new {modules}
else echo 'nvidia_peermem 16384 0 - Live 0x0000000000000000' >> {modules}; fi""",
    )
    env = {"PATH": f"{bindir}:{os.environ['PATH']}"}
    before = tree(root)
    applied = run_dldoctor("fix", FIX, "--apply", "--yes", "--root", str(root), env=env)
    assert applied.returncode == 0, applied.stderr
    assert "fixed (network.gpudirect pass)" in applied.stdout
    assert (root / PEERMEM_CONF.lstrip("/")).read_text().endswith("nvidia-peermem\n")
    journal_id = run_dldoctor("fix", "--history", "--root", str(root)).stdout.split()[0]
    undone = run_dldoctor("fix", "--undo", journal_id, "--root", str(root), env=env)
    assert undone.returncode == 0, undone.stderr
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before
