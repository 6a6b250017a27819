"""report.html, as a support engineer opens it: in a real browser (Debian's headless
Chromium), without dldoctor and without a network."""

from __future__ import annotations

import html.parser
import json
import re

import pytest

from dldoctor.diagnose import diagnose
from dldoctor.host.replay import ReplayHost
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered
from dldoctor.render.page import render_html, render_markdown
from tests.support.browser import (
    CHROMIUM,
    DESKTOP,
    PHONE,
    SKIP_REASON,
    dom_and_requests,
    look,
    measure,
)
from tests.support.cli import run_dldoctor
from tests.support.paths import HOSTS

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
PAGE_HOSTS = ("hgx-h100x8-gpu3-x8", "hgx-h100x8-healthy", "workstation-rtx4090-nouveau")


def _report(scenario: str):
    return diagnose(ReplayHost(str(HOSTS / scenario)), Policy(), ordered(builtin_checks()))


class _References(html.parser.HTMLParser):
    """Every attribute that could make a browser fetch something."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href", "srcset", "action", "data", "poster") and value:
                self.found.append(f"<{tag} {name}={value}>")


def test_the_page_loads_nothing_and_forbids_loading():
    page = render_html(_report("hgx-h100x8-gpu3-x8"))
    refs = _References()
    refs.feed(page)
    assert refs.found == []
    assert "url(" not in page and "@import" not in page and "<script" not in page
    assert "default-src 'none'" in page  # a finding's text cannot smuggle a fetch in


def test_text_from_the_host_is_escaped():
    report = _report("ubuntu2204-healthy")
    f = report.findings[0]
    hostile = type(f)(**{**f.__dict__, "summary": '<img src="http://x/">&'})
    page = render_html(type(report)(**{**report.__dict__, "findings": [hostile]}))
    assert "<img" not in page and "&lt;img src=&quot;http://x/&quot;&gt;&amp;" in page


def test_markdown_lists_every_finding_problems_first():
    report = _report("hgx-h100x8-gpu3-x8")
    text = render_markdown(report)
    assert all(f"`{f.id}`" in text for f in report.findings)
    passes, skips = _counted(report)
    assert text.index("## Problems (2)\n") < text.index(f"## Passed ({passes})\n")
    assert text.index(f"## Passed ({passes})\n") < text.index(
        f"## {skips} check(s) not applicable here\n"
    )
    problems = text[: text.index("## Passed")]
    assert problems.index("### FAIL `pci.link.width`") < problems.index(
        "### WARN `pci.bandwidth_limited`"
    )
    assert "**Remediation:**" in problems and "Evidence: " in problems


def _counted(report) -> tuple[int, int]:
    """(passes, skips): the counts the sections' headings must say."""
    said = [f.status.value for f in report.findings]
    assert said.count("pass") > 40 and said.count("skip") > 5  # an 8-GPU host, checked
    return said.count("pass"), said.count("skip")


def _sections(page: str) -> dict[str, int]:
    return {m: page.index(f"<section id={m}>") for m in ("problems", "passes", "skips")}


def test_the_page_puts_the_problems_first_then_the_passes_folded_then_the_skips_counted():
    report = _report("hgx-h100x8-gpu3-x8")
    page = render_html(report)
    at = _sections(page)
    assert page.index("<p id=verdict") < at["problems"] < at["passes"] < at["skips"]
    problems = page[at["problems"] : at["passes"]]
    for f in report.findings:
        where = page.index(f'id="{f.id}"')
        if f.status.value in ("fail", "warn", "error"):
            assert at["problems"] < where < at["passes"], f.id
        elif f.status.value == "pass":
            assert at["passes"] < where < at["skips"], f.id
        else:
            assert where > at["skips"], f.id
    assert problems.index('id="pci.link.width"') < problems.index('id="pci.bandwidth_limited"')
    assert "Reseat the card" in problems  # the fix under the failure
    assert "read /sys/bus/pci/devices/0000:48:00.0/current_link_width" in problems  # evidence
    # Every pass inside one folded <details>, by category; the skips counted, their
    # reasons folded.
    passes = page[at["passes"] : at["skips"]]
    passed, skips = _counted(report)
    assert passes.startswith(f"<section id=passes><h2>Passed ({passed})</h2><details><summary>")
    assert "<h3>gpu</h3>" in passes and "<h3>pci</h3>" in passes
    assert " open" not in passes
    assert page[at["skips"] :].startswith(
        f"<section id=skips><h2>{skips} check(s) not applicable here</h2><details>"
    )
    assert "<section id=topology>" not in page


def test_a_healthy_host_says_so_first():
    page = render_html(_report("hgx-h100x8-healthy"))
    at = _sections(page)
    assert "<p>No problems found.</p>" in page[at["problems"] : at["passes"]]


def test_a_picture_is_placed_after_the_problems():
    report = _report("hgx-h100x8-gpu3-x8")
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20"/></svg>'
    page = render_html(report, picture=svg)
    at = _sections(page)
    topology = page.index("<section id=topology><h2>Topology</h2>")
    assert at["problems"] < topology < at["passes"]
    assert page.count(svg) == 1 and page.index(svg) > topology  # trusted markup, as it is


