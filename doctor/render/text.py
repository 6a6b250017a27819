"""The checklist for a terminal, in the spirit of `flutter doctor`."""

from __future__ import annotations

import errno
import sys
from typing import TextIO

from dldoctor.model import Finding, Report, Status, counts

GLYPHS = {
    Status.PASS: ("✓", "green"),
    Status.WARN: ("!", "yellow"),
    Status.FAIL: ("✗", "red"),
    Status.SKIP: ("-", "dim"),
    Status.ERROR: ("☠", "magenta"),
}
EVIDENCE_LINES = 8
ASCII = {Status.PASS: "ok", Status.WARN: "!", Status.FAIL: "x", Status.SKIP: "-", Status.ERROR: "E"}


def _console(stream: TextIO, color: str):
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # Rich exits 1 here; the caller keeps the verdict's exit code (`| head`).
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "the reader closed the pipe")

    kwargs: dict = {"file": stream, "highlight": False, "soft_wrap": True}
    if color == "always":
        kwargs["force_terminal"] = True
    elif color == "never":
        kwargs["color_system"] = None
    return _Console(**kwargs)


def render_text(
    report: Report, *, verbose: bool = False, color: str = "auto", stream: TextIO | None = None
) -> None:
    from rich.markup import escape

    stream = stream or sys.stdout
    unicode = (getattr(stream, "encoding", "") or "").lower().replace("-", "") == "utf8"
    if not unicode and hasattr(stream, "reconfigure"):
        # A latin-1 or ASCII terminal: "≥" in a summary must not end the run.
        stream.reconfigure(errors="replace")
    console = _console(stream, color)
    host = report.host
    head = " · ".join(
        str(v) for v in (host.get("hostname"), host.get("os"), host.get("source")) if v
    )
    console.print(f"[bold]dldoctor {escape(report.tool.get('version', ''))}[/] {escape(head)}")
    console.print()
    shown = [f for f in report.findings if verbose or f.status != Status.SKIP]
    for f in shown:
        _finding(console, f, verbose, unicode, escape)
    hidden = len(report.findings) - len(shown)
    if hidden:
        # Most checks do not apply to a given host (no InfiniBand, no RAID, ...): listing
        # each skip buries the findings that matter.
        console.print(
            f"[dim]{hidden} check(s) not applicable here (-v lists them with the reason)[/]"
        )
    console.print()
    console.print(_footer(report, unicode))


def _finding(console, f: Finding, verbose: bool, unicode: bool, escape) -> None:
    glyph, style = GLYPHS[f.status]
    if not unicode:
        glyph = ASCII[f.status]
    console.print(f"[{style}]\\[{glyph}][/] [bold]{escape(f.title)}[/]: {escape(f.summary)}")
    bullet = "•" if unicode else "*"
    if verbose or f.status in (Status.FAIL, Status.ERROR):
        for line in f.details:
            console.print(f"    {bullet} {escape(line)}")
    if f.remediation:
        arrow = "→" if unicode else "->"
        console.print(f"    [{style}]{arrow}[/] {escape(f.remediation)}")
    if f.fixes:
        console.print(f"    fix: {escape(', '.join(f.fixes))}")
    if verbose:
        console.print(
            f"    [dim]id {escape(f.id)} · {f.duration_s * 1000:.1f} ms"
            f"{'' if f.source == 'builtin' else ' · from ' + escape(f.source)}[/]"
        )
        # A PCI walk reads hundreds of files: the JSON keeps them all, the screen a few.
        shown = f.evidence[:EVIDENCE_LINES]
        for ev in shown:
            console.print(f"    [dim]evidence: {escape(str(ev))}[/]")
        if len(f.evidence) > len(shown):
            console.print(
                f"    [dim]evidence: ... and {len(f.evidence) - len(shown)} more "
                "(--json lists them all)[/]"
            )


def _footer(report: Report, unicode: bool) -> str:
    c = counts(report.findings)
    parts = [
        f"{c['pass']} passed",
        f"{c['warn']} warnings",
        f"{c['fail']} failed",
        f"{c['skip']} skipped",
        f"{c['error']} errors",
    ]
    line = ", ".join(parts) + f" in {report.duration_s:.2f} s."
    problems = c["fail"] + c["warn"] + c["error"]
    if problems == 0:
        return line + " No issues found!"
    noun = "check" if problems == 1 else "checks"
    return line + f" Doctor found issues in {problems} {noun}."
