"""host.base.start_daemon: threads that finish a task take the next one, and a task never
waits for a thread (a hung one holds up nothing but its caller)."""

from __future__ import annotations

import threading
import time

from dldoctor.host.base import MAX_IDLE_THREADS, call_with_timeout, start_daemon


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "dldoctor-worker"]


def test_a_task_that_never_returns_does_not_hold_up_the_next():
    stuck = threading.Event()
    try:
        start_daemon(stuck.wait)
        ran = threading.Event()
        start_daemon(ran.set)
        assert ran.wait(30)
    finally:
        stuck.set()


def test_tasks_one_after_another_share_a_thread():
    idle_before = set(_workers())  # what earlier tests in this process left idle
    threads = []  # the Thread objects, kept: an ident of an ended thread can come back
    for _ in range(50):
        ok, thread = call_with_timeout(threading.current_thread, 30)
        assert ok
        threads.append(thread)
    # Each caller waits for its task: the thread that ran one is idle for the next (one
    # more at most, for a thread still between its task and the idle queue). Threads left
    # idle by earlier tests may take tasks too: none of those is a new thread.
    assert len(set(threads) - idle_before) <= 2


def test_a_burst_of_tasks_leaves_at_most_the_idle_cap_behind():
    release = threading.Event()
    started = threading.Semaphore(0)

    def task() -> None:
        started.release()
        release.wait()

    burst = MAX_IDLE_THREADS + 20
    for _ in range(burst):
        start_daemon(task)
    for _ in range(burst):
        assert started.acquire(timeout=30)  # every one runs at once: none waits for a thread
    assert len(_workers()) >= burst
    release.set()
    until = time.monotonic() + 30
    while len(_workers()) > MAX_IDLE_THREADS and time.monotonic() < until:
        time.sleep(0.01)
    assert len(_workers()) <= MAX_IDLE_THREADS
