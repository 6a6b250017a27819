#!/usr/bin/env python3
"""dldoctor's speed, side by side, in one run:

    .venv/bin/python benchmarks/speed.py [--runs 15] [--only side-by-side,replay,hang,diff]

1. side-by-side: `dldoctor --check --json` against `inxi -F` on this machine, in interleaved
   rounds (each sees the same load and page cache), median wall time of each and the ratio,
   and the CPU seconds (user + sys) each used, its children included: on a loaded machine
   the wall time is noise, the CPU time much less so. Skipped, saying so, when inxi is not
   installed. `--against DLDOCTOR` adds another build to the same rounds (before / after).
2. replay: generated HGX bundles with 8/16/32/64/128 GPUs (tests/support/hostgen.py's
   `gpu_server`, built into a temporary folder), median wall time of
   `dldoctor --from BUNDLE --check --json` each, and the cost of one more GPU.
3. hang: every external command dldoctor runs replaced by one that sleeps 600 s (a
   temporary folder first on PATH); the wall time and exit code of one
   `dldoctor --check --json` at the default timeouts, then whether any of those sleepers
   outlived it (they are killed afterwards).
4. diff: `dldoctor diff --json` of two 8-GPU fixture bundles (healthy, one GPU at x8),
   beside `dldoctor --from` of one of them, in interleaved pairs: median wall time of each.

Every run is a fresh process, Python start-up included, as a Slurm health check starts it.
Figures only: nothing here passes or fails (speed is measured here, never in the tests).
Run it from a checkout with the package installed (`pip install -e .`): the replay part
imports the test fixture builder.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GPU_COUNTS = (8, 16, 32, 64, 128)
HANG_WAIT_S = 300.0  # give up on a hung dldoctor after this (it is then killed)
MARKER = "DLDOCTOR_BENCH_HANG"

# Every program dldoctor's facts run (`host.run(...)` and the *_ARGV constants in
# doctor/facts/). Absolute paths (/sbin/ldconfig) cannot be shadowed through PATH.
TOOLS = (
    "nvidia-smi",
    "lspci",
    "python3",
    "getconf",
    "systemctl",
    "journalctl",
    "dmesg",
    "date",
    "numactl",
    "rocm-smi",
    "mdadm",
    "nvcc",
    "ldconfig",
    "nvme",
    "smartctl",
)


def dldoctor_cmd() -> list[str]:
    # The interpreter running this script has dldoctor installed (the checkout's venv).
    exe = Path(sys.executable).with_name("dldoctor")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "dldoctor"]


def environment(**extra: str) -> dict[str, str]:
    # pip compiles bytecode at install; an environment that forbids writing it would time
    # compiling every module instead (about 100 ms here).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, **extra}


def wall(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    start = time.perf_counter()
    code = subprocess.call(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env or environment()
    )
    return time.perf_counter() - start, code


def wall_and_cpu(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the command and its descendants, exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed, code = wall(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, code


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                               enumerate(zip(row, widths, strict=True))))  # fmt: skip
        if n == 0:
            print("  " + "  ".join("-" * w for w in widths))


# --- 1. against inxi -F -----------------------------------------------------------------


def side_by_side(runs: int, warmup: int, against: str | None = None) -> None:
    print("\n== dldoctor --check --json vs inxi -F (interleaved rounds)")
    inxi = shutil.which("inxi")
    if inxi is None:
        print("  inxi not installed: skipped (apt-get install inxi)")
        return
    cmds = {"dldoctor --check --json": [*dldoctor_cmd(), "--check", "--json"]}
    if against:  # another build (a checkout of the commit before a change), same rounds
        cmds[f"{against} --check --json"] = [against, "--check", "--json"]
    cmds["inxi -F"] = [inxi, "-F"]
    for _ in range(warmup):
        for cmd in cmds.values():
            wall(cmd)
    measured: dict[str, list[tuple[float, float, int]]] = {name: [] for name in cmds}
    loads = []
    for i in range(runs):
        # Rotate which goes first, so none always runs right after another.
        names = list(cmds)
        for name in names[i % len(names) :] + names[: i % len(names)]:
            measured[name].append(wall_and_cpu(cmds[name]))
        loads.append(os.getloadavg()[0])
    rows = [("command", "wall median", "min", "max", "CPU median", "CPU min")]
    for name, m in measured.items():
        w, c = [x[0] for x in m], [x[1] for x in m]
        rows.append((name, ms(statistics.median(w)), ms(min(w)), ms(max(w)),
                     ms(statistics.median(c)), ms(min(c))))  # fmt: skip
    table(rows)
    theirs = measured["inxi -F"]
    for name, m in measured.items():
        if name == "inxi -F":
            continue
        wall_ratio = statistics.median(t[0] for t in theirs) / statistics.median(x[0] for x in m)
        cpu_ratio = statistics.median(t[1] for t in theirs) / statistics.median(x[1] for x in m)
        # Each round's own ratio too: both ran under that round's load.
        paired = statistics.median(t[0] / x[0] for t, x in zip(theirs, m, strict=True))
        print(
            f"  inxi / {name.split(' --')[0]}: {wall_ratio:.2f}x wall (median of the rounds' "
            f"ratios {paired:.2f}x), {cpu_ratio:.2f}x CPU; exit {sorted({x[2] for x in m})}"
        )
    print(f"  ({runs} rounds, load {statistics.median(loads):.1f} on {os.cpu_count()} CPUs)")


# --- 2. the replay curve -----------------------------------------------------------------


def build_bundles(root: Path) -> dict[int, Path]:
    sys.path.insert(0, str(REPO))
    from tests.support.bundlebuilder import BundleBuilder
    from tests.support.hostgen import gpu_server

    bundles = {}
    for n in GPU_COUNTS:
        bundles[n] = root / f"hgx-h100x{n}"
        gpu_server(BundleBuilder(bundles[n]), f"bench-{n}", gpus=n)
    return bundles


def replay_curve(runs: int, warmup: int) -> None:
    print("\n== replay: dldoctor --from BUNDLE --check --json (generated HGX H100 hosts)")
    with tempfile.TemporaryDirectory(prefix="dldoctor-bench-") as tmp:
        bundles = build_bundles(Path(tmp))
        cmds = {n: [*dldoctor_cmd(), "--from", str(b), "--check", "--json"] for n, b in
                bundles.items()}  # fmt: skip
        for _ in range(warmup):
            for cmd in cmds.values():
                wall(cmd)
        times: dict[int, list[float]] = {n: [] for n in GPU_COUNTS}
        codes: set[int] = set()
        for _ in range(runs):  # round-robin, so a burst of load spreads over every size
            for n, cmd in cmds.items():
                t, code = wall(cmd)
                times[n].append(t)
                codes.add(code)
    med = {n: statistics.median(t) for n, t in times.items()}
    rows = [("GPUs", "median", "min", "ms per GPU from previous")]
    prev = None
    for n in GPU_COUNTS:
        step = "" if prev is None else f"{(med[n] - med[prev]) * 1000 / (n - prev):.1f}"
        rows.append((str(n), ms(med[n]), ms(min(times[n])), step))
        prev = n
    table(rows)
    lo, hi = GPU_COUNTS[0], GPU_COUNTS[-1]
    slope = (med[hi] - med[lo]) / (hi - lo)
    # Linear: the line through 8 and 128 predicts the sizes between them.
    worst = max(abs(med[n] - (med[lo] + slope * (n - lo))) for n in GPU_COUNTS)
    print(
        f"  {slope * 1000:.1f} ms per GPU from {lo} to {hi}; fixed cost {ms(med[lo] - slope * lo)};"
        f" largest distance from that line {ms(worst)}  ({runs} runs each, exit {sorted(codes)})"
    )


# --- 4. dldoctor diff -------------------------------------------------------------------


def diff_pair(runs: int, warmup: int) -> None:
    print("\n== diff: dldoctor diff --json A B (two 8-GPU fixture bundles)")
    hosts = REPO / "tests/fixtures/hosts"
    a, b = str(hosts / "hgx-h100x8-healthy"), str(hosts / "hgx-h100x8-gpu3-x8")
    cmds = {
        "dldoctor diff --json A B": [*dldoctor_cmd(), "diff", "--json", a, b],
        "dldoctor --from A --check --json": [*dldoctor_cmd(), "--from", a, "--check", "--json"],
    }
    for _ in range(warmup):
        for cmd in cmds.values():
            wall(cmd)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            times[name].append(wall(cmd)[0])
    rows = [("command", "median", "min")]
    rows += [(n, ms(statistics.median(t)), ms(min(t))) for n, t in times.items()]
    table(rows)


# --- 3. every tool hangs -----------------------------------------------------------------


def sleepers(token: str) -> list[int]:
    """Processes that carry this run's marker in their environment (the fake tools)."""
    found = []
    needle = f"{MARKER}={token}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue  # gone, or not ours to read
    return found


