"""Hang guards: a test that proves a timeout fires asserts what happened (killed, timed out,
answered), and bounds the wait only so that a regression fails instead of hanging."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

HANG_GUARD_S = 60.0


def returns(fn: Callable, *args, within: float = HANG_GUARD_S):
    """fn(*args), called in a thread; fails if it has not returned `within` seconds on."""
    result: list = []
    failure: list[BaseException] = []

    def call():
        try:
            result.append(fn(*args))
        except BaseException as e:  # handed to the test's thread
            failure.append(e)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(within)
    assert not thread.is_alive(), f"{getattr(fn, '__name__', fn)} hung ({within:g} s guard)"
    if failure:
        raise failure[0]
    return result[0]


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, ended but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def ended(pid: int, within: float = HANG_GUARD_S) -> bool:
    """Whether the process has ended, waiting for it at most `within` seconds (a killed
    process's orphans end a moment after it)."""
    until = time.monotonic() + within
    while alive(pid) and time.monotonic() < until:
        time.sleep(0.02)
    return not alive(pid)


def wait_until(condition: Callable[[], object], within: float = HANG_GUARD_S) -> bool:
    """Whether condition() came true, polled for at most `within` seconds."""
    until = time.monotonic() + within
    while not condition():
        if time.monotonic() >= until:
            return False
        time.sleep(0.02)
    return True
