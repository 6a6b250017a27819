"""What the interactive app shows, without Textual: one diagnosis run in a thread that
tells its subscribers each change, the host at a glance, the raw answers behind a
finding. Widgets read this and the fix flow (`fixflow.py`); they never ask the host
anything."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dldoctor.facts import Facts
from dldoctor.host.base import Answer, Host, Op
from dldoctor.host.recording import RecordingHost
from dldoctor.model import Evidence, Finding, Report
from dldoctor.policy import Policy
from dldoctor.registry import CheckSpec
from dldoctor.runner import CheckFinished, CheckStarted

EVIDENCE_LINES = 60


@dataclass(frozen=True)
class HostView:
    """The header: the host at a glance. Every field may be "" (not known yet, or never)."""

    name: str = ""
    os: str = ""
    kernel: str = ""
    gpus: str = ""
    driver: str = ""
    ram: str = ""
    source: str = ""


@dataclass(frozen=True)
class Running:
    check_id: str
    title: str
    seconds: float  # since it started
    waiting_on: str  # the probe it waits for, "" when it is computing
    seconds_left: float | None  # until the run's deadline


@dataclass(frozen=True)
class EvidenceView:
    source: str  # "read /proc/modules", "run nvidia-smi -q -x"
    status: str
    lines: tuple[str, ...]
    more: int = 0  # lines not shown


@dataclass
class Run:
    """One diagnosis: what has finished, what is still running, and its report once done."""

    specs: Sequence[CheckSpec]
    findings: dict[str, Finding] = field(default_factory=dict)
    started: dict[str, tuple[float, int]] = field(default_factory=dict)  # id -> (t, thread)
    report: Report | None = None
    deadline: float | None = None
    error: str = ""


@dataclass(frozen=True)
class RunStarted:
    run: Run


@dataclass(frozen=True)
class RunEnded:
    run: Run  # its report is set, or its error


Subscriber = Callable[[object], None]


class Session:
    """A diagnosis of one host, live or replayed, through a recorder: its answers are the
    evidence shown and the snapshot exported."""

    def __init__(
        self,
        make_host: Callable[[], Host],
        policy: Policy,
        specs: Sequence[CheckSpec],
        *,
        read_only: bool,
        root: str = "/",
        bundle: str = "",
        label: str = "",
        extra: Sequence[Finding] = (),
        notices: Sequence[str] = (),
        measuring: Sequence[CheckSpec] = (),
    ):
        self.make_host = make_host
        self.policy = policy
        self.specs = list(specs)
        self.read_only = read_only
        self.root = root
        self.bundle = bundle  # the bundle's folder (an archive's, extracted)
        self.label = label or bundle  # as the user named it
        self.extra = list(extra)  # plugins that failed to load, as findings
        self.notices = list(notices)  # said once the app is up ("fix X: verified after reboot")
        # The measuring checks `m` runs after a confirmation (docs/active.md); `measured`:
        # this session's answers hold measurements (its export says so in the manifest).
        self.measuring = [m for m in measuring if m.id not in {s.id for s in self.specs}]
        self.measured = any(s.active for s in self.specs)
        self.recorder: RecordingHost | None = None
        self.facts: Facts | None = None
        self.run: Run = Run(self.specs)
        self._lock = threading.Lock()
        self.generation = 0  # bumped by every start: a widget redraws when it changes
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> None:
        """Call `subscriber(event)` after each change of the run: RunStarted, the runner's
        CheckStarted and CheckFinished, RunEnded. It is called from the run's thread (or
        from `start`'s caller) and must not block."""
        self._subscribers.append(subscriber)

    def _tell(self, event: object) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:  # noqa: BLE001 - a screen gone as the app ends stops no run
                pass

    # --- running --------------------------------------------------------------------

    def start(self, specs: Sequence[CheckSpec] | None = None) -> threading.Thread:
        """Run `specs` (all by default) in a thread; one check re-run keeps the others."""
        from dldoctor.diagnose import diagnose

        chosen = list(specs or self.specs)
        previous = self.run.findings if specs else {}
        if specs and self.recorder is not None:
            # One check again: the answers behind the others' evidence (and the export)
            # stay; its own are replaced by the fresh ones.
            self.recorder.inner = self.make_host()
        else:
            self.recorder = RecordingHost(self.make_host())
        self.facts = Facts(self.recorder)
        run = Run(
            chosen, findings={k: v for k, v in previous.items() if k not in {s.id for s in chosen}}
        )
        t = self.policy.timeouts
        measures = any(s.active for s in chosen)
        # The measuring budget is added to the deadline, as --active adds it.
        run.deadline = time.monotonic() + t.deadline_s + (t.active_s if measures else 0.0)
        # A check re-run keeps the recorder's other answers; a whole run starts a new one.
        self.measured = measures or (bool(specs) and self.measured)
        with self._lock:
            self.run = run
            self.generation += 1
        self._tell(RunStarted(run))

        def listen(event) -> None:
            with self._lock:
                if isinstance(event, CheckStarted):
                    run.started[event.spec.id] = (time.monotonic(), event.thread)
                elif isinstance(event, CheckFinished):
                    run.started.pop(event.spec.id, None)
                    run.findings[event.spec.id] = event.finding
            self._tell(event)

        def work() -> None:
            try:
                report = diagnose(
                    self.recorder,
                    self.policy,
                    chosen,
                    deadline_at=run.deadline,
                    extra_findings=self.extra if not specs else (),
                    listeners=[listen],
                    facts=self.facts,
                )
            except Exception as exc:  # noqa: BLE001 - shown in the app, never a traceback
                run.error = f"{type(exc).__name__}: {exc}"
                self._tell(RunEnded(run))
                return
            kept = [f for f in previous.values() if f.id not in {s.id for s in chosen}]
            order = self._order()
            report.findings = sorted([*kept, *report.findings], key=lambda f: order.get(f.id, 0))
            run.report = report
            self._tell(RunEnded(run))

        thread = threading.Thread(target=work, name="dldoctor-tui-run", daemon=True)
        thread.start()
        return thread

    @property
    def done(self) -> bool:
        return self.run.report is not None or bool(self.run.error)

    def findings(self) -> list[Finding]:
        """Those finished so far, in the checks' order (the report's, once it is done)."""
        if self.run.report is not None:
            return list(self.run.report.findings)
        with self._lock:
            have = dict(self.run.findings)
        order = self._order()
        return sorted(have.values(), key=lambda f: order.get(f.id, 0))

    def _order(self) -> dict[str, int]:
        """The findings' order: the checks', the measuring ones last (their category)."""
        return {s.id: i for i, s in enumerate([*self.specs, *self.measuring])}

    def measuring_loads(self) -> list[str]:
        """What `m` would load, in words, for its confirmation."""
        from dldoctor.active import loads

        return loads(self.measuring)

    def running(self) -> list[Running]:
        """The checks still running, longest first, with what each waits on."""
        now = time.monotonic()
        with self._lock:
            started = dict(self.run.started)
        titles = {s.id: s.title for s in [*self.specs, *self.measuring]}
        left = None if self.run.deadline is None else max(0.0, self.run.deadline - now)
        found = [
            Running(cid, titles.get(cid, cid), now - t, self._blocker(thread), left)
            for cid, (t, thread) in started.items()
        ]
        return sorted(found, key=lambda r: -r.seconds)

    def _blocker(self, thread: int) -> str:
        return self.facts.blocker(thread) if self.facts is not None and thread else ""

    def suggested_dest(self) -> str:
        """Where the export suggests writing: a name without the host's (the archive's top
        folder takes it), so that a bundle passed on does not give the host away."""
        from dldoctor.snapshots.take import default_dest

        return default_dest(archive=True)

    def export(self, dest: str, *, redact: bool) -> str:
        """This run's answers and report as a snapshot at `dest` (a .tar.gz, or a folder
        when the name has no such ending); its path."""
        from dldoctor.snapshots import take
        from dldoctor.snapshots.redact import Redactor

        report = self.run.report
        if report is None or self.recorder is None:
            raise ValueError("the checks have not finished")
        redactor, map_path = None, ""
        if redact:
            map_path = take.default_map_path()
            redactor = Redactor.load(map_path)
        if not self.bundle:  # the forensic extras of a snapshot, asked now
            take.wait_extras(take.start_extras(self.recorder), time.monotonic() + 10)
        dest = os.path.abspath(dest or self.suggested_dest())
        archive = dest.endswith((".tar.gz", ".tgz"))
        argv = ["dldoctor", "(interactive export)"]
        return take.write_snapshot(
            self.recorder,
            report,
            dest,
            argv,
            archive=archive,
            redactor=redactor,
            map_path=map_path,
            active=self.measured,
            picture=self._picture(report),
        )

    def _picture(self, report) -> str | None:
        from dldoctor.topology import picture_of

        return None if self.facts is None else picture_of(self.facts, report.findings)

    def topology_text(self, width: int) -> str:
        """The run's topology as a text tree with its findings marked (the `t` screen)."""
        from dldoctor.topology import Topology, render_tree, topology_of

        topo = Topology(None, missing=("the checks have not started",))
        if self.facts is not None:
            topo = topology_of(self.facts)
        return render_tree(topo, self.findings(), width=width)

    # --- what the screens show ------------------------------------------------------

    def host_view(self) -> HostView:
        report = self.run.report
        summary = report.host if report else {}
        return HostView(
            name=str(summary.get("hostname") or self._fact_text("hostname")),
            os=str(summary.get("os") or ""),
            kernel=str(summary.get("kernel") or ""),
            gpus=self._gpus(),
            driver=self._driver(),
            ram=self._ram(),
            source=self._source(),
        )

    def _source(self) -> str:
        if self.bundle:
            return f"bundle {self.label} (read-only)"
        # A foreign capture (an nvidia-bug-report log): read-only, and no bundle folder.
        return f"{self.label} (read-only)" if self.read_only else "this host, live"

    def _done_fact(self, name: str):
        """A fact the run has already computed, or None: the header never waits."""
        if self.facts is None:
            return None
        return self.facts.peek(name)

    def _fact_text(self, name: str) -> str:
        value = self._done_fact(name)
        return value if isinstance(value, str) else ""

    def _gpus(self) -> str:
        stack = self._done_fact("gpu.nvidia")
        gpus = getattr(stack, "gpus", ()) or ()
        if not gpus:
            # The driver could not be asked: what the PCI bus shows is still worth a line.
            from dldoctor.facts.pci import NVIDIA

            bus = self._done_fact("pci.devices")
            seen = len(bus.gpus(NVIDIA)) if bus is not None else 0
            on_bus = f"{seen} NVIDIA GPU(s) on the PCI bus" if seen else ""
            # A capture without the driver's answers (a sos report) says nothing of GPUs:
            # "none seen" would read as "none there".
            if self.facts is not None and self.facts.not_captured("gpu.nvidia"):
                return f"{on_bus}; GPU facts not captured" if seen else "GPU facts not captured"
            return f"{on_bus}, none seen through the driver" if seen else ""
        names = sorted({g.name for g in gpus if g.name})
        return f"{len(gpus)} × {', '.join(names) or 'NVIDIA GPU'}"

    def _driver(self) -> str:
        stack = self._done_fact("gpu.nvidia")
        if not getattr(stack, "driver_version", ""):
            return ""
        cuda = f", CUDA ≤ {stack.cuda_driver_version}" if stack.cuda_driver_version else ""
        return f"driver {stack.driver_version}{cuda}"

    def _ram(self) -> str:
        total = getattr(self._done_fact("memory"), "total_bytes", None)
        return f"{total / 2**30:.0f} GiB RAM" if total else ""

    def evidence(self, finding: Finding) -> list[EvidenceView]:
        """The raw answers `finding` was decided on, as the recorder kept them."""
        return [self._evidence_view(e) for e in finding.evidence]

    def _evidence_view(self, evidence: Evidence) -> EvidenceView:
        answer = self.recorder.answer(evidence.op, evidence.key) if self.recorder else None
        source = f"{evidence.op} {evidence.key}"
        if answer is None:
            return EvidenceView(source, evidence.status, ("(not kept by this run)",))
        if not answer.ok:  # the status in the heading says it all ("missing")
            return EvidenceView(source, answer.status, ())
        lines = _answer_lines(answer)
        shown = tuple(lines[:EVIDENCE_LINES])
        return EvidenceView(source, evidence.status, shown, max(0, len(lines) - len(shown)))


def _answer_lines(answer: Answer) -> list[str]:
    value = answer.value
    if isinstance(value, (tuple, list)):
        return [str(v) for v in value] or ["(empty folder)"]
    if isinstance(value, (dict,)) or (answer.op == Op.PROBE):
        return json.dumps(value, indent=1, default=str).splitlines()
    text = answer.text
    return text.splitlines() or ["(empty)"]
