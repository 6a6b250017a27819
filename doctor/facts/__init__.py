"""Facts: raw Host answers parsed into frozen dataclasses, lazily, once per run.

A fact is declared with `@fact("name")` on a function of a FactContext. Checks ask
`facts.get(SOME_FACT)`; the first asker computes it, concurrent askers wait for that one
probe, later askers get the memoised value. Every Host answer a fact used is kept as its
evidence, so a finding can say what it rests on.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from dldoctor.host.base import (
    Answer,
    AnswerStatus,
    Host,
    NotCaptured,
    Op,
    ProbeFailed,
    op_label,
    seconds,
)
from dldoctor.host.recording import ObservingHost
from dldoctor.model import Evidence

T = TypeVar("T")


class Fact(Generic[T]):
    """A named, lazily computed piece of knowledge about the host."""

    __slots__ = ("name", "compute")

    def __init__(self, name: str, compute: Callable[[FactContext], T]):
        self.name = name
        self.compute = compute

    def __repr__(self) -> str:
        return f"Fact({self.name!r})"


def fact(name: str) -> Callable[[Callable[[FactContext], T]], Fact[T]]:
    def declare(fn: Callable[[FactContext], T]) -> Fact[T]:
        return Fact(name, fn)

    return declare


class FactFailed(Exception):
    """A fact's code raised; every check that needs it ends as `error`."""


class _EvidenceHost(ObservingHost):
    def __init__(self, inner: Host, sink: list[Evidence], facts: Facts):
        super().__init__(inner)
        self.sink = sink
        self.facts = facts

    def asking(self, op: str, key: str, timeout: float | None) -> None:
        self.facts._doing[threading.get_ident()] = (
            op_label(op, key),
            self.inner.limit(op, timeout),
        )

    def asking_measure(self, key: str, timeout: float) -> None:
        # The measuring budget's limit, not the passive probes' window (spent by now).
        label = op_label(Op.RUN, key)
        self.facts._doing[threading.get_ident()] = (label, self.inner.measure_limit(timeout))

    def seen(self, answer: Answer, argv: Sequence[str] | None) -> None:
        self.facts._doing.pop(threading.get_ident(), None)
        self.sink.append(Evidence(answer.op, answer.key, answer.status))
        self.facts.note_gap(answer)


class FactContext:
    """What a fact's code may use: the host (answers are noted) and other facts."""

    def __init__(self, facts: Facts, evidence: list[Evidence]):
        self.host: Host = _EvidenceHost(facts.host, evidence, facts)
        self._facts = facts
        self._evidence = evidence

    @contextlib.contextmanager
    def doing(self, what: str, limit: float | None = None) -> Iterator[None]:
        """Say what this thread waits on while it waits on threads of its own (a check cut
        off by the deadline then names it)."""
        me = threading.get_ident()
        self._facts._doing[me] = (what, limit)
        try:
            yield
        finally:
            self._facts._doing.pop(me, None)

    def get(self, other: Fact[T]) -> T:
        try:
            return self._facts.get(other)
        finally:  # a fact that failed still says what it read (a probe not captured)
            self._evidence.extend(self._facts.evidence(other))

    def replaced(self, answer: Answer) -> None:
        """`answer` was not captured, and the fact took what it needed from another answer
        (a bug report's `nvidia-smi -q` for NVML): it is no evidence, and must not make
        the runner skip the checks that rest on the other one."""
        self._evidence[:] = [
            e
            for e in self._evidence
            if (e.op, e.key, e.status) != (answer.op, answer.key, AnswerStatus.NOT_CAPTURED)
        ]


class _Slot:
    __slots__ = ("lock", "done", "value", "error", "evidence", "duration", "owner")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: int | None = None  # the thread computing it
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.evidence: tuple[Evidence, ...] = ()
        self.duration = 0.0


