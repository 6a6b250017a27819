#!/usr/bin/env python3
"""What each output format costs on top of `--check --json`:

    .venv/bin/python benchmarks/formats.py [--runs 21] [--gpus 8]

For each format of `dldoctor --format` (the table in dldoctor/render/formats.py), two
figures on a generated HGX bundle (tests/support/hostgen.py's `gpu_server`):
1. in process: the median time to render the report in that format (its module already
   imported, and the first import on its own) — the format's own cost;
2. end to end, on the bundle (replay: CPU-bound) and on this host (live: mostly waiting on
   commands, the way a cron line or a CI job runs it): fresh processes in interleaved
   pairs, `dldoctor --check --json` against the same with `--NAME FILE` beside it (or
   `--format NAME` in its place, for the formats that take stdout), the median difference
   — Python start-up and noise included.

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
    from tests.support.bundlebuilder import BundleBuilder
    from tests.support.hostgen import gpu_server

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


def end_to_end(bundle: Path | None, runs: int, out: Path) -> dict[str, float]:
    """Median of paired differences: `--check --json` against the same run with the
    format's output added beside it (`--NAME FILE`), or, for a format that takes stdout's
    place, `--format NAME` instead of `--json`. `bundle` None: this host, live."""
    from dldoctor.render.formats import FORMATS

    source = ["--from", str(bundle)] if bundle else []
    base = [sys.executable, "-m", "dldoctor", *source, "--check"]

    def wall(argv: list[str]) -> float:
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return time.perf_counter() - t0

    extra = {}
    for name, fmt in FORMATS.items():
        path = str(out / f"report.{name}")
        if fmt.file_flag:
            other = [*base, "--json", f"--{name}", path]
        elif name == "json":
            other = [*base, "--json", "--output", path]
        else:
            other = [*base, "--format", name]
        diffs = [wall(other) - wall([*base, "--json"]) for _ in range(runs)]
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
        replay = end_to_end(bundle, args.runs, Path(tmp))
        live = end_to_end(None, args.runs, Path(tmp))
    print(f"formats, {args.runs} runs each (goal: <= 20 ms on top of --check --json)")
    print(f"{'format':11} {'render':>9} {'import':>9} {'replay extra':>13} {'live extra':>11}")
    for name, (render, first) in inside.items():
        print(
            f"{name:11} {render * 1000:6.2f} ms {first * 1000:6.1f} ms "
            f"{replay[name] * 1000:+10.1f} ms {live[name] * 1000:+8.1f} ms"
        )
    print(f"(render and import: in process, on the {args.gpus}-GPU bundle's report; extra: "
          "median of paired wall-time differences, fresh processes)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
