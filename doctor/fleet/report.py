"""`dldoctor fleet report`: many node reports folded into one (docs/fleet.md).

Per check, how many nodes pass, warn, fail or error, the nodes folded as ClusterShell node
sets; per key fact (doctor/keyfacts.py), the majority value and the nodes that differ (the
odd ones out); per measured figure (the active tier's), the fleet's median over every part
measured alike and the stragglers below a fraction of it; with `since`, the nodes whose
findings, key facts or figures changed, compared by
`dldoctor diff`'s own code (doctor/diffing.py). Reports are read one at a time and only
tallies are kept: 10,000 nodes fit in a few tens of MiB.
"""

from __future__ import annotations

import array
import collections
import functools
import logging
import re
import statistics
from collections.abc import Iterable
from typing import Any

from dldoctor import keyfacts
from dldoctor.exitcodes import ExitCode
from dldoctor.figures import LOWER_IS_BETTER
from dldoctor.fleet.nodes import KINDS, NODE_NAME, Entry, NodeReport, Problem, load
from dldoctor.model import Status
from dldoctor.policy import PerfPolicy

log = logging.getLogger("dldoctor")
FORMAT = "dldoctor-fleet"
FORMAT_VERSION = 1
VERDICTS = ("pass", "warn", "fail", "error")
ABSENT = "absent"  # the item (a GPU, a port) is not on that node, whose fact is known
STRAGGLER = PerfPolicy().straggler  # a part below this fraction of the fleet's median
# Figures of these checks are a GPU's: folded per GPU model, so that a mixed fleet's A100s
# are not each a straggler beside its H100s.
GPU_CHECKS = ("perf.gpu.", "perf.nccl.")
# Figures whose parts differ by the host's layout, not by health (the judge's
# Measured.alike): a PCIe peer pair within a switch copies about twice as fast as one
# across sockets. Folded per part (the same pair on every node), never all together.
PER_PART = frozenset({"p2p_pcie"})


def fold(names: Iterable[str]) -> str:
    """`node[003,017-019]`: the names as one ClusterShell node set."""
    return _fold(tuple(names))


@functools.lru_cache(maxsize=64)
def _fold(names: tuple[str, ...]) -> str:
    # ClusterShell parses each name (40 us): the same large groups (every node, every
    # node that reported) recur for many checks and facts, and are folded once.
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

    names = set(names)
    plain = [n for n in names if NODE_NAME.fullmatch(n) and not _LONG_NUMBER.search(n)]
    odd = sorted(names.difference(plain))
    try:
        folded = [str(NodeSet.fromlist(plain, resolver=RESOLVER_NOGROUP))] if plain else []
    except Exception:  # noqa: BLE001 - a name ClusterShell cannot fold is listed as it is
        folded, odd = [], sorted(names)
    return ",".join(folded + odd)


# ClusterShell reads a name's digits as a number (a 400-digit one: NodeSetParseRangeError,
# 4,300: ValueError) and pads ranges to it: a longer run is no node index, listed verbatim.
_LONG_NUMBER = re.compile(r"[0-9]{19}")


def _group(names: list[str]) -> dict[str, Any]:
    return {"count": len(names), "nodes": fold(names)}


# --- tallies ----------------------------------------------------------------------------


class _Check:
    __slots__ = ("title", "nodes", "results")

    def __init__(self, title: str):
        self.title = title
        self.nodes: dict[str, list[str]] = {}  # status -> nodes
        self.results: dict[tuple[str, str], list[str]] = {}  # (status, summary) -> nodes


class _Fact:
    __slots__ = ("unknown", "known", "values", "items")

    def __init__(self):
        self.unknown: list[str] = []
        self.known: list[str] = []  # nodes whose per-item fact is known
        self.values: dict[str, list[str]] = {}  # a node-wide fact: value -> nodes
        self.items: dict[str, dict[str | None, list[str]]] = {}  # item -> value -> nodes


class _Figure:
    """One figure measured alike across the fleet: a number and two indexes a part (the
    node's in Tally.names, the subject's in Tally.subjects), 10,000 nodes of 90 figures in
    a few MiB."""

    __slots__ = ("values", "nodes", "subjects")

    def __init__(self):
        self.values = array.array("d")
        self.nodes = array.array("L")
        self.subjects = array.array("L")


