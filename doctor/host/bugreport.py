"""BugReportHost: answers from an `nvidia-bug-report.log(.gz)`, NVIDIA's support capture.

The log is a run of sections, each opened by a line of 44 underscores (docs/foreign-inputs.md
names the forms `nvidia-bug-report.sh` writes). A file section answers `read` of its path
("*** <path> does not exist" is `missing`, "is not readable" `permission_denied`); a command
section answers `run` of its command line. Everything else was never looked at: it answers
`not_captured`, and the checks that rest on it are skipped (doctor/runner.py), never judged.
The log is untrusted input, read whole into memory under a cap; a bad one is a BadLog (one
line, exit 4), never a traceback.
"""

from __future__ import annotations

import gzip
import os
import posixpath
import re
import stat
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from dldoctor import shellwords
from dldoctor.host.base import (
    MAX_READ_BYTES,
    Answer,
    AnswerStatus,
    CommandResult,
    Host,
    Op,
    command_key,
    not_measured,
    stdout_cap,
)

SEPARATOR = b"_" * 44
PROLOGUE = b"Start of NVIDIA bug report log file"
END = b"End of NVIDIA bug report log file"
GZIP_MAGIC = b"\x1f\x8b"
# Real logs run from 1 to a few tens of MiB (a long journal, base64 debug dumps); the cap
# bounds what a decompression bomb or a runaway capture can cost in memory.
MAX_LOG_BYTES = 256 * 1024 * 1024
_CHUNK = 1024 * 1024
# The script's command lines are a path and a few flags; a longer line is no command of
# one (a 1 MiB one took shlex 20 s, past any deadline, before a check ran).
MAX_COMMAND_LINE = 4096
SNIFF_BYTES = 64 * 1024  # the prologue is in the first few hundred bytes


def why_not(op: Op, key: str) -> str:
    """The reason a check that needed (op, key) is skipped, as sos's reader words its own."""
    probe = "NVML" if key == "nvml" else f"the {key} probe"
    what = {Op.RUN: f"command `{key}`", Op.PROBE: probe}.get(op, key)
    return f"not in this nvidia-bug-report ({what}, not captured)"


# Bottlerocket's admin container prefixes the host's files with its root (HOST_ROOT).
_HOST_ROOTS = ("/.bottlerocket/rootfs/",)
# Command lines the script has printed in other spellings over the years.
ALIASES = {
    ("nvidia-smi", "-q"): ("nvidia-smi", "--query"),
    ("nvidia-smi", "nvlink", "-s"): ("nvidia-smi", "nvlink", "--status"),
}


class BadLog(Exception):
    """The file is not a readable nvidia-bug-report log; the message is one line."""


@dataclass(frozen=True)
class Section:
    """One section: `kind` "file" (a file's bytes), "missing" ("does not exist"),
    "unreadable" ("is not readable") or "command" (what a command printed)."""

    kind: str
    name: str  # the file's path, normalised; or the command line as the log prints it
    body: bytes
    line: int  # where its header is (1-based)


@dataclass(frozen=True)
class BugReport:
    sections: tuple[Section, ...]
    version: str = ""  # nvidia-bug-report.sh's change number
    date: str = ""  # `date` when the script started, as it printed it
    uname: str = ""  # `uname -a`
    complete: bool = False  # the epilogue is there (a script that hung leaves none)
    notes: tuple[str, ...] = ()

    @property
    def hostname(self) -> str:
        words = self.uname.split()
        return words[1] if len(words) >= 3 else ""

    @property
    def kernel_release(self) -> str:
        words = self.uname.split()
        return words[2] if len(words) >= 3 else ""


# --- reading --------------------------------------------------------------------------


