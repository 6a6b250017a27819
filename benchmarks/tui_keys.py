#!/usr/bin/env python3
"""Each key a user presses in the app, on a big host, headless (Textual's Pilot):

    .venv/bin/python benchmarks/tui_keys.py [--from BUNDLE] [--rounds 3] [--hang]

The app on a replayed bundle (by default the 8-GPU tests/fixtures/hosts/hgx-h100x8-gpu3-x8,
whose PCIe finding carries about 1000 lines of lspci); with --hang, its read of
/proc/mdstat hangs (as in benchmarks/tui.py's second part) and the keys are pressed while
it does. The keys, in the order a user presses them: `s` through every status filter,
↓ and ↑, Enter (fold and open a category), `/` with a word and Esc, `v` (the raw evidence
and back), `f` and Esc, `?` and Esc. Per key: the main thread's CPU (time.thread_time,
which a loaded machine does not inflate) and the wall time from the key until the app has
handled it and every message it caused, its screen redrawn. Goal: max <= 100 ms.

Figures only: nothing passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the checkout's dldoctor and tests.support

BIG = "hgx-h100x8-gpu3-x8"
FILTERS = 7  # all, problems, fail, error, warn, pass, skip: `s` seven times is back to all


def keys() -> list[str]:
    """One round of what a user presses, each entry one key."""
    return [
        *["s"] * FILTERS,
        *["down"] * 4,
        *["up"] * 4,
        "enter",
        "enter",
        "slash",
        *"pci",
        "escape",
        "v",
        "v",
        "f",
        "escape",
        "question_mark",
        "escape",
    ]


def session_for(bundle: str, hang: threading.Event | None):
    """The app's Session on `bundle`; with `hang`, its read of /proc/mdstat waits on it."""
    from dldoctor.host.replay import ReplayHost
    from dldoctor.policy import Policy, Timeouts
    from dldoctor.registry import builtin_checks, ordered
    from dldoctor.tui.session import Session
    from tests.support.tui import HOSTS, HangingHost

    class Hung(HangingHost):  # until the benchmark releases it (the tests' gives up at 60 s)
        def read(self, path, **kwargs):
            while path == self.hang_path and not self.release.wait(1):
                pass
            return super().read(path, **kwargs)

    path = bundle if os.path.isdir(bundle) else str(HOSTS / bundle)
    if hang is None:
        return Session(lambda: ReplayHost(path), Policy(), ordered(builtin_checks()),
                       read_only=True, bundle=path)  # fmt: skip
    # The run outlives the keys (its 20 s deadline would end the hang under a loaded
    # machine's pace): the hung read ends when the benchmark releases it, or in 10 minutes.
    waits = Policy(timeouts=Timeouts(filesystem_s=600, check_s=600, deadline_s=600))
    return Session(lambda: Hung(path, "/proc/mdstat", hang), waits,
                   ordered(builtin_checks()), read_only=True, bundle=path)  # fmt: skip


async def press_all(bundle: str, rounds: int, hang: bool) -> dict[str, list[tuple[float, float]]]:
    """{key: [(CPU seconds, wall seconds), ...]} over `rounds` rounds."""
    from tests.support.tui import SIZE, app_for, finished, until

    release = threading.Event() if hang else None
    session = session_for(bundle, release)
    spent: dict[str, list[tuple[float, float]]] = {}
    try:
        async with app_for(session).run_test(size=SIZE) as pilot:
            if hang:
                running = pilot.app.results.query_one("#running")
                await until(pilot, lambda: running.display, timeout=30)
            else:
                await finished(pilot, session)
            for _ in range(rounds):
                for key in keys():
                    cpu, wall = time.thread_time(), time.perf_counter()
                    await pilot.press(key)
                    await pilot.pause()  # the redraws the key asked for
                    spent.setdefault(key, []).append(
                        (time.thread_time() - cpu, time.perf_counter() - wall)
                    )
                    if hang and session.done:
                        raise RuntimeError("the probe stopped hanging: the rest would not count")
    finally:
        if release is not None:
            release.set()
    return spent


def report(title: str, spent: dict[str, list[tuple[float, float]]]) -> None:
    ms = lambda s: f"{s * 1000:.0f}"  # noqa: E731
    print(title)
    every_cpu = [c for v in spent.values() for c, _ in v]
    every_wall = [w for v in spent.values() for _, w in v]
    for key, values in spent.items():
        cpu = [c for c, _ in values]
        wall = [w for _, w in values]
        print(
            f"  {key:14} x{len(values):<3} CPU median {ms(statistics.median(cpu)):>4} ms "
            f"max {ms(max(cpu)):>4} ms   wall median {ms(statistics.median(wall)):>4} ms "
            f"max {ms(max(wall)):>4} ms"
        )
    print(
        f"  every key ({len(every_cpu)}): CPU median {ms(statistics.median(every_cpu))} ms, "
        f"max {ms(max(every_cpu))} ms; wall median {ms(statistics.median(every_wall))} ms, "
        f"max {ms(max(every_wall))} ms (goal <= 100)"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--from", dest="bundle", default=BIG, help="a fixture host or a path")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hang", action="store_true", help="only while a probe hangs")
    p.add_argument("--done", action="store_true", help="only once the run has ended")
    ns = p.parse_args()
    os.environ.setdefault("DLDOCTOR_NO_PLUGINS", "1")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not ns.hang:
        report(f"{ns.bundle}, the run ended:", asyncio.run(press_all(ns.bundle, ns.rounds, False)))
    if not ns.done:
        report(f"{ns.bundle}, while /proc/mdstat hangs:",
               asyncio.run(press_all(ns.bundle, ns.rounds, True)))  # fmt: skip
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
