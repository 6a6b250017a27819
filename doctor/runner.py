"""The runner: checks run concurrently, each under a deadline; nothing a check does can
stop the run. A crash or a hang becomes an `error` finding that says why."""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dldoctor.facts import Fact, FactFailed, Facts
from dldoctor.host.base import AnswerStatus, NotCaptured, ProbeFailed, start_daemon
from dldoctor.model import Evidence, Figure, Finding, Outcome, Status
from dldoctor.policy import Policy
from dldoctor.registry import CheckSpec

# The longest the main thread waits in one call, so that a pending signal's handler runs.
SIGNAL_SLICE_S = 0.25


@dataclass(frozen=True)
class CheckStarted:
    spec: CheckSpec
    thread: int = 0  # its thread's ident: `Facts.blocker` says what it waits on


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
        figures=outcome.figures,
        subjects=outcome.subjects,
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
    if not isinstance(outcome.figures, tuple) or not all(
        isinstance(f, Figure) for f in outcome.figures
    ):
        raise TypeError("Outcome.figures must be Figures")
    if not isinstance(outcome.subjects, tuple) or not all(
        isinstance(x, str) for x in outcome.subjects
    ):
        raise TypeError("Outcome.subjects must be strings")
    return outcome


def _crashed(what: str, exc: Exception) -> Outcome:
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return Outcome(
        Status.ERROR,
        f"{what} crashed: {type(exc).__name__}: {exc}",
        (f"at {where.filename}:{where.lineno} in {where.name}",),
    )


def _unmet(spec: CheckSpec, view: _CheckFacts, policy: Policy) -> Outcome | None:
    """The outcome of the first of the check's requirements that stops it, or None. A
    need of `checks.needs` marked `takes_policy` may stand as one: it is asked with the
    policy too, and what it answers other than an Outcome means "go on"."""
    for need in spec.requires:
        try:
            outcome = need(view, policy) if getattr(need, "takes_policy", False) else need(view)
            if isinstance(outcome, Outcome) or (
                outcome is not None and not getattr(need, "takes_policy", False)
            ):
                return _valid(outcome)
        except (ProbeFailed, FactFailed):
            raise  # an error finding, as when the check's own fact fails
        except Exception as exc:
            return _crashed(f"requirement {getattr(need, '__name__', repr(need))}", exc)
    return None


NOT_JUDGED = "a foreign capture holds only what its collector asked for: no verdict on the host"


def _uncaptured(outcome: Outcome, evidence: Sequence[Evidence], facts: Facts) -> Outcome:
    """An outcome that rests on an answer a foreign capture lacks says nothing about the
    host: a verdict (often "absent"), an error or a reason to skip ("no sensors exposed")
    alike. It becomes a skip that says what was not captured. (A fact that took what it
    needed from another answer takes the uncaptured one out of its evidence:
    FactContext.replaced.) An outcome that names the facts it rests on (`rests_on`) is
    judged by their answers alone: what else the check read and the capture lacks becomes
    a line of its details. A live host and a dldoctor bundle never answer `not_captured`."""
    decisive = evidence
    if outcome.rests_on:
        decisive = [e for f in outcome.rests_on for e in facts.evidence(f)]
    missing = _missing(decisive, facts)
    if missing:
        return Outcome(Status.SKIP, missing[0], (*missing[1:6], NOT_JUDGED))
    aside = _missing(evidence, facts) if outcome.rests_on else []
    if not aside:
        return outcome
    said = tuple(f"not needed for this verdict, {why}" for why in aside[:5])
    return replace(outcome, details=(*outcome.details, *said))


def _missing(evidence: Iterable[Evidence], facts: Facts) -> list[str]:
    """Why each answer of `evidence` that a foreign capture lacks is missing, once each."""
    return list(
        dict.fromkeys(
            facts.uncaptured_reason(e.op, e.key)
            for e in evidence
            if e.status == AnswerStatus.NOT_CAPTURED
        )
    )


def run_check(spec: CheckSpec, facts: Facts, policy: Policy) -> Finding:
    view = _CheckFacts(facts)
    start = time.monotonic()
    try:
        outcome = _unmet(spec, view, policy) or _valid(spec.fn(view, policy))
    except NotCaptured as exc:
        answer = exc.answer  # what is missing, even where a fact gave it in its own words
        view.evidence.append(Evidence(answer.op, answer.key, answer.status))
        facts.note_gap(answer)
        outcome = Outcome(Status.SKIP, facts.uncaptured_reason(answer.op, answer.key))
    except ProbeFailed as exc:
        outcome = Outcome(Status.ERROR, str(exc))
    except FactFailed as exc:
        outcome = Outcome(Status.ERROR, str(exc))
    except Exception as exc:
        outcome = _crashed("check", exc)
    outcome = _uncaptured(outcome, view.evidence, facts)
    return finding_for(spec, outcome, view.evidence, time.monotonic() - start)


