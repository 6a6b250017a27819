#!/usr/bin/env python3
"""Wall time and peak memory of `dldoctor fleet report` over 1,000 and 10,000 node reports.

    .venv/bin/python benchmarks/fleet.py [--counts 1000,10000] [--runs 3]

The reports are generated (tests/support/fleetgen.py): the healthy 8-GPU fixture host replayed by
the real dldoctor (about 360 KiB of JSON, evidence included, as `fleet run` collects them),
and one node in a hundred changed as a rack's odd ones are (older driver, missing GPU,
a GPU at x8, older HCA firmware). Each run is a fresh `dldoctor fleet report --json DIR`
process, Python start-up included; peak memory is its maximum resident set size (wait4's
ru_maxrss). The targets: 2 s at 1,000, 20 s at 10,000, 200 MiB. Figures only.
Run it from a checkout with the package installed (`pip install -e .`): it imports the
test generator.
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one_run(folder: str) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MiB, exit code) of one `fleet report --json` process."""
    cmd = [sys.executable, "-m", "dldoctor", "fleet", "report", "--json", folder]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def fleet(folder: str, count: int, base: dict) -> None:
    from tests.support import fleetgen

    names = [f"node{i:05d}" for i in range(1, count + 1)]
    changes = (
        fleetgen.older_driver(),
        fleetgen.missing_gpu(),
        fleetgen.narrow_gpu(),
        fleetgen.old_nic_firmware(),
    )
    odd = {name: [changes[i % len(changes)]] for i, name in enumerate(names[7::100])}
    fleetgen.write_fleet(folder, base, names, odd)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--counts", default="1000,10000", help="fleet sizes, comma-separated")
    p.add_argument("--runs", type=int, default=3, help="runs per size (the median is shown)")
    ns = p.parse_args()
    from tests.support import fleetgen

    base = fleetgen.real_report()
    for count in (int(c) for c in ns.counts.split(",")):
        tmp = tempfile.mkdtemp(prefix="dldoctor-fleet-bench-")
        try:
            fleet(tmp, count, base)
            one_run(tmp)  # warm-up: page cache, .pyc
            runs = [one_run(tmp) for _ in range(ns.runs)]
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        rss = max(r[2] for r in runs)
        codes = sorted({r[3] for r in runs})
        # The CPU time and the load say how much of the wall time was this machine's others.
        print(
            f"fleet report: {count} reports in {wall:.2f} s, peak RSS {rss:.0f} MiB "
            f"(CPU {cpu:.2f} s; median of {ns.runs}; load average {os.getloadavg()[0]:.1f} "
            f"on {os.cpu_count()} CPUs; exit codes {codes})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
