"""`dldoctor fleet report --html`: the fleet document (fleet/report.py) as one page like
report.html — self-contained, nothing loaded, readable with scripts off (it has none).

Its heart is a heatmap of node sets × checks: the nodes whose verdicts are all alike are
one row, labelled by their ClusterShell node set (`node_sets` in the document), the worst
rows first, so the odd nodes sit on rows of their own above the majority. Only the checks
that are not the same pass or skip on every node are columns; the others are counted. Each
cell links to an anchor below holding that node set's result for that check (`:target`
marks it). Then the key-fact odd ones out and the stragglers as tables."""

from __future__ import annotations

import html
from typing import Any

from dldoctor.fleet.nodes import KINDS
from dldoctor.fleet.render import (
    MAX_DETAILS,
    closing,
    figure_lines,
    headline,
    odd_groups,
    since_lines,
    unknown_facts,
)
from dldoctor.fleet.report import NOT_RUN
from dldoctor.model import Status
from dldoctor.render.page import COLOURS, head

MAX_STRAGGLERS = 100  # rows of the stragglers' table; --json lists them all
# A cell's letter (its colour is not all it says) and its words in the anchor below.
LETTERS = {"fail": "F", "error": "E", "warn": "W", "pass": "P", "skip": "S", NOT_RUN: "–"}
WORDS = {NOT_RUN: "not run"}
ODD, SLOW = "odd", "slow"  # the two columns that are not checks: key facts, stragglers
_PALE = {
    "pass": ("#c8e6c9", "#1b5e20"),
    "skip": ("#eeeeee", "#616161"),
    NOT_RUN: ("#fafafa", "#9e9e9e"),
}


def _cell_style() -> str:
    # A problem is saturated, white on its status's colour; a pass or skip is pale: the
    # odd ones stand out of a sea of alike rows.
    out = []
    for status, letter in LETTERS.items():
        if status in _PALE:
            back, fore = _PALE[status]
        else:
            back, fore = COLOURS[Status(status)], "#fff"
        name = "nr" if status == NOT_RUN else letter.lower()
        out.append(f"td.{name} {{ background: {back}; }} td.{name} a {{ color: {fore}; }}")
    return "\n".join(out)


_STYLE = """
body { max-width: 88em; } /* fifty columns of cells fit a desktop's 1280 px */
table.heat { border-collapse: collapse; }
table.heat th, table.heat td { border: 1px solid #fff; padding: 0; }
table.heat td { min-width: 1.6em; text-align: center; font: 600 12px/1.9 monospace; }
table.heat td a { display: block; text-decoration: none; }
table.heat thead th { vertical-align: bottom; font-weight: 400; }
/* The checks' names stand upright: forty columns fit a desktop, a phone scrolls them. */
th.v span { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap;
  font: 12px monospace; color: #555; padding: .3em 0; }
/* A node set's name stays in view as the cells scroll under it; a long one wraps. */
th.set { position: sticky; left: 0; background: #fff; text-align: left; font-weight: 400;
  min-width: 14ch; max-width: 30ch; overflow-wrap: anywhere; padding: 0 .5em 0 0 !important;
  font-family: monospace; font-size: 12px; line-height: 1.3; }
td.n { font-weight: 400; color: #555; padding: 0 .4em; text-align: right; }
table.rows { border-collapse: collapse; }
table.rows td, table.rows th { border-bottom: 1px solid #ddd; padding: .2em .6em .2em 0;
  text-align: left; vertical-align: top; }
/* A version stays whole; a node set (no place to break) wraps anywhere, at 12ch or more. */
table.rows { overflow-wrap: break-word; }
table.rows td.id { overflow-wrap: anywhere; min-width: 12ch; }
section.set { border-left: 4px solid #ccc; padding: 0 .8em; margin: .8em 0; }
section.set h3 { font: 600 13px monospace; margin: .4em 0; }
@media (max-width: 40em) {
  /* A phone: each row of a table of text a block, its cells one under another, named. */
  table.rows tr:first-child { display: none; }
  table.rows, table.rows tr, table.rows td { display: block; }
  table.rows tr { border-bottom: 1px solid #ddd; padding: .3em 0; }
  table.rows td { border: 0; padding: 0; }
  table.rows td::before { content: attr(data-label) ": "; color: #666; font: 12px system-ui; }
}
li:target, section:target { background: #fff3c4; outline: 2px solid #f9a825; }
.legend span { display: inline-block; padding: 0 .4em; margin-right: .4em;
  font: 600 12px/1.6 monospace; }
"""


