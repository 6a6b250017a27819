"""`dldoctor snapshot`: a recorded run written as a bundle that replays to the same
findings, with the readable reports beside it."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS


def _findings(report: dict) -> dict[str, tuple[str, str]]:
    return {f["id"]: (f["status"], f["summary"]) for f in report["findings"]}


def test_a_snapshot_of_a_fixture_host_replays_to_the_same_findings(tmp_path):
    host = HOSTS / "hgx-h100x8-gpu3-x8"
    proc = run_dldoctor("snapshot", "--dir", "--from", str(host), "-o", str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(tmp_path / "b")
    original = report_of(run_dldoctor("--check", "--json", "--from", str(host)))
    replayed = report_of(run_dldoctor("--check", "--json", "--from", str(tmp_path / "b")))
    assert _findings(replayed) == _findings(original)
    assert any(s == "fail" for s, _ in _findings(replayed).values())  # the x8 GPU is in it
    inside = json.loads((tmp_path / "b" / "report.json").read_text())
    assert _findings(inside) == _findings(original)


def test_a_snapshot_of_this_machine_replays_to_its_own_report(tmp_path):
    proc = run_dldoctor("snapshot", "--dir", "-o", str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stderr
    bundle = tmp_path / "b"
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["format"] == "dldoctor-bundle"
    for member in ("report.json", "report.md", "report.html"):
        assert f"{member}" in manifest["files"], member
    recorded = json.loads((bundle / "report.json").read_text())
    replayed = report_of(run_dldoctor("--check", "--json", "--from", str(bundle)))
    assert {k: s for k, (s, _) in _findings(replayed).items()} == {
        k: s for k, (s, _) in _findings(recorded).items()
    }
    # Every extra was asked, and each is in the bundle, whether the tool is here or not.
    commands = {p.name for p in (bundle / "commands").iterdir()}
    for name in ("nvidia-smi_topo_-m", "numactl_-H", "ibv_devinfo_-v", "lspci_-vvv"):
        assert name in commands


def test_a_snapshot_never_overwrites(tmp_path):
    (tmp_path / "b").mkdir()
    proc = run_dldoctor("snapshot", "--dir", "--from", str(HOSTS / "ubuntu2204-healthy"),
                        "-o", str(tmp_path / "b"))  # fmt: skip
    assert proc.returncode == 6
    assert (
        proc.stderr.startswith("dldoctor: cannot write the snapshot:") and "exists" in proc.stderr
    )
    assert list((tmp_path / "b").iterdir()) == []


def test_snapshot_options_belong_to_snapshot():
    proc = run_dldoctor("--check", "-o", "x")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_the_default_snapshot_is_a_named_archive_that_replays(tmp_path):
    host = HOSTS / "hgx-h100x8-ib-init"
    proc = subprocess.run(
        [sys.executable, "-m", "dldoctor", "snapshot", "--from", str(host)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "DLDOCTOR_NO_PLUGINS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip())
    assert path.parent == tmp_path and re.fullmatch(
        r"dldoctor-[A-Za-z0-9._-]+-\d{8}T\d{6}Z\.tar\.gz", path.name
    ), path.name
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no work folder left
    original = report_of(run_dldoctor("--check", "--json", "--from", str(host)))
    replayed = report_of(run_dldoctor("--check", "--json", "--from", str(path)))
    assert _findings(replayed) == _findings(original)


def _archive_text(path: Path) -> str:
    """Every member's name and bytes, decompressed, and the files answers.json carries in
    base64 decoded too: all a reader of the archive could find."""
    parts = []
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            parts.append(member.name)
            data = tar.extractfile(member).read() if member.isfile() else b""
            parts.append(data.decode("latin-1"))
            if member.name.endswith("/answers.json"):
                for meta in json.loads(data).get("read", {}).values():
                    parts.append(base64.b64decode(meta.get("content_b64", "")).decode("latin-1"))
    return "\n".join(parts).lower()


def test_a_snapshot_holds_none_of_the_planted_secrets(tmp_path):
    from tests.support.planted import planted_host, planted_values

    host = planted_host(tmp_path / "planted")
    map_path = tmp_path / "private" / "map.json"
    (tmp_path / "private").mkdir()
    archives = []
    for name in ("one.tar.gz", "two.tar.gz"):
        proc = run_dldoctor("snapshot", "--from", str(host), "-o", str(tmp_path / name),
                            "--redact-map", str(map_path))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        archives.append(tmp_path / name)
    text = _archive_text(archives[0])
    assert [v for v in planted_values() if v.lower() in text] == []
    assert "report.html" in text and "nvml.json" in text  # the members were read
    assert map_path.stat().st_mode & 0o777 == 0o600
    # The same map twice: the same pseudonyms (the host summary of both reports).
    hosts = []
    for archive in archives:
        with tarfile.open(archive) as tar:
            report = next(m for m in tar.getmembers() if m.name.endswith("/report.json"))
            hosts.append(json.loads(tar.extractfile(report).read())["host"]["hostname"])
    assert hosts[0] == hosts[1] and hosts[0].startswith("host-")


def test_a_redacted_and_a_plain_snapshot_of_one_host_do_not_differ(tmp_path):
    host = HOSTS / "hgx-h100x8-roce-mtu1500"  # addresses, GIDs, MACs: much to redact
    plain, redacted = tmp_path / "plain", tmp_path / "redacted.tar.gz"
    for args in (("--no-redact", "--dir", "-o", str(plain)), ("-o", str(redacted))):
        proc = run_dldoctor("snapshot", "--from", str(host), *args)
        assert proc.returncode == 0, proc.stderr
    proc = run_dldoctor("diff", "--json", str(plain), str(redacted))
    assert proc.returncode == 0, proc.stdout
    assert json.loads(proc.stdout)["equivalent"] is True


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_one_rewritten_line_on_a_terminal_and_nothing_elsewhere():
    from dldoctor.snapshots.take import Progress

    quiet, tty = io.StringIO(), _Terminal()
    for stream in (quiet, tty):
        p = Progress(stream)
        p.say("waiting for 3 extra(s)")
        p.say("writing the bundle")
        p.done()
    assert quiet.getvalue() == ""
    assert tty.getvalue() == (
        "\r\x1b[Kdldoctor snapshot: waiting for 3 extra(s)"
        "\r\x1b[Kdldoctor snapshot: writing the bundle\r\x1b[K"
    )
