"""`--format nagios`: one status line, matched against the plugin API's grammar (the
Monitoring Plugins Development Guidelines, "Plugin Output", "Plugin Return Codes" and
"Performance data"), its performance data read back by the Monitoring Plugins project's own
parser (Monitoring::Plugin::Performance) where it is installed, and the exit code 0 OK,
1 WARNING, 2 CRITICAL, 3 UNKNOWN on fixture hosts, for dldoctor's own failures too."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from dldoctor.model import Finding, Report, Status
from dldoctor.render.nagios import render_nagios
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS

# The guidelines' grammar: `'label'=value[UOM];[warn];[crit];[min];[max]`, space separated;
# label any characters but `=` and `'`, quoted when it has spaces; value, min and max in
# [-0-9.] (value may be "U"); warn and crit ranges `[@]start:end` ("~" is minus infinity,
# "start:" may be left out when 0, "end" when infinite); UOM none, s/ms/us, %, B/KB/MB/TB, c;
# trailing unfilled semicolons may be dropped.
NUM = r"-?[0-9.]+"
RANGE = rf"@?(?:(?:{NUM}|~):(?:{NUM})?|{NUM})"
LABEL = r"(?:'[^'=]+'|[^'= ]+)"
PERF = (
    rf"{LABEL}=(?:{NUM}|U)(?:s|ms|us|%|B|KB|MB|TB|c)?"
    rf"(?:;(?:{RANGE})?(?:;(?:{RANGE})?(?:;(?:{NUM})?(?:;(?:{NUM})?)?)?)?)?"
)
LINE = re.compile(
    rf"(?P<service>[A-Z]+) (?P<state>OK|WARNING|CRITICAL|UNKNOWN): (?P<text>[^|\n]+?)"
    rf"(?: \| (?P<perf>{PERF}(?: {PERF})*))?\n"
)
STATES = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}


def nagios(*args: str):
    proc = run_dldoctor("--format", "nagios", *args)
    match = LINE.fullmatch(proc.stdout)
    assert match, proc.stdout  # one line, of the grammar, and nothing else on stdout
    return proc, match


def perfdata(match) -> dict[str, list[str]]:
    items = {}
    for item in match["perf"].split(" "):
        label, _, rest = item.partition("=")
        items[label.strip("'")] = rest.split(";")
    return items


def verdict(*args: str) -> dict:
    return report_of(run_dldoctor("--check", "--json", *args))


@pytest.mark.parametrize(
    ("host", "state", "named"),
    [
        ("hgx-h100x8-healthy", "OK", []),
        ("hgx-h100x8-numa-balancing", "WARNING", ["numa.balancing"]),
        ("hgx-h100x8-gpu3-x8", "CRITICAL", ["pci.link.width", "pci.bandwidth_limited"]),
        ("hgx-h100x8-raid-degraded", "CRITICAL", ["storage.raid"]),
    ],
)
def test_the_state_is_the_exit_code_and_the_text_names_the_problems(host, state, named):
    proc, match = nagios("--from", str(HOSTS / host))
    assert match["service"] == "DLDOCTOR" and match["state"] == state
    assert proc.returncode == STATES[state], proc.stderr
    for check_id in named:
        assert check_id in match["text"]
    report = verdict("--from", str(HOSTS / host))
    perf = perfdata(match)
    total = str(len(report["findings"]))
    for status, n in report["summary"]["counts"].items():
        assert perf[status][0] == str(n), status
        assert perf[status][3:] == ["0", total]  # min and max: none to all of the checks
    assert perf["time"][0].endswith("s") and float(perf["time"][0][:-1]) >= 0
    assert perf["gpus"][0] == str(len(report["inventory"]["gpus"])) == "8"


def test_the_thresholds_say_which_counts_alert():
    _, match = nagios("--from", str(HOSTS / "hgx-h100x8-numa-balancing"))
    perf = perfdata(match)
    # Range "0": an alert when the count is outside 0..0.
    assert perf["warn"][1:3] == ["0", ""] and perf["fail"][1:3] == ["", "0"]
    assert perf["pass"][1:3] == ["", ""] and perf["error"][1:3] == ["", ""]


def test_strict_makes_a_warning_critical():
    proc, match = nagios("--strict", "--from", str(HOSTS / "hgx-h100x8-numa-balancing"))
    assert match["state"] == "CRITICAL" and proc.returncode == 2
    assert perfdata(match)["warn"][1:3] == ["", "0"]


def test_checks_that_could_not_finish_are_unknown(incomplete_host):
    proc, match = nagios("--from", str(incomplete_host))
    assert match["state"] == "UNKNOWN" and proc.returncode == 3, proc.stderr
    assert match["text"] == "1 could not finish: system.libc"
    assert perfdata(match)["error"][0] == "1"


def test_a_warning_outranks_an_unfinished_check_and_both_are_named():
    # docker-ubuntu2004-lowmem: two warnings and `getconf` timed out (dldoctor's exit: 3).
    proc, match = nagios("--from", str(HOSTS / "docker-ubuntu2004-lowmem"))
    assert match["state"] == "WARNING" and proc.returncode == 1
    assert match["text"] == (
        "2 warnings: system.os.release, system.kernel.version; 1 could not finish: system.libc"
    )
    assert "gpus" not in perfdata(match)  # no GPU facts: not known, so not said to be 0


@pytest.mark.parametrize(
    "args",
    [
        ["--no-such-option"],
        ["--only", "no.such.check", "--from", str(HOSTS / "hgx-h100x8-healthy")],
        ["--from", "/no/such/bundle"],
        ["--format=nagios", "--timeout", "-1"],
    ],
)
def test_a_doctor_that_could_not_run_is_unknown_never_critical(args):
    proc, match = nagios(*args)
    assert match["state"] == "UNKNOWN" and proc.returncode == 3
    assert match["text"].startswith("dldoctor could not run: ")
    assert proc.stderr.strip()  # the reason on stderr too, as without --format


def test_the_line_stays_one_line_and_names_three_checks_per_status():
    findings = [Finding(f"x.c{i}", "X", "x", Status.FAIL, "bad\nworse | even") for i in range(5)]
    findings.append(Finding("odd|id\nhere", "Y", "y", Status.WARN, "meh"))
    text = render_nagios(Report(findings, duration_s=1.5)).decode()
    match = LINE.fullmatch(text)
    assert match and match["state"] == "CRITICAL"
    assert match["text"] == "5 failed: x.c0, x.c1, x.c2 +2 more; 1 warning: odd/id here"
    assert perfdata(match)["time"][0] == "1.500s"


def test_an_empty_selection_is_ok_with_every_count_zero():
    text = render_nagios(Report([])).decode()
    match = LINE.fullmatch(text)
    assert match and match["state"] == "OK"
    assert all(perfdata(match)[s][0] == "0" for s in ("pass", "warn", "fail", "skip", "error"))


PERL_PARSER = (
    "use Monitoring::Plugin::Performance;"
    "my @p = Monitoring::Plugin::Performance->parse_perfstring($ARGV[0]) or exit 1;"
    'print join("\\t", map { $_ // "" } $_->label, $_->value, $_->uom, $_->warning,'
    ' $_->critical, $_->min, $_->max), "\\n" for @p;'
)


@pytest.mark.skipif(
    shutil.which("perl") is None
    or subprocess.run(["perl", "-MMonitoring::Plugin::Performance", "-e", "1"]).returncode,
    reason="Monitoring::Plugin (Debian: libmonitoring-plugin-perl) is not installed",
)
def test_the_monitoring_plugins_parser_reads_the_performance_data():
    _, match = nagios("--from", str(HOSTS / "hgx-h100x8-gpu3-x8"))
    out = subprocess.run(
        ["perl", "-e", PERL_PARSER, match["perf"]], capture_output=True, text=True, check=True
    ).stdout
    parsed = {line.split("\t")[0]: line.split("\t")[1:] for line in out.splitlines()}
    assert list(parsed) == list(perfdata(match))  # every item parsed, none lost or merged
    # value, UOM, warning, critical, min, max
    assert parsed["fail"] == ["1", "", "", "0", "0", "75"]
    assert parsed["warn"] == ["1", "", "0", "", "0", "75"]
    assert parsed["pass"] == ["55", "", "", "", "0", "75"]
    assert parsed["time"][1:] == ["s", "", "", "0", ""] and float(parsed["time"][0]) > 0
    assert parsed["gpus"] == ["8", "", "", "", "0", ""]


def _perf_items(match) -> dict[str, list[str]]:
    """As perfdata(), for labels quoted because they hold spaces ('GPU 3 hbm_copy GB/s')."""
    found = re.findall(r"('[^']+'|[^' ]+)=(\S+)", match["perf"])
    return {label.strip("'"): rest.split(";") for label, rest in found}


def test_each_figure_is_performance_data_with_its_unit_in_the_label():
    from tests.support.perffigures import measured_report

    line = render_nagios(measured_report(slow={("hbm_copy", 3): 0.54})).decode()
    match = LINE.fullmatch(line)
    assert match and match["state"] == "CRITICAL", line  # GPU 3's HBM is below its floor
    perf = _perf_items(match)
    assert perf["GPU 3 hbm_copy GB/s"] == ["1409.4", "", "", "0"]
    assert perf["GPU 0 gemm_bf16 TFLOPS"] == ["702", "", "", "0"]
    assert perf["/data seq_read GB/s"] == ["6.2", "", "", "0"]
    assert perf["pass"][0] and len([k for k in perf if " " in k]) == 17


def test_a_matrix_of_figures_keeps_the_line_within_what_nagios_reads():
    from dldoctor.model import Figure

    many = tuple(Figure(f"GPU {a}->GPU {b}", "p2p_read", 389.51, "GB/s") for a in range(16)
                 for b in range(16))  # fmt: skip
    report = Report([Finding("perf.gpu.p2p", "P2P", "perf", Status.PASS, "ok", figures=many)])
    line = render_nagios(report)
    assert len(line) <= 4000
    perf = _perf_items(LINE.fullmatch(line.decode()))
    listed = [k for k in perf if "p2p_read" in k]
    assert 50 < len(listed) < 256 and perf["figures_not_listed"][0] == str(256 - len(listed))


@pytest.mark.skipif(
    shutil.which("perl") is None
    or subprocess.run(["perl", "-MMonitoring::Plugin::Performance", "-e", "1"]).returncode,
    reason="Monitoring::Plugin (Debian: libmonitoring-plugin-perl) is not installed",
)
def test_the_monitoring_plugins_parser_reads_the_figures():
    from tests.support.perffigures import measured_report

    match = LINE.fullmatch(render_nagios(measured_report()).decode())
    out = subprocess.run(
        ["perl", "-e", PERL_PARSER, match["perf"]], capture_output=True, text=True, check=True
    ).stdout
    parsed = {line.split("\t")[0]: line.split("\t")[1:] for line in out.splitlines()}
    assert list(parsed) == list(_perf_items(match))
    assert parsed["GPU 7 hbm_copy GB/s"] == ["2599.6", "", "", "", "0", ""]
