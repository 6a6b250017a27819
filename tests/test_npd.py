"""`--format npd`: node-problem-detector's custom plugin protocol (pkg/custompluginmonitor:
exit 0 OK, 1 NonOK, anything else Unknown; stdout trimmed is the message, cut at
max_output_length bytes, 80 by default). On fixture hosts: healthy 0, failing 1, a run
whose checks could not finish 2; the message names the failing checks in at most 80 bytes,
shortened between words."""

from __future__ import annotations

import pytest

from dldoctor.model import Finding, Report, Status
from dldoctor.render.npd import MAX_MESSAGE, render_npd, shorten
from tests.support.cli import run_dldoctor
from tests.support.paths import HOSTS


def npd(*args: str):
    proc = run_dldoctor("--format", "npd", *args)
    assert proc.stdout.endswith("\n") and proc.stdout.count("\n") == 1, proc.stdout
    message = proc.stdout.strip()  # what NPD keeps: strings.TrimSpace of stdout
    assert 0 < len(message.encode()) <= MAX_MESSAGE == 80
    return proc, message


@pytest.mark.parametrize(
    ("host", "code", "message"),
    [
        ("hgx-h100x8-healthy", 0, "no problem: 57 passed, 18 not applicable"),
        ("hgx-h100x8-numa-balancing", 0, "no problem: 56 passed, 1 warned, 18 not applicable"),
        ("hgx-h100x8-raid-degraded", 1, "1 failed: storage.raid"),
        ("hgx-h100x8-gpu3-x8", 1, "1 failed: pci.link.width"),
        # Warnings are no problem unless --strict; what could not finish makes it unknown.
        ("docker-ubuntu2004-lowmem", 2, "1 could not finish: system.libc"),
    ],
)
def test_exit_code_and_message_on_fixture_hosts(host, code, message):
    proc, said = npd("--from", str(HOSTS / host))
    assert proc.returncode == code, proc.stderr
    assert said == message


def test_a_run_whose_checks_could_not_finish_is_unknown_never_a_problem(incomplete_host):
    proc, said = npd("--from", str(incomplete_host))
    assert proc.returncode == 2, proc.stderr
    assert said == "1 could not finish: system.libc"


def test_strict_makes_a_warning_a_problem():
    proc, said = npd("--strict", "--from", str(HOSTS / "hgx-h100x8-numa-balancing"))
    assert proc.returncode == 1 and said == "1 warned: numa.balancing"


@pytest.mark.parametrize(
    "args", [["--no-such-option"], ["--from", "/no/such/bundle"], ["--deadline", "0"]]
)
def test_a_doctor_that_could_not_run_is_unknown(args):
    proc, said = npd(*args)
    assert proc.returncode == 2 and said.startswith("dldoctor could not run: ")


def test_a_long_list_is_cut_between_two_ids_with_an_ellipsis():
    ids = [f"gpu.check{i}.with.a.long.name" for i in range(12)]
    findings = [Finding(i, "T", "gpu", Status.FAIL, "bad") for i in ids]
    findings.append(Finding("system.libc", "C", "system", Status.ERROR, "timed out"))
    message = render_npd(Report(findings)).decode().strip()
    assert len(message.encode()) <= 80 and message.endswith("...")
    assert message.startswith("12 failed: gpu.check0.with.a.long.name, ")
    named = message[len("12 failed: ") : -len("...")].split(", ")
    assert named == ids[: len(named)]  # whole ids only, in order: none cut in the middle
    assert len(message) > 80 - len(ids[0]) - 5  # and as many as fit


def test_shorten_counts_bytes_and_cuts_inside_a_word_only_when_it_must():
    assert shorten("short enough", 80) == "short enough"
    text = "é" * 50  # 100 bytes, one word
    cut = shorten(text, 80)
    assert len(cut.encode()) <= 80 and cut == "é" * 38 + "..."
    assert shorten("aaa bbb ccc ddd", 12) == "aaa bbb..."
    assert shorten("aaa, bbb, ccc", 12) == "aaa, bbb..."
