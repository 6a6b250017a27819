#!/usr/bin/env python3
"""`dldoctor` (the app) with counters, for benchmarks/tui.py: what its main thread spends,
which a shared machine's wall times hide.

    DLDOCTOR_PROBE_OUT=stats.json python benchmarks/tui_probe.py [dldoctor's arguments]

Runs the app as `python -m dldoctor` would and, when it ends, writes to the file:
first_row_s and first_row_cpu_s (seconds since this script started, and the main thread's
CPU seconds, until the terminal is first sent a finding's row), import_cpu_s (the main
thread's CPU importing the app and Textual), tree_rebuilds (redraws of the findings
tree: each builds again only the categories whose findings changed), refreshes (redraws
of the results screen), refresh_cpu_s (their main-thread CPU), key_cpu_s (per key
pressed: the main thread's CPU from the key to the next write to the terminal), and
main_cpu (every 0.1 s: the monotonic clock and the main thread's CPU seconds, for the CPU
it spends while nothing is pressed)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

BEGAN = time.monotonic()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the checkout's dldoctor, as the benchmark's

stats: dict = {
    "tree_rebuilds": 0,
    "refreshes": 0,
    "refresh_cpu_s": 0.0,
    "key_cpu_s": [],
    "main_cpu": [],
}


def sample_main_cpu() -> None:
    clock = time.pthread_getcpuclockid(threading.main_thread().ident)
    while True:
        stats["main_cpu"].append((time.monotonic(), time.clock_gettime(clock)))
        time.sleep(0.1)


pending_key: list[float] = []  # the main thread's CPU when a key came, until the next write


def hook() -> None:
    import dldoctor.tui as tui

    run_app = tui.run_app

    def counted_run_app(session, on_end=None):
        cpu = time.thread_time()
        from textual import events
        from textual.drivers.linux_driver import LinuxDriver

        from dldoctor.tui import app, findings, results

        stats["import_cpu_s"] = time.thread_time() - cpu
        show, refresh, write = (
            findings.FindingsTree.show,
            results.ResultsScreen.refresh_state,
            LinuxDriver.write,
        )

        def counted_show(self, shown, selected):
            stats["tree_rebuilds"] += 1
            return show(self, shown, selected)

        def counted_refresh(self):
            began = time.thread_time()
            refresh(self)
            stats["refreshes"] += 1
            stats["refresh_cpu_s"] += time.thread_time() - began

        def counted_write(self, data):
            if "first_row_s" not in stats and ("├─ " in data or "└─ " in data):
                stats["first_row_s"] = time.monotonic() - BEGAN
                stats["first_row_cpu_s"] = time.thread_time()
            if pending_key:
                stats["key_cpu_s"].append(time.thread_time() - pending_key.pop())
            return write(self, data)

        on_event = app.DoctorApp.on_event

        async def counted_event(self, event):
            if isinstance(event, events.Key):
                pending_key[:] = [time.thread_time()]
            return await on_event(self, event)

        findings.FindingsTree.show = counted_show
        results.ResultsScreen.refresh_state = counted_refresh
        LinuxDriver.write = counted_write
        app.DoctorApp.on_event = counted_event
        try:
            return run_app(session, on_end)
        finally:
            with open(os.environ["DLDOCTOR_PROBE_OUT"], "w") as out:
                json.dump({**stats, "main_cpu": list(stats["main_cpu"])}, out)

    tui.run_app = counted_run_app


def main() -> int:
    from dldoctor.cli import main as dldoctor

    hook()
    threading.Thread(target=sample_main_cpu, daemon=True).start()
    sys.argv = ["dldoctor", *sys.argv[1:]]
    return dldoctor()


if __name__ == "__main__":
    sys.exit(main())
