#!/usr/bin/env python3
"""Size and headless-Chromium render time of the pages dldoctor writes, and their
screenshots at a desktop's and a phone's width:

    .venv/bin/python benchmarks/pages.py --out DIR [--runs 5]

The pages: report.html of three fixture hosts as `dldoctor snapshot` writes it (the 8-GPU
host with a GPU at x8, the healthy 8-GPU host, a workstation whose GPU Nouveau holds),
`dldoctor diff --html` of the healthy host's report against the x8 host, and — where this
dldoctor has `fleet report --html` — the fleet page of 1,000 nodes: real reports
(`--check --json --from` five fixture hosts), the healthy one on 996 nodes, each odd host
on one, linked under each node's name (tests/support/fleetgen.py `real_fleet`).

Per page: its bytes; Chromium's own load time, from the page's navigation to the end of
its load event (a copy that measures itself: tests/support/browser.py `measure`), the
median of --runs; the wall time of a whole headless run that dumps its DOM, less that of an
empty page (browser start-up); its layout width at 390 px. Screenshots go to DIR, each
printed with its path and size. Figures only: nothing passes or fails here (the tests
assert what the pages show, never how fast).

Measured 2026-12-02 on the project's 2-core VM under load 4.9, --runs 3, medians (the
README's Speed section has the table): report.html of the x8 host 95.2 kB loaded in 74 ms,
the healthy host's 41.4 kB in 41 ms, the workstation's 15.9 kB in 49 ms, the diff page
4.5 kB in 59 ms; every page 390 px wide at 390 px; an empty page's whole headless run
0.63 s. The 1,000-node fleet page (under load 5.6, --runs 3): 37.8 kB loaded in 106 ms, a
whole headless run 0.74 s (an empty page's 0.92 s: the spread is the machine's load; under
load 9.9, 1.23 s against 0.91 s), 390 px wide at 390 px.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
REPORT_HOSTS = ("hgx-h100x8-gpu3-x8", "hgx-h100x8-healthy", "workstation-rtx4090-nouveau")
FLEET_NODES = 1000


def dldoctor(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "DLDOCTOR_NO_PLUGINS": "1"}
    return subprocess.run([sys.executable, "-m", "dldoctor", *args], capture_output=True,
                          text=True, env=env, timeout=600, check=check)  # fmt: skip


def report_pages(work: Path) -> list[Path]:
    pages = []
    for host in REPORT_HOSTS:
        bundle = work / f"bundle-{host}"
        proc = dldoctor("snapshot", "--dir", "--from", str(HOSTS / host), "-o", str(bundle))
        assert proc.returncode == 0, proc.stderr
        page = work / f"report-{host}.html"
        page.write_bytes((bundle / "report.html").read_bytes())
        pages.append(page)
    return pages


def diff_page(work: Path) -> Path:
    a = work / "healthy.json"
    a.write_text(dldoctor("--check", "--json", "--from", str(HOSTS / "hgx-h100x8-healthy")).stdout)
    page = work / "diff.html"
    page.write_text(dldoctor("diff", "--html", str(a), str(HOSTS / "hgx-h100x8-gpu3-x8")).stdout)
    return page


def fleet_page(work: Path) -> Path | None:
    """The 1,000-node fleet page, or None where `fleet report` has no --html."""
    from tests.support.fleetgen import real_fleet

    if "--html" not in dldoctor("fleet", "report", "--help").stdout:
        return None
    real_fleet(work / "sweep", FLEET_NODES)
    page = work / "fleet.html"
    page.write_text(dldoctor("fleet", "report", "--html", str(work / "sweep")).stdout)
    return page


def main() -> int:
    from tests.support.browser import (
        CHROMIUM,
        DESKTOP,
        PHONE,
        SKIP_REASON,
        measure,
        png_ink,
        screenshot,
        timed_load,
    )

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="the screenshots' folder")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    if CHROMIUM is None:
        print(f"no figures: {SKIP_REASON}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pages = [*report_pages(work), diff_page(work)]
        fleet = fleet_page(work)
        if fleet is None:
            print("fleet report --html: not in this dldoctor (no page to measure)")
        else:
            pages.append(fleet)
        empty = work / "empty.html"
        empty.write_text("<!DOCTYPE html><title>empty</title>")
        browser = work / "chromium"
        start = statistics.median(timed_load(browser, empty) for _ in range(args.runs))
        print(f"headless Chromium {CHROMIUM}: an empty page's whole run {start:.2f} s")
        for page in pages:
            loads = [measure(browser, page, DESKTOP) for _ in range(args.runs)]
            load_ms = statistics.median(m["load_ms"] for m in loads)
            runs = statistics.median(timed_load(browser, page) for _ in range(args.runs))
            phone = measure(browser, page, PHONE)
            print(
                f"{page.name}: {page.stat().st_size / 1000:.1f} kB; loaded in {load_ms:.0f} ms "
                f"(navigation to load event, median of {args.runs}); headless run "
                f"{runs:.2f} s, {runs - start:+.2f} s over an empty page; at {PHONE} px "
                f"{phone['scroll_width']} px wide"
            )
            for width in (DESKTOP, PHONE):
                shot = screenshot(browser, page, args.out / f"{page.stem}-{width}.png", width)
                w, h, ink = png_ink(shot)
                print(f"  screenshot {shot} {w}x{h} {shot.stat().st_size} bytes, ink {ink:.1%}")
    print(json.dumps({"load_average": os.getloadavg()[0], "cpus": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
