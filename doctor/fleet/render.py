"""The fleet document (fleet/report.py) as text for a terminal or as Markdown."""

from __future__ import annotations

from typing import Any

from dldoctor.diffing import figure_line
from dldoctor.fleet.nodes import KINDS

COLUMNS = ("pass", "warn", "fail", "error", "skip")
MAX_DETAILS = 10  # nodes named one by one under a problem; the rest are counted
MAX_ITEMS = 4  # items named on one line of odd ones out
CLOSING = (
    ("failing", "with failing checks"),
    ("erroring", "with checks that could not finish"),
    ("warning", "with warnings"),
    ("odd", "off the majority in a key fact"),
    ("straggling", "with stragglers"),
)


def headline(doc: dict) -> str:
    n = doc["summary"]["nodes"]
    line = f"{n['total']} node(s) {n['nodeset']}: {n['reported']} report(s)"
    return line + (f", {n['not_reported']} not reported" if n["not_reported"] else "")


def closing(doc: dict) -> str:
    s = doc["summary"]
    parts = [f"{s['nodes']['reported']} report(s)"]
    for key, what in CLOSING:
        if s[key]["count"]:
            parts.append(f"{s[key]['count']} node(s) {what} ({s[key]['nodes']})")
    if s["nodes"]["not_reported"]:
        parts.append(f"{s['nodes']['not_reported']} node(s) not reported")
    return "; ".join(parts) + f". Fleet status: {s['status']}."


def _problem_lines(doc: dict) -> list[str]:
    lines = []
    for kind, found in doc["problems"].items():
        if not found["count"]:
            continue
        lines.append(f"  {KINDS[kind]}: {found['nodes']}")
        details = list(found["details"].items())
        lines += [f"    {node}: {detail}" for node, detail in details[:MAX_DETAILS] if detail]
        if len(details) > MAX_DETAILS:
            lines.append(f"    ... and {len(details) - MAX_DETAILS} more (--json lists them all)")
    return lines


def _skipped_everywhere(check: dict) -> bool:
    return not any(check["counts"][s] for s in COLUMNS if s != "skip")


def odd_groups(odd: list[dict]) -> list[tuple[str, str, str, str]]:
    """(what, value, nodes, majority): the items of one fact with the same odd value on the
    same nodes on one line (a node missing a GPU misses its model, VBIOS and link too)."""
    groups: dict[tuple, list[dict]] = {}
    for o in odd:
        groups.setdefault((o["fact"], o["value"], o["nodes"], o["majority"]), []).append(o)
    lines = []
    for (fact, value, nodes, majority), rows in groups.items():
        what = rows[0]["label"]
        if len(rows) > 1:
            items = [r["label"][len(fact) + 1 :] for r in rows]
            more = f", ... ({len(items)} items)" if len(items) > MAX_ITEMS else ""
            what = f"{fact} {', '.join(items[:MAX_ITEMS])}{more}"
        lines.append((what, value, nodes, "none" if majority is None else majority))
    return lines


def _alike(doc: dict) -> list[str]:
    names = []
    for fact in doc["facts"]:
        rows = [r for r in fact["rows"] if r["majority"] or r["others"]]
        if rows and not any(r["others"] for r in rows):
            only = rows[0]["majority"]["value"] if not fact["per_item"] else None
            names.append(f"{fact['fact']} {only}" if only else fact["fact"])
    return names


def unknown_facts(doc: dict) -> dict[str, list[str]]:
    """Node set -> the facts not known on it."""
    found: dict[str, list[str]] = {}
    for fact in doc["facts"]:
        if fact["unknown"]:
            found.setdefault(fact["unknown"]["nodes"], []).append(fact["fact"])
    return found


def since_lines(since: dict) -> list[str]:
    lines = []
    for row in since["changed"]:
        if row["findings"] is None:
            lines.append(f"  {row['node']}: {_state(row['was'])} -> {_state(row['now'])}")
            continue
        found = row["findings"]
        parts = [f"{f['id']} {f['a']['status']} -> {f['b']['status']}" for f in found["changed"]]
        parts += [f"{f['id']} gone (was {f['status']})" for f in found["only_in_a"]]
        parts += [f"{f['id']} new ({f['status']})" for f in found["only_in_b"]]
        parts += [f"{r['label']}: {r['a']} -> {r['b']}" for r in row["facts"]]
        parts += [figure_line(r) for r in row.get("figures", ())]
        lines.append(f"  {row['node']}: " + "; ".join(parts))
    for key in ("new", "gone"):
        if since[key]["count"]:
            lines.append(f"  {key}: {since[key]['nodes']}")
    return lines or ["  nothing changed"]


def _straggler_lines(perf: dict) -> list[str]:
    """ "node17 GPU 3 hbm_copy 1409 GB/s, 54 % of the fleet median 2600 GB/s", worst first."""
    from dldoctor.active.judge import amount, percent

    lines = []
    for s in perf["stragglers"][:MAX_DETAILS]:
        of = f"the fleet median {amount(s['median'], s['unit'])}"
        kind = f" ({s['kind']})" if s["kind"] else ""
        lines.append(
            f"  {s['node']} {s['subject']} {s['what']} {amount(s['value'], s['unit'])}, "
            f"{percent(s['fraction'])} of {of}{kind} [{s['check']}]"
        )
    more = len(perf["stragglers"]) - MAX_DETAILS
    if more > 0:
        lines.append(f"  ... and {more} more (--json lists them all)")
    return lines


