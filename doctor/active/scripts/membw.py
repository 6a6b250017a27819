"""Memory copy bandwidth, printed as one JSON object (dldoctor's perf.memory.bandwidth).

    python3 membw.py --bytes N --seconds S [--workers W] [--cpus 0-3,8-11]

Each worker process copies one buffer of N / (2 W) bytes into another again and again for
S seconds (a memoryview slice assignment is one memcpy: the interpreter adds nothing per
byte); the figure is the bytes copied by all workers together per second, counted as mbw
and `sysbench memory` count them (the bytes of each copy once; the memory moves twice
that, a read and a write). Several processes, not threads: a copy holds the interpreter
lock, and one core does not saturate a socket's memory channels.

Where it runs is the caller's choice: under `numactl --cpunodebind=N --membind=N`, or with
`--cpus`, which pins this process (and so its workers) to those CPUs before a byte is
allocated, so the kernel's first-touch policy places the buffers on their node.

Standalone: it imports nothing of dldoctor (a host's own interpreter runs it).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time

# Below this the buffers fit in a server CPU's last-level cache and the figure is the
# cache's, not the memory's.
MIN_BYTES = 64 << 20
MAX_WORKERS = 64
PAGE = 4096
# How long the workers may take to allocate and touch their buffers before copying.
READY_S = 60.0


def parse_cpus(text: str) -> set[int]:
    """A kernel cpulist ("0-3,8-11") as a set of CPU numbers; ValueError when odd."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if first > last or last - first > 1 << 16:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.update(range(first, last + 1))
    if not cpus:
        raise ValueError("no CPU named")
    return cpus


def copy_for(size: int, seconds: float, start, results) -> None:
    """One worker: copy `size` bytes over and over for `seconds` after `start` opens."""
    src = bytearray(size)
    dst = bytearray(size)
    view_src, view_dst = memoryview(src), memoryview(dst)
    # Touched here, a byte a page: first touch places the pages on this process's node.
    view_src[::PAGE] = b"\x5a" * len(range(0, size, PAGE))
    view_dst[:] = view_src
    start.wait()
    copied = 0
    began = time.perf_counter()
    until = began + seconds
    while True:
        view_dst[:] = view_src
        copied += size
        now = time.perf_counter()
        if now >= until:
            break
    results.put((copied, now - began))


def measure(total_bytes: int, seconds: float, workers: int) -> dict:
    size = max(1, total_bytes // (2 * workers))
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(workers + 1, timeout=READY_S)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=copy_for, args=(size, seconds, start, results)) for _ in range(workers)
    ]
    for p in procs:
        p.start()
    start.wait()  # every worker has its buffers: the copying starts together
    done = [results.get(timeout=seconds + 60) for _ in procs]
    for p in procs:
        p.join()
    copied = sum(c for c, _ in done)
    elapsed = max(e for _, e in done)
    return {
        "bytes_copied": copied,
        "seconds": round(elapsed, 6),
        "gb_per_s": copied / elapsed / 1e9,
        "workers": workers,
        "buffer_bytes": size,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bytes", type=int, required=True, help="working set, all workers")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--workers", type=int, default=0, help="default: one per CPU allowed")
    parser.add_argument("--cpus", default="", help="pin to these CPUs (first-touch placement)")
    args = parser.parse_args(argv)
    out: dict = {"tool": "dldoctor-membw", "pinned": "by the caller"}
    try:
        if not (0 < args.seconds <= 600):
            raise ValueError("--seconds must be more than 0 and at most 600")
        if args.bytes < MIN_BYTES:
            raise ValueError(f"--bytes must be at least {MIN_BYTES} (the caches would answer)")
        if args.cpus:
            os.sched_setaffinity(0, parse_cpus(args.cpus))
            out["pinned"] = "sched_setaffinity to the CPUs given; memory placed by first touch"
        allowed = sorted(os.sched_getaffinity(0))
        workers = args.workers or min(len(allowed), MAX_WORKERS)
        out["cpus"] = allowed
        out.update(measure(args.bytes, args.seconds, workers))
    except (ValueError, OSError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(out))
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
