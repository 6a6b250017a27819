"""The command line as CI and users meet it: exit codes, JSON, no Textual, timeouts."""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys

import pytest

from dldoctor.exitcodes import ExitCode
from tests.support.bundlebuilder import BundleBuilder
from tests.support.cli import findings_of, report_of, run_dldoctor, verdicts
from tests.support.commands import fake_command
from tests.support.paths import FIXTURES, HOSTS

HEALTHY = str(HOSTS / "ubuntu2204-healthy")
LEGACY = str(HOSTS / "rhel72-legacy")


def test_version():
    from dldoctor import __version__

    proc = run_dldoctor("--version")
    assert (proc.returncode, proc.stdout.strip()) == (0, f"dldoctor {__version__}")


def test_json_on_this_machine_is_valid_and_complete():
    proc = run_dldoctor("--check", "--json")
    report = report_of(proc)
    assert report["schema_version"] == 2
    assert proc.returncode == report["summary"]["exit_code"]
    assert proc.returncode in (ExitCode.OK, ExitCode.PROBLEMS)
    assert {"system.os.release", "system.kernel.version", "system.memory"} <= set(verdicts(report))
    assert report["host"]["kernel"] == os.uname().release
    for f in findings_of(report):
        assert f["evidence"] or f["status"] == "skip", f"{f['id']} names no evidence"
        # System facts answer on any Linux; GPU probes may be slow on a real GPU runner.
        if f["category"] == "system":
            assert f["status"] != "error", f


def test_exit_0_healthy_and_checklist_text():
    proc = run_dldoctor("--check", "--from", HEALTHY, "--color", "never")
    assert proc.returncode == ExitCode.OK
    assert "[✓] Operating system: Ubuntu 22.04.4 LTS" in proc.stdout
    assert "No issues found!" in proc.stdout


def test_exit_1_on_failure_and_on_warnings_with_strict():
    assert run_dldoctor("--check", "--from", LEGACY).returncode == ExitCode.OK  # warnings only
    assert run_dldoctor("--check", "--from", LEGACY, "--strict").returncode == ExitCode.PROBLEMS
    policy = str(FIXTURES / "policies/fleet-64g.toml")
    assert (
        run_dldoctor("--check", "--from", HEALTHY, "--policy", policy).returncode
        == ExitCode.PROBLEMS
    )


@pytest.mark.parametrize("args", [
    ["--bogus"], ["--only", "gpu.nonexistent"], ["--timeout", "0"],
    ["--timeout", "1e7"], ["--timeout", "1e300"],  # poll() cannot wait that long
    ["--only", ""], ["--only", ","], ["--skip", ""],  # not "everything"
    ["--only", "system", "--skip", "system"],  # nothing to run is no "No issues found!"
])  # fmt: skip
def test_exit_2_usage(args):
    proc = run_dldoctor("--check", "--from", HEALTHY, *args)
    assert proc.returncode == ExitCode.USAGE
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert "internal error" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("dldoctor: ")


def test_a_timeout_out_of_range_says_the_range():
    proc = run_dldoctor("--check", "--from", HEALTHY, "--timeout", "1e7")
    assert proc.stderr == "dldoctor: --timeout must be more than 0 and at most 3600 seconds\n"
    assert run_dldoctor("--check", "--from", HEALTHY, "--timeout", "3600").returncode == 0


def test_exit_3_when_a_check_cannot_finish(tmp_path):
    b = BundleBuilder(tmp_path / "b").command(["getconf", "GNU_LIBC_VERSION"], status="timeout",
                                              timeout_s=10.0)  # fmt: skip
    report = report_of(proc := run_dldoctor("--check", "--json", "--from", str(b.root)))
    assert proc.returncode == ExitCode.INCOMPLETE
    assert verdicts(report)["system.libc"] == "error"


@pytest.mark.parametrize("make", [
    lambda p: ["--from", str(p / "absent")],
    lambda p: (p.joinpath("answers.json").write_text("{"), ["--from", str(p)])[1],
    lambda p: ["--from", str(p)],  # an empty directory is no bundle
    lambda p: (p.joinpath("README").write_text("notes\n"), ["--from", str(p)])[1],
    lambda p: ["--from", "/etc"],
    lambda p: ["--policy", str(p / "absent.toml")],
    lambda p: (p.joinpath("bad.toml").write_text("[kernel]\nmin = 1\n"), ["--policy", str(p / "bad.toml")])[1],
])  # fmt: skip
def test_exit_4_unreadable_input_is_one_line(tmp_path, make):
    proc = run_dldoctor("--check", *make(tmp_path))
    assert proc.returncode == ExitCode.BAD_INPUT
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("dldoctor: ")


