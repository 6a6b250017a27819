"""`dldoctor diff A B`: what changed between two hosts, or one host at two moments.

A and B are bundle directories (replayed through the checks, so their facts are at hand)
or report JSON files (the `--check --json` document). Findings are matched by id and
compared by status; the key facts (doctor/keyfacts.py KEY_FACTS) are read from each side's
inventory: a bundle's, built from its replay's facts, or a report's own `inventory`.
The JSON document is described in docs/diff.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from dldoctor import keyfacts
from dldoctor.exitcodes import ExitCode
from dldoctor.figures import change, signed_percent
from dldoctor.inventory import Inventory
from dldoctor.keyfacts import KeyValue
from dldoctor.policy import Policy

FORMAT = "dldoctor-diff"
FORMAT_VERSION = 1
UNKNOWN = "unknown"  # the fact raised, or its source could not be read
ABSENT = "absent"  # the item (a GPU, a port, a drive) is not there on that side
MAX_REPORT_BYTES = 64 * 1024 * 1024
# A measured figure that moved by more than this fraction, either way, is a difference. The
# active tier's tests repeat within a few per cent on a healthy host (a GEMM or a copy to
# 1-2 %, fio a few); 10 % is the judge's own line for a straggler (perf.straggler 0.90): a
# host that lost as much against its own past as a straggler against its siblings.
FIGURE_CHANGE = 0.10
# A report made before the inventory existed holds no key facts to compare.
NO_INVENTORY = (
    "key facts were not compared: {paths} {hold} no inventory (a report from an older dldoctor)"
)


class DiffInputError(Exception):
    """An input that cannot be read: one line, exit 4."""


# --- key facts ------------------------------------------------------------------------
# The table is doctor/keyfacts.py's, read from each side's inventory: a bundle's, built from
# the facts its replay computed, or a report JSON's own `inventory`.

DiffValue = str | Mapping[str, str]


def known_key_facts(values: Mapping[str, KeyValue]) -> dict[str, DiffValue]:
    """The key facts as a diff prints them: a value not known is UNKNOWN."""

    def known(value: KeyValue) -> DiffValue:
        if isinstance(value, Mapping):
            return {k: UNKNOWN if v is None else v for k, v in value.items()}
        return UNKNOWN if value is None else value

    return {name: known(v) for name, v in values.items()}


def read_key_facts(inventory: Inventory | Mapping) -> dict[str, DiffValue]:
    """Every key fact of one inventory; one not known is UNKNOWN, never a crash."""
    return known_key_facts(keyfacts.key_facts(inventory))


# --- the two sides --------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    path: str
    kind: str  # "bundle", "sosreport", "nvidia-bug-report" (all replayed) or "report"
    host: dict
    findings: dict[str, dict]  # id -> {"id", "title", "status", "summary"}
    facts: dict[str, DiffValue] | None  # None: a report without an inventory
    labels: dict[str, str]
    # (check id, subject, what, unit) -> value: the active tier's measurements
    figures: dict[tuple[str, str, str, str], float] = field(default_factory=dict)


def figure_table(rows: Iterable[tuple[str, str, str, str, float]]) -> dict:
    """{(check, subject, what, unit): value}; a key twice keeps its first."""
    table: dict[tuple[str, str, str, str], float] = {}
    for check, subject, what, unit, value in rows:
        table.setdefault((check, subject, what, unit), value)
    return table


def _figures_of(findings) -> dict:
    return figure_table(
        (f.id, g.subject, g.what, g.unit, g.value) for f in findings for g in f.figures
    )


def finding_table(findings: Sequence[dict]) -> dict[str, dict]:
    table: dict[str, dict] = {}
    for f in findings:
        key, n = f["id"], 1
        while key in table:  # the same id twice (plugins.load): keep both, in order
            n += 1
            key = f"{f['id']}#{n}"
        table[key] = {k: f[k] for k in ("id", "title", "status", "summary")}
    return table


def _host_side(path: str, host, policy: Policy) -> Side:
    from dldoctor.diagnose import diagnose
    from dldoctor.registry import builtin_checks, ordered

    # Built-in checks only, under the built-in policy unless --policy names the site's:
    # a diff compares hosts, not settings. A bundle taken with --active replays its
    # measurements, whose figures are compared; their skips (not measured) say nothing of
    # the host and are left out.
    specs = ordered(builtin_checks(active=host.holds_measurements))
    measuring = {s.id for s in specs if s.active}
    report = diagnose(host, policy, specs)
    findings = [
        f for f in report.findings if f.id not in measuring or f.figures or f.status.value != "skip"
    ]
    inventory = Inventory.from_dict(report.inventory)
    return Side(
        path,
        "bundle" if host.kind == "replay" else host.kind,  # or "sosreport", "nvidia-bug-report"
        report.host,
        finding_table([f.to_dict() for f in findings]),
        read_key_facts(inventory),
        keyfacts.gpu_labels(inventory),
        _figures_of(findings),
    )


def _report_side(path: str) -> Side:
    from dldoctor.model import Report

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_REPORT_BYTES + 1)
        if len(data) > MAX_REPORT_BYTES:
            raise ValueError(f"larger than {MAX_REPORT_BYTES >> 20} MiB")
        report = Report.from_dict(json.loads(data))
    except OSError as exc:
        raise DiffInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        why = f"{type(exc).__name__}: {exc}" if isinstance(exc, KeyError) else str(exc)
        raise DiffInputError(
            f"{path} is neither a bundle directory nor a dldoctor report JSON ({why[:200]})"
        ) from None
    findings = [f.to_dict() for f in report.findings]
    for f in findings:  # the report's own shape (docs/report-schema.md), not only JSON
        if not all(isinstance(f.get(k), str) for k in ("id", "title", "status", "summary")):
            raise DiffInputError(
                f"{path} is not a dldoctor report: a finding's id, title, status or summary "
                "is not text"
            )
    if not isinstance(report.host, dict):
        raise DiffInputError(f"{path} is not a dldoctor report: its host is not an object")
    figures = _figures_of(report.findings)
    if not report.inventory:  # made before the inventory existed
        return Side(path, "report", report.host, finding_table(findings), None, {}, figures)
    inventory = Inventory.from_dict(report.inventory)
    return Side(
        path,
        "report",
        report.host,
        finding_table(findings),
        read_key_facts(inventory),
        keyfacts.gpu_labels(inventory),
        figures,
    )


@contextlib.contextmanager
def opened(path: str, policy: Policy | None = None) -> Iterator[Side]:
    """One input, read: a report JSON file, or anything `--from` reads (a bundle directory
    or `.tar.gz`, a sos report, an nvidia-bug-report log), opened by `--from`'s own opener
    and diagnosed under `policy` (default: the built-in one). The one place that tells the
    kinds apart."""
    from dldoctor.host.foreign import open_input
    from dldoctor.snapshots.bundle import BundleError

    if _is_report_json(path):
        yield _report_side(path)
    elif os.path.isdir(path) or os.path.isfile(path):
        with contextlib.ExitStack() as cleanup:
            try:
                make_host, _folder = open_input(path, cleanup)
            except BundleError as exc:
                raise DiffInputError(str(exc)) from None
            yield _host_side(path, make_host(), policy or Policy())
    elif os.path.exists(path):  # a FIFO or a device would block the read, or never end
        raise DiffInputError(f"{path}: not a bundle directory nor a regular file")
    else:
        raise DiffInputError(f"{path}: no such file or directory")


def _is_report_json(path: str) -> bool:
    """A regular file whose first non-blank byte opens a JSON object: no archive, log or
    sos report starts so."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return True  # _report_side says why it cannot be read
    return head.lstrip()[:1] == b"{"


