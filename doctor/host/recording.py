"""Hosts that watch another Host: RecordingHost keeps every answer for a bundle."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from dldoctor.host.base import DEFAULT_MAX_BYTES, READ, Answer, Host


class ObservingHost(Host):
    """Delegates every operation to `inner` and shows each answer to `seen`."""

    def __init__(self, inner: Host):
        self.inner = inner
        self.kind = inner.kind

    def describe(self) -> str:
        return self.inner.describe()

    def seen(self, answer: Answer, argv: Sequence[str] | None) -> None:
        raise NotImplementedError

    def _pass(self, answer: Answer, argv: Sequence[str] | None = None) -> Answer:
        self.seen(answer, argv)
        return answer

    def read(self, path: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Answer:
        return self._pass(self.inner.read(path, max_bytes=max_bytes))

    def listdir(self, path: str) -> Answer:
        return self._pass(self.inner.listdir(path))

    def readlink(self, path: str) -> Answer:
        return self._pass(self.inner.readlink(path))

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Answer:
        return self._pass(self.inner.run(argv, timeout=timeout), tuple(argv))

    def statvfs(self, path: str) -> Answer:
        return self._pass(self.inner.statvfs(path))

    def probe(self, name: str) -> Answer:
        return self._pass(self.inner.probe(name))


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
                answer.op == READ
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

    def write_bundle(self, dest: str, *, report: dict | None = None, argv: Sequence[str] = ()):
        """Write what was recorded as a bundle directory (docs/bundle-format.md)."""
        from dldoctor.snapshots.bundle import write_bundle

        return write_bundle(dest, self.answers, report=report, argv=argv)
