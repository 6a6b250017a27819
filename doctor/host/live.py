"""LiveHost: the real machine, or a fixture tree standing in for its filesystem."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dldoctor.host.base import (
    DEFAULT_MAX_BYTES,
    ERROR,
    LINK,
    LIST,
    MISSING,
    NOT_INSTALLED,
    OK,
    PERMISSION_DENIED,
    PROBE,
    READ,
    RUN,
    STATVFS,
    TIMEOUT,
    Answer,
    CommandResult,
    Host,
    call_with_timeout,
    command_key,
)
from dldoctor.host.paths import resolve_in_root

READ_CHUNK = 64 * 1024
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


def os_error_answer(op: str, key: str, exc: BaseException, duration: float) -> Answer:
    if isinstance(exc, ImportError):  # a probe's library (pynvml, ...) is not installed
        return Answer(op, key, NOT_INSTALLED, error=str(exc), duration_s=duration)
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return Answer(op, key, MISSING, duration_s=duration)
    if isinstance(exc, PermissionError):
        return Answer(op, key, PERMISSION_DENIED, error=str(exc), duration_s=duration)
    if isinstance(exc, OSError):
        return Answer(op, key, ERROR, error=exc.strerror or str(exc), duration_s=duration)
    return Answer(op, key, ERROR, error=f"{type(exc).__name__}: {exc}", duration_s=duration)


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
    ):
        self.root = os.path.abspath(root)
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

    def describe(self) -> str:
        return "live" if self.root == "/" else f"live (root {self.root})"

    def _real(self, path: str, *, follow_last: bool = True) -> str:
        if self.root == "/":
            return path
        return resolve_in_root(self.root, path, follow_last=follow_last)

    def _timed(self, op: str, key: str, fn: Callable[[], Any], limit: float) -> Answer:
        start = time.monotonic()
        finished, result = call_with_timeout(fn, limit)
        duration = time.monotonic() - start
        if not finished:
            return Answer(op, key, TIMEOUT, duration_s=duration, timeout_s=limit)
        if isinstance(result, BaseException):
            return os_error_answer(op, key, result, duration)
        return Answer(op, key, OK, result, duration_s=duration)

    def _fs(self, op: str, key: str, fn: Callable[[], Any]) -> Answer:
        return self._timed(op, key, fn, self.fs_timeout)

    def read(self, path: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Answer:
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

        return self._fs(READ, path, read)

    def listdir(self, path: str) -> Answer:
        return self._fs(LIST, path, lambda: tuple(sorted(os.listdir(self._real(path)))))

    def readlink(self, path: str) -> Answer:
        return self._fs(LINK, path, lambda: os.readlink(self._real(path, follow_last=False)))

    def statvfs(self, path: str) -> Answer:
        def stat() -> dict[str, int]:
            st = os.statvfs(self._real(path))
            return {name: int(getattr(st, name)) for name in STATVFS_FIELDS}

        return self._fs(STATVFS, path, stat)

    def probe(self, name: str) -> Answer:
        fn = self.probes.get(name)
        if fn is None:
            return Answer(PROBE, name, ERROR, error=f"no probe named {name!r}")
        return self._timed(PROBE, name, fn, self.probe_timeout)

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Answer:
        key = command_key(argv)
        limit = self.command_timeout if timeout is None else timeout
        # The PATH walk stats every entry: a hung NFS folder on PATH must not hang us.
        search = self.env.get("PATH", os.defpath)
        found, exe = call_with_timeout(lambda: shutil.which(argv[0], path=search), limit)
        if not found:
            return Answer(RUN, key, TIMEOUT, error="looking up the command on PATH",
                          timeout_s=limit)  # fmt: skip
        if exe is None or isinstance(exe, BaseException):
            return Answer(RUN, key, NOT_INSTALLED, error=f"{argv[0]}: not found on PATH")
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                [exe, *argv[1:]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                # Its own process group, so a timeout kills the children that hold the pipes.
                start_new_session=True,
            )
        except OSError as exc:
            return os_error_answer(RUN, key, exc, time.monotonic() - start)
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return Answer(RUN, key, TIMEOUT, duration_s=time.monotonic() - start, timeout_s=limit)
        result = CommandResult(proc.returncode, out[:DEFAULT_MAX_BYTES], err[:DEFAULT_MAX_BYTES])
        return Answer(RUN, key, OK, result, duration_s=time.monotonic() - start, timeout_s=limit)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    try:
        proc.communicate(timeout=1.0)
    except subprocess.TimeoutExpired:
        # A child in uninterruptible sleep keeps the pipes; give up on them, not on the run.
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