class Tally:
    """What the report keeps of each node: its name in a few lists."""

    def __init__(self):
        self.names: list[str] = []
        self.reported: list[str] = []
        self.problems: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
        self.checks: dict[str, _Check] = {}
        self.facts = {name: _Fact() for name in keyfacts.NAMES}
        self.labels: dict[str, str] = {}
        self.figures: dict[tuple[str, str, str, str], _Figure] = {}  # check, what, unit, kind
        self.subjects: dict[str, int] = {}

    def add_problem(self, name: str, problem: Problem) -> None:
        self.names.append(name)
        self.problems[problem.kind][name] = problem.detail

    def add_report(self, name: str, report: NodeReport) -> dict[str, keyfacts.KeyValue]:
        self.names.append(name)
        self.reported.append(name)
        for cid, title, status, summary in report.findings:
            check = self.checks.get(cid)
            if check is None:
                check = self.checks[cid] = _Check(title)
            check.nodes.setdefault(status, []).append(name)
            if status not in ("pass", "skip"):
                check.results.setdefault((status, summary), []).append(name)
        inventory = keyfacts.typed(report.inventory)
        facts = keyfacts.key_facts(inventory)
        for fact, value in facts.items():
            tally = self.facts[fact]
            if value is None:
                tally.unknown.append(name)
            elif isinstance(value, dict):
                tally.known.append(name)
                for item, v in value.items():
                    tally.items.setdefault(item, {}).setdefault(v, []).append(name)
            else:
                tally.values.setdefault(value, []).append(name)
        for address, label in keyfacts.gpu_labels(inventory).items():
            self.labels.setdefault(address, label)
        if report.figures:
            self._add_figures(len(self.names) - 1, report.figures, _gpu_model(inventory))
        return facts

    def _add_figures(self, node: int, figures, model: str) -> None:
        for check, subject, what, unit, value in figures:
            # A GPU's figure is folded per GPU model; the host's other parts (a volume, a
            # NUMA node, a port) and layout-bound figures per part: /data beside /scratch,
            # or a 100G port beside 400G rails, is no fleet to be slow against.
            if what in PER_PART or not check.startswith(GPU_CHECKS):
                kind = subject
            else:
                kind = model
            key = (check, what, unit, kind)
            tally = self.figures.get(key)
            if tally is None:
                tally = self.figures[key] = _Figure()
            tally.values.append(value)
            tally.nodes.append(node)
            tally.subjects.append(self.subjects.setdefault(subject, len(self.subjects)))


def _gpu_model(inventory) -> str:
    """The node's GPU model (its most common), "" when not known."""
    models = [g.model for g in inventory.gpus or () if g.model]
    return collections.Counter(models).most_common(1)[0][0] if models else ""


# --- the document -----------------------------------------------------------------------


def build(
    entries: Iterable[Entry],
    *,
    since: tuple[str, Iterable[Entry]] | None = None,
    strict: bool = False,
    straggler: float = STRAGGLER,
) -> dict[str, Any]:
    """The fleet document of the nodes in `entries` (docs/fleet.md); `since` is (the old
    sweep's path, its entries). Each node's answer is read once, its old one beside it."""
    tally, changed, new = Tally(), [], []
    old = _index(since[1]) if since else None
    for entry in _unique(entries):
        answer = entry.problem or load(entry.path)
        facts = None
        if isinstance(answer, Problem):
            tally.add_problem(entry.name, answer)
        else:
            facts = tally.add_report(entry.name, answer)
        if old is None:
            continue
        if entry.name not in old:
            new.append(entry.name)
        elif row := _change(entry.name, old.pop(entry.name), answer, facts):
            changed.append(row)
    doc = _document(tally, strict, straggler)
    if since:
        doc["since"] = {
            "path": since[0],
            "changed": changed,
            "new": _group(new),
            "gone": _group(list(old or ())),
        }
    return doc


def _unique(entries: Iterable[Entry]) -> list[Entry]:
    listed, seen = [], set()
    for entry in entries:
        if entry.name in seen:
            log.warning("node %s given twice: %s left out", entry.name, entry.path or "a record")
            continue
        seen.add(entry.name)
        listed.append(entry)
    return listed