# --- comparing ------------------------------------------------------------------------


def compare(a: Side, b: Side) -> dict:
    """The diff document (docs/diff.md)."""
    changed, only_a = [], []
    for key, fa in a.findings.items():
        fb = b.findings.get(key)
        if fb is None:
            only_a.append(fa)
        elif fa["status"] != fb["status"]:
            changed.append(
                {
                    "id": fa["id"],
                    "title": fa["title"],
                    "a": {"status": fa["status"], "summary": fa["summary"]},
                    "b": {"status": fb["status"], "summary": fb["summary"]},
                }
            )
    only_b = [fb for key, fb in b.findings.items() if key not in a.findings]
    compared = a.facts is not None and b.facts is not None
    facts = _fact_changes(a, b) if compared else []
    figures = figure_changes(a.figures, b.figures)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "equivalent": not (changed or only_a or only_b or facts or figures),
        "a": _side_summary(a),
        "b": _side_summary(b),
        "facts_compared": compared,
        "facts_not_compared": None if compared else _not_compared(a, b),
        "findings": {"changed": changed, "only_in_a": only_a, "only_in_b": only_b},
        "facts": facts,
        "figure_change": FIGURE_CHANGE,
        "figures": figures,
    }


def figure_changes(a: Mapping[tuple, float], b: Mapping[tuple, float]) -> list[dict]:
    """The figures measured alike on both sides (same check, part, figure and unit) that
    moved by more than FIGURE_CHANGE, the largest change first."""
    rows = []
    for key, va in a.items():
        vb = b.get(key)
        moved = None if vb is None else change(va, vb)
        if moved is not None and abs(moved) > FIGURE_CHANGE:
            check, subject, what, unit = key
            rows.append({"check": check, "subject": subject, "what": what, "unit": unit,
                         "a": va, "b": vb, "change": round(moved, 4)})  # fmt: skip
    return sorted(rows, key=lambda r: -abs(r["change"]))


