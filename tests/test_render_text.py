"""The terminal checklist: lines wrapped at word boundaries under a hanging indent, and a
closing line that tells issues of the host from checks that could not finish."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from dldoctor.model import Finding, Report, Status
from dldoctor.render.text import _footer, write_checklist
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS


def fixture_report(scenario: str) -> Report:
    proc = run_dldoctor("--check", "--json", "--from", str(HOSTS / scenario))
    return Report.from_dict(report_of(proc))


def rendered(report: Report, **console) -> str:
    out = io.StringIO()
    write_checklist(
        Console(file=out, force_terminal=False, highlight=False, **console),
        report,
        verbose=False,
        unicode=True,
    )
    return out.getvalue()


# Where each kind of line starts its text: a continuation line is indented to it.
STARTS = (("[", 4), ("    • ", 6), ("    → ", 6), ("    fix: ", 9))


@pytest.mark.parametrize("width", [70, 120])
@pytest.mark.parametrize("scenario", ["rhel72-legacy", "hgx-h100x8-raid-degraded"])
def test_wrapped_lines_break_between_words_under_a_hanging_indent(scenario, width):
    report = fixture_report(scenario)
    flat = rendered(report, soft_wrap=True, width=width)
    wrapped = rendered(report, width=width)
    lines = wrapped.splitlines()
    assert len(lines) > len(flat.splitlines())  # something did wrap
    assert all(len(line) <= width for line in lines)
    # Same words in the same order: a word cut in two would be two words. The header
    # names the bundle's path, a word longer than a line here: folding it is right.
    assert wrapped.split("\n\n", 1)[1].split() == flat.split("\n\n", 1)[1].split()
    indent = None
    continued = 0
    for line in lines:
        start = next((n for prefix, n in STARTS if line.startswith(prefix)), None)
        if start is not None:
            indent = start
        elif line.startswith(" "):
            assert indent is not None and line.startswith(" " * indent), line
            assert line[indent] != " ", line
            continued += 1
        else:
            indent = None  # the header, the skip count, the closing line
    assert continued > 0
    # Between the header and the closing line, nothing starts at column 0 but a finding
    # (and the count of the skips): a wrapped line there would.
    checklist = wrapped.split("\n\n")[1].splitlines()
    assert checklist[-1].endswith("not applicable here (-v lists them with the reason)")
    assert all(line.startswith(("[", " ")) for line in checklist[:-1])


def test_a_pipe_gets_one_line_per_item():
    report = fixture_report("hgx-h100x8-raid-degraded")
    flat = rendered(report, soft_wrap=True, width=70)
    assert any(len(line) > 70 and line.startswith("    → md1:") for line in flat.splitlines())


def finding(status: Status, n: int = 0) -> Finding:
    return Finding(id=f"x.c{n}", title="X", category="x", status=status, summary="s")


def footer_of(*statuses: Status) -> str:
    findings = [finding(s, i) for i, s in enumerate(statuses)]
    report = Report(tool={}, host={}, findings=findings, duration_s=0.5)
    return _footer(report, True).split(" s. ", 1)[1]


def test_errors_are_not_issues_of_the_host_in_the_closing_line():
    e, w, p = Status.ERROR, Status.WARN, Status.PASS
    assert footer_of(w, *[e] * 7) == (
        "Doctor found issues in 1 check; 7 checks could not finish (errors, not verdicts)."
    )
    assert footer_of(p, e) == (
        "No issues found by the checks that finished; 1 check could not finish "
        "(errors, not verdicts)."
    )
    assert footer_of(p, w, Status.FAIL) == "Doctor found issues in 2 checks."
    assert footer_of(p) == "No issues found!"


def test_counts_agree_with_their_nouns():
    report = Report(tool={}, host={}, findings=[finding(Status.WARN), finding(Status.ERROR, 1)],
                    duration_s=0.5)  # fmt: skip
    assert _footer(report, True).startswith(
        "0 passed, 1 warning, 0 failed, 0 skipped, 1 error in 0.50 s."
    )


def test_verbose_lists_each_figure_with_its_reference_and_fraction_by_its_stable_name():
    from dldoctor.model import Report as _Report
    from tests.support.perffigures import perf_findings

    report = _Report(perf_findings(slow={("hbm_copy", 3): 0.54}), tool={"version": "t"})
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, highlight=False, soft_wrap=True)
    write_checklist(console, report, verbose=True, unicode=True)
    lines = out.getvalue().splitlines()
    assert "    measured: GPU 3 hbm_copy 1409 GB/s, 42 % of 3350 GB/s" in lines
    assert "    measured: GPU 7 gemm_bf16 699 TFLOPS, 71 % of 989 TFLOPS" in lines
    assert "    measured: /data seq_read 6.20 GB/s, no reference" in lines
    assert "measured:" not in rendered(report)  # not without -v
