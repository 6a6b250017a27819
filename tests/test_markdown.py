"""`--format md` / `--md FILE`: the CI summary, rendered by an independent CommonMark
parser with GitHub's table extension (markdown-it-py) and read back from its HTML: the
heading, one table row per problem with its status, check, summary and what to do, the
counts, the passes folded in <details>; a summary's `|`, `<` and `&` stay text."""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt

from dldoctor.model import Finding, Report, Status
from dldoctor.render.markdown import render_markdown_summary
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS


class Page(HTMLParser):
    """The rendered page: its headings, its tables (rows of cell texts, each table marked
    if it sits in a <details>), the <summary> texts and the paragraphs."""

    def __init__(self, html: str):
        super().__init__()
        self.headings: list[str] = []
        self.tables: list[dict] = []
        self.summaries: list[str] = []
        self.paragraphs: list[str] = []
        self._details = 0
        self._text: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if tag == "details":
            self._details += 1
        elif tag == "table":
            self.tables.append({"rows": [], "folded": self._details > 0})
        elif tag == "tr":
            self.tables[-1]["rows"].append([])
        elif tag in ("th", "td", "h2", "summary", "p"):
            self._text = []

    def handle_endtag(self, tag):
        if tag == "details":
            self._details -= 1
        elif tag in ("th", "td", "h2", "summary", "p") and self._text is not None:
            text, self._text = "".join(self._text), None
            if tag in ("th", "td"):
                self.tables[-1]["rows"][-1].append(text)
            else:
                {"h2": self.headings, "summary": self.summaries, "p": self.paragraphs}[tag].append(
                    text
                )

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def page(markdown: str) -> Page:
    return Page(MarkdownIt("commonmark").enable("table").render(markdown))


def test_the_problems_table_rows_are_the_reports_problems_worst_first():
    host = str(HOSTS / "hgx-h100x8-gpu3-x8")
    proc = run_dldoctor("--format", "md", "--from", host)
    assert proc.returncode == 1, proc.stderr  # the verdict's code: md is not a protocol
    report = report_of(run_dldoctor("--json", "--from", host))
    p = page(proc.stdout)
    assert proc.stdout.startswith("## ❌ dldoctor on hgx-h100-02: 1 failed, 1 warning\n")
    assert p.headings == ["❌ dldoctor on hgx-h100-02: 1 failed, 1 warning"]
    problems, passes = p.tables
    assert problems["rows"][0] == ["Status", "Check", "Summary", "What to do"]
    assert not problems["folded"] and passes["folded"]
    by_id = {f["id"]: f for f in report["findings"]}
    rows = problems["rows"][1:]
    assert [r[0] for r in rows] == ["❌ fail", "⚠️ warn"]
    for status, check, summary, todo in rows:
        f = by_id[check.rpartition("(")[2].rstrip(")")]
        assert status.endswith(f["status"]) and check == f"{f['title']} ({f['id']})"
        assert summary == f["summary"] and todo.startswith(f["remediation"].replace("`", ""))
    counts = report["summary"]["counts"]
    assert p.summaries == [f"{counts['pass']} passed, {counts['skip']} not applicable"]
    folded = passes["rows"][1:]
    assert len(folded) == counts["pass"] + counts["skip"]
    statuses = [r[0] for r in folded]
    assert statuses == sorted(statuses, key=lambda s: s.endswith("skip"))  # passes first
    tally = next(t for t in p.paragraphs if "passed ·" in t)
    assert tally.startswith("1 failed · 1 warning · 0 could not finish · 55 passed ·")


def test_a_healthy_host_has_no_problem_table_and_its_passes_folded():
    proc = run_dldoctor("--format", "md", "--from", str(HOSTS / "hgx-h100x8-healthy"))
    assert proc.returncode == 0
    p = page(proc.stdout)
    assert p.headings == ["✅ dldoctor on hgx-h100-01: no problems found"]
    (table,) = p.tables
    assert table["folded"] and len(table["rows"]) == 1 + 57 + 18  # header, passes, skips


def test_fixes_and_unfinished_checks_are_named(incomplete_host, tmp_path):
    proc = run_dldoctor("--format", "md", "--from", str(incomplete_host))
    assert proc.returncode == 3
    rows = page(proc.stdout).tables[0]["rows"][1:]
    assert [r[:2] for r in rows] == [["❓ error", "C library (system.libc)"]]
    assert "did not answer within 10 s (timed out)" in rows[0][2]
    numa = run_dldoctor("--format", "md", "--from", str(HOSTS / "hgx-h100x8-numa-balancing"))
    (row,) = page(numa.stdout).tables[0]["rows"][1:]
    assert row[3].endswith("dldoctor fix fix.numa.balancing")


def test_md_file_beside_another_format(tmp_path):
    out = tmp_path / "summary.md"
    proc = run_dldoctor(
        "--json", "--from", str(HOSTS / "hgx-h100x8-raid-degraded"), "--md", str(out)
    )
    assert proc.returncode == 1 and report_of(proc)["summary"]["counts"]["fail"] == 1
    rows = page(out.read_text(encoding="utf-8")).tables[0]["rows"]
    assert [r[1] for r in rows[1:]] == ["Software RAID (storage.raid)"]


def test_cell_text_survives_pipes_tags_and_newlines():
    odd = "a | b <none> & c\nd `x|y <z>` e"
    findings = [
        Finding("odd.one", "Odd <b>", "x", Status.FAIL, odd, remediation="run `a | b`"),
        Finding("fine.one", "Fine", "x", Status.PASS, "ok"),
    ]
    md = render_markdown_summary(Report(findings, host={"hostname": "<h>"})).decode()
    p = page(md)
    assert p.headings == ["❌ dldoctor on <h>: 1 failed"]
    row = p.tables[0]["rows"][1]
    assert row == ["❌ fail", "Odd <b> (odd.one)", "a | b <none> & c d x|y <z> e", "run a | b"]
    assert p.tables[1]["rows"][1] == ["✅ pass", "Fine (fine.one)", "ok"]


def test_figures_are_folded_in_a_table_of_their_own_and_absent_without_any():
    from tests.support.perffigures import host_report, measured_report

    report = measured_report("hgx-h100x8-healthy", slow={("hbm_copy", 3): 0.54})
    shown = page(render_markdown_summary(report).decode())
    table = next(t for t in shown.tables if t["rows"][0][0] == "Check" and len(t["rows"][0]) == 5)
    assert table["folded"] and "17 figures measured" in shown.summaries
    assert ["perf.gpu.memory", "GPU 3", "hbm_copy", "1409 GB/s", "42 % of 3350 GB/s"] in table[
        "rows"
    ]
    assert ["perf.disk.read", "/data", "seq_read", "6.20 GB/s", "no reference"] in table["rows"]
    plain = render_markdown_summary(host_report("hgx-h100x8-healthy")).decode()
    assert "figures measured" not in plain
