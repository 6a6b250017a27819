#!/usr/bin/env python3
"""The interactive app's speed, as a user at a terminal sees it:

    .venv/bin/python benchmarks/tui.py [--runs 5] [--from BUNDLE]

1. `dldoctor` in a fresh 120x40 tmux pane (each run a fresh process, Python start-up
   included), the pane read every 10 ms: when the first finding is on screen, and when the
   whole run is ("· done"), against `dldoctor --check` on the same host, interleaved.
   Goals: first results <= 1 s; all results within the --check time + 0.3 s.
2. A key pressed while a probe hangs (the same pane, a --root copy of a fixture host
   whose /proc/mdstat is a FIFO nobody writes): the time from `tmux send-keys` until the
   pane shows the answer. Goal <= 100 ms.

Figures only: nothing passes or fails. Needs tmux (says so and skips without it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the checkout: tests.support.tui for part 2


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


def key_latency(presses: int) -> list[float]:
    """Seconds from a key sent to the pane to the screen answering it, while a check waits
    on a probe that hangs: a --root copy of a fixture host whose /proc/mdstat is a FIFO no
    one writes (its read blocks until the 30 s filesystem timeout)."""
    from tests.support.tui import HOSTS

    statuses = ["problems", "fail", "error", "warn", "pass", "skip", "all"]
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "root")
        shutil.copytree(HOSTS / "hgx-h100x8-raid-degraded" / "files", root, symlinks=True)
        os.unlink(os.path.join(root, "proc/mdstat"))
        os.mkfifo(os.path.join(root, "proc/mdstat"))
        socket = f"dldoctor-bench-{uuid.uuid4().hex[:8]}"
        tmux = ["tmux", "-L", socket]
        command = (
            f"env -u COLUMNS -u LINES DLDOCTOR_NO_PLUGINS=1 {sys.executable} -m dldoctor "
            f"--root {root} --timeout 30 --deadline 40; sleep 30"
        )
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", "120", "-y", "40", "-s", "k", command], check=True
        )

        def pane() -> str:
            return subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", "k"], capture_output=True, text=True
            ).stdout

        times = []
        try:
            began = time.monotonic()
            while "waiting on read /proc/mdstat" not in pane():
                if time.monotonic() - began > 30:
                    raise RuntimeError("the hung probe never showed on the pane")
                time.sleep(0.02)
            for i in range(presses):
                want = statuses[i % len(statuses)]
                sent = time.monotonic()
                subprocess.run([*tmux, "send-keys", "-t", "k", "s"], check=True)
                while True:
                    text = pane()
                    shown = f"status: {want}" in text if want != "all" else "status:" not in text
                    if shown:
                        break
                    if time.monotonic() - sent > 10:
                        raise RuntimeError(f"no answer to the key ({want}) within 10 s")
                time.sleep(0.002)
                if "waiting on read /proc/mdstat" not in text:
                    break  # the probe is no longer hanging: the rest would not count
                times.append(time.monotonic() - sent)
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)
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
        return 0
    times = key_latency(20)
    print(
        f"a key while a probe hangs (tmux), {len(times)} presses: median "
        f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
        "(goal <= 100; a capture of the pane costs a few ms of it)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
