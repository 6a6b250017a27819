"""report.md and report.html: the report as a person reads it without dldoctor (a support
engineer opening a bundle). Both put the problems first: the verdict, then every failure,
error and warning with its evidence and what to do; then the checks that passed, folded and
grouped by category; then the checks that did not apply, counted with their reasons
folded, as the checklist counts them (render/text.py)."""

from __future__ import annotations

import html

from dldoctor.figures import reference_text, value_text
from dldoctor.model import PROBLEMS, WORST_FIRST, Finding, Report, Status, counts

COLOURS = {
    Status.FAIL: "#c62828",
    Status.ERROR: "#8e24aa",
    Status.WARN: "#ef6c00",
    Status.PASS: "#2e7d32",
    Status.SKIP: "#757575",
}
# A check that passed shows the first answers it read: a PCI walk reads hundreds of files,
# and sixty passing checks of an 8-GPU host listing all of them made report.html 330 kB of
# paths nobody reads. report.json keeps every one; a problem lists them all.
PASS_EVIDENCE = 8


def by_category(findings: list[Finding]) -> list[tuple[str, list[Finding]]]:
    """(category, its findings problems first), categories in the order first met."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.category or "other", []).append(f)
    return [(c, sorted(fs, key=lambda f: f.status.rank)) for c, fs in groups.items()]


def problems(report: Report) -> list[Finding]:
    """Every failure, error and warning, the worst first (report order within a status)."""
    return sorted((f for f in report.findings if f.status in PROBLEMS), key=lambda f: f.status.rank)


def _of(report: Report, status: Status) -> list[Finding]:
    return [f for f in report.findings if f.status == status]


def _host_line(report: Report) -> list[tuple[str, str]]:
    host = report.host
    rows = [(k, str(host.get(k) or "?")) for k in ("hostname", "os", "kernel", "source")]
    rows.append(("dldoctor", str(report.tool.get("version", "?"))))
    rows.append(("started", report.started_at))
    return rows


def _tally(report: Report) -> str:
    c = counts(report.findings)
    return ", ".join(f"{c[s.value]} {s.value}" for s in WORST_FIRST if c.get(s.value))


def _not_applicable(n: int) -> str:
    return f"{n} check(s) not applicable here"


def render_markdown(report: Report) -> str:
    out = ["# dldoctor report", ""]
    out += [f"- **{k}**: {v}" for k, v in _host_line(report)]
    out += [f"- **verdict**: {report.status.value} ({_tally(report)})", ""]
    found = problems(report)
    out += [f"## Problems ({len(found)})", ""]
    if not found:
        out += ["No problems found.", ""]
    for f in found:
        out += _md_finding(f, f"{f.status.value.upper()} `{f.id}` — {f.title} ({f.category})")
    passed = _of(report, Status.PASS)
    if passed:
        out += [f"## Passed ({len(passed)})", ""]
        for category, findings in by_category(passed):
            out += [f"### {category}", ""]
            out += [f"- PASS `{f.id}` — {f.title}: {f.summary}" for f in findings]
            out.append("")
    skipped = _of(report, Status.SKIP)
    if skipped:
        out += [f"## {_not_applicable(len(skipped))}", ""]
        out += [f"- `{f.id}` — {f.title}: {f.summary}" for f in skipped]
    return "\n".join(out).rstrip() + "\n"


def _md_finding(f: Finding, heading: str) -> list[str]:
    out = [f"### {heading}", "", f.summary, ""]
    if f.details:
        out += [*(f"- {d}" for d in f.details), ""]
    if f.figures:
        out += ["| part | figure | measured | against its reference |", "|---|---|---|---|"]
        out += [f"| {_cell(g.subject)} | `{g.what}` | {_cell(value_text(g))} | "
                f"{_cell(reference_text(g))} |" for g in f.figures]  # fmt: skip
        out.append("")
    if f.remediation:
        out += [f"**Remediation:** {f.remediation}", ""]
    if f.fixes:
        out += ["Fix: " + ", ".join(f"`dldoctor fix {x}`" for x in f.fixes), ""]
    if f.evidence:
        out += ["Evidence: " + ", ".join(f"`{e}`" for e in f.evidence), ""]
    return out


def _cell(text: str) -> str:
    # A subject is a part's name (a volume's path may hold anything): one table cell.
    return " ".join(text.split()).replace("|", "\\|")


def _figure_table(f: Finding) -> str:
    e = html.escape
    head = "<tr><th>part</th><th>figure</th><th>measured</th><th>against its reference</th></tr>"
    rows = "".join(
        f"<tr><td>{e(g.subject)}</td><td class=id>{e(g.what)}</td><td>{e(value_text(g))}</td>"
        f"<td>{e(reference_text(g))}</td></tr>"
        for g in f.figures
    )
    # Styled inline: the page's head stays the same for a report without measurements.
    # A P2P matrix is wide: it scrolls in its box, the page does not.
    return (
        f'<div class=wide><table class=figures style="text-align:left">{head}{rows}</table></div>'
    )


# Nothing is loaded from anywhere: no script, no font, no image; the policy says so too,
# so a browser refuses whatever a finding's text might smuggle in. Every long word (a sysfs
# path, an id) may break, so a phone's 390 px never scrolls the page sideways.
_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 1em auto; padding: 0 1em;
  max-width: 70em; color: #222; overflow-wrap: anywhere; }}
table.host td {{ padding: 0 1em 0 0; vertical-align: top; }}
table.host td:first-child {{ color: #666; white-space: nowrap; }}
details {{ border-left: 4px solid #ccc; margin: .4em 0; padding: .2em .8em; }}
summary {{ cursor: pointer; }} .id {{ font-family: monospace; color: #555; }}
.badge {{ display: inline-block; min-width: 3.5em; text-align: center; color: #fff;
  border-radius: 3px; font-weight: 600; font-size: 12px; margin-right: .5em; }}
.evidence {{ font-family: monospace; font-size: 12px; color: #555; }}
details.evidence {{ border-color: #eee; }}
.remedy {{ background: #f6f6f6; padding: .4em .6em; }}
.wide {{ overflow-x: auto; max-width: 100%; }} .wide svg {{ max-width: none; }}
.wide table {{ overflow-wrap: normal; }}
ul.plain {{ list-style: none; padding-left: 0; }} ul.plain li {{ margin: .2em 0; }}
.cat {{ color: #666; font-size: 12px; }}
#verdict {{ font-size: 18px; border-left: 6px solid; padding: .2em .6em; }}
</style></head><body>
"""


