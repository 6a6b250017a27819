"""Findings and Reports: the one data model every renderer and the TUI read."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from dldoctor.host.base import AnswerStatus, Op

SCHEMA_VERSION = 2
# The versions a reader accepts (docs/report-schema.md, "Migration"): 1 embedded each
# finding's evidence by value; 2 keeps one table of it per report.
READABLE_SCHEMA_VERSIONS = (1, 2)

# What a finding quotes of the host, whichever check wrote it: a summary is a line, a
# detail a few lines, and a finding a screenful of them. A 16 MiB `osrelease` echoed whole
# made a 64 MiB summary and a 272 MiB report.
SUMMARY_CHARS = 400
DETAIL_CHARS = 2000
MAX_DETAILS = 200


def quoted(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with a note of how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def quoted_lines(lines: tuple[str, ...]) -> tuple[str, ...]:
    kept = tuple(quoted(line, DETAIL_CHARS) for line in lines[:MAX_DETAILS])
    if len(lines) > MAX_DETAILS:
        kept += (f"... ({len(lines) - MAX_DETAILS} more lines)",)
    return kept


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"  # not applicable here; the summary says why
    ERROR = "error"  # the check or its probe crashed or timed out; never a verdict on the host

    def __str__(self) -> str:
        return self.value

    @property
    def rank(self) -> int:
        """0 for the worst: the place of this status in WORST_FIRST (a sort key)."""
        return WORST_FIRST.index(self)


# The order a reader cares about: what failed, what could not look, what to watch, then the
# rest. The first three are the problems: what a summary lists and a run is judged by.
WORST_FIRST = (Status.FAIL, Status.ERROR, Status.WARN, Status.PASS, Status.SKIP)
PROBLEMS = WORST_FIRST[:3]


@dataclass(frozen=True)
class Evidence:
    """One raw answer a finding rests on (op + key name it in a bundle)."""

    op: str
    key: str
    status: str

    def to_dict(self) -> dict[str, str]:
        return {"op": self.op, "key": self.key, "status": self.status}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evidence:
        return cls(str(d["op"]), str(d["key"]), str(d["status"]))

    def __str__(self) -> str:
        status = self.status
        if self.op == Op.LINK and status == AnswerStatus.ERROR:
            # readlink of a path that is not a link fails (EINVAL), and the facts ask it of
            # every path they resolve: the normal "no", not a failure to look.
            status = "not a link"
        suffix = "" if status == AnswerStatus.OK else f" ({status})"
        return f"{self.op} {self.key}{suffix}"


@dataclass(frozen=True)
class Figure:
    """One figure the active tier measured (docs/active.md): what, on which part, in which
    unit, and the reference it was judged against, with where that reference comes from.
    A finding's summary says it in words; this is what `diff` and `fleet report` compare."""

    subject: str  # the part measured: "GPU 3", "/data", "NUMA node 1", "mlx5_0:1"
    what: str  # a stable name: "gemm_bf16", "hbm_copy", "h2d", "seq_read", ...
    value: float
    unit: str  # "TFLOPS", "TB/s", "GB/s", "us", "IOPS"
    reference: float | None = None  # the figure expected, in the same unit
    source: str = ""  # where the reference comes from: a datasheet, a policy key, genconf

    @property
    def fraction(self) -> float | None:
        """The value as a fraction of the reference (None without one)."""
        return self.value / self.reference if self.reference else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "subject": self.subject,
            "what": self.what,
            "value": self.value,
            "unit": self.unit,
        }
        if self.reference is not None:
            d["reference"] = self.reference
            d["source"] = self.source
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Figure:
        reference = d.get("reference")
        return cls(
            subject=str(d["subject"]),
            what=str(d["what"]),
            value=float(d["value"]),
            unit=str(d["unit"]),
            reference=None if reference is None else float(reference),
            source=str(d.get("source", "")),
        )


@dataclass(frozen=True)
class Outcome:
    """What a check function returns; the runner adds identity, evidence and timing."""

    status: Status
    summary: str
    details: tuple[str, ...] = ()
    remediation: str | None = None  # replaces the check's default remediation
    fixes: tuple[str, ...] | None = None  # replaces the check's default fix ids
    figures: tuple[Figure, ...] = ()  # what a measuring check measured
    # The facts this verdict rests on, where the check read others too (dldoctor.facts'
    # Fact objects). Empty: all it read. A foreign capture that lacks an answer of the
    # others does not undo it (runner, docs/foreign-inputs.md): a fatal SXid in the kernel
    # log is a verdict whether or not the PCI device list was captured.
    rests_on: tuple[Any, ...] = ()
    # The parts a verdict is about, machine-readable, for pictures that draw findings onto
    # the host (doctor/topology.py): "pci:0000:9c:00.0", "gpu:3", "net:ib0", "rdma:mlx5_0".
    subjects: tuple[str, ...] = ()


def _outcome(status: Status):
    def make(
        summary: str,
        details=(),
        *,
        remediation: str | None = None,
        fixes=None,
        figures=(),
        rests_on=(),
        subjects=(),
    ) -> Outcome:
        return Outcome(
            status,
            summary,
            tuple(details),
            remediation,
            None if fixes is None else tuple(fixes),
            tuple(figures),
            tuple(rests_on),
            tuple(dict.fromkeys(subjects)),
        )

    make.__name__ = status.name.lower()
    return make


