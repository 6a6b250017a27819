#!/usr/bin/env python3
"""Median wall time and peak memory of `dldoctor --check --json`, Python start-up included.

    python benchmarks/check_json.py [--runs 15] [--target 0.3] [-- extra dldoctor args]

Each run is a fresh process, as a Slurm health check or a CI job starts it. Peak memory is
the child's maximum resident set size (wait4's ru_maxrss). Exits 1 when the median misses
--target, so the script can gate a CI job; the numbers are printed either way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time


def one_run(cmd: list[str]) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, proc.returncode  # ru_maxrss is KiB on Linux


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--warmup", type=int, default=2, help="runs not counted (page cache, .pyc)")
    p.add_argument("--target", type=float, default=0.3, help="median seconds to stay under")
    p.add_argument("args", nargs="*", help="extra dldoctor arguments (after --)")
    ns = p.parse_args()
    exe = shutil.which("dldoctor")
    cmd = [exe] if exe else [sys.executable, "-m", "dldoctor"]
    cmd += ["--check", "--json", *ns.args]
    for _ in range(ns.warmup):
        one_run(cmd)
    runs = [one_run(cmd) for _ in range(ns.runs)]
    walls = sorted(r[0] for r in runs)
    rss = [r[1] for r in runs]
    codes = sorted({r[2] for r in runs})
    median = statistics.median(walls)
    print(f"command      {' '.join(cmd)}")
    print(f"runs         {ns.runs} (after {ns.warmup} warm-up), exit codes {codes}")
    print(
        f"wall median  {median * 1000:.0f} ms   min {walls[0] * 1000:.0f} ms   "
        f"max {walls[-1] * 1000:.0f} ms"
    )
    print(f"peak RSS     median {statistics.median(rss):.1f} MiB   max {max(rss):.1f} MiB")
    verdict = "within" if median <= ns.target else "OVER"
    print(f"target       {ns.target * 1000:.0f} ms median: {verdict}")
    return 0 if median <= ns.target else 1


if __name__ == "__main__":
    raise SystemExit(main())
