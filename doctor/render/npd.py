"""`--format npd`: node-problem-detector's custom plugin protocol (kubernetes/node-problem-
detector: docs/custom_plugin_monitor.md, pkg/custompluginmonitor). The exit code is the
result: 0 OK, 1 a problem (NonOK: the node condition turns True), anything else unknown
(2 here). Standard output, trimmed, is the condition's message, which NPD cuts at the
config's `max_output_length`, 80 bytes by default (it cuts Go string bytes, so the limit
is in UTF-8 bytes); dldoctor keeps it within 80 itself, ending a longer one with "..."
between two words rather than in the middle of a check id.

dldoctor's verdict maps onto it: exit 1 (a check failed, or warned under --strict) is a
problem; exit 3 (no check failed but some could not finish) is unknown, never a problem:
the doctor could not look. Warnings alone are OK unless --strict.
"""

from __future__ import annotations

from dldoctor.exitcodes import ExitCode, exit_code_for
from dldoctor.model import Report, Status, counts

OK, PROBLEM, UNKNOWN = 0, 1, 2
MAX_MESSAGE = 80  # NPD's default max_output_length
ELLIPSIS = "..."


def npd_exit_code(report: Report) -> int:
    code = exit_code_for(report.findings, strict=report.strict)
    return {ExitCode.OK: OK, ExitCode.PROBLEMS: PROBLEM}.get(code, UNKNOWN)


def render_npd(report: Report) -> bytes:
    return (shorten(_message(report), MAX_MESSAGE) + "\n").encode()


def npd_failure(message: str) -> tuple[bytes, int]:
    """The doctor could not run at all: unknown, with the reason as the message."""
    text = shorten(f"dldoctor could not run: {_clean(message)}", MAX_MESSAGE)
    return (text + "\n").encode(), UNKNOWN


def _clean(text: str) -> str:
    return " ".join(text.split())  # one line: NPD shows the message as it is


def _message(report: Report) -> str:
    c = counts(report.findings)
    problems = [Status.FAIL, *([Status.WARN] if report.strict else []), Status.ERROR]
    parts = []
    for status in problems:
        ids = [_clean(f.id) for f in report.findings if f.status == status]
        if ids:
            word = {Status.FAIL: "failed", Status.WARN: "warned"}.get(status, "could not finish")
            parts.append(f"{len(ids)} {word}: {', '.join(ids)}")
    if parts:
        return "; ".join(parts)
    warned = f", {c['warn']} warned" if c["warn"] else ""
    return f"no problem: {c['pass']} passed{warned}, {c['skip']} not applicable"


def shorten(text: str, limit: int) -> str:
    """`text` in at most `limit` UTF-8 bytes: whole words and an ellipsis when it is
    longer; only a first word longer than the limit is cut inside."""
    if len(text.encode()) <= limit:
        return text
    room = limit - len(ELLIPSIS)
    kept = ""
    for word in text.split(" "):
        longer = f"{kept} {word}" if kept else word
        if len(longer.encode()) > room:
            break
        kept = longer
    if not kept:
        kept = text.encode()[:room].decode("utf-8", "ignore")
    return kept.rstrip(",;: ") + ELLIPSIS
