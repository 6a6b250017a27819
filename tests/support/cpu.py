"""CPU time, for tests that bound CPU work: unlike the wall clock, another process's load
on the machine does not count against it."""

from __future__ import annotations

import resource


def children_cpu_s() -> float:
    """User and system seconds of every child process waited for so far (and of theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
