"""The Host contract: every answer about the machine, and nothing else, comes through here."""

from __future__ import annotations

import enum
import queue
import shlex
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


class _Named(str, enum.Enum):
    """A name written as its value: in a recording, in JSON, in a message."""

    def __str__(self) -> str:
        return self.value


class AnswerStatus(_Named):
    """What became of one question to a Host."""

    OK = "ok"
    MISSING = "missing"
    PERMISSION_DENIED = "permission_denied"
    TIMEOUT = "timeout"
    NOT_INSTALLED = "not_installed"
    # The I/O errors that are none of the others (EIO from a sysfs attribute the device
    # cannot answer, a bundle entry that is not a file, ...).
    ERROR = "error"
    # A foreign capture (a sos report, an nvidia-bug-report log) that did not collect this:
    # nothing is known about it on that host, neither present nor absent. `error` holds the
    # whole reason ("not in this sos report (...)"); a check whose evidence holds one is
    # skipped with it (runner; docs/foreign-inputs.md).
    NOT_CAPTURED = "not_captured"


STATUSES = tuple(AnswerStatus)


class Op(_Named):
    """The operations a Host answers; they name the entries of a recording."""

    READ = "read"
    LIST = "list"
    LINK = "link"
    RUN = "run"
    STATVFS = "statvfs"
    PROBE = "probe"


# What a command's stdout may print before it is stopped (a 64-GPU `nvidia-smi -q -x`, a
# long boot's kernel journal).
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
# What a command's stdout may hold, by program: what its fact reads, with room for the
# largest real host. A parser makes many objects of its text: 15 MiB of binary garbage
# printed once by `getconf` peaked at 151 MiB, by the Python probe at 216 MiB, under the
# 16 MiB cap. The others (lspci's hex dumps, the kernel log) print MiBs on big hosts.
STDOUT_CAPS = {
    "getconf": 4 << 10,  # one line: GNU_LIBC_VERSION
    "date": 4 << 10,
    "nvcc": 64 << 10,  # --version
    "systemctl": 1 << 20,  # is-active, show of a few units
    "numactl": 1 << 20,
    "mdadm": 1 << 20,
    "python3": 1 << 20,  # the probe: its interpreter's version and paths, as JSON
    "nvidia-smi": 4 << 20,  # -q -x: ~50 KiB a GPU, 16 GPUs with room to spare
    "ldconfig": 4 << 20,  # -p of a conda-heavy host is about 1 MiB
    "rocm-smi": 4 << 20,
    "nvme": 4 << 20,
    "smartctl": 4 << 20,
}


def stdout_cap(argv: Sequence[str]) -> int:
    """The most of `argv`'s stdout that is kept (the program named by path or by name)."""
    program = argv[0].rsplit("/", 1)[-1] if argv else ""
    return STDOUT_CAPS.get(program, DEFAULT_MAX_BYTES)


# A listing holds at most this many names: a big server has a few thousand PCI functions
# or network interfaces; 30,000 planted in a bundle's /sys/bus/pci/devices kept the PCI
# facts busy (and starved the report of the interpreter lock) past the deadline.
MAX_LIST_ENTRIES = 10_000
# A command's stderr is read for one line of diagnosis; more than this is a tool gone wrong.
MAX_STDERR_BYTES = 1024 * 1024
# All the commands of one host together hold at most this much output: every tool can
# misbehave at once (a run starts them all together), and per-command caps alone would
# add up to 15 x 17 MiB. A real host's commands print a few MiB between them.
OUTPUT_BUDGET_BYTES = 32 * 1024 * 1024
# What one file read keeps unless its fact asks for less (a sysfs attribute: 4 KiB) or
# more (mountinfo): a /proc or /sys file, or a bundle's copy of one, is never read whole on
# trust (a 1 GiB sparse `osrelease` in a bundle took 925 MiB).
MAX_READ_BYTES = 1024 * 1024


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


