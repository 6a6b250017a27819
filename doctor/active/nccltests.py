"""nccl-tests' `all_reduce_perf` over every GPU of the host in one process (`-g N`): its
table of sizes with the time, algorithm and bus bandwidth of the out-of-place and the
in-place reduction, and "# Avg bus bandwidth" over all sizes.

The bus bandwidth (algorithm bandwidth x 2(N-1)/N) is what the links carry, comparable
across GPU counts; the largest size's is the figure (the average is dominated by the
small sizes' latency). Sizes 8 MiB to 1 GiB, doubling: a few seconds on NVLink, under 30 s
on PCIe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dldoctor.active.output import tool_run
from dldoctor.facts import FactContext, fact
from dldoctor.facts.nvidia import nvidia

COST_S = 25.0


def argv_for(gpus: int) -> tuple[str, ...]:
    return ("all_reduce_perf", "-b", "8M", "-e", "1G", "-f", "2", "-g", str(gpus))


@dataclass(frozen=True)
class Row:
    size: int  # bytes
    busbw_out: float  # GB/s, out-of-place
    busbw_in: float  # GB/s, in-place
    wrong: int  # values that came back wrong (0; -1 when not checked: "N/A")

    @property
    def busbw(self) -> float:
        return max(self.busbw_out, self.busbw_in)


@dataclass(frozen=True)
class NcclTests:
    installed: bool = True
    rows: tuple[Row, ...] = ()
    avg_busbw: float | None = None
    gpus: int | None = None  # "nGpus 8" x "nThread", when the header says
    error: str = ""
    notes: tuple[str, ...] = ()

    @property
    def largest(self) -> Row | None:
        return max(self.rows, key=lambda r: r.size) if self.rows else None

    @property
    def wrong(self) -> int:
        return sum(r.wrong for r in self.rows if r.wrong > 0)


_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([\d.]+)")
_HEADER = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")


def _wrong(word: str) -> int:
    if word == "N/A":
        return -1
    try:
        return int(float(word))  # "0", or "0e+00" in nccl-tests before 2.10
    except ValueError:
        return -1


def parse_row(line: str) -> Row | None:
    """A table row: size count type redop [root] then time algbw busbw #wrong, twice."""
    words = line.split()
    if len(words) < 12 or not words[0].isdigit():
        return None
    try:
        return Row(
            int(words[0]),
            float(words[-6]),
            float(words[-2]),
            max(_wrong(words[-5]), _wrong(words[-1])),
        )
    except ValueError:
        return None


def parse(text: str) -> NcclTests:
    rows, avg, gpus = [], None, None
    for line in text.splitlines():
        stripped = line.strip()
        if m := _HEADER.search(stripped):
            gpus = int(m.group(1)) * int(m.group(2))
        elif m := _AVG.match(stripped):
            avg = float(m.group(1))
        elif not stripped.startswith("#") and (row := parse_row(stripped)):
            rows.append(row)
    error = "" if rows else "no all_reduce_perf results in its output"
    return NcclTests(True, tuple(rows), avg, gpus, error)


@fact("active.nccl_tests")
def nccl_tests(ctx: FactContext) -> NcclTests:
    count = len(ctx.get(nvidia).gpus)
    if count < 2:
        return NcclTests(error="an all-reduce needs two GPUs or more")
    return tool_run(ctx, argv_for(count), cost_s=COST_S, what="the all-reduce", parse=parse,
                    got=lambda found: bool(found.rows), none=NcclTests)  # fmt: skip