def read_log(path: str, *, cap: int = MAX_LOG_BYTES) -> bytes:
    """The log's bytes, gunzipped when gzip-compressed (the script appends one gzip member
    per section: all are read). BadLog when it cannot be read, is cut short, or inflates
    past `cap`."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise BadLog(f"{path}: not a regular file")
        with open(path, "rb") as f:
            if f.read(2) != GZIP_MAGIC:
                f.seek(0)
                data = f.read(cap + 1)
                if len(data) > cap:
                    raise BadLog(f"{path}: larger than {cap >> 20} MiB (the cap on a log)")
                return data
            f.seek(0)
            return _gunzip(f, path, cap)
    except OSError as exc:
        raise BadLog(f"cannot read {path}: {exc.strerror or exc}") from None


def _gunzip(f, path: str, cap: int) -> bytes:
    # Inflated twice: once counting, once keeping. A bomb is refused when its count passes
    # the cap, without holding a byte of it (kept, it cost 280 MiB before the refusal); a
    # real log (a few MiB) costs a second inflation.
    _inflate(f, path, cap, keep=False)
    f.seek(0)
    return _inflate(f, path, cap, keep=True)


def _inflate(f, path: str, cap: int, *, keep: bool) -> bytes:
    parts, total = [], 0
    try:
        with gzip.GzipFile(fileobj=f, mode="rb") as z:
            while chunk := z.read(min(_CHUNK, cap + 1 - total)):
                if keep:
                    parts.append(chunk)
                total += len(chunk)
                if total > cap:
                    raise BadLog(f"{path}: inflates past {cap >> 20} MiB (the cap on a log)")
    except EOFError:
        raise BadLog(f"{path}: the gzip stream is cut short (truncated download?)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise BadLog(f"{path}: not a valid gzip stream ({exc})") from None
    return b"".join(parts)


def sniff(path: str) -> bytes:
    """The first SNIFF_BYTES of the log, gunzipped if need be; b"" when unreadable."""
    try:
        with open(path, "rb") as f:
            if f.read(2) != GZIP_MAGIC:
                f.seek(0)
                return f.read(SNIFF_BYTES)
            f.seek(0)
            with gzip.GzipFile(fileobj=f, mode="rb") as z:
                return z.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return b""


def recognise(path: str) -> bool:
    """Whether `--from path` means an nvidia-bug-report log: a regular file that begins
    with the script's prologue, or is named like its output (`*.log`, `*.log.gz`), so that a
    damaged one gets a bug-report error rather than a bundle one."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
    except OSError:
        return False
    return PROLOGUE in sniff(path) or path.endswith((".log", ".log.gz"))


# --- parsing --------------------------------------------------------------------------


def parse_bug_report(data: bytes) -> BugReport:
    """The sections of a log; never raises (a log with no section at all is the caller's
    to refuse)."""
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last line
    starts = [i for i, line in enumerate(lines) if line.rstrip(b"\r") == SEPARATOR]
    sections: list[Section] = []
    notes: list[str] = []
    meta: dict[bytes, str] = {}
    for start, end in zip(starts, [*starts[1:], len(lines)][: len(starts)], strict=True):
        block = lines[start + 1 : end]
        first = next((i for i, line in enumerate(block) if line.strip()), None)
        if first is None:
            continue
        header = block[first].rstrip(b"\r")
        if header.startswith(PROLOGUE):
            meta = _prologue(block)
            continue
        sections.extend(_sections(header, block[first + 1 :], start + 2 + first))
    names = [s.name for s in sections]
    if len(set(names)) != len(names):
        notes.append("some sections appear twice: the first of each is used")
    if PROLOGUE not in data[:SNIFF_BYTES]:
        notes.append("no prologue: not written by nvidia-bug-report.sh, or cut at the start")
    complete = END in data[-4096:]
    if not complete:
        notes.append("no epilogue: the script did not finish (it hung, or the log is cut)")
    return BugReport(
        tuple(sections),
        version=meta.get(b"nvidia-bug-report.sh Version:", ""),
        date=meta.get(b"Date:", ""),
        uname=meta.get(b"uname:", ""),
        complete=complete,
        notes=tuple(notes),
    )


def _prologue(block: list[bytes]) -> dict[bytes, str]:
    found = {}
    for line in block:
        for key in (b"nvidia-bug-report.sh Version:", b"Date:", b"uname:"):
            if line.startswith(key) and key not in found:
                found[key] = line[len(key) :].decode("utf-8", "replace").strip()
    return found


def _text(line: bytes) -> str:
    return line.decode("utf-8", "replace").strip()


def _path(raw: str) -> str:
    for root in _HOST_ROOTS:
        if raw.startswith(root):
            raw = "/" + raw[len(root) :]
    return posixpath.normpath(raw)  # "/proc/driver/nvidia/./version"


def _sections(header: bytes, rest: list[bytes], line: int) -> list[Section]:
    text = _text(header)
    if text.startswith("*** ") and not text.startswith("*** ls:"):
        name = text[4:]
        for suffix, kind in ((" does not exist", "missing"), (" is not readable", "unreadable")):
            if name.endswith(suffix):
                return [Section(kind, _path(name[: -len(suffix)]), b"", line)]
        if rest and rest[0].startswith(b"*** ls:"):
            rest = rest[1:]
        # Each line was followed by a newline; report_file() ends a file with `echo ""`,
        # one newline more than the file has.
        return [Section("file", _path(name), b"\n".join(rest), line)]
    return _commands(header, rest, line)


_PROGRAM = re.compile(r"/[\w.+/-]{1,255}")


def _is_command_line(line: bytes) -> bool:
    """report_command() prints the command's absolute path and its arguments."""
    word = line.rstrip(b"\r").split(b" ", 1)[0].decode("latin-1")
    return _PROGRAM.fullmatch(word) is not None