def test_only_and_skip_by_category_and_id():
    report = report_of(run_dldoctor("--check", "--json", "--from", HEALTHY, "--only", "system",
                                    "--skip", "system.memory,system.python"))  # fmt: skip
    ids = set(verdicts(report))
    assert (
        "system.memory" not in ids and "system.python" not in ids and "system.kernel.version" in ids
    )


def test_skips_are_counted_unless_verbose():
    plain = run_dldoctor("--check", "--from", HEALTHY, "--color", "never").stdout
    assert "[-]" not in plain and "not applicable here (-v lists them" in plain
    verbose = run_dldoctor("--check", "-v", "--from", HEALTHY, "--color", "never").stdout
    assert "[-] NVIDIA driver:" in verbose


def test_verbose_shows_details_evidence_and_timings():
    out = run_dldoctor("--check", "-v", "--from", HEALTHY, "--color", "never").stdout
    assert "evidence: read /proc/meminfo" in out
    assert "id system.memory ·" in out and " ms" in out


def test_list_checks():
    proc = run_dldoctor("--list-checks")
    assert proc.returncode == 0 and "system.kernel.version" in proc.stdout


def test_check_never_imports_textual_nor_cpuinfo():
    code = (
        "import sys; from dldoctor.cli import main; rc = main(['--check', '--json']);"
        "bad = [m for m in ('textual', 'cpuinfo', 'prometheus_client') if m in sys.modules];"
        "print('IMPORTED', bad, file=sys.stderr); sys.exit(0 if not bad else 99)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # And as a whole process, whatever imports at start-up (.pth files included):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "dldoctor", "--check", "--json"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines()
                if line.startswith("import time:")}  # fmt: skip
    assert "dldoctor" in imported
    assert not imported & {"textual", "cpuinfo", "prometheus_client"}


