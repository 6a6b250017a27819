"""Hostile values for the redactor: a map, a bundle or a text that would make it fail get a
one-line error (exit 4) or a correct bundle, never an internal error (exit 5)."""

from __future__ import annotations

import json
import shutil
import tarfile
import time

import pytest

from dldoctor.snapshots.redact import CHUNK_CHARS, LEFT_OUT, Redactor, redact_bundle
from tests.support.bundlebuilder import BundleBuilder
from tests.support.cli import run_dldoctor
from tests.support.paths import HOSTS

HOST = HOSTS / "ubuntu2204-healthy"


def _snapshot(tmp_path, source, *extra):
    out = tmp_path / "out.tar.gz"
    proc = run_dldoctor("snapshot", "--from", str(source), "-o", str(out), *extra)
    return proc, out


@pytest.mark.parametrize("kinds", [[], {"host": []}, {"host": {"a": 1}}, "x"])
def test_a_redact_map_of_the_wrong_shape_is_one_line_and_exit_4(tmp_path, kinds):
    bad = tmp_path / "map.json"
    bad.write_text(json.dumps({"format": "dldoctor-redaction-map", "kinds": kinds}))
    proc, out = _snapshot(tmp_path, HOST, "--redact-map", str(bad))
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.count("\n") == 1 and "'kinds' must map" in proc.stderr
    assert not out.exists()


def _deep(n: int) -> str:
    return '{"status": "ok", "value": {"devices": ' + '[{"a": ' * n + "1" + "}]" * n + "}}"


def test_a_bundle_nested_700_deep_snapshots_to_a_correct_bundle(tmp_path):
    source = tmp_path / "deep"
    shutil.copytree(HOST, source, symlinks=True)
    (source / "nvml.json").write_text(_deep(350))  # 700 levels: a list and a dict each
    proc, out = _snapshot(tmp_path, source, "--redact-map", str(tmp_path / "map.json"))
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(out) as tar:
        (name,) = [n for n in tar.getnames() if n.endswith("/nvml.json")]
        text = tar.extractfile(name).read().decode()
    assert text.count("[") == 350 and json.loads(text)["status"] == "ok"


def test_a_manifest_naming_a_lone_surrogate_snapshots_to_a_correct_bundle(tmp_path):
    source = tmp_path / "surrogate"
    shutil.copytree(HOST, source, symlinks=True)
    (source / "manifest.json").write_text(
        '{"format": "dldoctor-bundle", "format_version": 1, "files": {"\\ud800": "00"}}'
    )
    proc, out = _snapshot(tmp_path, source, "--redact-map", str(tmp_path / "map.json"))
    assert proc.returncode == 0, proc.stderr
    assert "differ from its manifest" in proc.stderr and "internal error" not in proc.stderr
    replay = run_dldoctor("--check", "--json", "--from", str(out))
    assert replay.returncode in (0, 1), replay.stderr


def test_assignments_nested_in_assignments_do_not_recurse():
    # /proc/cmdline or a unit's Environment= of "A=A=A=...": each NAME= read once, in line
    text = "A=" * 20_000 + "x PASSWORD=A=hunter2"
    redacted = Redactor().text(text)
    assert redacted.startswith("A=A=A=") and "hunter2" not in redacted


def test_past_its_deadline_redaction_leaves_the_rest_of_a_long_log_out(tmp_path):
    root = tmp_path / "long"
    shutil.copytree(HOST, root, symlinks=True)
    line = "2026-11-29T08:00:10 node kernel: job token ghp_R7pQ2xZ9kL4mN8vB3cF6hJ1tY5wE0aSdGuIo\n"
    log = line * (2 * CHUNK_CHARS // len(line) + 10)  # three chunks
    argv = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise"]
    BundleBuilder(root).command(argv, log)
    stdout = root / "commands" / "_".join(argv) / "stdout"
    hostname = (root / "files/proc/sys/kernel/hostname").read_text().strip()
    redact_bundle(str(root), Redactor(), deadline=time.monotonic())  # already past it
    assert stdout.read_text() == LEFT_OUT % len(log)  # nothing of it, and it says so
    # the small members are redacted all the same
    assert hostname not in (root / "files/proc/sys/kernel/hostname").read_text()
    whole = tmp_path / "whole"
    shutil.copytree(HOST, whole, symlinks=True)
    BundleBuilder(whole).command(argv, log)
    redact_bundle(str(whole), Redactor())  # no deadline: every chunk
    text = (whole / "commands" / "_".join(argv) / "stdout").read_text()
    assert text.count("\n") == log.count("\n") and "ghp_" not in text and "secret-0001" in text