def _commands(header: bytes, rest: list[bytes], line: int) -> list[Section]:
    """One block can hold several commands: report_command() prints each as its command
    line, a blank line, the output and a blank line, with no separator between them."""
    found: list[tuple[bytes, int, list[bytes]]] = [(header, line, [])]
    for i, current in enumerate(rest):
        before = rest[i - 1] if i else b""
        after = rest[i + 1] if i + 1 < len(rest) else b""
        if _is_command_line(current) and not before.strip() and not after.strip():
            found.append((current, line + 1 + i, []))
        else:
            found[-1][2].append(current)
    sections = []
    for head, at, body in found:
        while body and not body[0].strip():  # the blank line after the command line
            body = body[1:]
        sections.append(Section("command", _text(head).removesuffix(":"), b"\n".join(body), at))
    return sections


def command_words(name: str) -> tuple[str, ...]:
    """A command section's line as the argv a fact would ask: the program's base name and
    its arguments, shell quoting undone (`/usr/bin/lspci -d "10de:*" -v -xxx`)."""
    if len(name) > MAX_COMMAND_LINE:
        return ()  # no fact asks a command that long
    try:
        words = shellwords.split(name)
    except ValueError:
        return ()
    if not words:
        return ()
    return (posixpath.basename(words[0]), *words[1:])


# --- the host -------------------------------------------------------------------------


class BugReportHost(Host):
    kind = "nvidia-bug-report"
    absent = AnswerStatus.NOT_CAPTURED

    def __init__(self, report: BugReport, path: str = ""):
        self.report = report
        self.path = path
        self.files: dict[str, Section] = {}
        self.commands: dict[tuple[str, ...], Section] = {}
        for section in report.sections:
            if section.kind == "command":
                words = command_words(section.name)
                if words:
                    self.commands.setdefault(words, section)
            else:
                self.files.setdefault(section.name, section)
        # The kernel's UTS name, as `uname -a` printed it in the prologue.
        self.derived = {"/proc/sys/kernel/hostname": report.hostname,
                        "/proc/sys/kernel/osrelease": report.kernel_release}  # fmt: skip

    def describe(self) -> str:
        what = f"nvidia-bug-report of {self.report.hostname or 'an unnamed host'}"
        return what + (f", collected {self.report.date}" if self.report.date else "")

    @staticmethod
    def _absent(op: Op, key: str) -> Answer:
        return Answer(op, key, AnswerStatus.NOT_CAPTURED, error=why_not(op, key))

    def read(self, path: str, *, max_bytes: int = MAX_READ_BYTES) -> Answer:
        section = self.files.get(posixpath.normpath(path) if path.startswith("/") else path)
        if section is None:
            derived = self.derived.get(path)
            if derived:
                return Answer(Op.READ, path, AnswerStatus.OK, (derived + "\n").encode())
            return self._absent(Op.READ, path)
        if section.kind == "missing":
            return Answer(
                Op.READ, path, AnswerStatus.MISSING, error="the log says it does not exist"
            )
        if section.kind == "unreadable":
            return Answer(
                Op.READ,
                path,
                AnswerStatus.PERMISSION_DENIED,
                error="the log says it is not readable",
            )
        return Answer(Op.READ, path, AnswerStatus.OK, section.body[:max_bytes])

    def measure(
        self, argv: Sequence[str], *, timeout: float, scratch_in: str | None = None
    ) -> Answer:
        return not_measured(command_key(argv), "an nvidia-bug-report log")

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Answer:
        key = command_key(argv)
        if tuple(argv) == ("uname", "-a") and self.report.uname:
            return Answer(
                Op.RUN,
                key,
                AnswerStatus.OK,
                CommandResult(0, (self.report.uname + "\n").encode(), b""),
            )
        words = (posixpath.basename(argv[0]), *argv[1:]) if argv else ()
        for candidate in (words, ALIASES.get(words)):
            section = self.commands.get(candidate) if candidate else None
            if section is not None:
                if len(section.body) > stdout_cap(argv):  # as a live run of it: no answer
                    why = f"its section is larger than {stdout_cap(argv)} bytes, the most kept"
                    return Answer(Op.RUN, key, AnswerStatus.ERROR, error=why)
                # The script merges stderr into stdout and keeps no exit status.
                return Answer(Op.RUN, key, AnswerStatus.OK, CommandResult(0, section.body, b""))
        return self._absent(Op.RUN, key)

    def listdir(self, path: str) -> Answer:
        return self._absent(Op.LIST, path)

    def readlink(self, path: str) -> Answer:
        return self._absent(Op.LINK, path)

    def statvfs(self, path: str) -> Answer:
        return self._absent(Op.STATVFS, path)

    def probe(self, name: str) -> Answer:
        return self._absent(Op.PROBE, name)


def open_bug_report(path: str) -> BugReportHost:
    """The host of the log at `path`; BadLog when it is not a readable one."""
    report = parse_bug_report(read_log(path))
    if not report.sections:
        raise BadLog(
            f"{path}: not an nvidia-bug-report log (no section headed by a line of underscores)"
        )
    return BugReportHost(report, path)
