"""What a user without root gets (issue 9): a file the user may not read is a note and,
where a verdict rested on it, an `error` or a `skip` with the reason, never a verdict.
Marked `nonroot`: .ci/run runs these as nobody; under root they are skipped (root reads
every file whatever its mode)."""

from __future__ import annotations

import os
import shutil

from tests.support.cli import report_of, run_dldoctor
from tests.support.marks import nonroot
from tests.support.paths import HOSTS

SCENARIO = "hgx-h100x8-healthy"
CRASHED = ("crashed", "did not finish")


def _report(*args: str) -> dict:
    proc = run_dldoctor("--check", "--json", *args)
    assert proc.stderr == "", proc.stderr
    report = report_of(proc)
    assert report["summary"]["exit_code"] == proc.returncode
    return report


@nonroot
def test_files_the_user_cannot_read_give_no_verdict(tmp_path):
    tree = tmp_path / "root"
    shutil.copytree(HOSTS / SCENARIO / "files", tree, symlinks=True)
    readable = {f["id"]: f for f in _report("--root", str(tree))["findings"]}
    for folder, _, files in os.walk(tree):
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0)
    denied = _report("--root", str(tree))
    changed = []
    for f in denied["findings"]:
        assert f["summary"].strip() and not any(c in f["summary"] for c in CRASHED), f
        was = readable[f["id"]]["status"]
        if f["status"] != was and f["status"] in ("pass", "fail"):
            changed.append(f"{f['id']}: {was} -> {f['status']}: {f['summary']}")
    assert changed == []
    said = " ".join(" ".join([f["summary"], *f["details"]]) for f in denied["findings"])
    assert "permission denied" in said  # the denials were seen, not taken for absence


@nonroot
def test_a_live_run_without_root_ends_with_reasons():
    report = _report()
    assert report["summary"]["exit_code"] in (0, 1, 3)
    for f in report["findings"]:
        assert f["summary"].strip() and not any(c in f["summary"] for c in CRASHED), f
