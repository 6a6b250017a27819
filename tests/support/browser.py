"""Debian's headless Chromium as a person's browser: the DOM it builds, its screenshots at a
desktop's and a phone's width, the requests a page made (its network log), and how wide
the page lays out. benchmarks/pages.py drives it too."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP_REASON = "chromium not installed (apt-get install chromium)"
DESKTOP, PHONE = 1280, 390
# The browser's own traffic (update checks, sign-in, dictionaries) has no origin; what a
# page fetches names the page's origin (a file page's is opaque: "null").
BROWSER_ITSELF = "not an origin"


def chromium(folder: Path, url: str, *args: str, timeout: float = 120):
    """One headless run on `url` with its own profile under `folder`; no host name resolves,
    so nothing the page might ask for leaves the machine (the log still records the ask)."""
    assert CHROMIUM is not None, SKIP_REASON
    folder.mkdir(parents=True, exist_ok=True)
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={folder / 'profile'}", *args, url]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def dump_dom(folder: Path, page: Path, width: int = DESKTOP) -> str:
    return chromium(folder, page.as_uri(), f"--window-size={width},900", "--dump-dom").stdout


def screenshot(folder: Path, page: Path, out: Path, width: int, height: int = 1600) -> Path:
    chromium(folder, page.as_uri(), f"--window-size={width},{height}", f"--screenshot={out}")
    return out


def dom_and_requests(folder: Path, page: Path) -> tuple[str, list[str]]:
    """The DOM Chromium built of the page, and every URL the page asked for (from its
    network log)."""
    log = folder / f"netlog-{page.name}.json"
    dom = chromium(folder, page.as_uri(), "--window-size=1280,900", "--dump-dom",
                   f"--log-net-log={log}").stdout  # fmt: skip
    # The log may end without closing its list when the browser exits: read what parses.
    doc, _ = json.JSONDecoder().raw_decode(log.read_text())
    start = doc["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return dom, [
        e["params"]["url"]
        for e in doc["events"]
        if e["type"] == start and e.get("params", {}).get("initiator") != BROWSER_ITSELF
        and "url" in e["params"]
    ]  # fmt: skip


_MEASURE = """<script>
addEventListener("load", () => setTimeout(() => {
  const n = performance.getEntriesByType("navigation")[0];
  parent.postMessage(JSON.stringify({scroll_width: document.documentElement.scrollWidth,
    inner_width: innerWidth, load_ms: n.loadEventEnd, dom_ms: n.domComplete}), "*");
}, 0));
</script>"""
# Headless Chromium's window is at least 500 px wide: a phone's 390 px is a frame's.
_FRAME = """<!DOCTYPE html><html><body style="margin:0">
<iframe src="{src}" width="{width}" height="900" style="border:0"></iframe>
<script>addEventListener("message", (m) => {{
  const out = document.createElement("pre"); out.id = "measured";
  out.textContent = m.data; document.body.append(out); }});</script></body></html>"""
_CSP = re.compile(r'<meta http-equiv="Content-Security-Policy"[^>]*>')


def measure(folder: Path, page: Path, width: int) -> dict:
    """How wide the page lays out in a viewport `width` px wide (the document's scroll
    width against the viewport's) and how long it took to load, in ms from its navigation:
    from a copy of it that measures itself in a frame of that width. The page forbids
    scripts, so the copy drops its policy and adds a small one."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / f"measured-{page.name}"
    text = page.read_text(encoding="utf-8")
    assert _CSP.search(text), "the page carries its no-fetch policy"
    copy.write_text(_CSP.sub("", text).replace("</body>", _MEASURE + "</body>"), "utf-8")
    frame = folder / f"frame-{width}-{page.name}"
    frame.write_text(_FRAME.format(src=copy.name, width=width), "utf-8")
    dom = chromium(folder, frame.as_uri(), "--window-size=1280,900",
                   "--virtual-time-budget=10000", "--dump-dom").stdout  # fmt: skip
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def timed_load(folder: Path, page: Path) -> float:
    """Seconds of a whole headless Chromium run that dumps the page's DOM."""
    t0 = time.perf_counter()
    dump_dom(folder, page)
    return time.perf_counter() - t0


def png_ink(path: Path) -> tuple[int, int, float]:
    """(width, height, the fraction of pixels unlike the top-left one): a blank page is 0."""
    from PIL import Image, ImageChops

    with Image.open(path) as image:
        rgb = image.convert("RGB")
    background = Image.new("RGB", rgb.size, rgb.getpixel((0, 0)))
    # A pixel like the background is black in the difference; one band holds whether not.
    unlike = ImageChops.difference(rgb, background).convert("L").point(lambda v: 255 if v else 0)
    inked = unlike.histogram()[255]
    return rgb.width, rgb.height, inked / (rgb.width * rgb.height)


class Looked(NamedTuple):
    """What a person's browser made of one page."""

    dom: str
    requests: list[str]  # the URLs it asked for
    shots: list[tuple[Path, int, int, float]]  # path, width, height, ink (png_ink)
    phone: dict  # measure() at PHONE


def look(folder: Path, page: Path, shots: Path | None = None) -> Looked:
    """The page's DOM and requests, its screenshots at DESKTOP and PHONE (written to
    `shots`, default `folder`), and its layout at PHONE: four runs of Chromium."""
    dom, asked = dom_and_requests(folder, page)
    taken = []
    for width in (DESKTOP, PHONE):
        out = screenshot(folder, page, (shots or folder) / f"{page.stem}-{width}.png", width)
        taken.append((out, *png_ink(out)))
    return Looked(dom, asked, taken, measure(folder, page, PHONE))