class Runner:
    """Every check in a thread of its own, all started at once: a check waiting on a hung
    probe holds nothing the others need, so N hung tools cost one timeout, not N. The run
    ends at `deadline` (monotonic clock) whatever the checks do; a check still running
    then is an `error` that names what it waits on."""

    def __init__(
        self,
        specs: Sequence[CheckSpec],
        facts: Facts,
        policy: Policy,
        *,
        check_timeout: float,
        deadline: float | None = None,
        listeners: Iterable[Listener] = (),
    ):
        self.specs = list(specs)
        self.facts = facts
        self.policy = policy
        self.check_timeout = check_timeout
        # A measuring check waits its turn for the one measuring lane: the whole active
        # budget is its backstop, and the run's deadline still bounds it.
        self.measure_timeout = check_timeout + policy.timeouts.active_s
        self.deadline = deadline
        self.listeners = list(listeners)

    def _emit(self, event: Any) -> None:
        for listener in self.listeners:
            listener(event)

    def run(self) -> list[Finding]:
        """All findings, in the order of `specs`."""
        events: queue.SimpleQueue[tuple[str, int, Any]] = queue.SimpleQueue()

        def work(index: int) -> None:
            events.put(("start", index, (time.monotonic(), threading.get_ident())))
            events.put(("done", index, run_check(self.specs[index], self.facts, self.policy)))

        for index in range(len(self.specs)):
            start_daemon(lambda i=index: work(i))
        running: dict[int, tuple[float, int]] = {}
        results: dict[int, Finding] = {}
        while len(results) < len(self.specs):
            ends = [started + self._timeout(i) for i, (started, _) in running.items()]
            if self.deadline is not None:
                ends.append(self.deadline)
            wait = max(0.0, min(ends) - time.monotonic()) if ends else None
            try:
                # In slices: a signal the kernel hands to another thread does not wake this
                # wait, and its handler (which ends the run) runs only when this thread
                # next runs Python code; a check hung for 300 s must not hold Ctrl-C.
                slice_s = SIGNAL_SLICE_S if wait is None else min(wait, SIGNAL_SLICE_S)
                kind, index, payload = events.get(timeout=slice_s)
            except queue.Empty:
                if wait is not None and wait <= SIGNAL_SLICE_S:
                    self._give_up(running, results)
                continue
            if index in results:
                continue  # finished after it was given up on: its verdict came too late
            spec = self.specs[index]
            if kind == "start":
                running[index] = payload
                self._emit(CheckStarted(spec, payload[1]))
            else:
                running.pop(index, None)
                results[index] = payload
                self._emit(CheckFinished(spec, payload))
        return [results[i] for i in range(len(self.specs))]

    def _timeout(self, index: int) -> float:
        return self.measure_timeout if self.specs[index].active else self.check_timeout

    def _give_up(self, running: dict[int, tuple[float, int]], results: dict[int, Finding]) -> None:
        now = time.monotonic()
        past_deadline = self.deadline is not None and now >= self.deadline
        for index in range(len(self.specs)):
            if index in results:
                continue
            started, thread = running.get(index, (now, 0))
            overdue = now - started >= self._timeout(index)
            if not (past_deadline or overdue):
                continue
            spec = self.specs[index]
            blocker = self.facts.blocker(thread) if thread else ""
            if overdue and not past_deadline:
                summary = f"did not finish within {self._timeout(index):g} s (timed out)"
            else:
                summary = "did not finish before the run's deadline"
            if blocker:
                summary += f": waiting on {blocker}"
            outcome = Outcome(Status.ERROR, summary, _waited_details(blocker))
            results[index] = finding_for(spec, outcome, (), now - started)
            running.pop(index, None)
            self._emit(CheckFinished(spec, results[index]))


def _waited_details(blocker: str) -> tuple[str, ...]:
    if blocker:
        return ("a probe it needs did not answer in time; the host was not judged on it",)
    return ("abandoned: it was still computing; the host was not judged on it",)
