#!/usr/bin/env python3
"""The interactive app's speed, as a user at a terminal sees it:

    .venv/bin/python benchmarks/tui.py [--runs 5] [--from BUNDLE]

1. `dldoctor` in a fresh 120x40 tmux pane (each run a fresh process, Python start-up
   included), the pane read every 10 ms: when the first finding is on screen, and when the
   whole run is ("· done"), against `dldoctor --check` on the same host, interleaved.
   Goals: first results <= 1 s; all results within the --check time + 0.3 s.
2. A key pressed while a probe hangs (Textual's Pilot, a replayed bundle whose
   /proc/mdstat read never returns): the time until the screen answers it. Goal <= 100 ms.

Figures only: nothing passes or fails. Needs tmux for part 1 (says so and skips it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the checkout: tests.tui_support for part 2


def pane_timing(extra: list[str]) -> tuple[float, float]:
    """(seconds to the first finding on the pane, seconds to the end of the run)."""
    socket = f"dldoctor-bench-{uuid.uuid4().hex[:8]}"
    command = " ".join(
        [
            "env -u COLUMNS -u LINES DLDOCTOR_NO_PLUGINS=1",
            sys.executable,
            "-m dldoctor",
            *extra,
            "; sleep 30",
        ]
    )
    tmux = ["tmux", "-L", socket]
    began = time.monotonic()
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "120", "-y", "40", "-s", "b", command], check=True
    )
    first = None
    try:
        while time.monotonic() - began < 60:
            pane = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", "b"], capture_output=True, text=True
            ).stdout
            now = time.monotonic() - began
            if first is None and ("├─ " in pane or "└─ " in pane):
                first = now
            if "· done" in pane:
                return first or now, now
            time.sleep(0.01)
        raise RuntimeError("the run did not end on the pane within 60 s")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def check_wall(extra: list[str]) -> float:
    began = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "dldoctor", "--check", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "DLDOCTOR_NO_PLUGINS": "1"},
    )
    return time.monotonic() - began


async def key_latency(presses: int) -> list[float]:
    from dldoctor.policy import Policy
    from dldoctor.registry import builtin_checks, ordered
    from dldoctor.tui.app import DoctorApp
    from dldoctor.tui.session import Session
    from tests.tui_support import HOSTS, HangingHost

    release = threading.Event()
    bundle = str(HOSTS / "hgx-h100x8-raid-degraded")
    session = Session(
        lambda: HangingHost(bundle, "/proc/mdstat", release),
        Policy(),
        ordered(builtin_checks()),
        read_only=True,
        bundle=bundle,
    )
    app = DoctorApp(session)
    times = []
    async with app.run_test(size=(120, 40)) as pilot:
        while not session.run.started.get("storage.raid"):
            await pilot.pause(0.05)
        screen = app.screen
        for _ in range(presses):
            if session.done:  # the deadline gave up on the probe: the rest would not count
                break
            before = screen.status_filter
            began = time.monotonic()
            await pilot.press("s")
            while screen.status_filter == before:
                await asyncio.sleep(0.001)
            await pilot.pause()  # and drawn
            times.append(time.monotonic() - began)
        release.set()
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=5, help="timed runs of each")
    p.add_argument("--from", dest="bundle", help="time the app on a bundle instead of this host")
    ns = p.parse_args()
    extra = ["--from", ns.bundle] if ns.bundle else []
    if shutil.which("tmux"):
        firsts, ends, checks = [], [], []
        for i in range(ns.runs):
            if i % 2:
                checks.append(check_wall(extra))
            first, end = pane_timing(extra)
            firsts.append(first)
            ends.append(end)
            if not i % 2:
                checks.append(check_wall(extra))
        med = statistics.median
        print(
            f"app in tmux, {ns.runs} runs: first results {med(firsts) * 1000:.0f} ms "
            f"(max {max(firsts) * 1000:.0f}); all results {med(ends) * 1000:.0f} ms"
        )
        print(
            f"--check alone: {med(checks) * 1000:.0f} ms; the app's end minus it: "
            f"{(med(ends) - med(checks)) * 1000:+.0f} ms (goal <= +300)"
        )
    else:
        print("tmux not installed: the pane timings are skipped (apt-get install tmux)")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_CONFIG_HOME"] = tmp
        times = asyncio.run(key_latency(20))
    print(
        f"a key while a probe hangs, 20 presses: median {statistics.median(times) * 1000:.0f} ms, "
        f"max {max(times) * 1000:.0f} ms (goal <= 100)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
