"""The active tier: checks that measure what the host delivers (docs/active.md).

A measurement is a Host answer like any other: a command (a field tool such as `fio` or
`nvbandwidth`, or one of the scripts in `scripts/` run by the host's own interpreter) that
a bundle records and `--from` replays. Its parser is a fact; judging the figure against a
reference is a pure check (category `perf`, ids `perf.<subject>.<what>`, declared with
`@check(..., active=True)`), whose Outcome carries the figures.

Measurements take turns in one lane: two at once would measure each other (fio beside a
GEMM, a memory test beside an all-reduce). Each is given the time it is sized for; the
run's measuring budget (policy `timeouts.active_s`) cuts it, and one asked for when the
budget is spent is not started (a timeout answer that says so, never a verdict).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from dldoctor.host.base import Answer

LANE = threading.Lock()


@dataclass(frozen=True)
class MeasureStarted:
    """A measurement got the lane and starts now (told from the check's thread)."""

    what: str  # "fio sequential read of /data"
    cost_s: float  # the most it may take


@dataclass(frozen=True)
class MeasureEnded:
    what: str
    answer: Answer
    seconds: float


# Who is told each measurement's start and end: the terminal's progress lines
# (active/progress.py). Called from the measuring thread; a listener must not block.
LISTENERS: list[Callable[[object], None]] = []


@contextlib.contextmanager
def listening(listener: Callable[[object], None]) -> Iterator[None]:
    """Tell `listener` every measurement's MeasureStarted and MeasureEnded meanwhile."""
    LISTENERS.append(listener)
    try:
        yield
    finally:
        LISTENERS.remove(listener)


def _tell(event: object) -> None:
    for listener in list(LISTENERS):
        try:
            listener(event)
        except Exception:  # noqa: BLE001 - a progress line never stops a measurement
            pass


def measure(
    ctx,
    argv: Sequence[str],
    *,
    cost_s: float,
    what: str,
    scratch_in: str | None = None,
) -> Answer:
    """Run one measurement through `ctx.host` (a fact's FactContext) in the lane, with at
    most `cost_s` seconds: `what` names it while a check waits on it ("the GEMM of GPU 0")."""
    with ctx.doing(f"waiting for the measuring lane ({what})"):
        LANE.acquire()
    try:
        start = time.monotonic()
        _tell(MeasureStarted(what, cost_s))
        with ctx.doing(f"measuring {what}", cost_s):
            answer = ctx.host.measure(argv, timeout=cost_s, scratch_in=scratch_in)
        _tell(MeasureEnded(what, answer, time.monotonic() - start))
        return answer
    finally:
        LANE.release()


# What each kind of measuring check loads (its id's subject, `perf.<subject>.<what>`),
# for the app's confirmation and the docs.
LOADS = {
    "gpu": "the GPUs (compute, memory, PCIe and NVLink copies)",
    "nccl": "every GPU at once (an all-reduce over NVLink or PCIe)",
    "disk": "the data and checkpoint volumes (files in a temporary folder, removed after)",
    "memory": "the memory of each NUMA node",
    "rdma": "the RDMA ports (a loopback transfer)",
}


def loads(specs) -> list[str]:
    """What the measuring checks `specs` load, in words, each kind once."""
    subjects = dict.fromkeys(s.id.split(".")[1] if s.id.count(".") >= 2 else s.id for s in specs)
    return [LOADS.get(subject, f"what {subject} measures") for subject in subjects]
