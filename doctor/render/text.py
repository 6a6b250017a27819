"""The checklist for a terminal, in the spirit of `flutter doctor`."""

from __future__ import annotations

import errno
import io
import sys
from typing import TextIO

from dldoctor.figures import said
from dldoctor.model import Finding, Report, Status, counts

GLYPHS = {
    Status.PASS: ("✓", "green"),
    Status.WARN: ("!", "yellow"),
    Status.FAIL: ("✗", "red"),
    Status.SKIP: ("-", "dim"),
    Status.ERROR: ("☠", "magenta"),
}
EVIDENCE_LINES = 8
FIGURE_LINES = 16  # a P2P matrix of 8 GPUs is 56 figures: the JSON keeps them all
ASCII = {Status.PASS: "ok", Status.WARN: "!", Status.FAIL: "x", Status.SKIP: "-", Status.ERROR: "E"}


def _console(stream: TextIO, color: str):
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # Rich exits 1 here; the caller keeps the verdict's exit code (`| head`).
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "the reader closed the pipe")

    # A terminal gets lines wrapped at its width with a hanging indent; a pipe or a file
    # gets each item on one line (grep, logs).
    isatty = getattr(stream, "isatty", None)
    tty = bool(isatty and isatty())
    kwargs: dict = {"file": stream, "highlight": False, "soft_wrap": not tty}
    if color == "always":
        kwargs["force_terminal"] = True
    elif color == "never":
        kwargs["color_system"] = None
    return _Console(**kwargs)


def render_text(
    report: Report, *, verbose: bool = False, color: str = "auto", stream: TextIO | None = None
) -> None:
    stream = stream or sys.stdout
    unicode = (getattr(stream, "encoding", "") or "").lower().replace("-", "") == "utf8"
    if not unicode and hasattr(stream, "reconfigure"):
        # A latin-1 or ASCII terminal: "≥" in a summary must not end the run.
        stream.reconfigure(errors="replace")
    write_checklist(_console(stream, color), report, verbose=verbose, unicode=unicode)


def text_bytes(report: Report) -> bytes:
    """The checklist for a file (`--output`): UTF-8, no colour, not verbose."""
    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding="utf-8", newline="\n")
    render_text(report, color="never", stream=stream)
    stream.flush()
    return buffer.getvalue()


def write_checklist(console, report: Report, *, verbose: bool, unicode: bool) -> None:
    """The checklist on a Rich console: wrapped at its width unless it soft-wraps."""
    from rich.text import Text

    host = report.host
    head = " · ".join(
        str(v) for v in (host.get("hostname"), host.get("os"), host.get("source")) if v
    )
    _hang(
        console,
        Text(""),
        Text.assemble((f"dldoctor {report.tool.get('version', '')}", "bold"), f" {head}"),
    )
    console.print()
    shown = [f for f in report.findings if verbose or f.status != Status.SKIP]
    for f in shown:
        _finding(console, f, verbose, unicode)
    hidden = len(report.findings) - len(shown)
    if hidden:
        # Most checks do not apply to a given host (no InfiniBand, no RAID, ...): listing
        # each skip buries the findings that matter.
        _hang(
            console,
            Text(""),
            Text(f"{hidden} check(s) not applicable here (-v lists them with the reason)", "dim"),
        )
    console.print()
    _hang(console, Text(""), Text(_footer(report, unicode)))


def _hang(console, prefix, body) -> None:
    """`prefix` then `body`, its continuation lines indented under the body's start.
    Lines break between words; only a word longer than a whole line is folded."""
    from rich.text import Text

    if console.soft_wrap:
        console.print(prefix + body)
        return
    indent = prefix.cell_len
    lines = body.wrap(console, max(console.width - indent, 20), overflow="fold")
    for i, line in enumerate(lines):
        line.rstrip()  # the space the line broke at
        console.print((prefix if i == 0 else Text(" " * indent)) + line, soft_wrap=True)


def _finding(console, f: Finding, verbose: bool, unicode: bool) -> None:
    from rich.text import Text

    glyph, style = GLYPHS[f.status]
    if not unicode:
        glyph = ASCII[f.status]
    _hang(console, Text.assemble((f"[{glyph}]", style), " "),
          Text.assemble((f.title, "bold"), f": {f.summary}"))  # fmt: skip
    bullet = "•" if unicode else "*"
    if verbose or f.status in (Status.FAIL, Status.ERROR):
        for line in f.details:
            _hang(console, Text(f"    {bullet} "), Text(line))
    if f.remediation:
        arrow = "→" if unicode else "->"
        _hang(console, Text.assemble("    ", (arrow, style), " "), Text(f.remediation))
    if f.fixes:
        _hang(console, Text("    fix: "), Text(", ".join(f.fixes)))
    if verbose:
        _figures(console, f)
        source = "" if f.source == "builtin" else f" · from {f.source}"
        dim = Text("    ", "dim")
        _hang(console, dim, Text(f"id {f.id} · {f.duration_s * 1000:.1f} ms{source}", "dim"))
        # A PCI walk reads hundreds of files: the JSON keeps them all, the screen a few.
        shown = f.evidence[:EVIDENCE_LINES]
        for ev in shown:
            _hang(console, Text("    evidence: ", "dim"), Text(str(ev), "dim"))
        if len(f.evidence) > len(shown):
            more = len(f.evidence) - len(shown)
            _hang(
                console, dim, Text(f"evidence: ... and {more} more (--json lists them all)", "dim")
            )


def _figures(console, f: Finding) -> None:
    """Each figure a measuring check measured, by the name a policy's `perf.references`
    and `dldoctor diff` give it, with the fraction of its reference."""
    from rich.text import Text

    for figure in f.figures[:FIGURE_LINES]:
        _hang(console, Text("    measured: "), Text(said(figure)))
    more = len(f.figures) - FIGURE_LINES
    if more > 0:
        _hang(console, Text("    "), Text(f"measured: ... and {more} more (--json lists them all)"))


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _footer(report: Report, unicode: bool) -> str:
    c = counts(report.findings)
    parts = [
        f"{c['pass']} passed",
        _plural(c["warn"], "warning", "warnings"),
        f"{c['fail']} failed",
        f"{c['skip']} skipped",
        _plural(c["error"], "error", "errors"),
    ]
    line = ", ".join(parts) + f" in {report.duration_s:.2f} s."
    issues = c["fail"] + c["warn"]
    # An error is a check that could not look, not something wrong with the host.
    unfinished = (
        f"{_plural(c['error'], 'check', 'checks')} could not finish (errors, not verdicts)"
        if c["error"]
        else ""
    )
    if issues == 0 and not unfinished:
        return line + " No issues found!"
    if issues == 0:
        return line + f" No issues found by the checks that finished; {unfinished}."
    found = f" Doctor found issues in {_plural(issues, 'check', 'checks')}"
    return line + found + (f"; {unfinished}." if unfinished else ".")
