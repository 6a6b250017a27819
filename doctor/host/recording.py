"""Hosts that watch another Host: RecordingHost keeps every answer for a bundle."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from dldoctor.host.base import MAX_READ_BYTES, Answer, Host, Op, command_key


class ObservingHost(Host):
    """Delegates every operation to `inner` and shows each answer to `seen`."""

    def __init__(self, inner: Host):
        self.inner = inner
        self.kind = inner.kind
        self.absent = inner.absent
        self.holds_measurements = inner.holds_measurements

    def describe(self) -> str:
        return self.inner.describe()

    def bound(
        self,
        *,
        commands_until: float | None,
        until: float | None,
        measures_until: float | None = None,
    ) -> None:
        self.inner.bound(commands_until=commands_until, until=until, measures_until=measures_until)

    def limit(self, op: Op, timeout: float | None = None) -> float | None:
        return self.inner.limit(op, timeout)

    def measure_limit(self, timeout: float) -> float | None:
        return self.inner.measure_limit(timeout)

    def prefetch(self, *, runs: Sequence[Sequence[str]] = (), probes: Sequence[str] = ()) -> None:
        self.inner.prefetch(runs=runs, probes=probes)

    def seen(self, answer: Answer, argv: Sequence[str] | None) -> None:
        raise NotImplementedError

    def asking(self, op: Op, key: str, timeout: float | None) -> None:
        """Called before each operation (facts use it to say what a check waits on)."""

    def asking_measure(self, key: str, timeout: float) -> None:
        """Called before a measurement: a command under the measuring budget."""
        self.asking(Op.RUN, key, timeout)

    def _ask(self, op: Op, key: str, call, argv: Sequence[str] | None = None,
             timeout: float | None = None) -> Answer:  # fmt: skip
        self.asking(op, key, timeout)
        answer = call()
        self.seen(answer, argv)
        return answer

    def read(self, path: str, *, max_bytes: int = MAX_READ_BYTES) -> Answer:
        return self._ask(Op.READ, path, lambda: self.inner.read(path, max_bytes=max_bytes))

    def listdir(self, path: str) -> Answer:
        return self._ask(Op.LIST, path, lambda: self.inner.listdir(path))

    def readlink(self, path: str) -> Answer:
        return self._ask(Op.LINK, path, lambda: self.inner.readlink(path))

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Answer:
        call = lambda: self.inner.run(argv, timeout=timeout)  # noqa: E731
        return self._ask(Op.RUN, command_key(argv), call, tuple(argv), timeout)

    def measure(
        self, argv: Sequence[str], *, timeout: float, scratch_in: str | None = None
    ) -> Answer:
        # Recorded as the command it is, under its placeholders: a replay asks the same.
        key = command_key(argv)
        self.asking_measure(key, timeout)
        answer = self.inner.measure(argv, timeout=timeout, scratch_in=scratch_in)
        self.seen(answer, tuple(argv))
        return answer

    def statvfs(self, path: str) -> Answer:
        return self._ask(Op.STATVFS, path, lambda: self.inner.statvfs(path))

    def probe(self, name: str) -> Answer:
        return self._ask(Op.PROBE, name, lambda: self.inner.probe(name))


class RecordingHost(ObservingHost):
    """Remembers each answer, "missing" and timeouts included, to write it as a bundle."""

    def __init__(self, inner: Host):
        super().__init__(inner)
        self._lock = threading.Lock()
        self._answers: dict[tuple[str, str], tuple[Answer, Sequence[str] | None]] = {}

    def describe(self) -> str:
        return f"{self.inner.describe()}, recording"

    def seen(self, answer: Answer, argv: Sequence[str] | None) -> None:
        key = (answer.op, answer.key)
        with self._lock:
            old = self._answers.get(key)
            # Two reads of one file with different size limits: keep the fuller one, so
            # that a replay can answer both.
            if (
                answer.op == Op.READ
                and old
                and old[0].ok
                and answer.ok
                and len(old[0].value) > len(answer.value)
            ):
                return
            self._answers[key] = (answer, argv)

    @property
    def answers(self) -> list[tuple[Answer, Sequence[str] | None]]:
        """(answer, argv-for-commands) in the order first asked."""
        with self._lock:
            return list(self._answers.values())

    def answer(self, op: Op, key: str) -> Answer | None:
        """The answer kept for (op, key), None when it was never asked."""
        with self._lock:
            kept = self._answers.get((op, key))
        return kept[0] if kept else None

    def write_bundle(
        self,
        dest: str,
        *,
        report: dict | None = None,
        argv: Sequence[str] = (),
        extra_files: dict[str, bytes] | None = None,
        active: bool = False,
    ):
        """Write what was recorded as a bundle directory (docs/bundle-format.md); `active`:
        the run measured (--active), so its replay runs the measuring checks."""
        from dldoctor.snapshots.bundle import write_bundle

        return write_bundle(
            dest, self.answers, report=report, argv=argv, extra_files=extra_files,
            absent=self.absent, active=active or self.holds_measurements,
        )  # fmt: skip