def _index(entries: Iterable[Entry]) -> dict[str, Entry]:
    found: dict[str, Entry] = {}
    for entry in entries:
        found.setdefault(entry.name, entry)
    return found


def _state(answer: NodeReport | Problem) -> str:
    return answer.kind if isinstance(answer, Problem) else "report"


def _change(name: str, old: Entry, now: NodeReport | Problem, facts) -> dict | None:
    """How node `name` changed since its old answer (None: it did not), by `diff`."""
    from dldoctor.diffing import compare

    before = old.problem or load(old.path)
    row = {"node": name, "was": _state(before), "now": _state(now), "findings": None,
           "facts": [], "figures": []}  # fmt: skip
    if isinstance(before, NodeReport) and isinstance(now, NodeReport):
        doc = compare(_side(old.path, before, None), _side(name, now, facts))
        if doc["equivalent"]:
            return None
        return {**row, "findings": doc["findings"], "facts": doc["facts"],
                "figures": doc["figures"]}  # fmt: skip
    return None if row["was"] == row["now"] else row


def _side(path: str, report: NodeReport, facts):
    from dldoctor.diffing import Side, figure_table, finding_table, known_key_facts

    facts = facts if facts is not None else keyfacts.key_facts(report.inventory)
    values = known_key_facts(facts)
    labels = keyfacts.gpu_labels(report.inventory)
    keys = ("id", "title", "status", "summary")
    findings = [dict(zip(keys, f, strict=True)) for f in report.findings]
    figures = figure_table(report.figures)
    return Side(path, "report", report.host, finding_table(findings), values, labels, figures)


def _document(tally: Tally, strict: bool, straggler: float) -> dict[str, Any]:
    checks = [_check_row(cid, c, tally.reported) for cid, c in tally.checks.items()]
    facts, odd, odd_nodes = [], [], {}
    odd_of: dict[str, list[int]] = {}  # node -> its entries in odd
    for name, fact in tally.facts.items():
        rows = _fact_rows(name, fact, tally.labels)
        facts.append(
            {
                "fact": name,
                "per_item": bool(fact.known or fact.items),
                "unknown": _group(fact.unknown) if fact.unknown else None,
                "rows": [row for row, _ in rows],
            }
        )
        for row, differing in rows:
            majority = row["majority"]["value"] if row["majority"] else None
            for other, nodes in zip(row["others"], differing, strict=True):
                odd.append(
                    {
                        "fact": name,
                        "item": row["item"],
                        "label": row["label"],
                        "majority": majority,
                        **other,
                    }
                )
                odd_nodes.update(dict.fromkeys(nodes))
                for node in nodes:
                    odd_of.setdefault(node, []).append(len(odd) - 1)
    perf = _perf(tally, straggler)
    straggling = list(dict.fromkeys(s["node"] for s in perf["stragglers"]))
    by_status = {s: _union(c.nodes.get(s, ()) for c in tally.checks.values()) for s in VERDICTS}
    not_reported = sum(len(p) for p in tally.problems.values())
    if by_status["fail"]:
        status, code = "fail", ExitCode.PROBLEMS
    elif by_status["error"] or not_reported:
        status, code = "error", ExitCode.INCOMPLETE
    elif by_status["warn"] or odd or straggling:
        status, code = "warn", ExitCode.PROBLEMS if strict else ExitCode.OK
    else:
        status, code = "pass", ExitCode.OK
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "summary": {
            "status": status,
            "exit_code": int(code),
            "strict": strict,
            "nodes": {
                "total": len(tally.names),
                "reported": len(tally.reported),
                "not_reported": not_reported,
                "nodeset": fold(tally.names),
            },
            "failing": _group(by_status["fail"]),
            "erroring": _group(by_status["error"]),
            "warning": _group(by_status["warn"]),
            "odd": _group(list(odd_nodes)),
            "straggling": _group(straggling),
        },
        "problems": {
            kind: {**_group(list(found)), "details": found}
            for kind, found in tally.problems.items()
        },
        "checks": checks,
        "odd_ones_out": odd,
        "facts": facts,
        "perf": perf,
        "node_sets": _node_sets(tally, odd_of, perf["stragglers"]),
    }


