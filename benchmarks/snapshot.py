#!/usr/bin/env python3
"""`dldoctor snapshot` against `sos report --batch --clean` (sos report, then sos clean's
obfuscation of the archive), the bundle a support engineer would otherwise ask for:

    .venv/bin/python benchmarks/snapshot.py [--runs 3]

Interleaved runs, each a fresh process, each writing into a fresh temporary folder; the
median wall time of each and the ratio. sos needs root and is skipped, saying so, when it
is not installed (`apt-get install sosreport`). Figures only: nothing passes or fails.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def wall(cmd: list[str]) -> tuple[float, int]:
    began = time.monotonic()
    code = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.monotonic() - began, code


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="timed runs of each")
    ns = p.parse_args()
    sos = shutil.which("sos")
    ours_t, theirs_t, codes = [], [], set()
    for i in range(ns.runs):
        with tempfile.TemporaryDirectory() as tmp:
            ours = [sys.executable, "-m", "dldoctor", "snapshot", "-o", f"{tmp}/snap.tar.gz"]
            theirs = [sos, "report", "--batch", "--clean", "--tmp-dir", tmp] if sos else None
            order = [ours, theirs] if i % 2 == 0 else [theirs, ours]
            for cmd in order:
                if cmd is None:
                    continue
                t, code = wall(cmd)
                (ours_t if cmd is ours else theirs_t).append(t)
                if cmd is ours:
                    codes.add(code)
    a = statistics.median(ours_t)
    print(f"dldoctor snapshot (redacted .tar.gz): median {a:.2f} s over {ns.runs} "
          f"(min {min(ours_t):.2f}, max {max(ours_t):.2f}; exit {sorted(codes)})")  # fmt: skip
    if not theirs_t:
        print("sos report --batch --clean: sos not installed: skipped (apt-get install sosreport)")
        return 0
    b = statistics.median(theirs_t)
    print(f"sos report --batch --clean: median {b:.2f} s (min {min(theirs_t):.2f}, "
          f"max {max(theirs_t):.2f})")  # fmt: skip
    print(f"ratio sos / dldoctor: {b / a:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