def test_a_passive_check_never_imports_the_active_tier():
    # Its checks and measuring code load only with --active (a tenth of the start-up).
    code = (
        "import sys; from dldoctor.cli import main; rc = main(['--check', '--json']);"
        "print(sorted(m for m in sys.modules if m.startswith('dldoctor.')), file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    modules = proc.stderr.strip().splitlines()[-1]
    assert "'dldoctor.checks.pci'" in modules and "'dldoctor.checks.storage'" in modules
    assert "dldoctor.active" not in modules and "dldoctor.checks.perf" not in modules


def test_the_measuring_checks_live_in_the_measuring_modules_only():
    # A passive run skips those modules unimported (registry.MEASURING_MODULES): a
    # measuring check elsewhere would run without --active, a passive one there never.
    from dldoctor.registry import MEASURING_MODULES, builtin_checks

    specs = builtin_checks(active=True)
    where = {s.id: (s.fn.__module__.rpartition(".")[2].startswith(MEASURING_MODULES), s.active)
             for s in specs}  # fmt: skip
    assert any(active for _, active in where.values())
    assert {i: w for i, w in where.items() if w[0] != w[1]} == {}
    assert {s.id for s in builtin_checks()} == {i for i, (_, active) in where.items() if not active}


def test_a_hanging_command_errors_only_its_checks_and_the_run_ends_in_time(tmp_path):
    # Fake `python3` and `getconf` that would sleep for five minutes.
    for name in ("python3", "getconf"):
        fake_command(tmp_path, name, "sleep 300")
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    # Only the system checks: on a GPU runner NVML itself may need more than 1 s. The 30 s
    # is a hang guard: what proves the 1 s timeout fired is each check's summary.
    proc = run_dldoctor("--check", "--json", "--only", "system", "--timeout", "1", env=env,
                        timeout=30)  # fmt: skip
    report = report_of(proc)
    by_id = {f["id"]: f for f in report["findings"]}
    assert by_id["system.python"]["status"] == "error"
    assert by_id["system.python"]["summary"].startswith("`python3 -I -c ")
    assert by_id["system.python"]["summary"].endswith("` did not answer within 1 s (timed out)")
    assert (
        by_id["system.libc"]["summary"]
        == "`getconf GNU_LIBC_VERSION` did not answer within 1 s (timed out)"
    )
    others = {i: f["status"] for i, f in by_id.items() if i not in ("system.python", "system.libc")}
    assert "error" not in others.values()
    assert proc.returncode == ExitCode.INCOMPLETE or "fail" in others.values()


def test_a_policy_that_is_a_directory_is_bad_input(tmp_path):
    (tmp_path / "p.toml").mkdir()
    proc = run_dldoctor("--check", "--policy", str(tmp_path / "p.toml"))
    assert proc.returncode == ExitCode.BAD_INPUT
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_a_bug_outside_the_checks_is_exit_5_in_one_line(monkeypatch, capsys):
    import dldoctor.diagnose
    from dldoctor.cli import main

    def broken(*args, **kwargs):
        raise RuntimeError("renderer exploded")

    monkeypatch.setattr(dldoctor.diagnose, "diagnose", broken)
    monkeypatch.delenv("DLDOCTOR_DEBUG", raising=False)
    assert main(["--check", "--from", HEALTHY]) == ExitCode.INTERNAL
    err = capsys.readouterr().err
    assert err == ("dldoctor: internal error: RuntimeError: renderer exploded "
                   "(set DLDOCTOR_DEBUG=1 for the traceback)\n")  # fmt: skip


def test_json_report_round_trips():
    from dldoctor.model import Report

    report = report_of(run_dldoctor("--check", "--json", "--from", LEGACY))
    again = Report.from_dict(report).to_dict()
    assert again == report
    assert json.loads(json.dumps(again)) == report


def test_a_latin1_terminal_still_gets_valid_json_and_text():
    env = {"PYTHONIOENCODING": "latin-1"}
    proc = run_dldoctor("--check", "--json", "--from", LEGACY, env=env)
    assert proc.returncode == 0 and report_of(proc)["schema_version"] == 2
    text = subprocess.run([sys.executable, "-m", "dldoctor", "--check", "--from", LEGACY],
                          capture_output=True, env={**os.environ, **env}, timeout=60)  # fmt: skip
    assert text.returncode == 0 and text.stderr == b""
    assert "Operating system" in text.stdout.decode("latin-1")


@pytest.mark.parametrize("value", ["inf", "nan", "-1"])
def test_timeouts_must_be_finite_and_positive(value):
    assert (
        run_dldoctor("--check", "--from", HEALTHY, "--timeout", value).returncode == ExitCode.USAGE
    )


def _dldoctor_into(stdout, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DLDOCTOR_NO_PLUGINS": "1"}
    return subprocess.run([sys.executable, "-m", "dldoctor", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=60)  # fmt: skip


@pytest.mark.parametrize("mode", [[], ["-v"], ["--json"]])
@pytest.mark.parametrize("host, args, code", [(HEALTHY, [], ExitCode.OK),
                                              (LEGACY, ["--strict"], ExitCode.PROBLEMS)])  # fmt: skip
def test_a_pipe_closed_early_keeps_the_verdicts_exit_code(mode, host, args, code):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone (`| head -1`): every write meets EPIPE
    try:
        proc = _dldoctor_into(write_end, "--check", *mode, "--from", host, *args)
    finally:
        os.close(write_end)
    assert proc.returncode == code
    assert proc.stderr == ""  # no "Exception ignored", no internal error


def test_a_reader_that_stops_after_one_line_keeps_the_exit_code():
    argv = [sys.executable, "-m", "dldoctor", "--check", "-v", "--from", HEALTHY]
    env = {**os.environ, "DLDOCTOR_NO_PLUGINS": "1"}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        assert proc.stdout.readline().startswith(b"dldoctor ")
        proc.stdout.close()  # like `head -1`; the rest may or may not have been written yet
        assert proc.wait(timeout=60) == ExitCode.OK
        assert proc.stderr.read() == b""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("mode", [[], ["--json"]])
def test_a_full_stdout_is_an_output_error_in_one_line(mode):
    with open("/dev/full", "w") as full:
        proc = _dldoctor_into(full, "--check", *mode, "--from", HEALTHY)
    assert proc.returncode == ExitCode.OUTPUT
    assert proc.stderr == "dldoctor: cannot write the report: No space left on device\n"


@pytest.mark.parametrize("mode", [[], ["--json"]])
def test_a_closed_stdout_is_an_output_error_in_one_line(mode):
    script = '"$0" -m dldoctor --check "$@" >&-'
    proc = subprocess.run(["sh", "-c", script, sys.executable, *mode, "--from", HEALTHY],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DLDOCTOR_NO_PLUGINS": "1"})  # fmt: skip
    assert proc.returncode == ExitCode.OUTPUT
    assert proc.stderr == "dldoctor: cannot write the report: standard output is closed\n"


def _table_rows(text: str) -> dict[int, list[str]]:
    """The first markdown table in `text` whose header starts with `code`, by code."""
    lines = text[text.index("| code |") :].splitlines()[2:]
    rows = itertools.takewhile(lambda line: line.startswith("|"), lines)
    return {
        int(cells[1]): [c.strip() for c in cells[2:-1]] for cells in (r.split("|") for r in rows)
    }


def test_the_exit_code_table_is_the_same_in_the_code_and_the_readme():
    import dldoctor.exitcodes as exitcodes
    from tests.support.paths import TESTS

    readme = (TESTS.parent / "README.md").read_text()
    in_code = _table_rows(exitcodes.__doc__)
    in_readme = _table_rows(readme[readme.index("## Exit codes") :])
    assert set(in_code) == set(in_readme) == {int(c) for c in ExitCode}
    assert {code: row[0] for code, row in in_code.items()} == {int(c): c.name for c in ExitCode}


def test_a_probe_that_timed_out_is_never_a_verdict_on_the_driver(tmp_path):
    # This machine, every probe cut short: the NVIDIA driver check cannot fail.
    report = report_of(run_dldoctor("--check", "--json", "--only", "gpu.driver.loaded",
                                    "--timeout", "0.01"))  # fmt: skip
    assert verdicts(report)["gpu.driver.loaded"] in ("skip", "error")
    # A bundle whose NVML probe timed out: an error while a GPU is on the bus ...
    b = BundleBuilder(tmp_path / "b").probe("nvml", None, status="timeout")
    for name, value in (("vendor", "0x10de"), ("class", "0x030200"), ("device", "0x2330")):
        b.file(f"/sys/bus/pci/devices/0000:18:00.0/{name}", value + "\n")
    proc = run_dldoctor("--check", "--json", "--only", "gpu.driver", "--from", str(b.root))
    assert verdicts(report_of(proc))["gpu.driver.loaded"] == "error"
    assert proc.returncode == ExitCode.INCOMPLETE
    # ... and not applicable on a bus read in full that shows no NVIDIA device.
    c = BundleBuilder(tmp_path / "c").probe("nvml", None, status="timeout")
    (c.root / "files/sys/bus/pci/devices").mkdir(parents=True)
    proc = run_dldoctor("--check", "--json", "--only", "gpu.driver", "--from", str(c.root))
    assert verdicts(report_of(proc))["gpu.driver.loaded"] == "skip"
    assert proc.returncode == ExitCode.OK


def test_verbose_evidence_shows_a_path_that_is_no_link_as_such(tmp_path):
    from dldoctor.model import Evidence

    assert str(Evidence("link", "/tmp", "error")) == "link /tmp (not a link)"
    assert str(Evidence("read", "/sys/x", "error")) == "read /sys/x (error)"
    # /dev/shm a plain folder: the shm fact asks whether it is a link (old Debian's /run/shm).
    b = BundleBuilder(tmp_path / "b").file("/dev/shm/.keep", "")
    b.answer("statvfs", "/dev/shm", status="ok",
             value={"f_frsize": 4096, "f_blocks": 2**20, "f_bavail": 2**20})  # fmt: skip
    out = run_dldoctor("--check", "-v", "--only", "memory.devshm", "--from", str(b.root),
                       "--color", "never").stdout  # fmt: skip
    assert "evidence: link /dev/shm (not a link)" in out
    assert "(error)" not in out


def test_json_is_one_compact_line_for_a_program_and_indented_at_a_terminal():
    from dldoctor.model import Finding, Report, Status
    from dldoctor.render.jsondoc import render_json

    report = Report(findings=[Finding("a.b", "A", "a", Status.PASS, "fine")])
    piped, tty = io.StringIO(), io.StringIO()
    tty.isatty = lambda: True
    render_json(report, stream=piped)
    render_json(report, stream=tty)
    assert piped.getvalue().count("\n") == 1 and tty.getvalue().count("\n") > 10
    assert json.loads(piped.getvalue()) == json.loads(tty.getvalue())


@pytest.mark.parametrize("args", [["--list-checks"], ["--check"]])
def test_a_full_or_closed_stdout_is_exit_6_for_every_output(args):
    env = {**os.environ, "DLDOCTOR_NO_PLUGINS": "1"}
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "dldoctor", *args], stdout=full,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=60)  # fmt: skip
    assert proc.returncode == 6, proc.stderr
    assert proc.stderr.strip() == "dldoctor: cannot write the report: No space left on device"