def _perf(tally: Tally, straggler: float) -> dict[str, Any]:
    """Per figure measured alike (check, what, unit, GPU model), the fleet's median over
    every part and the parts below `straggler` of it; every straggler, the worst first."""
    subjects = list(tally.subjects)
    rows, slow = [], []
    for (check, what, unit, kind), fig in tally.figures.items():
        median = statistics.median(fig.values)
        if unit in LOWER_IS_BETTER:  # a latency: slow is above the median
            below = [i for i, v in enumerate(fig.values) if v * straggler > median]
        else:
            below = [i for i, v in enumerate(fig.values) if v < straggler * median]
        if len(fig.values) < 2:  # one part is no fleet to be slow against
            below = []
        parts = [
            {"node": tally.names[fig.nodes[i]], "subject": subjects[fig.subjects[i]],
             "value": fig.values[i], "fraction": round(fig.values[i] / median, 4)}
            for i in below
        ]  # fmt: skip
        parts.sort(key=lambda p: _distance(p["fraction"], unit))
        nodes = list(dict.fromkeys(tally.names[n] for n in fig.nodes))
        rows.append({
            "check": check, "what": what, "unit": unit, "kind": kind or None,
            "parts": len(fig.values), "nodes": _group(nodes), "median": median,
            "min": min(fig.values), "max": max(fig.values), "stragglers": parts,
        })  # fmt: skip
        slow += [{"check": check, "what": what, "unit": unit, "kind": kind or None,
                  "median": median, **p} for p in parts]  # fmt: skip
    slow.sort(key=lambda s: (_distance(s["fraction"], s["unit"]), _natural(s["node"])))
    return {"straggler": straggler, "figures": rows, "stragglers": slow}


NOT_RUN = "not_run"  # a node that reported, but not this check (an older dldoctor, --only)
# A row's worst cell: a check not run says nothing of the node, below a pass.
_CELL_RANK = {"fail": 0, "error": 1, "warn": 2, "pass": 3, NOT_RUN: 4, "skip": 5}


def _node_sets(tally: Tally, odd_of: dict[str, list[int]], slow: list[dict]) -> dict[str, Any]:
    """The reported nodes folded by their verdict vectors: nodes whose every check has the
    same status, and that alike are (or are not) off the majority in a key fact and have
    (or have not) stragglers, are one row, labelled by their node set, the worst rows
    first, then the larger ones. Only the checks whose status is not the same pass or skip
    on every node are the vectors' columns; the others are named under `uniform`. A key
    fact or a straggler warns, as it does the fleet's status."""
    uniform: dict[str, list[str]] = {"pass": [], "skip": []}
    columns = []
    everyone = len(tally.reported)
    for cid, check in tally.checks.items():
        alike = [s for s in ("pass", "skip") if len(check.nodes.get(s, ())) == everyone]
        if alike:
            uniform[alike[0]].append(cid)
        else:
            columns.append(cid)
    # Each column's commonest status is every node's but those that differ: the work is
    # the nodes' and the differences', not nodes × columns (10,000 nodes of 50 checks).
    common: list[str] = []
    differ: dict[str, list[tuple[int, str]]] = {}  # node -> (column, its status)
    said: list[dict[str, str]] = []  # per column: node -> its result's summary
    for c, cid in enumerate(columns):
        check = tally.checks[cid]
        by_status = dict(check.nodes)
        ran = sum(map(len, by_status.values()))
        if ran < everyone:
            have = {n for nodes in by_status.values() for n in nodes}
            by_status[NOT_RUN] = [n for n in tally.reported if n not in have]
        common.append(max(by_status, key=lambda st: len(by_status[st])))
        for status, nodes in by_status.items():
            if status != common[c]:
                for node in nodes:
                    differ.setdefault(node, []).append((c, status))
        said.append({n: text for (_, text), nodes in check.results.items() for n in nodes})
    slow_of: dict[str, list[int]] = {}
    for i, s in enumerate(slow):
        slow_of.setdefault(s["node"], []).append(i)
    sets: dict[tuple, list[str]] = {}
    for name in tally.reported:
        key = (tuple(differ.get(name, ())), name in odd_of, name in slow_of)
        sets.setdefault(key, []).append(name)
    rows = []
    for (differs, odd, straggling), nodes in sets.items():
        vector = list(common)
        for c, status in differs:
            vector[c] = status
        worst = min((*vector, *("warn",) * (odd or straggling)), key=_CELL_RANK.__getitem__,
                    default="pass")  # fmt: skip
        results = {}
        for c, status in enumerate(vector):
            if status in VERDICTS and status != "pass":
                texts: dict[str, list[str]] = {}
                for n in nodes:
                    texts.setdefault(said[c][n], []).append(n)
                results[columns[c]] = [{"summary": t, **_group(ns)} for t, ns in texts.items()]
        rows.append({**_group(nodes), "status": worst, "verdicts": vector,
                     "results": results,
                     "odd": _union(odd_of.get(n, ()) for n in nodes) if odd else [],
                     "stragglers": _union(slow_of.get(n, ()) for n in nodes)})  # fmt: skip
    rows.sort(key=lambda r: (_CELL_RANK[r["status"]], -r["count"], _natural(r["nodes"])))
    return {"checks": columns, "uniform": uniform, "rows": rows}