def figure_line(row: Mapping) -> str:
    """ "perf.gpu.memory GPU 3 hbm_copy 2610 GB/s -> 1409 GB/s (-46 %)" """
    from dldoctor.active.judge import amount

    a, b = amount(row["a"], row["unit"]), amount(row["b"], row["unit"])
    return (
        f"{row['check']} {row['subject']} {row['what']} {a} -> {b} "
        f"({signed_percent(row['change'])})"
    )


def _not_compared(a: Side, b: Side) -> str:
    paths = list(dict.fromkeys(s.path for s in (a, b) if s.facts is None))
    return NO_INVENTORY.format(
        paths=" and ".join(paths), hold="holds" if len(paths) == 1 else "hold"
    )


def _side_summary(side: Side) -> dict:
    host = {k: side.host.get(k) for k in ("hostname", "os", "kernel")}
    return {"path": side.path, "kind": side.kind, **host}


def _fact_changes(a: Side, b: Side) -> list[dict]:
    assert a.facts is not None and b.facts is not None
    labels = {**b.labels, **a.labels}
    rows = []
    for name in a.facts:  # KEY_FACTS in a diff; `fleet report --since` brings its own
        va, vb = a.facts[name], b.facts.get(name, UNKNOWN)
        if isinstance(va, str) and isinstance(vb, str):
            if va != vb:
                rows.append({"fact": name, "item": None, "label": name, "a": va, "b": vb})
            continue
        # One side per item and the other UNKNOWN as a whole: each item is unknown there.
        ia = va if isinstance(va, Mapping) else dict.fromkeys(vb, va)
        ib = vb if isinstance(vb, Mapping) else dict.fromkeys(va, vb)
        for item in sorted(ia.keys() | ib.keys(), key=_natural):
            x, y = ia.get(item, ABSENT), ib.get(item, ABSENT)
            if x != y:
                label = f"{name} {item}" + (f" ({labels[item]})" if item in labels else "")
                rows.append({"fact": name, "item": item, "label": label, "a": x, "b": y})
    return rows


