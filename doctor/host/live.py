"""LiveHost: the real machine, or a fixture tree standing in for its filesystem."""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dldoctor.host.base import (
    DEFAULT_MAX_BYTES,
    MAX_READ_BYTES,
    MAX_STDERR_BYTES,
    OUTPUT_BUDGET_BYTES,
    Answer,
    AnswerStatus,
    CommandResult,
    Host,
    Op,
    OutputBudget,
    call_with_timeout,
    capped_listing,
    command_key,
    file_name_text,
    seconds,
    start_daemon,
    stdout_cap,
)
from dldoctor.host.paths import resolve_in_root
from dldoctor.reaper import end_tree, orphans

READ_CHUNK = 64 * 1024
# Of output cut short (no answer can be read from it), this much of each stream is kept,
# for the finding and the bundle; the rest goes back to the budget.
KEPT_OF_CUT_BYTES = 64 * 1024
STATVFS_FIELDS = (
    "f_bsize",
    "f_frsize",
    "f_blocks",
    "f_bfree",
    "f_bavail",
    "f_files",
    "f_ffree",
    "f_favail",
    "f_flag",
    "f_namemax",
)


# Where dldoctor's measuring scripts live: run by an interpreter of the host's own (its
# framework's), so they import nothing of dldoctor.
MEASURING_SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "active", "scripts")


def _filled(word: str, words: Mapping[str, str]) -> str:
    for placeholder, value in words.items():
        if placeholder in word:
            if not value:
                raise ValueError(f"{placeholder} in {word!r} without a folder to make it in")
            word = word.replace(placeholder, value)
    return word


class ChildProbe:
    """A probe run in a child Python process: a C call that never returns (NVML on a
    hung driver) is killed with the child instead of holding a thread of ours forever.

    The child runs `module` as a script, which prints {"status": ..., "value": ...}; it
    must import nothing of dldoctor. The child starts without `site` (-S) and is given
    this interpreter's sys.path: the .pth files and the editable install's finder cost
    more CPU than the probe itself, and the path finds the same modules (pynvml).
    """

    def __init__(self, module: str):
        self.module = module

    def argv(self) -> list[str]:
        spec = importlib.util.find_spec(self.module)
        if spec is None or not spec.origin:
            return [sys.executable, "-c", f"from {self.module} import main; main()"]
        # Not the caller's folder (where `python -m dldoctor` was started), as for any child.
        try:
            here = os.getcwd()
        except OSError:  # the folder was removed: nothing to leave out
            here = ""
        path = [p for p in sys.path if p and p != here]
        code = (
            f"import sys;sys.path[:]={path!r};__file__={spec.origin!r};"
            "exec(compile(open(__file__,'rb').read(),__file__,'exec'))"
        )
        return [sys.executable, "-S", "-c", code]


