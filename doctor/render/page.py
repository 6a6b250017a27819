"""report.md and report.html: the report as a person reads it without dldoctor (a support
engineer opening a bundle). Both list the findings by category, problems first."""

from __future__ import annotations

import html

from dldoctor.figures import reference_text, value_text
from dldoctor.model import WORST_FIRST, Finding, Report, Status, counts

COLOURS = {
    Status.FAIL: "#c62828",
    Status.ERROR: "#8e24aa",
    Status.WARN: "#ef6c00",
    Status.PASS: "#2e7d32",
    Status.SKIP: "#757575",
}


def by_category(report: Report) -> list[tuple[str, list[Finding]]]:
    """(category, its findings problems first), categories in the report's order."""
    groups: dict[str, list[Finding]] = {}
    for f in report.findings:
        groups.setdefault(f.category or "other", []).append(f)
    return [(c, sorted(fs, key=lambda f: f.status.rank)) for c, fs in groups.items()]


def _host_line(report: Report) -> list[tuple[str, str]]:
    host = report.host
    rows = [(k, str(host.get(k) or "?")) for k in ("hostname", "os", "kernel", "source")]
    rows.append(("dldoctor", str(report.tool.get("version", "?"))))
    rows.append(("started", report.started_at))
    return rows


def _tally(report: Report) -> str:
    c = counts(report.findings)
    return ", ".join(f"{c[s.value]} {s.value}" for s in WORST_FIRST if c.get(s.value))


def render_markdown(report: Report) -> str:
    out = ["# dldoctor report", ""]
    out += [f"- **{k}**: {v}" for k, v in _host_line(report)]
    out += [f"- **verdict**: {report.status.value} ({_tally(report)})", ""]
    for category, findings in by_category(report):
        out += [f"## {category}", ""]
        for f in findings:
            out += [f"### {f.status.value.upper()} `{f.id}` — {f.title}", "", f.summary, ""]
            if f.details:
                out += [*(f"- {d}" for d in f.details), ""]
            if f.figures:
                out += ["| part | figure | measured | against its reference |", "|---|---|---|---|"]
                out += [f"| {_cell(g.subject)} | `{g.what}` | {_cell(value_text(g))} | "
                        f"{_cell(reference_text(g))} |" for g in f.figures]  # fmt: skip
                out.append("")
            if f.remediation:
                out += [f"**Remediation:** {f.remediation}", ""]
            if f.evidence:
                out += ["Evidence: " + ", ".join(f"`{e}`" for e in f.evidence), ""]
    return "\n".join(out).rstrip() + "\n"


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
    return f'<table class=figures style="text-align:left">{head}{rows}</table>'


# Nothing is loaded from anywhere: no script, no font, no image; the policy says so too,
# so a browser refuses whatever a finding's text might smuggle in.
_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }}
table.host td {{ padding: 0 1em 0 0; }} table.host td:first-child {{ color: #666; }}
details {{ border-left: 4px solid #ccc; margin: .4em 0; padding: .2em .8em; }}
summary {{ cursor: pointer; }} .id {{ font-family: monospace; color: #555; }}
.badge {{ display: inline-block; min-width: 3.5em; text-align: center; color: #fff;
  border-radius: 3px; font-weight: 600; font-size: 12px; margin-right: .5em; }}
.evidence {{ font-family: monospace; font-size: 12px; color: #555; }}
.remedy {{ background: #f6f6f6; padding: .4em .6em; }}
</style></head><body>
"""


def render_html(report: Report, *, picture: str | None = None) -> str:
    """report.html; `picture`: trusted SVG markup (dldoctor.topology.render_svg, which
    escapes every host text itself), placed as it is in a Topology section."""
    e = html.escape
    out = [_HEAD.format(title=e(f"dldoctor: {report.host.get('hostname') or 'host'}"))]
    out.append("<h1>dldoctor report</h1><table class=host>")
    out += [f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in _host_line(report)]
    colour = COLOURS[report.status]
    out.append(
        f'<tr><td>verdict</td><td><span class=badge style="background:{colour}">'
        f"{e(report.status.value)}</span>{e(_tally(report))}</td></tr></table>"
    )
    for category, findings in by_category(report):
        out.append(f"<h2>{e(category)}</h2>")
        for f in findings:
            colour = COLOURS[f.status]
            opened = " open" if f.status in (Status.FAIL, Status.ERROR, Status.WARN) else ""
            out.append(
                f'<details id="{e(f.id)}" style="border-color:{colour}"{opened}><summary>'
                f'<span class=badge style="background:{colour}">{e(f.status.value)}</span>'
                f"<b>{e(f.title)}</b> <span class=id>{e(f.id)}</span> — {e(f.summary)}"
                "</summary>"
            )
            if f.details:
                out.append("<ul>" + "".join(f"<li>{e(d)}</li>" for d in f.details) + "</ul>")
            if f.figures:
                out.append(_figure_table(f))
            if f.remediation:
                out.append(f"<p class=remedy><b>Remediation:</b> {e(f.remediation)}</p>")
            if f.evidence:
                items = "<br>".join(e(str(x)) for x in f.evidence)
                out.append(f"<p class=evidence>{items}</p>")
            out.append("</details>")
    if picture:
        out.append('<h2 id="topology">Topology</h2><div class=topology>')
        out.append(picture)
        out.append("</div>")
    out.append("</body></html>\n")
    return "\n".join(out)