def _natural(text: str) -> tuple:
    # "GPU 10" after "GPU 9"; "nvme10" after "nvme2".
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


# --- output ---------------------------------------------------------------------------


def _named(side: dict) -> str:
    return side["path"] + (f" ({side['hostname']})" if side.get("hostname") else "")


def render_text(doc: dict) -> str:
    if doc["equivalent"]:
        note = "" if doc["facts_compared"] else f" ({doc['facts_not_compared']})"
        return f"{doc['a']['path']} and {doc['b']['path']} are equivalent{note}\n"
    lines = [f"A: {_named(doc['a'])}", f"B: {_named(doc['b'])}"]
    found = doc["findings"]
    if any(found.values()):
        lines += ["", "Findings"]
        for f in found["changed"]:
            lines.append(f"  {f['id']}: {f['a']['status']} -> {f['b']['status']}")
            lines.append(f"    A: {f['a']['summary']}")
            lines.append(f"    B: {f['b']['summary']}")
        for side, key in (("A", "only_in_a"), ("B", "only_in_b")):
            for f in found[key]:
                lines.append(f"  {f['id']}: only in {side} ({f['status']}: {f['summary']})")
    if doc["facts"]:
        lines += ["", "Key facts"]
        lines += [f"  {r['label']}: {r['a']} -> {r['b']}" for r in doc["facts"]]
    if doc["figures"]:
        lines += ["", f"Figures (changed by more than {doc['figure_change'] * 100:.0f} %)"]
        lines += [f"  {figure_line(r)}" for r in doc["figures"]]
    if not doc["facts_compared"]:
        lines += ["", doc["facts_not_compared"][0].upper() + doc["facts_not_compared"][1:]]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    from dldoctor.cli.shared import Parser, add_active_arguments, add_request_arguments

    p = Parser(
        prog="dldoctor diff",
        description="Compare two hosts, or one host at two moments: the findings whose "
        "status changed, the findings only in one, and the key facts that changed.",
        epilog="Exit codes: 0 equivalent, 1 they differ, 2 usage error, 4 an input could "
        "not be read, 6 the output could not be written.",
    )
    p.add_argument(
        "a", metavar="A", help="a bundle (a directory or a .tar.gz) or a report JSON file"
    )
    p.add_argument("b", metavar="B", help="the same, to compare with A")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the diff as JSON on stdout")
    out.add_argument(
        "--html",
        action="store_true",
        help="print the diff as a self-contained HTML page (the two sides, each change " "marked)",
    )
    add_request_arguments(
        p,
        helps={
            "--policy": "judge the bundles A and B under this policy (default: built-in; "
            "a report JSON keeps the verdicts it was written with)",
            "--timeout": "time limit of each probe of a bundle's diagnosis",
            "--deadline": "each bundle's diagnosis ends by then (default 20)",
        },
        refused={"--from": "the inputs of a diff are A and B"},
    )
    add_active_arguments(
        p,
        refused={
            "--active": "a diff compares what A and B recorded: a bundle taken with --active "
            "replays its measurements",
            "--force": "a diff measures nothing",
        },
    )
    return p


def main(argv: Sequence[str]) -> int:
    from dldoctor.cli.shared import OutputError, write_output
    from dldoctor.request import request_from

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return int(exc.code or 0)
    request = request_from(args)
    try:
        with opened(args.a, request.policy) as a, opened(args.b, request.policy) as b:
            doc = compare(a, b)
    except DiffInputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if args.json:
        text = json.dumps(doc, indent=2, ensure_ascii=True) + "\n"
    elif args.html:
        from dldoctor.render.diffpage import render_html

        text = render_html(doc)
    else:
        text = render_text(doc)
    try:
        write_output(lambda: sys.stdout.write(text))
    except OutputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.OUTPUT
    return ExitCode.OK if doc["equivalent"] else ExitCode.PROBLEMS