def _distance(fraction: float, unit: str) -> float:
    """How far from the median, as a sort key (the worst first): a latency at twice the
    median is as far as a bandwidth at half of it."""
    return 1 / fraction if unit in LOWER_IS_BETTER and fraction else fraction


def _union(groups: Iterable[Iterable[str]]) -> list[str]:
    return list(dict.fromkeys(n for g in groups for n in g))


def _check_row(cid: str, check: _Check, reported: list[str]) -> dict[str, Any]:
    counts = {s: len(check.nodes.get(s, ())) for s in (*VERDICTS, "skip")}
    ran = sum(counts.values())
    missing = []
    if ran < len(reported):  # an older dldoctor, or a run with --only
        have = {n for nodes in check.nodes.values() for n in nodes}
        missing = [n for n in reported if n not in have]
    results = sorted(check.results.items(), key=lambda kv: (Status(kv[0][0]).rank, -len(kv[1])))
    return {
        "id": cid,
        "title": check.title,
        "counts": counts,
        "nodes": {s: fold(check.nodes[s]) for s in ("fail", "error", "warn") if s in check.nodes},
        "results": [
            {"status": s, "summary": text, **_group(nodes)} for (s, text), nodes in results
        ],
        "not_run": _group(missing) if missing else None,
    }


def _fact_rows(
    name: str, fact: _Fact, labels: dict[str, str]
) -> list[tuple[dict, list[list[str]]]]:
    """(row, the nodes of each of its others: those off its majority) for each item of the
    fact, or the one row of a node-wide fact."""
    if not (fact.known or fact.items):
        return [_row(None, name, dict(fact.values))] if fact.values else []
    rows = []
    for item in sorted(fact.items, key=_natural):
        values = dict(fact.items[item])
        if sum(map(len, values.values())) < len(fact.known):  # a node lists an item once
            present = {n for nodes in values.values() for n in nodes}
            values[ABSENT] = [n for n in fact.known if n not in present]
        label = f"{name} {item}" + (f" ({labels[item]})" if item in labels else "")
        rows.append(_row(item, label, values))
    return rows


def _row(item: str | None, label: str, values: dict) -> tuple[dict, list[list[str]]]:
    unknown = values.pop(None, [])
    ranked = sorted(values.items(), key=lambda kv: (-len(kv[1]), _natural(kv[0])))
    leads = len(ranked) == 1 or (len(ranked) > 1 and len(ranked[0][1]) > len(ranked[1][1]))
    majority = {"value": ranked[0][0], "count": len(ranked[0][1])} if leads else None
    others = ranked[1:] if leads else ranked
    row = {
        "item": item,
        "label": label,
        "majority": majority,
        "others": [{"value": v, **_group(nodes)} for v, nodes in others],
        "unknown": _group(unknown) if unknown else None,
    }
    return row, [nodes for _, nodes in others]


def _natural(text: str) -> tuple:
    # "GPU 10" after "GPU 9"; "0000:c5:00.0" in bus order.
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text))
