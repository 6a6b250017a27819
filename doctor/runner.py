"""The runner: checks run concurrently, each under a deadline; nothing a check does can
stop the run. A crash or a hang becomes an `error` finding that says why."""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dldoctor.facts import Fact, FactFailed, Facts
from dldoctor.host.base import ProbeFailed
from dldoctor.model import Evidence, Finding, Outcome, Status
from dldoctor.policy import Policy
from dldoctor.registry import CheckSpec


@dataclass(frozen=True)
class CheckStarted:
    spec: CheckSpec


@dataclass(frozen=True)
class CheckFinished:
    spec: CheckSpec
    finding: Finding


Listener = Callable[[Any], None]


class _CheckFacts:
    """The facts as one check sees them: every fact it asks for adds to its evidence."""

    def __init__(self, facts: Facts):
        self._facts = facts
        self.evidence: list[Evidence] = []

    def get(self, f: Fact):
        try:
            return self._facts.get(f)
        finally:
            self.evidence.extend(self._facts.evidence(f))


def finding_for(
    spec: CheckSpec, outcome: Outcome, evidence: Iterable[Evidence], duration: float
) -> Finding:
    problem = outcome.status in (Status.WARN, Status.FAIL)
    remediation = outcome.remediation if outcome.remediation is not None else spec.remediation
    fixes = outcome.fixes if outcome.fixes is not None else spec.fixes
    return Finding(
        id=spec.id,
        title=spec.title,
        category=spec.category,
        status=outcome.status,
        summary=outcome.summary,
        details=outcome.details,
        evidence=tuple(dict.fromkeys(evidence)),
        remediation=remediation if problem else "",
        fixes=tuple(fixes) if problem else (),
        duration_s=duration,
        source=spec.source,
    )


def _valid(outcome: object) -> Outcome:
    if not isinstance(outcome, Outcome):
        raise TypeError(f"returned {type(outcome).__name__}, not an Outcome")
    if not isinstance(outcome.status, Status) or not isinstance(outcome.summary, str):
        raise TypeError("an Outcome needs a Status and a str summary")
    for name in ("details", "fixes"):
        value = getattr(outcome, name)
        if value is not None and not (
            isinstance(value, tuple) and all(isinstance(v, str) for v in value)
        ):
            raise TypeError(f"Outcome.{name} must be strings")
    return outcome


def run_check(spec: CheckSpec, facts: Facts, policy: Policy) -> Finding:
    view = _CheckFacts(facts)
    start = time.monotonic()
    try:
        outcome = _valid(spec.fn(view, policy))
    except ProbeFailed as exc:
        outcome = Outcome(Status.ERROR, str(exc))
    except FactFailed as exc:
        outcome = Outcome(Status.ERROR, str(exc))
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        outcome = Outcome(
            Status.ERROR,
            f"check crashed: {type(exc).__name__}: {exc}",
            (f"at {where.filename}:{where.lineno} in {where.name}",),
        )
    return finding_for(spec, outcome, view.evidence, time.monotonic() - start)


class Runner:
    def __init__(
        self,
        specs: Sequence[CheckSpec],
        facts: Facts,
        policy: Policy,
        *,
        check_timeout: float,
        workers: int = 8,
        listeners: Iterable[Listener] = (),
    ):
        self.specs = list(specs)
        self.facts = facts
        self.policy = policy
        self.check_timeout = check_timeout
        self.workers = max(1, workers)
        self.listeners = list(listeners)

    def _emit(self, event: Any) -> None:
        for listener in self.listeners:
            listener(event)

    def run(self) -> list[Finding]:
        """All findings, in the order of `specs`. Returns within check_timeout of the
        last check that started, whatever the checks do."""
        todo: queue.SimpleQueue[int] = queue.SimpleQueue()
        for index in range(len(self.specs)):
            todo.put(index)
        events: queue.SimpleQueue[tuple[str, int, Any]] = queue.SimpleQueue()

        def work() -> None:
            while True:
                try:
                    index = todo.get_nowait()
                except queue.Empty:
                    return
                events.put(("start", index, time.monotonic()))
                events.put(("done", index, run_check(self.specs[index], self.facts, self.policy)))

        def spawn() -> None:
            # Daemon threads: a check stuck in a syscall must not keep the process alive.
            threading.Thread(target=work, name="dldoctor-check", daemon=True).start()

        for _ in range(min(self.workers, len(self.specs))):
            spawn()
        running: dict[int, float] = {}
        results: dict[int, Finding] = {}
        while len(results) < len(self.specs):
            wait = None
            if running:
                wait = max(0.0, min(running.values()) + self.check_timeout - time.monotonic())
            try:
                kind, index, payload = events.get(timeout=wait)
            except queue.Empty:
                self._abandon_overdue(running, results, spawn)
                continue
            if index in results:
                continue  # finished after it was given up on: its verdict came too late
            spec = self.specs[index]
            if kind == "start":
                running[index] = payload
                self._emit(CheckStarted(spec))
            else:
                running.pop(index, None)
                results[index] = payload
                self._emit(CheckFinished(spec, payload))
        return [results[i] for i in range(len(self.specs))]

    def _abandon_overdue(
        self, running: dict[int, float], results: dict[int, Finding], spawn: Callable[[], None]
    ) -> None:
        now = time.monotonic()
        for index, started in list(running.items()):
            if now - started < self.check_timeout:
                continue
            spec = self.specs[index]
            outcome = Outcome(
                Status.ERROR,
                f"did not finish within {self.check_timeout:g} s (timed out)",
                ("abandoned: a probe it waits on may be hung",),
            )
            results[index] = finding_for(spec, outcome, (), now - started)
            del running[index]
            self._emit(CheckFinished(spec, results[index]))
            spawn()  # the stuck worker is lost; keep the rest of the queue moving
