"""`dldoctor diff --html A B`: the two sides, each change marked by what it means for the
host, as a self-contained page opened in headless Chromium."""

from __future__ import annotations

import html.parser

import pytest

from dldoctor.render.diffpage import finding_rows, mark
from tests.support.browser import CHROMIUM, PHONE, SKIP_REASON, look
from tests.support.cli import run_dldoctor
from tests.support.paths import HOSTS

HEALTHY = HOSTS / "hgx-h100x8-healthy"
GPU3_X8 = HOSTS / "hgx-h100x8-gpu3-x8"


class _Rows(html.parser.HTMLParser):
    """Each table row's class and cell texts."""

    def __init__(self):
        super().__init__()
        self.rows: list[tuple[str, list[str]]] = []
        self._cell = False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append((dict(attrs).get("class") or "", []))
        elif tag in ("td", "th"):
            self._cell = True
            self.rows[-1][1].append("")

    def handle_endtag(self, tag):
        self._cell = self._cell and tag not in ("td", "th")

    def handle_data(self, data):
        if self._cell:
            self.rows[-1][1][-1] += data


def _rows(page: str) -> list[tuple[str, list[str]]]:
    parser = _Rows()
    parser.feed(page)
    return [r for r in parser.rows if r[0].startswith("mark")]


def _side(status: str, summary: str = "s") -> dict:
    return {"status": status, "summary": summary}


def test_each_change_is_marked_by_what_it_means():
    assert mark({"a": _side("pass"), "b": _side("fail")}) == "new"
    assert mark({"a": _side("skip"), "b": _side("warn")}) == "new"
    assert mark({"a": _side("error"), "b": _side("pass")}) == "resolved"
    assert mark({"a": _side("warn"), "b": _side("fail")}) == "changed"
    assert mark({"a": _side("pass"), "b": _side("skip")}) == "changed"
    assert mark({"a": None, "b": _side("fail")}) == "new"  # only in B, a problem
    assert mark({"a": _side("warn"), "b": None}) == "resolved"  # gone from B
    assert mark({"a": None, "b": _side("pass")}) == "only"
    doc = {"findings": {
        "changed": [{"id": "x", "title": "X", "a": _side("warn"), "b": _side("fail")}],
        "only_in_a": [{"id": "y", "title": "Y", "status": "fail", "summary": "s"}],
        "only_in_b": [{"id": "z", "title": "Z", "status": "fail", "summary": "s"}],
    }}  # fmt: skip
    assert [(m, r["id"]) for m, r in finding_rows(doc)] == [
        ("new", "z"), ("resolved", "y"), ("changed", "x")
    ]  # fmt: skip


def test_a_gpu_at_x8_is_a_new_problem_and_its_width_a_changed_fact():
    proc = run_dldoctor("diff", "--html", str(HEALTHY), str(GPU3_X8))
    assert proc.returncode == 1, proc.stderr  # they differ, as with --json
    page = proc.stdout
    assert page.startswith("<!DOCTYPE html>") and "default-src 'none'" in page
    rows = _rows(page)
    assert ("mark new", ["new problem", "PCIe link widthpci.link.width",
            "pass10 device(s) at the full width of their slot",
            "fail1 link(s) trained narrower than they can be"]) in rows  # fmt: skip
    assert [r[1][1] for r in rows if r[0] == "mark new"] == [
        "PCIe link widthpci.link.width",
        "PCIe bandwidth at bootpci.bandwidth_limited",
    ]
    assert ("mark fact", ["pcie.width 0000:48:00.0 (GPU 3)", "x16", "x8"]) in rows
    assert "<b>they differ</b>: new problem: 2, key facts changed: 1" in page
    # Both sides head the page; the other way round, the same changes are resolved.
    assert page.index("<h2>A</h2>") < page.index("<h2>B</h2>") < page.index("id=findings")
    back = _rows(run_dldoctor("diff", "--html", str(GPU3_X8), str(HEALTHY)).stdout)
    assert [r[0] for r in back] == ["mark resolved", "mark resolved", "mark fact"]


def test_equivalent_inputs_say_so(tmp_path):
    report = tmp_path / "a.json"
    report.write_text(run_dldoctor("--check", "--json", "--from", str(HEALTHY)).stdout)
    proc = run_dldoctor("diff", "--html", str(report), str(report))
    assert proc.returncode == 0, proc.stderr
    assert "<b>equivalent</b></p>" in proc.stdout and not _rows(proc.stdout)


def test_html_and_json_are_one_or_the_other():
    proc = run_dldoctor("diff", "--html", "--json", str(HEALTHY), str(GPU3_X8))
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_the_diff_page_in_chromium(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(run_dldoctor("--check", "--json", "--from", str(HEALTHY)).stdout)
    page = tmp_path / "diff.html"
    page.write_text(run_dldoctor("diff", "--html", str(a), str(GPU3_X8)).stdout)
    seen = look(tmp_path / "chromium", page)
    assert seen.requests == []
    assert '<tr class="mark new"' in seen.dom and '<section id="facts">' in seen.dom
    for path, width, height, ink in seen.shots:
        print(f"screenshot {path} {width}x{height} {path.stat().st_size} bytes, ink {ink:.1%}")
        assert ink > 0.005, path
    assert seen.phone["inner_width"] == PHONE
    assert seen.phone["scroll_width"] <= PHONE, seen.phone