@dataclass(frozen=True)
class Answer:
    """One answer of the Host. `value` is only meaningful when `status == "ok"`:

    read -> bytes, list -> tuple of names, link -> target str, run -> CommandResult,
    statvfs -> dict of the os.statvfs fields, probe -> JSON-able data.
    """

    op: Op
    key: str
    status: AnswerStatus
    value: Any = None
    error: str = ""
    duration_s: float = 0.0
    timeout_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == AnswerStatus.OK

    @property
    def text(self) -> str:
        """Decoded text of a read or a command's stdout; empty when not ok."""
        if not self.ok:
            return ""
        if isinstance(self.value, CommandResult):
            return self.value.text
        if isinstance(self.value, bytes):
            return self.value.decode("utf-8", "replace")
        return str(self.value)

    def describe(self) -> str:
        what = op_label(self.op, self.key)
        if self.status == AnswerStatus.TIMEOUT:
            if self.timeout_s == 0 and self.error:  # never started: no time was left
                return f"{what} was not run: {self.error}"
            limit = f" within {seconds(self.timeout_s)} s" if self.timeout_s else ""
            why = f": {self.error}" if self.error else ""
            return f"{what} did not answer{limit} (timed out{why})"
        if self.status == AnswerStatus.NOT_INSTALLED:
            return f"{what}: command not installed"
        if self.status == AnswerStatus.PERMISSION_DENIED:
            return f"{what}: permission denied"
        if self.status == AnswerStatus.MISSING:
            return f"{what}: missing"
        if self.status == AnswerStatus.ERROR:
            return f"{what}: {self.error or 'error'}"
        if self.status == AnswerStatus.NOT_CAPTURED:
            return f"{what}: {self.error or 'not captured'}"
        return f"{what}: ok"

    def require(self, *, uncaptured_ok: bool = False) -> Answer:
        """Return self, or raise ProbeFailed when the probe timed out or broke.

        Facts call this where a missing answer has a meaning of its own (absent file) but a
        timeout or an I/O error means "could not look": the check becomes an `error`. An
        answer a foreign capture lacks raises NotCaptured (the check is skipped), unless
        `uncaptured_ok`: the caller has another source, or can do without it.
        """
        if self.status in (AnswerStatus.TIMEOUT, AnswerStatus.ERROR):
            raise ProbeFailed(self)
        if self.status == AnswerStatus.NOT_CAPTURED and not uncaptured_ok:
            raise NotCaptured(self)
        return self


class OutputBudget:
    """Bytes of command output a host may still hold, shared by its commands."""

    def __init__(self, total: int):
        self.total = self.left = total
        self.lock = threading.Lock()

    def take(self, wanted: int) -> int:
        with self.lock:
            granted = min(wanted, self.left)
            self.left -= granted
            return granted

    def give(self, n: int) -> None:
        with self.lock:
            self.left += n


def capped_listing(answer: Answer) -> Answer:
    """A listing of more than MAX_LIST_ENTRIES names becomes an error that says so."""
    if answer.ok and len(answer.value) > MAX_LIST_ENTRIES:
        why = f"{len(answer.value)} entries, more than the {MAX_LIST_ENTRIES} read of a folder"
        return Answer(
            answer.op, answer.key, AnswerStatus.ERROR, error=why, duration_s=answer.duration_s
        )
    return answer


def seconds(value: float) -> str:
    """A time limit as a person reads it: 10, 2.5, 0.35 (a limit cut short by the run's
    window reads 10, not 9.97)."""
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def op_label(op: Op, key: str) -> str:
    """How a person names one operation: "`nvidia-smi -q -x`", "read /proc/mdstat"."""
    key = key if len(key) <= 60 else key[:57] + "..."
    return f"`{key}`" if op == Op.RUN else f"{op} {key}"


class ProbeFailed(Exception):
    """A probe timed out or failed; checks that depend on it end as `error`."""

    def __init__(self, answer: Answer):
        super().__init__(answer.describe())
        self.answer = answer


class NotCaptured(ProbeFailed):
    """The answer is not in the foreign capture being read; checks that depend on it are
    skipped with that reason (a ProbeFailed, so every fact that lets a failed probe through
    lets this through too)."""