class Facts:
    """The per-run fact store. `Facts.given({...})` builds one from values (tests)."""

    def __init__(self, host: Host | None):
        self.host = host
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}
        self._local = threading.local()
        # What each thread is blocked on, so a check cut off by the run's deadline can say
        # what it waited for. Plain dicts: one writer per key (its own thread).
        self._doing: dict[int, tuple[str, float | None]] = {}
        self._waiting: dict[int, str] = {}
        self._gaps: dict[tuple[str, str], str] = {}  # (op, key) not captured -> why

    @classmethod
    def given(cls, values: Mapping[Fact, Any]) -> Facts:
        facts = cls(None)
        for f, value in values.items():
            slot = facts._slot(f)
            slot.value, slot.done = value, True
        return facts

    def _slot(self, f: Fact) -> _Slot:
        with self._lock:
            slot = self._slots.get(f.name)
            if slot is None:
                slot = self._slots[f.name] = _Slot()
            return slot

    def get(self, f: Fact[T], *, timeout: float | None = None) -> T:
        """The fact's value. With `timeout`, a fact another thread is still computing
        raises FactFailed after that long instead of waiting for it."""
        slot = self._slot(f)
        computing: list[str] = self._local.__dict__.setdefault("stack", [])
        if f.name in computing:
            raise FactFailed(f"fact cycle: {' -> '.join([*computing, f.name])}")
        if not slot.lock.acquire(blocking=False):
            me = threading.get_ident()
            self._waiting[me] = f.name
            try:
                got = slot.lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout))
            finally:
                del self._waiting[me]
            if not got:
                raise FactFailed(f"fact {f.name} is still being computed")
        try:
            if not slot.done:
                slot.owner = threading.get_ident()
                self._compute(f, slot, computing)
        finally:
            slot.owner = None
            slot.lock.release()
        if isinstance(slot.error, ProbeFailed):
            raise type(slot.error)(slot.error.answer)  # NotCaptured stays NotCaptured
        if slot.error is not None:
            raise FactFailed(f"fact {f.name} failed: {_one_line(slot.error)}")
        return slot.value

    def _compute(self, f: Fact, slot: _Slot, computing: list[str]) -> None:
        if self.host is None:
            slot.error = LookupError(f"no value given for {f.name}")
            slot.done = True
            return
        evidence: list[Evidence] = []
        computing.append(f.name)
        start = time.monotonic()
        try:
            slot.value = f.compute(FactContext(self, evidence))
        except Exception as exc:  # kept, and raised again to every check that asks
            slot.error = exc
        except BaseException as exc:  # Ctrl-C and the like: no later asker gets a None
            slot.error = exc
            raise
        finally:
            computing.pop()
            slot.duration = time.monotonic() - start
            slot.evidence = tuple(dict.fromkeys(evidence))
            slot.done = True

    def note_gap(self, answer: Answer) -> None:
        """Keep why a foreign capture lacks `answer` (for the skip it causes)."""
        if answer.status == AnswerStatus.NOT_CAPTURED and answer.error:
            self._gaps.setdefault((answer.op, answer.key), answer.error)

    def uncaptured_reason(self, op: str, key: str) -> str:
        """Why a foreign capture's answer to (op, key) is not there, as its Host said."""
        return self._gaps.get((op, key)) or f"{op_label(op, key)}: not captured"

    def peek(self, name: str) -> Any:
        """The value of the fact called `name` if it is already computed, else None: for
        a display that must never wait on a probe."""
        with self._lock:
            slot = self._slots.get(name)
        return slot.value if slot is not None and slot.done and slot.error is None else None

    def not_captured(self, name: str) -> bool:
        """The fact called `name` is computed and failed for an answer the capture lacks:
        unknown, never absent (a display must not say "none")."""
        with self._lock:
            slot = self._slots.get(name)
        return slot is not None and slot.done and isinstance(slot.error, NotCaptured)

    def blocker(self, thread_id: int) -> str:
        """What a thread waits on, following waits on facts to the operation that holds
        them: "`nvidia-smi -q -x` (10 s limit)"; "" when it is not waiting on anything."""
        seen: set[int] = set()
        tid: int | None = thread_id
        while tid is not None and tid not in seen:
            seen.add(tid)
            doing = self._doing.get(tid)
            if doing is not None:
                what, limit = doing
                return f"{what} ({seconds(limit)} s limit)" if limit else what
            name = self._waiting.get(tid)
            if name is None:
                return ""
            with self._lock:
                slot = self._slots.get(name)
            tid = slot.owner if slot else None
            if tid is None:
                return f"fact {name}"
        return ""

    def evidence(self, f: Fact) -> tuple[Evidence, ...]:
        return self._slot(f).evidence

    def timings(self) -> dict[str, float]:
        with self._lock:
            return {
                name: round(slot.duration, 6)
                for name, slot in sorted(self._slots.items())
                if slot.done and slot.duration
            }


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