def head(title: str, style: str = "") -> str:
    """The page's head up to <body>: every page dldoctor writes (report.html, `diff
    --html`) loads nothing and carries its own style."""
    return _HEAD.format(title=html.escape(title)).replace("</style>", style + "</style>")


def render_html(report: Report, *, picture: str | None = None) -> str:
    """The page. `picture` is trusted SVG markup (the host's topology, drawn by dldoctor
    from its facts), placed as it is in a Topology section after the problems."""
    e = html.escape
    out = [head(f"dldoctor: {report.host.get('hostname') or 'host'}")]
    colour = COLOURS[report.status]
    out.append("<h1>dldoctor report</h1>")
    out.append(
        f'<p id=verdict style="border-color:{colour}">verdict <span class=badge '
        f'style="background:{colour}">{e(report.status.value)}</span>{e(_tally(report))}</p>'
    )
    out.append("<table class=host>")
    out += [f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in _host_line(report)]
    out.append("</table>")
    found = problems(report)
    out.append(f"<section id=problems><h2>Problems ({len(found)})</h2>")
    if not found:
        out.append("<p>No problems found.</p>")
    out += [_html_finding(f, opened=True, category=True) for f in found]
    out.append("</section>")
    if picture:
        out.append(f"<section id=topology><h2>Topology</h2><div class=wide>{picture}</div>")
        out.append("</section>")
    passed = _of(report, Status.PASS)
    if passed:
        out.append(
            f"<section id=passes><h2>Passed ({len(passed)})</h2><details>"
            f"<summary>{len(passed)} check(s) passed</summary>"
        )
        for category, findings in by_category(passed):
            out.append(f"<h3>{e(category)}</h3>")
            out += [_html_finding(f, opened=False, category=False) for f in findings]
        out.append("</details></section>")
    skipped = _of(report, Status.SKIP)
    if skipped:
        # Counted as the checklist counts them; each reason is one line, folded.
        out.append(
            f"<section id=skips><h2>{e(_not_applicable(len(skipped)))}</h2><details>"
            "<summary>the reasons</summary><ul class=plain>"
        )
        out += [
            f'<li id="{e(f.id)}"><b>{e(f.title)}</b> <span class=id>{e(f.id)}</span> — '
            f"{e(f.summary)}</li>"
            for f in skipped
        ]
        out.append("</ul></details></section>")
    out.append("</body></html>\n")
    return "\n".join(out)


def _html_finding(f: Finding, *, opened: bool, category: bool) -> str:
    e = html.escape
    colour = COLOURS[f.status]
    where = f" <span class=cat>{e(f.category or 'other')}</span>" if category else ""
    out = [
        f'<details id="{e(f.id)}" style="border-color:{colour}"{" open" if opened else ""}>'
        f'<summary><span class=badge style="background:{colour}">{e(f.status.value)}</span>'
        f"<b>{e(f.title)}</b> <span class=id>{e(f.id)}</span>{where} — {e(f.summary)}"
        "</summary>"
    ]
    if f.details:
        out.append("<ul>" + "".join(f"<li>{e(d)}</li>" for d in f.details) + "</ul>")
    if f.figures:
        out.append(_figure_table(f))
    if f.remediation:
        out.append(f"<p class=remedy><b>Remediation:</b> {e(f.remediation)}</p>")
    if f.fixes:
        fixes = ", ".join(f"<code>dldoctor fix {e(x)}</code>" for x in f.fixes)
        out.append(f"<p class=remedy><b>Fix:</b> {fixes}</p>")
    if f.evidence:
        # The raw answers, folded: a PCI walk is a screenful of paths under the verdict.
        shown = f.evidence if f.status in PROBLEMS else f.evidence[:PASS_EVIDENCE]
        items = "<br>".join(e(str(x)) for x in shown)
        more = len(f.evidence) - len(shown)
        if more:
            items += f"<br>... and {more} more (report.json lists them all)"
        out.append(
            f"<details class=evidence><summary>evidence: {len(f.evidence)} raw answer(s)"
            f"</summary>{items}</details>"
        )
    out.append("</details>")
    return "\n".join(out)
