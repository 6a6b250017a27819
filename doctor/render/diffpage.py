"""`dldoctor diff --html`: the diff document (doctor/diffing.py, docs/diff.md) as a page
like report.html — self-contained, nothing loaded, readable with scripts off. The two
sides head the page; each change is a row marked by what it means for the host: a new
problem, a problem resolved, a status that changed otherwise, a finding on one side only,
a key fact or a measured figure that changed."""

from __future__ import annotations

import html

from dldoctor.render.page import head

PROBLEMS = ("fail", "error", "warn")
# What a change means, worst first: the order of the page's sections.
MARKS = {
    "new": ("new problem", "#c62828"),
    "resolved": ("resolved", "#2e7d32"),
    "changed": ("changed status", "#ef6c00"),
    "only": ("on one side only", "#757575"),
}
STATUS_COLOURS = {"fail": "#c62828", "error": "#8e24aa", "warn": "#ef6c00",
                  "pass": "#2e7d32", "skip": "#757575"}  # fmt: skip
_STYLE = """
table.diff { border-collapse: collapse; width: 100%; overflow-wrap: break-word; }
table.diff td, table.diff th { border-bottom: 1px solid #ddd; padding: .3em .5em;
  text-align: left; vertical-align: top; }
table.diff th { background: #f3f3f3; }
tr.mark td:first-child { border-left: 4px solid var(--mark); }
.sides { display: flex; flex-wrap: wrap; gap: 1em; }
.sides > div { flex: 1 1 18em; border: 1px solid #ddd; padding: .4em .8em; }
.sides h2 { margin: .2em 0; }
.was { color: #666; }
@media (max-width: 40em) {
  /* A phone: each change a block of its own, its cells one under another, named. */
  table.diff tr:first-child { display: none; }
  table.diff, table.diff tr, table.diff td { display: block; width: auto; }
  table.diff tr { border-left: 4px solid var(--mark); margin: .6em 0; }
  table.diff td { border: 0; padding: .1em .5em; }
  tr.mark td:first-child { border: 0; }
  table.diff td[data-side]::before { content: attr(data-side) ": "; color: #666; }
}
"""


def mark(row: dict) -> str:
    """new, resolved, changed or only: what one finding row of the diff means."""
    a, b = row.get("a"), row.get("b")
    if a is None or b is None:  # a finding on one side only
        side = b if a is None else a
        if side["status"] in PROBLEMS:
            return "new" if a is None else "resolved"
        return "only"
    if b["status"] in PROBLEMS and a["status"] not in PROBLEMS:
        return "new"
    if a["status"] in PROBLEMS and b["status"] not in PROBLEMS:
        return "resolved"
    return "changed"


def finding_rows(doc: dict) -> list[tuple[str, dict]]:
    """(mark, row) for every finding that differs, rows as {id, title, a, b} with a or b
    None on the side that lacks it; new problems first, then resolved, changed, one side."""
    found = doc["findings"]
    rows = [dict(f) for f in found["changed"]]
    rows += [{"id": f["id"], "title": f["title"], "a": f, "b": None} for f in found["only_in_a"]]
    rows += [{"id": f["id"], "title": f["title"], "a": None, "b": f} for f in found["only_in_b"]]
    order = list(MARKS)
    return sorted(((mark(r), r) for r in rows), key=lambda mr: order.index(mr[0]))


def _status(side: dict | None) -> str:
    e = html.escape
    if side is None:
        return "<span class=was>not there</span>"
    colour = STATUS_COLOURS.get(side["status"], "#757575")
    return (
        f'<span class=badge style="background:{colour}">{e(side["status"])}</span>'
        f"{e(side['summary'])}"
    )


def _side(label: str, side: dict) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td>{k}</td><td>{e(str(side.get(k) or '?'))}</td></tr>"
        for k in ("path", "kind", "hostname", "os", "kernel")
    )
    return f"<div><h2>{label}</h2><table class=host>{rows}</table></div>"


def render_html(doc: dict) -> str:
    from dldoctor.diffing import figure_line

    e = html.escape
    a, b = doc["a"], doc["b"]
    title = f"dldoctor diff: {a.get('hostname') or a['path']} / {b.get('hostname') or b['path']}"
    out = [head(title, _STYLE), "<h1>dldoctor diff</h1>"]
    out.append(f"<div class=sides>{_side('A', a)}{_side('B', b)}</div>")
    rows = finding_rows(doc)
    tally = {m: sum(1 for k, _ in rows if k == m) for m in MARKS}
    said = ", ".join(f"{MARKS[m][0]}: {n}" for m, n in tally.items() if n)
    if doc["facts"]:
        said += (", " if said else "") + f"key facts changed: {len(doc['facts'])}"
    if doc["figures"]:
        said += (", " if said else "") + f"figures moved: {len(doc['figures'])}"
    verdict = "equivalent" if doc["equivalent"] else "they differ"
    colour = "#2e7d32" if doc["equivalent"] else "#ef6c00"
    out.append(
        f'<p id=verdict style="border-color:{colour}"><b>{verdict}</b>'
        f"{(': ' + e(said)) if said else ''}</p>"
    )
    if rows:
        out.append("<section id=findings><h2>Findings</h2><div class=wide><table class=diff>")
        out.append("<tr><th>change</th><th>check</th><th>A</th><th>B</th></tr>")
        for m, r in rows:
            name, colour = MARKS[m]
            out.append(
                f'<tr class="mark {m}" style="--mark:{colour}" id="{e(r["id"])}">'
                f'<td><b style="color:{colour}">{e(name)}</b></td>'
                f"<td><b>{e(r['title'])}</b><br><span class=id>{e(r['id'])}</span></td>"
                f"<td data-side=A>{_status(r['a'])}</td><td data-side=B>{_status(r['b'])}</td></tr>"
            )
        out.append("</table></div></section>")
    if doc["facts"]:
        out.append("<section id=facts><h2>Key facts changed</h2><div class=wide>")
        out.append("<table class=diff><tr><th>key fact</th><th>A</th><th>B</th></tr>")
        out += [
            f'<tr class="mark fact" style="--mark:#1565c0"><td class=id>{e(r["label"])}</td>'
            f"<td data-side=A>{e(str(r['a']))}</td><td data-side=B>{e(str(r['b']))}</td></tr>"
            for r in doc["facts"]
        ]
        out.append("</table></div></section>")
    if doc["figures"]:
        limit = f"{doc['figure_change'] * 100:.0f} %"
        out.append(f"<section id=figures><h2>Figures changed by more than {limit}</h2><ul>")
        out += [f"<li class=id>{e(figure_line(r))}</li>" for r in doc["figures"]]
        out.append("</ul></section>")
    if not doc["facts_compared"]:
        out.append(f"<p>{e(doc['facts_not_compared'])}</p>")
    out.append("</body></html>\n")
    return "\n".join(out)
