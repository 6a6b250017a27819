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
3. What a shared machine's wall times hide, from the same two runs under
   benchmarks/tui_probe.py (the app with counters): the main thread's CPU until the first
   finding is sent to the terminal (and of it, importing Textual and the app), full
   redraws of the findings tree per run, and the main thread's CPU per key.

Figures only: nothing passes or fails. Needs tmux (says so and skips without it). Every key
a user presses, on the 8-GPU bundle and while a read hangs, is benchmarks/tui_keys.py.
"""

from __future__ import annotations

import argparse
import json
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


PROBE = os.path.join(HERE, "tui_probe.py")
IDLE_S = 2.0  # no key pressed while a probe hangs, before the keys


def cpu_per_second(samples: list, start: float, end: float) -> float:
    """The main thread's CPU seconds per second between `start` and `end` (the probe's
    samples of the monotonic clock, which every process shares, and of its CPU)."""
    inside = [(t, cpu) for t, cpu in samples if start <= t <= end]
    if len(inside) < 2:
        return float("nan")
    (t0, c0), (t1, c1) = inside[0], inside[-1]
    return (c1 - c0) / (t1 - t0)


def app_command(extra: list[str], probe_out: str = "") -> str:
    """The shell command starting the app in a pane; under the probe with `probe_out`."""
    program = [f"DLDOCTOR_PROBE_OUT={probe_out}", sys.executable, PROBE] if probe_out else [
        sys.executable, "-m dldoctor"
    ]  # fmt: skip
    return " ".join(
        ["env -u COLUMNS -u LINES DLDOCTOR_NO_PLUGINS=1", *program, *extra, "; sleep 30"]
    )


def read_probe(tmux: list[str], target: str, path: str) -> dict:
    """Quit the app in the pane and read what the probe wrote as it ended."""
    subprocess.run([*tmux, "send-keys", "-t", target, "q"], check=True)
    began = time.monotonic()
    while not os.path.exists(path) or not os.path.getsize(path):
        if time.monotonic() - began > 20:
            raise RuntimeError("the probe wrote nothing within 20 s of q")
        time.sleep(0.05)
    time.sleep(0.05)  # written whole
    with open(path) as f:
        return json.load(f)


def pane_timing(extra: list[str], probe_out: str = "") -> tuple[float, float, dict]:
    """(seconds to the first finding on the pane, seconds to the end of the run, and with
    `probe_out` the probe's counters)."""
    socket = f"dldoctor-bench-{uuid.uuid4().hex[:8]}"
    command = app_command(extra, probe_out)
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
                stats = read_probe(tmux, "b", probe_out) if probe_out else {}
                return first or now, now, stats
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


def key_latency(presses: int, probe_out: str = "") -> tuple[list[float], dict]:
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
        command = app_command(["--root", root, "--timeout 30 --deadline 40"], probe_out)
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
            idle = (time.monotonic(), time.monotonic() + IDLE_S)
            time.sleep(IDLE_S)  # the main thread's CPU while it only shows the hung probe
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
            stats = read_probe(tmux, "k", probe_out) if probe_out else {}
            stats["idle_cpu_per_s"] = cpu_per_second(stats.get("main_cpu", []), *idle)
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)
    return times, stats


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=5, help="timed runs of each")
    p.add_argument("--from", dest="bundle", help="time the app on a bundle instead of this host")
    ns = p.parse_args()
    extra = ["--from", ns.bundle] if ns.bundle else []
    if not shutil.which("tmux"):
        print("tmux not installed: the pane timings are skipped (apt-get install tmux)")
        return 0
    med = statistics.median
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    firsts, ends, checks = [], [], []
    for i in range(ns.runs):
        if i % 2:
            checks.append(check_wall(extra))
        first, end, _ = pane_timing(extra)
        firsts.append(first)
        ends.append(end)
        if not i % 2:
            checks.append(check_wall(extra))
    print(
        f"app in tmux, {ns.runs} runs: first results {med(firsts) * 1000:.0f} ms "
        f"(max {max(firsts) * 1000:.0f}); all results {med(ends) * 1000:.0f} ms"
    )
    print(
        f"--check alone: {med(checks) * 1000:.0f} ms; the app's first results minus it: "
        f"{(med(firsts) - med(checks)) * 1000:+.0f} ms, its end minus it: "
        f"{(med(ends) - med(checks)) * 1000:+.0f} ms (goal <= +300)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        counted = [pane_timing(extra, os.path.join(tmp, f"run{i}.json"))[2] for i in range(3)]
        times, keyed = key_latency(20, os.path.join(tmp, "keys.json"))
    print(
        f"a key while a probe hangs (tmux), {len(times)} presses: median "
        f"{med(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
        "(goal <= 100; a capture of the pane costs a few ms of it)"
    )
    ms = lambda values: f"{med(values) * 1000:.0f} ms"  # noqa: E731
    print(
        "the app's main thread, 3 runs under the probe: CPU to the first finding sent "
        f"{ms([c['first_row_cpu_s'] for c in counted])} (importing Textual and the app "
        f"{ms([c['import_cpu_s'] for c in counted])}); tree redraws per run "
        f"{med([c['tree_rebuilds'] for c in counted]):.0f}, screen refreshes "
        f"{med([c['refreshes'] for c in counted]):.0f}"
    )
    keys = keyed["key_cpu_s"] or [0.0]
    print(
        f"while a probe hangs: main-thread CPU per key {ms(keys)} (max "
        f"{max(keys) * 1000:.0f} ms), tree redraws {keyed['tree_rebuilds']} for "
        f"{len(times)} keys, screen refreshes {keyed['refreshes']} "
        f"({keyed['refresh_cpu_s'] * 1000:.0f} ms CPU); with no key pressed the main thread "
        f"spends {keyed['idle_cpu_per_s'] * 1000:.0f} ms CPU per second"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
