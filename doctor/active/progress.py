"""What a person at a terminal sees while `--check --active` measures: one line on stderr
as each measurement starts, one when it fails, and one as each measuring check ends with
its figures ("measuring fio sequential read of /data (≤ 12 s)…", "… 1.9 GB/s in 10.2 s").
Nothing on a stderr that is not a terminal, and never anything on stdout (a `--json`
report stays the report alone)."""

from __future__ import annotations

import threading
from typing import TextIO

from dldoctor.active import MeasureEnded, MeasureStarted
from dldoctor.active.judge import amount
from dldoctor.model import Finding
from dldoctor.runner import CheckFinished

PREFIX = "dldoctor: "


def wanted(stream: TextIO | None) -> bool:
    """Whether `stream` is a person's terminal."""
    return bool(stream is not None and getattr(stream, "isatty", None) and stream.isatty())


class MeasuringProgress:
    """A listener of both the measurements (dldoctor.active.listening) and the runner
    (CheckFinished of a measuring check): it writes the lines above to `stream`."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self._lock = threading.Lock()  # measuring threads and the runner's both write

    def __call__(self, event: object) -> None:
        line = self.line(event)
        if line:
            with self._lock:
                self.stream.write(PREFIX + line + "\n")
                self.stream.flush()

    @staticmethod
    def line(event: object) -> str:
        """The line an event gets ("" for none)."""
        if isinstance(event, MeasureStarted):
            return f"measuring {event.what} (≤ {event.cost_s:g} s)…"
        if isinstance(event, MeasureEnded):
            answer = event.answer
            if answer.ok and answer.value.returncode == 0:
                return ""  # its check's line gives the figure
            if answer.ok:
                return f"… {event.what}: exited {answer.value.returncode} in {event.seconds:.1f} s"
            return f"… {event.what}: {answer.describe()}"
        if isinstance(event, CheckFinished) and event.spec.active:
            return ended(event.finding)
        return ""


def ended(finding: Finding) -> str:
    """A measuring check's last line: its figures and how long it took, or what it said."""
    took = f"in {finding.duration_s:.1f} s"
    if not finding.figures:
        return f"… {finding.id}: {finding.status.value}: {finding.summary} ({took})"
    # One figure is said alone ("1.90 GB/s"); several name their parts ("GPU 0 2610 GB/s").
    named = len(finding.figures) > 1
    parts = [(f"{f.subject} " if named else "") + amount(f.value, f.unit) for f in finding.figures]
    shown = ", ".join(parts[:4]) + (f" and {len(parts) - 4} more" if len(parts) > 4 else "")
    return f"… {shown} {took} ({finding.id}: {finding.status.value})"
