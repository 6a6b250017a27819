"""Reading the node reports of a sweep: every file is untrusted input.

A node's answer is a report JSON (what `dldoctor --check --json` prints) or a bundle
(directory or `.tar.gz`, whose report.json is read). Whatever cannot be read as one — too
large, not JSON, JSON of another shape, a damaged bundle — is a `Problem` of that node
("not a report"), as are the nodes `fleet run` could not reach or that did not answer in
time (recorded in the sweep's sweep.json). Nothing here raises on a node's content.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from dldoctor.host.base import file_name_text
from dldoctor.model import READABLE_SCHEMA_VERSIONS, Status

SWEEP = "sweep.json"  # what `fleet run` writes beside the reports (docs/fleet.md)
SWEEP_FORMAT = "dldoctor-fleet-sweep"
MAX_REPORT_BYTES = 32 * 1024 * 1024  # an 8-GPU host's report is about 400 KiB
MAX_SWEEP_BYTES = 64 * 1024 * 1024
MAX_VALUES = 1_000_000  # JSON values parsed of one report (each costs memory)
MAX_FINDINGS = 5_000
MAX_FIGURES = 100_000  # measured figures of one report (a P2P matrix of 8 GPUs is 56)
MAX_TEXT = 300  # an id, a title or a summary kept of a node's finding
STATUSES = frozenset(s.value for s in Status)
REPORT_SUFFIXES = (".json", ".tar.gz", ".tgz")

# A host name as ClusterShell folds it; others (a comma, a bracket, an "@" that would ask
# the group resolver, a "/") are listed verbatim.
NODE_NAME = re.compile(r"[A-Za-z0-9_.+-]+")

UNREACHABLE, TIMED_OUT, NOT_A_REPORT = "unreachable", "timed_out", "not_a_report"
KINDS = {UNREACHABLE: "unreachable", TIMED_OUT: "timed out", NOT_A_REPORT: "not a report"}


@dataclass(frozen=True)
class Problem:
    kind: str  # one of KINDS
    detail: str


# What a fleet keeps of a measured figure: check id, subject, what, unit, value.
FigureRow = tuple[str, str, str, str, float]


@dataclass(frozen=True)
class NodeReport:
    host: dict[str, Any]
    findings: list[tuple[str, str, str, str]]  # id, title, status, summary
    inventory: Any  # None in a report made before the inventory existed
    figures: list[FigureRow] = field(default_factory=list)  # the active tier's


@dataclass(frozen=True)
class Entry:
    """One node of the inputs: where its answer is, or what was recorded instead."""

    name: str
    path: str  # "" when the sweep recorded no answer
    problem: Problem | None = None


class InputError(Exception):
    """A path given on the command line that is not there (one line, exit 4)."""


# --- which nodes ------------------------------------------------------------------------


def node_name(path: str) -> str:
    base = os.path.basename(os.path.normpath(path))
    base = file_name_text(base)  # undecodable bytes: a name that can still be printed
    for suffix in REPORT_SUFFIXES:
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return base


def is_bundle_dir(path: str) -> bool:
    """A folder laid out as a bundle (docs/bundle-format.md), with or without its manifest
    (the test hosts have none): one node, never a sweep of nodes named after its parts."""
    from dldoctor.snapshots.bundle import CONTENTS, REPORT

    for name, is_folder in ((REPORT, False), *CONTENTS):
        try:
            mode = os.lstat(os.path.join(path, name)).st_mode
        except OSError:
            continue
        if (stat.S_ISDIR if is_folder else stat.S_ISREG)(mode):
            return True
    return False


def entries(paths: list[str]) -> Iterator[Entry]:
    """The nodes of the inputs, in order: a report file or bundle is one node (named after
    its file); a sweep directory holds many (sweep.json first, then any other report)."""
    for path in paths:
        if os.path.isdir(path) and not is_bundle_dir(path):
            yield from _sweep_entries(path)
        elif os.path.lexists(path):  # a link named on the command line is the user's choice
            yield Entry(node_name(path), os.path.realpath(path))
        else:
            raise InputError(f"{path}: no such file or directory")


def _sweep_entries(folder: str) -> Iterator[Entry]:
    recorded = read_sweep(folder)
    seen = set()
    for name, outcome in recorded.items():
        seen.add(name)
        file = outcome.get("file")
        if isinstance(file, str) and file and os.path.basename(file) == file:
            yield Entry(name, os.path.join(folder, file))
        else:
            kind = outcome.get("outcome")
            if kind not in KINDS:
                kind, outcome = NOT_A_REPORT, {"detail": "the sweep recorded no answer of it"}
            yield Entry(name, "", Problem(kind, str(outcome.get("detail") or "")[:MAX_TEXT]))
    try:
        listing = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise InputError(f"cannot list {folder}: {exc.strerror or exc}") from None
    for entry in listing:
        if entry.name == SWEEP or entry.name.startswith("."):
            continue
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_dir and not is_bundle_dir(entry.path):
            continue
        if not is_dir and not entry.name.endswith(REPORT_SUFFIXES):
            continue
        name = node_name(entry.name)
        if name not in seen:  # a report the sweep wrote is listed in sweep.json already
            seen.add(name)
            yield Entry(name, entry.path)


def read_sweep(folder: str) -> dict[str, dict]:
    """{node: its outcome} from the folder's sweep.json ({} without one). A damaged one is
    left aside with a warning: the reports beside it are still read."""
    import logging

    path = os.path.join(folder, SWEEP)
    if not os.path.lexists(path):
        return {}
    data = _read_capped(path, MAX_SWEEP_BYTES)
    doc = None
    if isinstance(data, bytes):
        with contextlib.suppress(ValueError, RecursionError):
            doc = json.loads(data)
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not (
        isinstance(doc, dict) and doc.get("format") == SWEEP_FORMAT and isinstance(nodes, dict)
    ):
        logging.getLogger("dldoctor").warning("%s: not a dldoctor sweep record: ignored", path)
        return {}
    return {str(k)[:MAX_TEXT]: v for k, v in nodes.items() if isinstance(v, dict)}


# --- one node's answer ------------------------------------------------------------------


def load(path: str) -> NodeReport | Problem:
    """A node's report, from a report JSON file or a bundle; a Problem for anything else.
    A symbolic link is never followed (one in a sweep folder could point at /etc/shadow),
    nor a FIFO or a device opened."""
    from dldoctor.snapshots.archive import is_archive

    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        return Problem(NOT_A_REPORT, f"cannot read it: {exc.strerror or exc}")
    if stat.S_ISLNK(mode):
        return Problem(NOT_A_REPORT, "a symbolic link: not followed")
    if stat.S_ISDIR(mode) or is_archive(path):
        data = _bundle_report(path)
    elif stat.S_ISREG(mode):
        data = _read_capped(path, MAX_REPORT_BYTES)
    else:
        return Problem(NOT_A_REPORT, "not a regular file")
    return data if isinstance(data, Problem) else parse(data)


def _read_capped(path: str, cap: int) -> bytes | Problem:
    try:  # O_NONBLOCK: a FIFO put there since must not hang the report; no link followed
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        return Problem(NOT_A_REPORT, f"cannot read it: {exc.strerror or exc}")
    with open(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Problem(NOT_A_REPORT, "not a regular file")
        try:
            # Its size and one byte more (a buffered read loops until it has them): reading
            # `cap` bytes would allocate them all; a file that grew meanwhile reads as cut short.
            data = f.read(min(st.st_size, cap) + 1)
        except OSError as exc:
            return Problem(NOT_A_REPORT, f"cannot read it: {exc.strerror or exc}")
    if len(data) > cap:
        return Problem(NOT_A_REPORT, f"larger than {cap >> 20} MiB")
    return data


def _bundle_report(path: str) -> bytes | Problem:
    from dldoctor.snapshots.archive import read_bundle
    from dldoctor.snapshots.bundle import REPORT, BundleError

    with contextlib.ExitStack() as cleanup:  # an extracted archive is removed at once
        try:
            reader, _changed = read_bundle(path, cleanup)
            data = reader.read_bytes(REPORT, MAX_REPORT_BYTES + 1)
        except (BundleError, OSError) as exc:
            return Problem(NOT_A_REPORT, f"unreadable bundle: {str(exc)[:MAX_TEXT]}")
    if data is None:
        return Problem(NOT_A_REPORT, f"a bundle without {REPORT}")
    if len(data) > MAX_REPORT_BYTES:
        return Problem(NOT_A_REPORT, f"its {REPORT} is larger than {MAX_REPORT_BYTES >> 20} MiB")
    return data


# Nine tenths of a report is its findings' evidence (and their details and remediation),
# which a fleet does not read: msgspec decodes the report into these types and skips every
# other field without building it, whatever the evidence's layout or the report's
# indentation. It is used only where its answer is the stdlib's: msgspec refuses a
# superset of what `json` refuses (NaN, lone surrogates, out-of-range numbers), ASCII
# input (as dldoctor writes it) leaves no encoding to guess, and any refusal, or a document
# the checks below would refuse, is parsed again by `json`, whose answer names the fault.
class _Figure(msgspec.Struct):
    subject: str
    what: str
    value: float
    unit: str


class _Finding(msgspec.Struct):
    id: str
    title: str
    status: str
    summary: str
    figures: list[_Figure] = []


class _Report(msgspec.Struct):
    schema_version: int
    findings: list[_Finding]
    host: dict = {}
    inventory: Any = None


_FAST = msgspec.json.Decoder(_Report)


def _fast(data: bytes) -> NodeReport | None:
    """The report as `_report(json.loads(data))` reads it, or None where only that says."""
    if not data.isascii():
        return None
    try:
        doc = _FAST.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    findings = doc.findings
    if _unreadable_version(doc.schema_version) or len(findings) > MAX_FINDINGS:
        return None
    if not all(f.status in STATUSES for f in findings):
        return None
    rows = [(f.id[:MAX_TEXT], f.title[:MAX_TEXT], f.status, f.summary[:MAX_TEXT]) for f in findings]
    figures = [
        (f.id[:MAX_TEXT], g.subject[:MAX_TEXT], g.what[:MAX_TEXT], g.unit[:MAX_TEXT], g.value)
        for f in findings
        if f.figures
        for g in f.figures
    ]
    if len(figures) > MAX_FIGURES or not all(map(math.isfinite, (r[4] for r in figures))):
        return None
    return NodeReport(_host(doc.host), rows, doc.inventory, figures)


def parse(data: bytes) -> NodeReport | Problem:
    """A report document from a node's bytes, checked for the parts a fleet reads."""
    # Commas bound the values: without them only nesting adds any, which both parsers stop
    # at the recursion limit. Fewer bytes than the bound hold fewer commas: not counted.
    if len(data) >= MAX_VALUES and data.count(b",") >= MAX_VALUES:
        return Problem(NOT_A_REPORT, f"not JSON (more than {MAX_VALUES} JSON values)")
    fast = _fast(data)
    if fast is not None:
        return fast
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        if not data.strip():
            return Problem(NOT_A_REPORT, "empty")
        why = str(exc).splitlines()[0][:MAX_TEXT] if str(exc) else type(exc).__name__
        return Problem(NOT_A_REPORT, f"not JSON ({why})")
    return _report(doc)


