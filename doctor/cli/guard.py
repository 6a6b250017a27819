"""The guard of a run: SIGINT/SIGTERM/SIGHUP end it (Terminated), a watchdog thread ends
a process stuck past the deadline, and a forked backstop kills one frozen in native code."""

from __future__ import annotations

import os

# After the deadline the report is written and the process exits; this much later the
# watchdog ends it regardless, and this much later still the backstop kills it.
WATCHDOG_SLACK_S = 0.9
BACKSTOP_SLACK_S = 2.0
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


class Terminated(BaseException):
    """SIGINT, SIGTERM or SIGHUP: the run ends, children killed on the way out (atexit)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def catch_signals() -> dict[int, object]:
    """Our handlers for SIGINT/SIGTERM/SIGHUP; the ones they replace (to restore)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}  # signal handlers can only be set there (a library caller's thread)
    return {sig: signal.signal(sig, _on_signal) for sig in (getattr(signal, n) for n in SIGNALS)}


def release_signals(previous: dict[int, object], *, program: bool) -> None:
    import signal

    for sig, handler in previous.items():
        # The program ignores them from here on: a second Ctrl-C or SIGTERM during the exit,
        # while the children are being killed, must not cut that short.
        signal.signal(sig, signal.SIG_IGN if program else handler)


def guard_deadline(end: float, code: list[int]) -> None:
    """The backstop, then the watchdog, for a run that ends at `end` (monotonic)."""
    backstop(end + BACKSTOP_SLACK_S)  # first: forked before any thread starts
    watchdog(end + WATCHDOG_SLACK_S, code)


def watchdog(at: float, code: list[int]) -> None:
    """The last resort: at `at` (monotonic), whatever is stuck (a write to a pipe nobody
    reads, a plugin's import), kill the children and end the process."""
    import threading
    import time

    def fire() -> None:
        time.sleep(max(0.0, at - time.monotonic()))
        from dldoctor.host.live import kill_children

        kill_children()
        try:
            os.write(2, b"dldoctor: still running past the deadline: exiting\n")
        finally:
            os._exit(code[0])

    threading.Thread(target=fire, name="dldoctor-watchdog", daemon=True).start()


def backstop(at: float) -> None:
    """The watchdog thread needs the interpreter lock; native code that holds it (a regex
    gone quadratic, a C extension stuck in a call) stops every thread. A forked process
    watches from outside: dldoctor still alive at `at` is frozen, its commands' groups are
    killed, then dldoctor (exit 137). It ends with dldoctor: the pipe's write end closes."""
    import signal

    read_end, write_end = os.pipe()
    parent = os.getpid()
    if os.fork():
        os.close(read_end)
        _BACKSTOP.append(write_end)  # held open for the life of the process
        return
    try:  # the watcher: no Python handler, no atexit, no stdout held open
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        os.closerange(0, 2)
        os.closerange(3, read_end)
        os.closerange(read_end + 1, 1 << 16)
        if not _ended_by(read_end, at):
            _kill_stuck(parent)
    finally:
        os._exit(0)


_BACKSTOP: list[int] = []


def _ended_by(fd: int, at: float) -> bool:
    import select
    import time

    while (left := at - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            return True  # EOF (or a stray byte): dldoctor is gone
    return False


def _kill_stuck(parent: int) -> None:
    import signal

    os.write(2, b"dldoctor: stuck in native code past the deadline: killed\n")
    os.kill(parent, signal.SIGSTOP)  # frozen: it starts no command while they are killed
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        mine = entry.isdigit() and int(fields[1]) == parent and int(entry) != os.getpid()
        for kill in (os.killpg, os.kill) if mine else ():  # its commands lead their groups
            try:
                kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
    os.kill(parent, signal.SIGKILL)
