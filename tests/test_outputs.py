"""`--format` and `--output FILE`, and the `--NAME FILE` outputs beside stdout's: the same
report in each, written atomically (a collector never reads half a file), an unwritable
one a one-line error with exit 6, two formats asked of stdout a usage error."""

from __future__ import annotations

import json
import os

import pytest

from dldoctor.render.formats import FORMATS
from tests.support.cli import run_dldoctor
from tests.support.paths import HOSTS

HOST = str(HOSTS / "hgx-h100x8-gpu3-x8")


def test_output_writes_the_format_to_the_file_and_nothing_to_stdout(tmp_path):
    out = tmp_path / "report.json"
    proc = run_dldoctor("--from", HOST, "--format", "json", "--output", str(out))
    assert proc.returncode == 1 and proc.stdout == ""
    written = json.loads(out.read_text())
    assert written["summary"]["exit_code"] == 1
    assert "pci.link.width" in {f["id"] for f in written["findings"] if f["status"] == "fail"}
    same = json.loads(run_dldoctor("--from", HOST, "--json").stdout)
    assert [f["status"] for f in same["findings"]] == [f["status"] for f in written["findings"]]


def test_the_text_file_is_the_checklist_without_colour(tmp_path):
    out = tmp_path / "report.txt"
    run_dldoctor("--from", HOST, "--format", "text", "--output", str(out))
    text = out.read_text(encoding="utf-8")
    assert "\x1b[" not in text
    stdout = run_dldoctor("--from", HOST, "--check", "--color", "never").stdout
    # Between the header (it names the run) and the footer (its time): the same lines.
    assert text.splitlines()[1:-1] == stdout.splitlines()[1:-1]
    assert "Doctor found issues in 2 checks" in text.splitlines()[-1]


def test_several_outputs_in_one_run_agree(tmp_path):
    junit, text = tmp_path / "r.xml", tmp_path / "r.txt"
    proc = run_dldoctor(
        "--from", HOST, "--json", "--junit", str(junit), "--output", str(text)
    )  # --output takes the --json report; the JUnit file beside it
    assert proc.returncode == 1, proc.stderr
    assert json.loads(text.read_text())["summary"]["counts"]["fail"] >= 1
    assert b'name="pci.link.width"' in junit.read_bytes()


def test_an_output_file_is_replaced_whole_and_leaves_no_temporary_beside_it(tmp_path):
    out = tmp_path / "report.xml"
    out.write_text("old content that is longer than nothing at all\n" * 1000)
    os.chmod(out, 0o644)
    run_dldoctor("--from", HOST, "--check", "--junit", str(out))
    assert out.read_bytes().startswith(b"<?xml") and b"old content" not in out.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.xml"]


@pytest.mark.parametrize("flag", ["--output", "--junit"])
def test_an_unwritable_output_is_exit_6_in_one_line(tmp_path, flag):
    nowhere = tmp_path / "no" / "such" / "dir" / "r.out"
    proc = run_dldoctor("--from", HOST, "--check", flag, str(nowhere))
    assert proc.returncode == 6
    assert proc.stderr.strip().count("\n") == 0 and str(nowhere) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_two_formats_for_stdout_is_a_usage_error_before_any_work():
    proc = run_dldoctor("--from", "/no/such/bundle", "--json", "--format", "text")
    assert proc.returncode == 2
    assert "--json and --format text" in proc.stderr


def test_every_format_is_offered_and_renders_a_report(tmp_path):
    for name in FORMATS:
        out = tmp_path / f"r.{name}"
        proc = run_dldoctor("--from", HOST, "--format", name, "--output", str(out))
        assert proc.returncode in (1, 2), (name, proc.stderr)  # nagios says CRITICAL: 2
        assert out.stat().st_size > 0, name