def _unreadable_version(version: Any) -> Problem | None:
    """Every readable schema version, 1 and 2, holds what a fleet reads — the findings' id,
    title, status and summary, the host and the inventory — in the same place; they differ
    only in where the evidence is, which a fleet does not read (docs/report-schema.md)."""
    if version in READABLE_SCHEMA_VERSIONS and type(version) is int:
        return None
    shown, known = json.dumps(version)[:40], " or ".join(map(str, READABLE_SCHEMA_VERSIONS))
    return Problem(NOT_A_REPORT, f"schema_version {shown}, not {known}")


def _host(host: Any) -> dict[str, str]:
    if not isinstance(host, dict):
        return {}
    return {k: v[:MAX_TEXT] for k, v in host.items() if isinstance(v, str)}


def _report(doc: Any) -> NodeReport | Problem:
    if not isinstance(doc, dict):
        return Problem(NOT_A_REPORT, f"a JSON {type(doc).__name__}, not a report object")
    unreadable = _unreadable_version(doc.get("schema_version"))
    if unreadable:
        return unreadable
    findings = doc.get("findings")
    if not isinstance(findings, list):
        return Problem(NOT_A_REPORT, "no findings list")
    if len(findings) > MAX_FINDINGS:
        return Problem(NOT_A_REPORT, f"more than {MAX_FINDINGS} findings")
    rows = []
    for f in findings:  # type(x) is str: ten thousand reports of sixty findings each
        fid, title, status, summary = (
            (f.get("id"), f.get("title"), f.get("status"), f.get("summary"))
            if type(f) is dict
            else (None,) * 4
        )
        if not (type(fid) is type(title) is type(summary) is type(status) is str):
            return Problem(NOT_A_REPORT, "a finding without a text id, title, summary and status")
        if status not in STATUSES:
            return Problem(NOT_A_REPORT, f"a finding of status {status[:20]!r}")
        rows.append((fid[:MAX_TEXT], title[:MAX_TEXT], status, summary[:MAX_TEXT]))
    figures = _figures(findings)
    if isinstance(figures, Problem):
        return figures
    return NodeReport(_host(doc.get("host")), rows, doc.get("inventory"), figures)


