"""The kernel log of the current boot (the journal, else dmesg), read once, and what the
parsers of its events share: stamped lines and their ages.

`kernel.log` reads the log once and keeps only the lines some fact parses (see
`KEPT_MARKERS`); `kernel.xid` (facts/xid.py), `kernel.sxid` (facts/sxid.py) and
`pcie.bandwidth_limits` (facts/pcie.py) parse from it. `read_lines` understands the
timestamp formats of dmesg, `dmesg --time-format=iso` and journalctl, and lines with no
timestamp at all.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.host.base import DEFAULT_MAX_BYTES, Answer, AnswerStatus, command_key

# --- stamped lines ----------------------------------------------------------------------

# 2024-05-01T10:00:00,123456+00:00 (dmesg --time-format=iso),
# 2024-05-01T10:00:00.123456+0000 (journalctl -o short-iso-precise), +00:00 in newer
# systemd, Z from other tools.
_ISO = re.compile(
    r"^\s*(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?(?=\s)"
)
_MONOTONIC = re.compile(r"\[\s*(\d+(?:\.\d+)?)\]")
_MAX_NOTES = 5


@dataclass
class LogLine:
    raw: str
    body: str  # from the marker (or `body_from`) on
    monotonic: float | None
    epoch: float | None


def _iso_epoch(m: re.Match) -> float | None:
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    zone = m.group(8)
    if zone is None:  # a local time in a zone we do not know
        return None
    if zone == "Z":
        offset = 0
    else:
        digits = zone[1:].replace(":", "")
        offset = (int(digits[:2]) * 60 + int(digits[2:])) * 60
        offset = -offset if zone[0] == "-" else offset
    try:
        stamp = _dt.datetime(
            year, month, day, hour, minute, second,
            tzinfo=_dt.timezone(_dt.timedelta(seconds=offset)),
        )  # fmt: skip
    except (ValueError, OverflowError):
        return None
    fraction = float(f"0.{m.group(7)}") if m.group(7) else 0.0
    return stamp.timestamp() + fraction


def _stamp(prefix: str) -> tuple[float | None, float | None, bool]:
    """(monotonic, epoch, looked like a stamp) from the text before "NVRM"."""
    m = _ISO.match(prefix)
    if m is not None:
        return None, _iso_epoch(m), True
    m = _MONOTONIC.search(prefix)
    if m is not None:
        return float(m.group(1)), None, True
    return None, None, False


def read_lines(text: str, marker: str, body_from: str) -> tuple[list[LogLine], int]:
    """The lines holding `marker`, with their stamps, and how many stamps were unusable.
    A line's body starts at `body_from` (or at `marker` when the line lacks it)."""
    lines: list[LogLine] = []
    bad_stamps = 0
    for raw in text.split("\n"):
        raw = raw.rstrip("\r")
        at = raw.find(marker)
        if at < 0:
            continue
        start = raw.rfind(body_from, 0, at + 1)
        at = start if start >= 0 else at
        monotonic, epoch, stamped = _stamp(raw[:at])
        if stamped and monotonic is None and epoch is None:
            bad_stamps += 1
        if not stamped and lines and raw[:1].isspace():
            monotonic, epoch = lines[-1].monotonic, lines[-1].epoch
        lines.append(LogLine(raw, raw[at:], monotonic, epoch))
    return lines, bad_stamps


class LogClock:
    """Ages of stamped lines against "now"; counts the stamps later than now."""

    def __init__(self, now_monotonic: float | None, now_epoch: float | None):
        self.now_monotonic, self.now_epoch = now_monotonic, now_epoch
        self.in_future = 0

    def age(self, line: LogLine) -> float | None:
        if line.epoch is not None:
            value = None if self.now_epoch is None else self.now_epoch - line.epoch
        elif line.monotonic is not None:
            # dmesg stamps leave out time suspended, /proc/uptime counts it: after a
            # suspend the age comes out too large, never too small.
            value = None if self.now_monotonic is None else self.now_monotonic - line.monotonic
        else:
            return None
        if value is not None and value < 0:
            if value < -2.0:  # `date +%s` has whole seconds; more than that is odd
                self.in_future += 1
                return None
            value = 0.0
        return value

    def notes(self, bad_stamps: int, middle: list[str]) -> list[str]:
        """Notes on the stamps read, around `middle` (the parser's own notes)."""
        notes = []
        if bad_stamps:
            notes.append(f"{bad_stamps} line(s) have a timestamp without a usable date or zone")
        notes += middle
        if self.in_future:
            notes.append(
                f"{self.in_future} event(s) are stamped later than the log was read (another "
                "boot, or the clock changed): their age is unknown"
            )
        return notes


def unrecognised_notes(raws: list[str], what: str) -> list[str]:
    notes = [f"unrecognised {what} line: {raw.strip()[:100]!r}" for raw in raws[:_MAX_NOTES]]
    if len(raws) > _MAX_NOTES:
        notes.append(f"... and {len(raws) - _MAX_NOTES} more unrecognised {what} lines")
    return notes


# --- the fact -------------------------------------------------------------------------

JOURNAL_ARGV = ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise")
DMESG_ARGV = ("dmesg",)
DATE_ARGV = ("date", "+%s")

# A kernel log can be large; only the lines some fact parses are kept: the NVIDIA driver's
# (Xid events), the NVSwitch driver's (SXid events), the PCI core's "available PCIe
# bandwidth, limited by ..." and AER reports.
KEPT_MARKERS = (b"NVRM", b"SXid", b"PCIe bandwidth", b"AER:")


def kept_lines(data: bytes) -> str:
    """The lines of a kernel log that mention one of `KEPT_MARKERS`."""
    keep = [line for line in data.split(b"\n") if any(m in line for m in KEPT_MARKERS)]
    return b"\n".join(keep).decode("utf-8", "replace")