class _Children:
    """Every child process group still running, so that none outlives dldoctor."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.groups: set[int] = set()
        self.closed = False
        self.spawning = 0  # threads inside Popen: their child has no pid to kill yet

    def spawn(self, argv: list[str], **kwargs: Any) -> subprocess.Popen | None:
        with self.lock:
            if self.closed:
                return None
            self.spawning += 1
        try:
            # Not under the lock: Popen waits for the exec, which blocks on a binary on a
            # hung NFS mount, and kill_all() at exit must not wait for that.
            proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
            with self.lock:
                if not self.closed:
                    self.groups.add(proc.pid)
                    return proc
            _killpg(proc.pid)  # started while dldoctor was exiting: it must not outlive it
            proc.wait()
            return None
        finally:
            with self.lock:
                self.spawning -= 1

    def done(self, proc: subprocess.Popen) -> None:
        with self.lock:
            self.groups.discard(proc.pid)
        _killpg(proc.pid)  # a grandchild left behind in the group

    def kill_all(self, *, close: bool = True) -> None:
        """Kill every group still running; `close`: and start no more (at exit)."""
        # Bounded: a thread that died holding the lock must not hang the exit.
        locked = self.lock.acquire(timeout=1.0)
        try:
            self.closed = self.closed or close
            groups = list(self.groups)
        finally:
            if locked:
                self.lock.release()
        for pgid in groups:
            _killpg(pgid)
            self.groups.discard(pgid)  # only once killed: a second signal must not lose it
        # A child forked just before the close gets its pid only when Popen returns; its
        # thread then kills it (above). At exit, give those threads that moment: the
        # interpreter stops daemon threads where they are, and the child would live on.
        until = time.monotonic() + SPAWN_GRACE_S
        while close and self.spawning and time.monotonic() < until:
            time.sleep(0.005)
        if close:
            self.end_orphans()

    def end_orphans(self) -> None:
        """End the descendants of our commands that left their command's group (setsid, a
        daemonising helper) and were reparented to us (`reaper`): at a command's timeout,
        and at exit."""
        found: list[int] = []
        if self.lock.acquire(timeout=1.0):
            try:
                # A command being started has no pid here yet and would look reparented;
                # at exit (closed) it is to be killed anyway.
                if self.closed or not self.spawning:
                    found = orphans(self.groups)
            finally:
                self.lock.release()
        for pid in found:
            end_tree(pid)


# How long the exit waits for commands being started (an exec blocked on a hung mount
# takes longer: that one is not waited for).
SPAWN_GRACE_S = 1.0


CHILDREN = _Children()


def kill_children() -> None:
    """Kill every command and child probe still running (at exit, on a signal)."""
    CHILDREN.kill_all()


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass  # the group is already gone


atexit.register(kill_children)


def os_error_answer(op: Op, key: str, exc: BaseException, duration: float) -> Answer:
    if isinstance(exc, ImportError):  # a probe's library (pynvml, ...) is not installed
        return Answer(op, key, AnswerStatus.NOT_INSTALLED, error=str(exc), duration_s=duration)
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return Answer(op, key, AnswerStatus.MISSING, duration_s=duration)
    if isinstance(exc, PermissionError):
        return Answer(op, key, AnswerStatus.PERMISSION_DENIED, error=str(exc), duration_s=duration)
    if isinstance(exc, OSError):
        return Answer(
            op, key, AnswerStatus.ERROR, error=exc.strerror or str(exc), duration_s=duration
        )
    return Answer(
        op, key, AnswerStatus.ERROR, error=f"{type(exc).__name__}: {exc}", duration_s=duration
    )


class LiveHost(Host):
    """The machine dldoctor runs on.

    `root` re-roots every filesystem operation (tests point it at a fixture tree; links
    resolve inside it). Commands and in-process probes always concern this machine.
    """

    kind = "live"

    def __init__(
        self,
        root: str = "/",
        *,
        command_timeout: float = 10.0,
        fs_timeout: float = 5.0,
        probe_timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        probes: Mapping[str, Callable[[], Any]] | None = None,
        max_stdout: int = DEFAULT_MAX_BYTES,
        max_stderr: int = MAX_STDERR_BYTES,
        output_budget: int = OUTPUT_BUDGET_BYTES,
    ):
        self.root = os.path.abspath(root)
        self.max_stdout, self.max_stderr = max_stdout, max_stderr
        self.output_budget = OutputBudget(output_budget)
        self.command_timeout = command_timeout
        self.fs_timeout = fs_timeout
        self.probe_timeout = command_timeout if probe_timeout is None else probe_timeout
        base = dict(os.environ if env is None else env)
        # Parsers expect the C locale's wording and number format.
        base.update(LC_ALL="C", LANG="C")
        self.env = base
        if probes is None:
            from dldoctor.probes import PROBES

            probes = PROBES
        self.probes = dict(probes)
        self._early: dict[tuple[str, str], _Early] = {}
        self._commands_until: float | None = None
        self._until: float | None = None
        self._measures_until: float | None = None
        self._window = 0.0

    def bound(
        self,
        *,
        commands_until: float | None,
        until: float | None,
        measures_until: float | None = None,
    ) -> None:
        now = time.monotonic()
        self._commands_until, self._until = commands_until, until
        self._measures_until = until if measures_until is None else measures_until
        self._window = max(0.0, (commands_until or now) - now)

    def limit(self, op: Op, timeout: float | None = None) -> float | None:
        # File reads keep their own limit up to the deadline: a sysfs read asked after a
        # hung command (mdadm per array, nvme per controller) must still be made.
        if op == Op.PROBE:
            return _sooner(self.probe_timeout, self._until)
        if op == Op.RUN:
            limit = self.command_timeout if timeout is None else timeout
            return _sooner(limit, self._commands_until)
        return _sooner(self.fs_timeout, self._until)

    def prefetch(self, *, runs: Sequence[Sequence[str]] = (), probes: Sequence[str] = ()) -> None:
        # The child interpreters (PATH's python3, the NVML probe) start while the checks are
        # still being imported, on another core: their start-up is off the critical path.
        for argv in runs:
            limit = self.command_timeout
            call = lambda a=list(argv): self._run_now(a, None)  # noqa: E731
            self._early[(Op.RUN, command_key(argv))] = _Early(call, limit)
        for name in probes:
            call = lambda n=name: self._probe_now(n)  # noqa: E731
            self._early[(Op.PROBE, name)] = _Early(call, self.probe_timeout)

    def _prefetched(self, op: Op, key: str) -> Answer | None:
        early = self._early.pop((op, key), None)
        return early.answer(op, key) if early is not None else None

    def _spent(self, op: Op, key: str) -> Answer:
        why = f"the run's probe time ({seconds(self._window)} s) was used up"
        return Answer(op, key, AnswerStatus.TIMEOUT, timeout_s=0, error=why)

    def describe(self) -> str:
        return "live" if self.root == "/" else f"live (root {self.root})"

    def _real(self, path: str, *, follow_last: bool = True) -> str:
        if self.root == "/":
            return path
        return resolve_in_root(self.root, path, follow_last=follow_last)

    def _timed(self, op: Op, key: str, fn: Callable[[], Any], limit: float | None) -> Answer:
        if limit is None or limit <= 0:
            return self._spent(op, key)
        start = time.monotonic()
        finished, result = call_with_timeout(fn, limit)
        duration = time.monotonic() - start
        if not finished:
            return Answer(op, key, AnswerStatus.TIMEOUT, duration_s=duration, timeout_s=limit)
        if isinstance(result, BaseException):
            return os_error_answer(op, key, result, duration)
        return Answer(op, key, AnswerStatus.OK, result, duration_s=duration)

    def _fs(self, op: Op, key: str, fn: Callable[[], Any]) -> Answer:
        return self._timed(op, key, fn, self.limit(op))

    def read(self, path: str, *, max_bytes: int = MAX_READ_BYTES) -> Answer:
        def read() -> bytes:
            # Chunked: procfs/sysfs handlers allocate the size asked for, and a large single
            # read of /proc/sys/* fails with ENOMEM.
            chunks, left = [], max_bytes
            with open(self._real(path), "rb", buffering=0) as f:
                while left > 0:
                    chunk = f.read(min(left, READ_CHUNK))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    left -= len(chunk)
            return b"".join(chunks)

        return self._fs(Op.READ, path, read)

    def listdir(self, path: str) -> Answer:
        return capped_listing(
            self._fs(
                Op.LIST,
                path,
                lambda: tuple(sorted(map(file_name_text, os.listdir(self._real(path))))),
            )
        )

    def readlink(self, path: str) -> Answer:
        return self._fs(
            Op.LINK, path, lambda: file_name_text(os.readlink(self._real(path, follow_last=False)))
        )

    def statvfs(self, path: str) -> Answer:
        def stat() -> dict[str, int]:
            st = os.statvfs(self._real(path))
            return {name: int(getattr(st, name)) for name in STATVFS_FIELDS}

        return self._fs(Op.STATVFS, path, stat)

    def probe(self, name: str) -> Answer:
        early = self._prefetched(Op.PROBE, name)
        return early if early is not None else self._probe_now(name)

    def _probe_now(self, name: str) -> Answer:
        fn = self.probes.get(name)
        if fn is None:
            return Answer(Op.PROBE, name, AnswerStatus.ERROR, error=f"no probe named {name!r}")
        limit = self.limit(Op.PROBE)
        if isinstance(fn, ChildProbe):
            return self._child_probe(name, fn, limit)
        return self._timed(Op.PROBE, name, fn, limit)

    def _child_probe(self, name: str, child: ChildProbe, limit: float | None) -> Answer:
        if limit is None or limit <= 0:
            return self._spent(Op.PROBE, name)
        answer = self._spawn(Op.PROBE, name, child.argv(), limit)
        if not answer.ok:
            return answer
        out = answer.value
        try:
            said = json.loads(out.stdout)
            status = said["status"]
        except (ValueError, TypeError, KeyError, RecursionError):
            why = out.stderr.decode("utf-8", "replace").strip().splitlines()
            error = f"probe exited {out.returncode}: {why[-1][:200] if why else 'no answer'}"
            return Answer(Op.PROBE, name, AnswerStatus.ERROR, error=error,
                          duration_s=answer.duration_s, timeout_s=limit)  # fmt: skip
        if status == AnswerStatus.OK:
            return Answer(Op.PROBE, name, AnswerStatus.OK, said.get("value"),
                          duration_s=answer.duration_s, timeout_s=limit)  # fmt: skip
        not_installed = status == AnswerStatus.NOT_INSTALLED
        failed = AnswerStatus.NOT_INSTALLED if not_installed else AnswerStatus.ERROR
        return Answer(Op.PROBE, name, failed, error=str(said.get("error", "")),
                      duration_s=answer.duration_s)  # fmt: skip

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Answer:
        early = self._prefetched(Op.RUN, command_key(argv)) if timeout is None else None
        return early if early is not None else self._run_now(argv, timeout)

    def measure(
        self, argv: Sequence[str], *, timeout: float, scratch_in: str | None = None
    ) -> Answer:
        key = command_key(argv)
        limit = self.measure_limit(timeout)
        if "{scratch}" in "".join(argv) and scratch_in is None:  # a Host never raises
            why = "{scratch} in the command line without a folder to make it in (scratch_in)"
            return Answer(Op.RUN, key, AnswerStatus.ERROR, error=why)
        if limit is None or limit <= 0:
            why = "the run's measuring time was used up"
            return Answer(Op.RUN, key, AnswerStatus.TIMEOUT, timeout_s=0, error=why)
        scratch = ""
        if scratch_in is not None:
            made, scratch = call_with_timeout(
                lambda: tempfile.mkdtemp(prefix=".dldoctor-measure-", dir=scratch_in),
                min(limit, self.fs_timeout),
            )
            if not made:
                why = f"making a scratch folder in {scratch_in}"
                return Answer(Op.RUN, key, AnswerStatus.TIMEOUT, error=why, timeout_s=limit)
            if isinstance(scratch, BaseException):
                return os_error_answer(Op.RUN, key, scratch, 0.0)
        words = {"{python}": sys.executable, "{scripts}": MEASURING_SCRIPTS, "{scratch}": scratch}
        try:
            filled = [_filled(word, words) for word in argv]
            return self._run_now(filled, timeout, key=key, limit=limit)
        finally:
            if scratch:
                # A hung volume must not hold the run: the removal gets a filesystem limit.
                call_with_timeout(lambda: shutil.rmtree(scratch, ignore_errors=True),
                                  self.fs_timeout)  # fmt: skip

    def measure_limit(self, timeout: float) -> float | None:
        return _sooner(timeout, self._measures_until)

    def _run_now(
        self,
        argv: Sequence[str],
        timeout: float | None,
        *,
        key: str | None = None,
        limit: float | None = None,
    ) -> Answer:
        key = command_key(argv) if key is None else key
        limit = self.limit(Op.RUN, timeout) if limit is None else limit
        if limit is None or limit <= 0:
            return self._spent(Op.RUN, key)
        # The PATH walk stats every entry: a hung NFS folder on PATH must not hang us.
        search = self.env.get("PATH", os.defpath)
        found, exe = call_with_timeout(lambda: shutil.which(argv[0], path=search), limit)
        if not found:
            return Answer(Op.RUN, key, AnswerStatus.TIMEOUT, error="looking up the command on PATH",
                          timeout_s=limit)  # fmt: skip
        if exe is None or isinstance(exe, BaseException):
            return Answer(
                Op.RUN, key, AnswerStatus.NOT_INSTALLED, error=f"{argv[0]}: not found on PATH"
            )
        return self._spawn(Op.RUN, key, [exe, *argv[1:]], limit)

    def _spawn(self, op: Op, key: str, argv: list[str], limit: float) -> Answer:
        start = time.monotonic()
        try:
            proc = CHILDREN.spawn(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd="/",  # not the caller's folder: a child Python would import from it
            )
        except OSError as exc:
            return os_error_answer(op, key, exc, time.monotonic() - start)
        if proc is None:
            return Answer(op, key, AnswerStatus.ERROR, error="not run: dldoctor is exiting")
        try:
            cap = min(self.max_stdout, stdout_cap(argv)) if op == Op.RUN else self.max_stdout
            out, err, over = self._collect(proc, start + limit, cap)
            if out is None:  # the deadline came first
                _kill_group(proc)
                CHILDREN.end_orphans()  # what it started outside its group (holding the pipe)
                return Answer(op, key, AnswerStatus.TIMEOUT, duration_s=time.monotonic() - start,
                              timeout_s=limit)  # fmt: skip
            if over:  # no answer can be read from output cut short: stop it now
                _kill_group(proc)
            else:
                try:
                    proc.wait(timeout=max(0.0, start + limit - time.monotonic()))
                except subprocess.TimeoutExpired:  # closed its pipes but kept running
                    _kill_group(proc)
                    CHILDREN.end_orphans()
                    return Answer(op, key, AnswerStatus.TIMEOUT,
                                  duration_s=time.monotonic() - start, timeout_s=limit)  # fmt: skip
        finally:
            CHILDREN.done(proc)
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        result = CommandResult(proc.returncode if proc.returncode is not None else -9, out, err)
        duration = time.monotonic() - start
        if over:
            # An error, not a verdict: the fact sees why, and the finding names it. The part
            # read is kept in `value` for whoever wants to look at it.
            return Answer(op, key, AnswerStatus.ERROR, result, error=over, duration_s=duration,
                          timeout_s=limit)  # fmt: skip
        return Answer(op, key, AnswerStatus.OK, result, duration_s=duration, timeout_s=limit)

    def _collect(
        self, proc: subprocess.Popen, deadline: float, max_stdout: int
    ) -> tuple[bytes | None, bytes, str]:
        """Read stdout and stderr as they stream, each up to its cap, until both end.

        (stdout, stderr, "") at end of output; (None, b"", "") at the deadline; what was
        read and why it stopped ("output truncated at ...") when a stream went over its cap.
        Memory stays bounded by the caps whatever the command prints.
        """
        caps = {"stdout": max_stdout, "stderr": self.max_stderr}
        kept = {"stdout": bytearray(), "stderr": bytearray()}
        over = ""
        budget = self.output_budget
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
            sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
            while sel.get_map() and not over:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None, b"", ""
                for sk, _ in sel.select(left):
                    name = sk.data
                    chunk = os.read(sk.fd, READ_CHUNK)
                    if not chunk:
                        sel.unregister(sk.fileobj)
                        continue
                    buf, room = kept[name], caps[name] - len(kept[name])
                    granted = budget.take(min(room, len(chunk)))
                    buf += chunk[:granted]
                    if len(chunk) > room:
                        over = (f"output truncated at {caps[name]} bytes of {name} "
                                f"({_size(caps[name])}): the command was stopped")  # fmt: skip
                    elif granted < len(chunk):
                        over = (f"output truncated at {len(buf)} bytes of {name}: the commands "
                                f"of this run printed {_size(budget.total)} between them, "
                                "the most kept: the command was stopped")  # fmt: skip
                    if over:
                        break
        if over:
            for buf in kept.values():
                budget.give(max(0, len(buf) - KEPT_OF_CUT_BYTES))
                del buf[KEPT_OF_CUT_BYTES:]
        return bytes(kept["stdout"]), bytes(kept["stderr"]), over


class _Early:
    """An operation started ahead of its asker, in a daemon thread."""

    def __init__(self, call: Callable[[], Answer], limit: float):
        self._done = threading.Event()
        self._answer: Answer | None = None
        self._limit = limit

        def work() -> None:
            try:
                self._answer = call()
            finally:
                self._done.set()

        start_daemon(work)

    def answer(self, op: Op, key: str) -> Answer:
        # The operation is bounded by its own limit; the margin covers killing it.
        if self._done.wait(self._limit + 2.0) and self._answer is not None:
            return self._answer
        return Answer(op, key, AnswerStatus.ERROR, error="started early, and gave no answer")


def _sooner(limit: float, until: float | None) -> float:
    return limit if until is None else min(limit, until - time.monotonic())


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    try:
        proc.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        # In uninterruptible sleep: give up on reaping it, not on the run. The pipes are
        # not read again, so a grandchild that holds them cannot hang us either.
        pass


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n / 1024:g} KiB"