def _figures(findings: list[dict]) -> list[FigureRow] | Problem:
    """Every finding's figures (docs/report-schema.md): a figure that is not one makes the
    report "not a report", as a finding that is not one does."""
    rows: list[FigureRow] = []
    for f in findings:
        listed = f.get("figures", [])
        if type(listed) is not list:
            return Problem(NOT_A_REPORT, "a finding whose figures are not a list")
        for g in listed:
            row = _figure_row(f["id"], g)
            if row is None:
                return Problem(NOT_A_REPORT, "a figure without a text subject, what and unit "
                                             "and a finite number as its value")  # fmt: skip
            rows.append(row)
    if len(rows) > MAX_FIGURES:
        return Problem(NOT_A_REPORT, f"more than {MAX_FIGURES} figures")
    return rows


def _figure_row(check: str, g: Any) -> FigureRow | None:
    if type(g) is not dict:
        return None
    subject, what, unit, value = g.get("subject"), g.get("what"), g.get("unit"), g.get("value")
    if not (type(subject) is type(what) is type(unit) is str):
        return None
    if type(value) not in (int, float) or not math.isfinite(value):
        return None
    return (check[:MAX_TEXT], subject[:MAX_TEXT], what[:MAX_TEXT], unit[:MAX_TEXT], float(value))