def figure_lines(perf: dict) -> list[str]:
    from dldoctor.active.judge import amount

    lines = []
    for r in perf["figures"]:
        kind = f" ({r['kind']})" if r["kind"] else ""
        lines.append(
            f"  {r['check']} {r['what']}{kind}: median {amount(r['median'], r['unit'])} over "
            f"{r['parts']} part(s) of {r['nodes']['count']} node(s), "
            f"{amount(r['min'], '').strip()}–{amount(r['max'], r['unit'])}, "
            f"{len(r['stragglers'])} straggler(s)"
        )
    return lines


def _state(state: str) -> str:
    return KINDS.get(state, state)


def render_text(doc: dict[str, Any]) -> str:
    lines = [f"dldoctor fleet: {headline(doc)}"]
    problems = _problem_lines(doc)
    if problems:
        lines += ["", "Not reported", *problems]
    checks = [c for c in doc["checks"] if not _skipped_everywhere(c)]
    if checks:
        width = max(len(c["id"]) for c in checks)
        lines += ["", f"  {'check':{width}}  " + "  ".join(f"{s:>5}" for s in COLUMNS)]
        for c in checks:
            counts = "  ".join(f"{c['counts'][s]:>5}" for s in COLUMNS)
            lines.append(f"  {c['id']:{width}}  {counts}")
            for r in c["results"]:
                lines.append(f"      {r['status']} {r['nodes']}: {r['summary']}")
            if c["not_run"]:
                lines.append(f"      not run on {c['not_run']['nodes']}")
    skipped = len(doc["checks"]) - len(checks)
    if skipped:
        lines.append(f"  ({skipped} check(s) not applicable on any node)")
    odd = doc["odd_ones_out"]
    lines += ["", "Odd ones out" if odd else "Odd ones out: none"]
    for what, value, nodes, majority in odd_groups(odd):
        lines.append(f"  {what}: {value} on {nodes} (majority {majority})")
    alike = _alike(doc)
    if alike:
        lines.append("  alike on every node that knows them: " + ", ".join(alike))
    for nodes, facts in unknown_facts(doc).items():
        lines.append(f"  not known on {nodes}: " + ", ".join(facts))
    perf = doc.get("perf")
    if perf and perf["figures"]:
        below = f"below {perf['straggler'] * 100:.0f} % of the fleet's median"
        lines += ["", "Figures measured", *figure_lines(perf)]
        lines += [
            "",
            f"Stragglers ({below})" if perf["stragglers"] else f"Stragglers: none {below}",
        ]
        lines += _straggler_lines(perf)
    if "since" in doc:
        lines += ["", f"Changed since {doc['since']['path']}", *since_lines(doc["since"])]
    lines += ["", closing(doc)]
    return "\n".join(lines) + "\n"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: dict[str, Any]) -> str:
    lines = ["# dldoctor fleet report", "", headline(doc) + ".", ""]
    problems = [(k, f) for k, f in doc["problems"].items() if f["count"]]
    if problems:
        lines += ["## Not reported", "", "| node | problem | detail |", "|---|---|---|"]
        for kind, found in problems:
            lines += [
                f"| {_cell(n)} | {KINDS[kind]} | {_cell(d)} |" for n, d in found["details"].items()
            ]
        lines.append("")
    lines += [
        "## Checks",
        "",
        "| check | pass | warn | fail | error | skip | nodes |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for c in doc["checks"]:
        if _skipped_everywhere(c):
            continue
        nodes = "<br>".join(f"{r['status']} {r['nodes']}: {r['summary']}" for r in c["results"])
        counts = " | ".join(str(c["counts"][s]) for s in COLUMNS)
        lines.append(f"| `{_cell(c['id'])}` | {counts} | {_cell(nodes)} |")
    lines += ["", "## Odd ones out", ""]
    if doc["odd_ones_out"]:
        lines += ["| key fact | value | nodes | majority |", "|---|---|---|---|"]
        for row in odd_groups(doc["odd_ones_out"]):
            lines.append("| " + " | ".join(map(_cell, row)) + " |")
    else:
        lines.append("None: every node that knows a key fact has its majority value.")
    for nodes, facts in unknown_facts(doc).items():
        lines += ["", f"Not known on {_cell(nodes)}: " + ", ".join(facts) + "."]
    perf = doc.get("perf")
    if perf and perf["figures"]:
        lines += ["", "## Stragglers", ""]
        lines += [
            f"Parts below {perf['straggler'] * 100:.0f} % of the fleet's median, worst first.",
            "",
        ]
        lines += [f"- {_cell(line.strip())}" for line in _straggler_lines(perf)] or ["None."]
        lines += ["", "Figures measured:", ""]
        lines += [f"- {_cell(line.strip())}" for line in figure_lines(perf)]
    if "since" in doc:
        lines += ["", f"## Changed since {_cell(doc['since']['path'])}", ""]
        lines += [f"- {_cell(line.strip())}" for line in since_lines(doc["since"])]
    lines += ["", closing(doc)]
    return "\n".join(lines) + "\n"
