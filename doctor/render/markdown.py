"""`--format md` (and `--md FILE`): the report as a short Markdown summary for a CI job's
page, GitHub's job summary (`>> "$GITHUB_STEP_SUMMARY"`) or a GitLab merge request note: a
heading with the verdict, a table of the problems (status, check, summary, what to do),
the counts, and the checks that passed or did not apply folded in a <details> block.

The whole report, by category with details and evidence, is a bundle's report.md
(render/page.py); this one is what a reviewer reads between two pipeline steps.
"""

from __future__ import annotations

import re

from dldoctor.figures import measured, reference_text, value_text
from dldoctor.model import PROBLEMS, Finding, Report, Status, counts

BADGES = {
    Status.FAIL: "❌ fail",
    Status.ERROR: "❓ error",
    Status.WARN: "⚠️ warn",
    Status.PASS: "✅ pass",
    Status.SKIP: "➖ skip",
}
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def render_markdown_summary(report: Report) -> bytes:
    c = counts(report.findings)
    out = [_heading(report, c), "", _escape(_host_line(report)), ""]
    problems = sorted(
        (f for f in report.findings if f.status in PROBLEMS),
        key=lambda f: f.status.rank,  # the worst first: what a reviewer opened it for
    )
    if problems:
        out += ["| Status | Check | Summary | What to do |", "|---|---|---|---|"]
        out += [
            f"| {BADGES[f.status]} | {_check(f)} | {_escape(f.summary)} | {_todo(f)} |"
            for f in problems
        ]
        out.append("")
    out += [_tally(report, c), ""]
    out += _figures(report)
    # Passes, then what did not apply: sorted() keeps the report's order within each.
    rest = sorted(
        (f for f in report.findings if f.status not in PROBLEMS),
        key=lambda f: f.status == Status.SKIP,
    )
    if rest:
        # A blank line after <summary>: GitHub renders Markdown inside <details> only then.
        folded = f"{c['pass']} passed, {c['skip']} not applicable"
        out += [f"<details><summary>{folded}</summary>", ""]
        out += ["| Status | Check | Summary |", "|---|---|---|"]
        out += [f"| {BADGES[f.status]} | {_check(f)} | {_escape(f.summary)} |" for f in rest]
        out += ["", "</details>", ""]
    return "\n".join(out).encode()


def _figures(report: Report) -> list[str]:
    """What the active tier measured, folded: a reviewer opens it to see the figures
    against their references (a report without measurements has none of it)."""
    rows = [
        f"| {_escape(f'`{f.id}`')} | {_escape(fig.subject)} | {_escape(f'`{fig.what}`')} "
        f"| {_escape(value_text(fig))} | {_escape(reference_text(fig))} |"
        for f, fig in measured(report.findings)
    ]
    if not rows:
        return []
    out = [f"<details><summary>{len(rows)} figures measured</summary>", ""]
    out += ["| Check | Part | Figure | Measured | Against its reference |", "|---|---|---|---|---|"]
    return [*out, *rows, "", "</details>", ""]


def _heading(report: Report, c: dict[str, int]) -> str:
    host = report.host.get("hostname") or "this host"
    parts = [
        f"{c['fail']} failed" if c["fail"] else "",
        _warnings(c["warn"]) if c["warn"] else "",
        f"{c['error']} could not finish" if c["error"] else "",
    ]
    said = ", ".join(p for p in parts if p) or "no problems found"
    strict = " (--strict: warnings fail)" if report.strict and c["warn"] else ""
    badge = BADGES[report.status].split()[0]
    return f"## {badge} dldoctor on {_escape(str(host))}: {said}{strict}"


def _host_line(report: Report) -> str:
    h = report.host
    parts = [h.get("os"), h.get("kernel") and f"kernel {h['kernel']}", h.get("source")]
    parts.append(f"dldoctor {report.tool.get('version', '')}".strip())
    return " · ".join(str(p) for p in parts if p)


def _tally(report: Report, c: dict[str, int]) -> str:
    return (
        f"**{c['fail']} failed** · {_warnings(c['warn'])} · {c['error']} could not finish · "
        f"{c['pass']} passed · {c['skip']} not applicable · {report.duration_s:.2f} s"
    )


def _warnings(n: int) -> str:
    return f"{n} warning" if n == 1 else f"{n} warnings"


def _check(f: Finding) -> str:
    return _escape(f"{f.title} (`{f.id}`)")


def _todo(f: Finding) -> str:
    steps = [_escape(f.remediation)] if f.remediation else []
    steps += [_escape(f"`dldoctor fix {fix}`") for fix in f.fixes]
    return "<br>".join(steps)


def _escape(text: str) -> str:
    """Text for a table cell: one line, `|` escaped (GitHub splits cells at it, in code
    spans too), and outside code spans `<`, `>` and `&` as entities (a summary quoting
    `<none>` must not become an HTML tag). Inside a code span entities are not decoded,
    so the code is left as it is."""
    text = " ".join(text.split()).replace("|", "\\|")
    out, at = [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [_entities(text[at : span.start()]), span.group()]
        at = span.end()
    out.append(_entities(text[at:]))
    return "".join(out)


def _entities(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