def render_html(doc: dict[str, Any]) -> str:
    e = html.escape
    sets = doc["node_sets"]
    status = doc["summary"]["status"]
    colour = COLOURS[Status(status)]
    out = [head(f"dldoctor fleet: {doc['summary']['nodes']['nodeset']}", _STYLE + _cell_style())]
    out.append("<h1>dldoctor fleet report</h1>")
    out.append(
        f'<p id=verdict style="border-color:{colour}">fleet status <span class=badge '
        f'style="background:{colour}">{e(status)}</span>{e(headline(doc))}</p>'
    )
    out.append(f"<p>{e(closing(doc))}</p>")
    out += _not_reported(doc)
    out += _heatmap(doc, sets)
    out += _odd_section(doc)
    out += _straggler_section(doc)
    if "since" in doc:
        out.append(f"<section id=since><h2>Changed since {e(doc['since']['path'])}</h2>")
        out.append(_list(line.strip() for line in since_lines(doc["since"])) + "</section>")
    out += _set_sections(doc, sets)
    out.append("</body></html>\n")
    return "\n".join(out)


def _list(lines) -> str:
    return "<ul class=plain>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>"


def _not_reported(doc: dict) -> list[str]:
    found = [(k, f) for k, f in doc["problems"].items() if f["count"]]
    if not found:
        return []
    rows = []
    for kind, f in found:
        details = list(f["details"].items())
        rows += [(node, KINDS[kind], detail) for node, detail in details[:MAX_DETAILS]]
        if len(details) > MAX_DETAILS:
            rows.append(
                (f["nodes"], KINDS[kind], f"{len(details)} node(s) in all (--json lists each)")
            )
    table = _table(("nodes", "problem", "detail"), rows, mono=(0,))
    return [f"<section id=unreported><h2>Not reported</h2>{table}</section>"]


def _table(heads: tuple[str, ...], rows, mono: tuple[int, ...] = ()) -> str:
    """A table of text that wraps on a desktop and stacks on a phone, each cell named by
    its column there (the style's table.rows)."""
    e = html.escape
    out = ["<table class=rows><tr>" + "".join(f"<th>{e(h)}</th>" for h in heads) + "</tr>"]
    for row in rows:
        cells = (
            f'<td data-label="{e(h)}"{" class=id" if i in mono else ""}>{e(str(v))}</td>'
            for i, (h, v) in enumerate(zip(heads, row, strict=True))
        )
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "".join(out) + "</table>"


def _columns(doc: dict, sets: dict) -> list[tuple[str, str]]:
    """(key, heading) of each column: the checks that differ, then key facts and
    stragglers where any node has them."""
    cols = [(cid, cid) for cid in sets["checks"]]
    if any(r["odd"] for r in sets["rows"]):
        cols.append((ODD, "key facts (odd one out)"))
    if any(r["stragglers"] for r in sets["rows"]):
        cols.append((SLOW, "stragglers"))
    return cols


def _cells(row: dict, cols: list[tuple[str, str]]) -> list[str]:
    """The row's status in each column."""
    statuses = list(row["verdicts"])
    for key, _ in cols[len(statuses) :]:
        statuses.append("warn" if row["odd" if key == ODD else "stragglers"] else "pass")
    return statuses