class KernelLogText(NamedTuple):
    """The kernel log of the current boot, cut to `KEPT_MARKERS` lines, as read once."""

    source: str  # the command line read; "" when none could be
    text: str  # the kept lines, in log order
    readable: bool
    # "Now" on the host's clock, for the ages of stamped lines: wall-clock seconds when the
    # journal was read, the uptime when dmesg was (its stamps are monotonic). None when
    # there was nothing to date or the host could not say.
    now_epoch: float | None = None
    now_monotonic: float | None = None
    notes: tuple[str, ...] = ()


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[0][:120] if text else ""


def _why_unusable(answer: Answer) -> str:
    """ "" when a command answered with exit status 0; otherwise why not."""
    if not answer.ok:
        return answer.describe()
    result = answer.value
    if result.returncode != 0:
        said = _first_line(result.stderr) or _first_line(result.stdout)
        return f"`{answer.key}` exited with status {result.returncode}" + (
            f": {said}" if said else ""
        )
    return ""


def _journal_has_entries(stdout: bytes) -> bool:
    # "-- No entries --" and "-- Journal begins at ... --" are journalctl's own lines.
    return any(line.strip() and not line.startswith(b"-- ") for line in stdout.split(b"\n"))


def _cut_note(answer: Answer) -> list[str]:
    if len(answer.value.stdout) >= DEFAULT_MAX_BYTES:
        return [f"`{answer.key}` printed more than was kept: the latest events may be missing"]
    return []


@fact("kernel.log")
def kernel_log(ctx: FactContext) -> KernelLogText:
    """The kernel messages of the current boot: the journal's, else dmesg's.

    The journal keeps the whole boot; the dmesg ring buffer only its latest part. "Now"
    comes from the host's own clock (`date +%s`) or uptime (/proc/uptime), read through
    the Host like everything else, so a replayed bundle gives the same ages; it is only
    asked for when some line was kept.
    """
    notes: list[str] = []
    journal = ctx.host.run(list(JOURNAL_ARGV)).require(uncaptured_ok=True)
    if (
        journal.status == AnswerStatus.NOT_CAPTURED
    ):  # an nvidia-bug-report has dmesg, not the journal
        ctx.replaced(journal)
    why = _why_unusable(journal)
    if not why and not _journal_has_entries(journal.value.stdout):
        why = "the journal has no kernel messages for this boot"
        hint = _first_line(journal.value.stderr)
        why += f" ({hint})" if hint else ""
    if not why:
        text = kept_lines(journal.value.stdout)
        now_epoch = None
        if text:
            now_epoch, clock_note = _now_epoch(ctx)
            notes += clock_note
        notes += _cut_note(journal)
        source = command_key(JOURNAL_ARGV)
        return KernelLogText(source, text, True, now_epoch=now_epoch, notes=tuple(notes))

    notes.append(f"journal not used: {why}")
    dmesg = ctx.host.run(list(DMESG_ARGV)).require()
    why = _why_unusable(dmesg)
    if why:
        if dmesg.ok and b"not permitted" in dmesg.value.stderr.lower():
            why += " (kernel.dmesg_restrict=1: run as root or with CAP_SYSLOG)"
        notes.append(f"dmesg not read: {why}")
        return KernelLogText("", "", False, notes=tuple(notes))
    if not dmesg.value.stdout.strip():
        notes.append("dmesg printed nothing (the ring buffer may have been cleared)")
    text = kept_lines(dmesg.value.stdout)
    now_monotonic = None
    if text:
        now_monotonic, uptime_note = _now_monotonic(ctx)
        notes += uptime_note
    notes += _cut_note(dmesg)
    source = command_key(DMESG_ARGV)
    return KernelLogText(source, text, True, now_monotonic=now_monotonic, notes=tuple(notes))


def events_from_log(ctx: FactContext, parse, make):
    """`make(source, events, readable, notes)` of what `parse` finds in `kernel.log`."""
    log = ctx.get(kernel_log)
    if not log.readable:
        return make("", (), False, log.notes)
    events, parse_notes = parse(log.text, now_monotonic=log.now_monotonic, now_epoch=log.now_epoch)
    return make(log.source, tuple(events), True, log.notes + tuple(parse_notes))


def _now_epoch(ctx: FactContext) -> tuple[float | None, list[str]]:
    answer = ctx.host.run(list(DATE_ARGV)).require(uncaptured_ok=True)
    if answer.status == AnswerStatus.NOT_CAPTURED:  # the ages are unknown, the events are not
        ctx.replaced(answer)
    why = _why_unusable(answer)
    if not why:
        text = answer.text.strip()
        if re.fullmatch(r"\d+", text):
            return float(text), []
        why = f"`{answer.key}` printed {text[:40]!r}"
    return None, [f"the host's clock could not be read ({why}): event ages are unknown"]


def _now_monotonic(ctx: FactContext) -> tuple[float | None, list[str]]:
    answer = ctx.host.read("/proc/uptime", max_bytes=256).require(uncaptured_ok=True)
    if (
        answer.status == AnswerStatus.NOT_CAPTURED
    ):  # the ages are unknown, the events are still there
        ctx.replaced(answer)
    if answer.ok:
        first = answer.text.split()[:1]
        try:
            uptime = float(first[0])
        except (IndexError, ValueError):
            uptime = math.nan
        if math.isfinite(uptime) and uptime >= 0:
            return uptime, []
        why = f"/proc/uptime reads {answer.text.strip()[:40]!r}"
    else:
        why = answer.describe()
    return None, [f"the uptime could not be read ({why}): event ages are unknown"]