def hang_run() -> None:
    print("\n== every external tool hangs (each `exec sleep 600`), default timeouts")
    token = f"{os.getpid()}-{time.time_ns()}"
    with tempfile.TemporaryDirectory(prefix="dldoctor-hang-") as tmp:
        for name in TOOLS:
            path = Path(tmp) / name
            path.write_text("#!/bin/sh\nexec sleep 600\n")
            path.chmod(0o755)
        env = environment(PATH=f"{tmp}:{os.environ.get('PATH', os.defpath)}", **{MARKER: token})
        start = time.perf_counter()
        proc = subprocess.Popen(
            [*dldoctor_cmd(), "--check", "--json"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            code: int | str = proc.wait(HANG_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = f"killed after {HANG_WAIT_S:g} s"
        took = time.perf_counter() - start
        time.sleep(0.5)  # a sleeper being killed right now is not a survivor
        left = [pid for pid in sleepers(token) if pid != proc.pid]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    table(
        [
            ("fake tools", "wall", "exit code", "sleepers left after exit"),
            (str(len(TOOLS)), f"{took:.1f} s", str(code), str(len(left))),
        ]
    )
    print("  (goal: at most one command timeout + 2 s; the sleepers left were killed)")


def machine() -> str:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    return f"{platform.node()}: {os.cpu_count()} CPUs ({cpu or platform.machine()}), " + (
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=15, help="timed runs (pairs) per figure")
    p.add_argument("--warmup", type=int, default=2, help="runs not counted (page cache, .pyc)")
    p.add_argument("--only", default="side-by-side,replay,hang,diff", help="parts, comma-separated")
    p.add_argument(
        "--against",
        metavar="DLDOCTOR",
        help="side-by-side: another dldoctor executable (say, the previous commit's venv), "
        "measured in the same rounds",
    )
    ns = p.parse_args()
    parts = {s.strip() for s in ns.only.split(",") if s.strip()}
    unknown = parts - {"side-by-side", "replay", "hang", "diff"}
    if unknown:
        p.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    print(f"machine  {machine()}")
    print(f"date     {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"command  {' '.join(dldoctor_cmd())}")
    if "side-by-side" in parts:
        side_by_side(ns.runs, ns.warmup, ns.against)
    if "replay" in parts:
        replay_curve(ns.runs, ns.warmup)
    if "hang" in parts:
        hang_run()
    if "diff" in parts:
        diff_pair(ns.runs, ns.warmup)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