def _cls(status: str) -> str:
    return "nr" if status == NOT_RUN else LETTERS[status].lower()


def _heatmap(doc: dict, sets: dict) -> list[str]:
    e = html.escape
    rows, cols = sets["rows"], _columns(doc, sets)
    reported = doc["summary"]["nodes"]["reported"]
    out = [f"<section id=checks><h2>Checks by node set ({len(rows)})</h2>"]
    if not rows:
        return [*out, "<p>No node reported.</p></section>"]
    out.append(
        f"<p>{reported} reported node(s) in {len(rows)} set(s) of nodes alike in every "
        f"verdict, the worst first; {len(sets['checks'])} check(s) whose verdict is not "
        "the same pass or skip on every node. Each cell links to its set's result.</p>"
    )
    titles = {c["id"]: c["title"] for c in doc["checks"]}
    head_cells = "".join(
        f'<th class=v scope=col title="{e(titles.get(k, h))}"><span>{e(h)}</span></th>'
        for k, h in cols
    )
    out.append(
        "<div class=wide><table class=heat><thead><tr><th class=set scope=col>nodes"
        f"</th><th scope=col>n</th>{head_cells}</tr></thead><tbody>"
    )
    for r, row in enumerate(rows):
        cells = "".join(
            f"<td class={_cls(s)}><a href=#r{r}-{c}>{LETTERS[s]}</a></td>"
            for c, s in enumerate(_cells(row, cols))
        )
        out.append(
            f"<tr><th class=set scope=row><a href=#r{r}>{e(row['nodes'])}</a></th>"
            f"<td class=n>{row['count']}</td>{cells}</tr>"
        )
    out.append("</tbody></table></div>")
    legend = "".join(
        f'<span style="background:{_swatch(s)[0]};color:{_swatch(s)[1]}">{LETTERS[s]}</span>'
        f"{e(WORDS.get(s, s))} "
        for s in LETTERS
    )
    out.append(f"<p class=legend>{legend}</p>")
    uniform = sets["uniform"]
    alike = [(s, ids) for s, ids in uniform.items() if ids]
    if alike:
        words = {"pass": "pass on every node", "skip": "not applicable on any node"}
        said = "; ".join(f"{len(ids)} {words[s]}" for s, ids in alike)
        out.append(f"<details><summary>Also {e(said)}</summary>")
        for s, ids in alike:
            out.append(
                f"<p>{e(words[s])}: "
                + ", ".join(
                    f'<span class=id title="{e(titles.get(i, i))}">{e(i)}</span>' for i in ids
                )
                + "</p>"
            )
        out.append("</details>")
    out.append("</section>")
    return out


def _swatch(status: str) -> tuple[str, str]:
    return _PALE.get(status) or (COLOURS[Status(status)], "#fff")


def _odd_section(doc: dict) -> list[str]:
    e = html.escape
    odd = doc["odd_ones_out"]
    out = ["<section id=odd><h2>Odd ones out</h2>"]
    if not odd:
        out.append("<p>None: every node that knows a key fact has its majority value.</p>")
    else:
        heads = ("key fact", "value", "nodes", "majority")
        out.append(_table(heads, odd_groups(odd), mono=(0, 2)))
    for nodes, facts in unknown_facts(doc).items():
        out.append(f"<p>Not known on <span class=id>{e(nodes)}</span>: {e(', '.join(facts))}.</p>")
    out.append("</section>")
    return out