passed = _outcome(Status.PASS)
warned = _outcome(Status.WARN)
failed = _outcome(Status.FAIL)
skipped = _outcome(Status.SKIP)
errored = _outcome(Status.ERROR)  # the check could not look (a probe timed out or broke)


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    category: str
    status: Status
    summary: str
    details: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    remediation: str = ""
    fixes: tuple[str, ...] = ()
    duration_s: float = 0.0
    source: str = "builtin"
    figures: tuple[Figure, ...] = ()  # the active tier's measurements
    subjects: tuple[str, ...] = ()  # the parts it is about (Outcome.subjects)

    def __post_init__(self) -> None:
        # A check may plan a fix that does not exist yet: offer only the registered ones.
        from dldoctor.fixes import known

        object.__setattr__(self, "fixes", known(self.fixes))
        object.__setattr__(self, "summary", quoted(self.summary, SUMMARY_CHARS))
        object.__setattr__(self, "details", quoted_lines(self.details))
        object.__setattr__(self, "remediation", quoted(self.remediation, DETAIL_CHARS))

    def to_dict(self, evidence_ids: dict[Evidence, int] | None = None) -> dict[str, Any]:
        """The finding as a report holds it: its evidence as indexes into the report's
        table, `evidence_ids`, which grows by what it lacks; by value without one."""
        if evidence_ids is None:
            evidence: list[Any] = [e.to_dict() for e in self.evidence]
        else:
            evidence = [evidence_ids.setdefault(e, len(evidence_ids)) for e in self.evidence]
        d = {
            "id": self.id,
            "title": self.title,
            "category": self.category,
            "status": self.status.value,
            "summary": self.summary,
            "details": list(self.details),
            "evidence": evidence,
            "remediation": self.remediation,
            "fixes": list(self.fixes),
            "duration_s": round(self.duration_s, 6),
            "source": self.source,
        }
        if self.figures:  # only a measuring check's: a passive report stays as it was
            d["figures"] = [f.to_dict() for f in self.figures]
        if self.subjects:  # only where a check names its parts: other findings stay as they were
            d["subjects"] = list(self.subjects)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], table: list[Evidence] | None = None) -> Finding:
        """A finding from `to_dict`: evidence by value, or indexes into `table`."""
        listed = d.get("evidence", ())
        if table is None:
            evidence = tuple(Evidence.from_dict(e) for e in listed)
        else:
            evidence = tuple(_entry(table, i) for i in listed)
        return cls(
            id=d["id"],
            title=d["title"],
            category=d["category"],
            status=Status(d["status"]),
            summary=d["summary"],
            details=tuple(d.get("details", ())),
            evidence=evidence,
            remediation=d.get("remediation", ""),
            fixes=tuple(d.get("fixes", ())),
            duration_s=float(d.get("duration_s", 0.0)),
            source=d.get("source", "builtin"),
            figures=tuple(Figure.from_dict(f) for f in d.get("figures", ())),
            subjects=tuple(str(x) for x in d.get("subjects", ()) if isinstance(x, str)),
        )


def _entry(table: list[Evidence], index: Any) -> Evidence:
    if type(index) is not int or not 0 <= index < len(table):
        raise ValueError(f"evidence {str(index)[:40]!r} is not an index of the report's table")
    return table[index]


def counts(findings) -> dict[str, int]:
    result = {s.value: 0 for s in Status}
    for f in findings:
        result[f.status.value] += 1
    return result


def overall(findings) -> Status:
    """The run's worst problem (WORST_FIRST), or pass when there is none."""
    worst = min((f.status for f in findings), key=lambda s: s.rank, default=Status.PASS)
    return worst if worst in PROBLEMS else Status.PASS


@dataclass
class Report:
    findings: list[Finding]
    host: dict[str, Any] = field(default_factory=dict)
    tool: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    duration_s: float = 0.0
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    strict: bool = False
    schema_version: int = SCHEMA_VERSION
    # What the run learned of the host's parts (dldoctor.inventory); {} in a report from
    # before it existed, or made without facts.
    inventory: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> Status:
        return overall(self.findings)

    def to_dict(self) -> dict[str, Any]:
        from dldoctor.exitcodes import exit_code_for

        # Five PCI checks rest on the same few hundred sysfs answers: kept once, 8-GPU
        # reports are a third of the size (docs/report-schema.md).
        evidence_ids: dict[Evidence, int] = {}
        findings = [f.to_dict(evidence_ids) for f in self.findings]
        return {
            "schema_version": self.schema_version,
            "tool": self.tool,
            "host": self.host,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 6),
            "strict": self.strict,
            "summary": {
                "status": self.status.value,
                "exit_code": int(exit_code_for(self.findings, strict=self.strict)),
                "counts": counts(self.findings),
            },
            "findings": findings,
            "evidence": [e.to_dict() for e in evidence_ids],
            "timings": self.timings,
            "inventory": self.inventory,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Report:
        """A report of any readable schema version; it writes itself as the current one."""
        version = d.get("schema_version")
        if version not in READABLE_SCHEMA_VERSIONS or type(version) is not int:
            raise ValueError(
                f"report schema_version {version!r} is not one of {READABLE_SCHEMA_VERSIONS}"
            )
        table = None if version == 1 else [Evidence.from_dict(e) for e in d.get("evidence", ())]
        return cls(
            findings=[Finding.from_dict(f, table) for f in d.get("findings", ())],
            host=dict(d.get("host", {})),
            tool=dict(d.get("tool", {})),
            started_at=d.get("started_at", ""),
            duration_s=float(d.get("duration_s", 0.0)),
            timings=dict(d.get("timings", {})),
            strict=bool(d.get("strict", False)),
            inventory=dict(d.get("inventory") or {}),
        )
