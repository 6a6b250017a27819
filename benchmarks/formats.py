#!/usr/bin/env python3
"""What each output format costs on top of `--check --json`:

    .venv/bin/python benchmarks/formats.py [--runs 21] [--gpus 8]

For each format of `dldoctor --format` (the table in dldoctor/render/formats.py), two
figures on a generated HGX bundle (tests/hostgen.py's `gpu_server`):
1. in process: the median time to render the report in that format (its module already
   imported, and the first import on its own) — the format's own cost;
2. end to end: fresh processes in interleaved pairs, `dldoctor --from B --check --json`
   against the same with `--output FILE --format NAME` added beside stdout's JSON (the
   `--NAME FILE` form where the format has one), the median difference — what a CI job or
   a cron line pays, Python start-up and noise included.

The goal is ≤ 20 ms each. Figures only: nothing passes or fails here.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def build_bundle(folder: Path, gpus: int) -> Path:
    from tests.bundlebuilder import BundleBuilder
    from tests.hostgen import gpu_server

    dest = folder / f"hgx-h100x{gpus}"
    gpu_server(BundleBuilder(dest), f"bench-{gpus}", gpus=gpus)
    return dest


def in_process(bundle: Path, runs: int) -> dict[str, tuple[float, float]]:
    from dldoctor.diagnose import diagnose
    from dldoctor.host.replay import ReplayHost
    from dldoctor.policy import Policy
    from dldoctor.registry import builtin_checks, ordered
    from dldoctor.render.formats import FORMATS

    report = diagnose(ReplayHost(str(bundle)), Policy(), ordered(builtin_checks()))
    figures = {}
    for name, fmt in FORMATS.items():
        module = fmt.renderer.split(":")[0]
        t0 = time.perf_counter()
        importlib.import_module(module)
        first = time.perf_counter() - t0
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fmt.render(report)
            times.append(time.perf_counter() - t0)
        figures[name] = (statistics.median(times), first)
    return figures


def end_to_end(bundle: Path, runs: int, out: Path) -> dict[str, float]:
    from dldoctor.render.formats import FORMATS

    base = [sys.executable, "-m", "dldoctor", "--from", str(bundle), "--check", "--json"]

    def wall(argv: list[str]) -> float:
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return time.perf_counter() - t0

    extra = {}
    for name, fmt in FORMATS.items():
        path = str(out / f"report.{name}")
        flags = [f"--{name}", path] if fmt.file_flag else ["--output", path, "--format", name]
        if name == "json":
            flags = ["--output", path]
        diffs = []
        for _ in range(runs):
            diffs.append(wall(base + flags) - wall(base))
        extra[name] = statistics.median(diffs)
    return extra


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=21)
    p.add_argument("--gpus", type=int, default=8)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build_bundle(Path(tmp), args.gpus)
        inside = in_process(bundle, args.runs)
        outside = end_to_end(bundle, args.runs, Path(tmp))
    print(f"formats on a {args.gpus}-GPU bundle, {args.runs} runs each (goal: <= 20 ms extra)")
    print(f"{'format':12} {'render':>10} {'first import':>14} {'end to end extra':>18}")
    for name, (render, first) in inside.items():
        print(
            f"{name:12} {render * 1000:8.2f} ms {first * 1000:11.1f} ms "
            f"{outside[name] * 1000:+15.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
