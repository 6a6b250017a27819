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

import threading
from collections.abc import Sequence

from dldoctor.host.base import Answer

LANE = threading.Lock()


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
        with ctx.doing(f"measuring {what}", cost_s):
            return ctx.host.measure(argv, timeout=cost_s, scratch_in=scratch_in)
    finally:
        LANE.release()
