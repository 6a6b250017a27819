"""report.html, as a support engineer opens it: in a real browser (Debian's headless
Chromium), without dldoctor and without a network."""

from __future__ import annotations

import html.parser
import shutil
import subprocess

import pytest

from dldoctor.diagnose import diagnose
from dldoctor.host.replay import ReplayHost
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered
from dldoctor.render.page import render_html, render_markdown
from tests.support.paths import HOSTS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


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


def test_markdown_lists_every_finding():
    report = _report("hgx-h100x8-gpu3-x8")
    text = render_markdown(report)
    assert all(f"`{f.id}`" in text for f in report.findings)
    failed = next(f for f in report.findings if f.status.value == "fail")
    section = text[text.index(f"## {failed.category}\n") :].split("\n## ")[0]
    assert section.index("### FAIL") < section.index("### PASS")  # problems first


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")
def test_the_page_renders_every_finding_in_chromium(tmp_path):
    report = _report("hgx-h100x8-gpu3-x8")
    page = tmp_path / "report.html"
    page.write_text(render_html(report))
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert "<h1>dldoctor report</h1>" in dom
    for f in report.findings:
        assert f'id="{f.id}"' in dom, f.id
    assert dom.count("<details") == len(report.findings)


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