def command_key(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def file_name_text(name: str) -> str:
    """A file name as text: its undecodable bytes, which os keeps as surrogates and no
    UTF-8 output can hold (a report, a bundle), read as U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def not_measured(key: str, capture: str) -> Answer:
    """The answer of a foreign capture (a sos report, an nvidia-bug-report log) to a
    measurement: no collector measures, so its check is skipped with this reason."""
    why = f"{capture} holds no measurements: the active tier measures on the host itself"
    return Answer(Op.RUN, key, AnswerStatus.NOT_CAPTURED, error=why)


class Host(ABC):
    """All I/O with the machine. The five hosts a run reads (host/foreign.py's `open_input`
    picks one for `--from`):

    - `LiveHost` (host/live.py): the machine dldoctor runs on;
    - `LiveHost(root=...)`: `--root`, a copy of a machine's filesystem (commands and
      probes still concern this machine);
    - `ReplayHost` (host/replay.py): a dldoctor bundle, `--from DIR` or its .tar.gz;
    - `SosReportHost` (host/sosreport.py): a sos report, its tree or its archive;
    - `BugReportHost` (host/bugreport.py): an nvidia-bug-report.log(.gz).

    `ObservingHost` and `RecordingHost` (host/recording.py) wrap any of them: they see each
    answer, and the recording one writes them as a bundle (`snapshot`).
    """

    kind = "abstract"
    # What an answer the source does not have means: missing on the host. A foreign capture
    # (host/bugreport.py), and a bundle converted from one, answer not_captured instead.
    absent = AnswerStatus.MISSING
    # Its answers include the active tier's measurements: a bundle taken with --active
    # (manifest `active`), whose replay runs the measuring checks unasked (docs/active.md).
    holds_measurements = False

    @abstractmethod
    def read(self, path: str, *, max_bytes: int = MAX_READ_BYTES) -> Answer: ...

    @abstractmethod
    def listdir(self, path: str) -> Answer: ...

    @abstractmethod
    def readlink(self, path: str) -> Answer: ...

    @abstractmethod
    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Answer: ...

    @abstractmethod
    def statvfs(self, path: str) -> Answer: ...

    @abstractmethod
    def probe(self, name: str) -> Answer:
        """An in-process probe (Python interpreter, NVML, ...): JSON-able data."""

    def describe(self) -> str:
        return self.kind

    def bound(  # noqa: B027
        self,
        *,
        commands_until: float | None,
        until: float | None,
        measures_until: float | None = None,
    ) -> None:
        """Every command must end by `commands_until`, every measurement by
        `measures_until` (the active tier's budget; None: `until`), every other operation
        by `until` (monotonic clock): how one run keeps its probes within one budget, so
        that hung commands asked in turn cost one timeout in all. Replay ignores it."""

    def limit(self, op: Op, timeout: float | None = None) -> float | None:
        """The time limit an operation would get if it started now (None: unbounded)."""
        return None

    def measure(
        self, argv: Sequence[str], *, timeout: float, scratch_in: str | None = None
    ) -> Answer:
        """Run a measuring tool (the active tier, docs/active.md): a command like any other,
        recorded and replayed under `argv` as written, whose words may hold placeholders
        that only a live host fills in:

        - `{python}`: the interpreter running dldoctor;
        - `{scripts}`: the folder of dldoctor's measuring scripts (dldoctor/active/scripts);
        - `{scratch}`: a new empty folder made inside `scratch_in` for this run alone, and
          removed with everything in it when the command ends, however it ends.

        Its limit is `timeout`, cut by the run's measuring budget (`bound`), not by the
        window of the passive probes. A host that only replays answers it as `run`; a
        foreign capture answers `not_captured` (no collector measures)."""
        return self.run(argv, timeout=timeout)

    def measure_limit(self, timeout: float) -> float | None:
        """The limit a measurement would get if it started now (None: unbounded)."""
        return None

    def prefetch(self, *, runs: Sequence[Sequence[str]] = (), probes: Sequence[str] = ()) -> None:  # noqa: B027
        """Start these operations now, in the background; the first to ask for one later
        gets its answer. Only a live host has anything to gain."""


MAX_IDLE_THREADS = 16


class _DaemonThreads:
    """Daemon threads kept for the next task once they finish one: a run hands out a few
    hundred short tasks (a read each, a check each), and starting a thread for each cost
    more CPU than the tasks. A task never waits for a thread: with none idle, a new one
    starts, so a thread stuck in a hung read holds up nothing but its own caller."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting on `_tasks`, less the tasks already put there
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def start(self, task: Callable[[], None]) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._tasks.put(task)
                return
        worker = threading.Thread(target=self._work, args=(task,), name="dldoctor-worker")
        worker.daemon = True
        worker.start()

    def _work(self, task: Callable[[], None]) -> None:
        while True:
            task()  # what it raises ends this thread, as it would a thread of its own
            with self._lock:
                if self._idle >= MAX_IDLE_THREADS:
                    return  # after a burst (a check each), the rest end
                self._idle += 1
            task = self._tasks.get()


_DAEMONS = _DaemonThreads()


def start_daemon(task: Callable[[], None]) -> None:
    """Run `task` now in a daemon thread (one left idle by an earlier task, or a new one).
    Daemon: a task stuck in a syscall must not keep the process alive."""
    _DAEMONS.start(task)


def call_with_timeout(fn: Callable[[], Any], timeout: float) -> tuple[bool, Any]:
    """Run fn in a daemon thread; (True, result-or-exception) or (False, None) on timeout.

    A daemon thread, not an executor: a read blocked on a hung NFS mount or a dead PCI
    device cannot be interrupted, and an executor's worker would be joined at exit and
    hang the doctor with it.
    """
    box: list[Any] = []
    done = threading.Event()

    def target() -> None:
        try:
            box.append(fn())
        except BaseException as exc:  # handed to the caller, which decides
            box.append(exc)
        done.set()

    start_daemon(target)
    if not done.wait(timeout):
        return False, None
    return True, box[0]