@needs_chromium
def test_a_wide_picture_scrolls_in_its_box_not_the_page(tmp_path):
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="1200" height="300">'
        '<rect x="10" y="10" width="1180" height="280" fill="#1565c0"/></svg>'
    )
    page = tmp_path / "report.html"
    page.write_text(render_html(_report("hgx-h100x8-gpu3-x8"), picture=svg), encoding="utf-8")
    measured = measure(tmp_path / "chromium", page, PHONE)
    assert measured["scroll_width"] <= PHONE, measured


def test_an_8_gpu_page_stays_small():
    for scenario in ("hgx-h100x8-gpu3-x8", "hgx-h100x8-healthy"):
        assert len(render_html(_report(scenario)).encode()) <= 300_000, scenario


@needs_chromium
@pytest.mark.parametrize("scenario", PAGE_HOSTS)
def test_a_snapshots_page_in_chromium(tmp_path, scenario):
    """The report.html `dldoctor snapshot` writes, opened by a person's browser at a
    desktop's and at a phone's width: problems before passes, nothing fetched, nothing
    blank, nothing wider than the phone."""
    bundle = tmp_path / "bundle"
    proc = run_dldoctor("snapshot", "--dir", "--from", str(HOSTS / scenario), "-o", str(bundle))
    assert proc.returncode == 0, proc.stderr
    findings = json.loads((bundle / "report.json").read_text())["findings"]
    seen = look(tmp_path / "chromium", bundle / "report.html")
    assert seen.requests == []
    dom = seen.dom
    assert "<h1>dldoctor report</h1>" in dom
    for f in findings:
        assert f'id="{f["id"]}"' in dom, f["id"]
    problems = [f for f in findings if f["status"] in ("fail", "warn", "error")]
    passes = [f for f in findings if f["status"] == "pass"]
    skips = len(findings) - len(problems) - len(passes)
    at = {s: dom.index(f'<section id="{s}">') for s in ("problems", "passes")}
    assert at["problems"] < at["passes"]
    assert f"<h2>Problems ({len(problems)})</h2>" in dom
    for f in problems:  # each opened, in the problems section
        assert at["problems"] < dom.index(f'<details id="{f["id"]}"') < at["passes"]
        assert re.search(rf'<details id="{re.escape(f["id"])}" [^>]*open=""', dom), f["id"]
    assert f"<h2>{skips} check(s) not applicable here</h2>" in dom
    raw = dom.count('<details class="evidence"')
    assert raw >= len(problems)  # each problem's raw answers, folded under it
    assert dom.count("<details") == len(problems) + len(passes) + 2 + raw
    for path, width, height, ink in seen.shots:
        print(f"screenshot {path} {width}x{height} {path.stat().st_size} bytes, ink {ink:.1%}")
        assert ink > 0.005, path  # not blank (a blank page is 0)
    assert [s[1] for s in seen.shots] == [DESKTOP, PHONE]
    assert seen.phone["inner_width"] == PHONE
    assert seen.phone["scroll_width"] <= PHONE, seen.phone  # wraps, no sideways scroll


@needs_chromium
def test_the_browser_harness_sees_a_fetch_and_an_overflow(tmp_path):
    """The two checks above can fail: a page that fetches is caught by the network log,
    and one wider than the phone by the measure."""
    fetching = tmp_path / "fetching.html"
    fetching.write_text('<!DOCTYPE html><img src="http://192.0.2.1/x.png">')
    _, asked = dom_and_requests(tmp_path / "a", fetching)
    assert asked == ["http://192.0.2.1/x.png"]
    wide = tmp_path / "wide.html"
    policy = render_html(_report("ubuntu2204-healthy")).split("<title>")[0]
    wide.write_text(policy + '</head><body><div style="width:900px">wide</div></body></html>')
    measured = measure(tmp_path / "b", wide, PHONE)
    assert measured["inner_width"] == PHONE and measured["scroll_width"] > PHONE


class _Cells(html.parser.HTMLParser):
    """The rows of the page's figure tables (class=figures), as cell texts."""

    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self._inside = self._cell = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._inside = ("class", "figures") in attrs
        elif self._inside and tag == "tr":
            self.rows.append([])
        elif self._inside and tag in ("td", "th"):
            self._cell = True
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        self._cell = self._cell and tag not in ("td", "th")
        self._inside = self._inside and tag != "table"

    def handle_data(self, data):
        if self._cell:
            self.rows[-1][-1] += data


def test_both_pages_show_each_figure_with_its_reference_and_plain_reports_none():
    from tests.support.perffigures import measured_report

    report = measured_report("hgx-h100x8-healthy", slow={("hbm_copy", 3): 0.54})
    cells = _Cells()
    cells.feed(render_html(report))
    assert ["GPU 3", "hbm_copy", "1409 GB/s", "42 % of 3350 GB/s"] in cells.rows
    assert ["/data", "seq_read", "6.20 GB/s", "no reference"] in cells.rows
    assert len([r for r in cells.rows if r[0] != "part"]) == 17
    text = render_markdown(report)
    assert "| GPU 3 | `hbm_copy` | 1409 GB/s | 42 % of 3350 GB/s |" in text
    plain = _report("hgx-h100x8-healthy")
    assert "class=figures" not in render_html(plain) and "`hbm_copy`" not in render_markdown(plain)