def _straggler_section(doc: dict) -> list[str]:
    from dldoctor.active.judge import amount, percent

    e = html.escape
    perf = doc.get("perf")
    if not perf or not perf["figures"]:
        return []
    slow = perf["stragglers"]
    below = f"below {perf['straggler'] * 100:.0f} % of the fleet's median"
    out = [f"<section id=stragglers><h2>Stragglers ({len(slow)})</h2>"]
    if not slow:
        out.append(f"<p>None {e(below)}.</p>")
    else:
        out.append(f"<p>Parts {e(below)}, the worst first.</p>")
        heads = ("node", "part", "figure", "measured", "of the fleet's median", "check")
        rows = [
            (s["node"], s["subject"], s["what"], amount(s["value"], s["unit"]),
             f"{percent(s['fraction'])} of {amount(s['median'], s['unit'])}"
             + (f" ({s['kind']})" if s["kind"] else ""), s["check"])
            for s in slow[:MAX_STRAGGLERS]
        ]  # fmt: skip
        out.append(_table(heads, rows, mono=(0, 2, 5)))
        if len(slow) > MAX_STRAGGLERS:
            out.append(f"<p>... and {len(slow) - MAX_STRAGGLERS} more (--json lists them all)</p>")
    out.append("<details><summary>Figures measured</summary>")
    out.append(_list(line.strip() for line in figure_lines(perf)) + "</details></section>")
    return out


def _set_sections(doc: dict, sets: dict) -> list[str]:
    """Per node set, an anchor per cell: its problems each with their summary (and the
    nodes of the set it holds on, where the set's nodes said different things), its
    odd key facts and stragglers; then its passes and skips, named in one line each."""
    e = html.escape
    rows, cols = sets["rows"], _columns(doc, sets)
    if not rows:
        return []
    titles = {c["id"]: c["title"] for c in doc["checks"]}
    out = ["<section id=sets><h2>Each node set's results</h2>"]
    for r, row in enumerate(rows):
        colour = _swatch(row["status"])[0]
        out.append(
            f'<section id=r{r} class=set style="border-color:{colour}"><h3>{e(row["nodes"])} '
            f"({row['count']} node(s), {e(row['status'])})</h3><ul class=plain>"
        )
        quiet: dict[str, list[str]] = {}
        for c, ((key, name), s) in enumerate(zip(cols, _cells(row, cols), strict=True)):
            anchor = f"r{r}-{c}"
            if s not in ("fail", "error", "warn"):
                quiet.setdefault(s, []).append(f"<span id={anchor} class=id>{e(name)}</span>")
                continue
            badge = f'<span class=badge style="background:{COLOURS[Status(s)]}">{e(s)}</span>'
            what = f"<b>{e(name)}</b>"
            if key in titles:
                what = f"<b>{e(titles[key])}</b> <span class=id>{e(key)}</span>"
            out.append(f"<li id={anchor}>{badge}{what}: {_said(doc, row, key)}</li>")
        for s, names in quiet.items():
            out.append(f"<li>{e(WORDS.get(s, s))}: {', '.join(names)}</li>")
        out.append("</ul></section>")
    out.append("</section>")
    return out


def _said(doc: dict, row: dict, key: str) -> str:
    from dldoctor.active.judge import amount, percent

    e = html.escape
    if key == ODD:
        odd = [doc["odd_ones_out"][i] for i in row["odd"]]
        # A set's nodes may be odd in different facts: each says on which, in a larger set.
        return "; ".join(
            f"{e(what)} {e(value)}"
            + (f" on <span class=id>{e(nodes)}</span>" if row["count"] > 1 else "")
            + f" (majority {e(majority)})"
            for what, value, nodes, majority in odd_groups(odd)
        )
    if key == SLOW:
        slow = [doc["perf"]["stragglers"][i] for i in row["stragglers"]]
        shown = [
            f"{e(s['node'])} {e(s['subject'])} {e(s['what'])} "
            f"{e(amount(s['value'], s['unit']))}, {e(percent(s['fraction']))} of the median"
            for s in slow[:MAX_DETAILS]
        ]
        more = f"; ... and {len(slow) - MAX_DETAILS} more" if len(slow) > MAX_DETAILS else ""
        return "; ".join(shown) + more
    results = row["results"][key]
    if len(results) == 1:
        return e(results[0]["summary"])
    return "; ".join(f"{e(x['summary'])} (<span class=id>{e(x['nodes'])}</span>)" for x in results)
