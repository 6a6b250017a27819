"""Fault injection through the Host: a wrapper that answers chosen operations with a
fault (timed out, permission denied, missing, I/O error, garbage, huge) and passes every
other one to the host it wraps. Used by test_fault_injection.py."""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dldoctor.host.base import (
    MAX_READ_BYTES,
    Answer,
    AnswerStatus,
    CommandResult,
    Host,
    Op,
    command_key,
)

FAULTS = ("timeout", "permission_denied", "missing", "error", "garbage", "huge")
# A failure to look: the host was not seen, so no verdict may rest on it.
BLIND = ("timeout", "permission_denied", "error")

HUGE_BYTES = 1 << 20
# Text a parser must survive: unicode digits, a number past int()'s limit, NUL, a long
# line, deep nesting, numbers of the wrong sign and kind.
NASTY = (
    "²",
    "¹²³",
    "9" * 5000,
    "-1",
    "nan",
    "1e999",
    "\x00\x00",
    "[" * 2000,
    "{" * 2000,
    "<" * 500,
    "0x",
    "\ufffd",
    "=" * 300,
    ":::",
)

Selector = Callable[[str, str], bool]


def family(key: str) -> str:
    """The key with its numbers and PCI addresses folded: what one code path reads for
    every GPU, port or disk alike."""
    key = re.sub(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]", "<pci>", key)
    return re.sub(r"\d+", "<n>", key)


def garbage_text(key: str) -> bytes:
    rng = random.Random(key)
    parts = [rng.choice(NASTY) for _ in range(6)] + [rng.randbytes(64).decode("latin-1")]
    rng.shuffle(parts)
    lines = [" ".join(parts[i : i + 2]) for i in range(0, len(parts), 2)]
    return "\n".join(lines).encode("utf-8", "surrogateescape")


def huge_text() -> bytes:
    return b"9" * 5000 + b" " + b"A" * HUGE_BYTES + b"\n" + b"1 2 3 " * 20000


def garbage_value(key: str) -> Any:
    rng = random.Random(key)
    return rng.choice(
        [
            "garbage",
            ["x", 1, None],
            {"available": "yes", "gpus": "many", "error": 7},
            {k: rng.choice(NASTY) for k in ("version", "driver", "count", "value", "gpus")},
            12,
            None,
        ]
    )


class FaultyHost(Host):
    """Answers the operations `selected` picks with `fault`; every other from `inner`."""

    kind = "faulty"

    def __init__(
        self,
        inner: Host,
        fault: str,
        selected: Selector,
        mutate: Callable[[bytes], bytes] | None = None,
    ):
        """fault "mutated": the real answer's bytes (a read, a command's stdout) passed
        through `mutate`."""
        assert fault in (*FAULTS, "mutated"), fault
        self.inner = inner
        self.fault = fault
        self.selected = selected
        self.mutate = mutate
        self.hits = 0

    def describe(self) -> str:
        return f"{self.inner.describe()} with {self.fault} faults"

    def _answer(
        self, op: str, key: str, real: Callable[[], Answer], max_bytes: int = MAX_READ_BYTES
    ) -> Answer:
        if not self.selected(op, key):
            return real()
        self.hits += 1
        fault = self.fault
        if fault == "timeout":
            return Answer(op, key, AnswerStatus.TIMEOUT, timeout_s=5.0)
        if fault == "permission_denied":
            return Answer(op, key, AnswerStatus.PERMISSION_DENIED, error="Permission denied")
        if fault == "missing":
            return Answer(
                op, key, AnswerStatus.NOT_INSTALLED if op == Op.RUN else AnswerStatus.MISSING
            )
        if fault == "error":
            return Answer(op, key, AnswerStatus.ERROR, error="[Errno 5] Input/output error")
        if fault == "mutated":
            return self._mutated(real(), max_bytes)
        return Answer(op, key, AnswerStatus.OK, self._value(op, key, max_bytes))

    def _mutated(self, answer: Answer, max_bytes: int) -> Answer:
        assert self.mutate is not None
        value = answer.value
        if not answer.ok:
            return answer
        if isinstance(value, bytes):
            value = self.mutate(value)[:max_bytes]
        elif isinstance(value, CommandResult):
            value = CommandResult(value.returncode, self.mutate(value.stdout), value.stderr)
        return Answer(answer.op, answer.key, AnswerStatus.OK, value)

    def _value(self, op: str, key: str, max_bytes: int) -> Any:
        huge = self.fault == "huge"
        if op == Op.READ:  # a read is cut at max_bytes, as every Host does
            return (huge_text() if huge else garbage_text(key))[:max_bytes]
        if op == Op.RUN:
            out = huge_text() if huge else garbage_text(key)
            return CommandResult(0, out, out[:1000])
        if op == Op.LIST:
            if huge:
                return tuple(f"{i}" for i in range(5000))
            return tuple(sorted(set(NASTY[:7]) | {"a" * 300, "..", "x/y"}))
        if op == Op.LINK:
            return "../" * 2000 if huge else "²/../\x00/" + "x" * 300
        if op == Op.STATVFS:
            if huge:
                return {f: 10**5000 for f in ("f_bsize", "f_frsize", "f_blocks", "f_bfree",
                                              "f_bavail", "f_files", "f_ffree")}  # fmt: skip
            return {"f_bsize": -1, "f_blocks": "x", "f_bavail": None}
        if op == Op.PROBE:
            if huge:
                return {"value": "A" * HUGE_BYTES, "gpus": [{"name": "9" * 5000}] * 64}
            return garbage_value(key)
        raise AssertionError(op)

    def read(self, path: str, *, max_bytes: int = MAX_READ_BYTES) -> Answer:
        return self._answer(
            Op.READ, path, lambda: self.inner.read(path, max_bytes=max_bytes), max_bytes
        )

    def listdir(self, path: str) -> Answer:
        return self._answer(Op.LIST, path, lambda: self.inner.listdir(path))

    def readlink(self, path: str) -> Answer:
        return self._answer(Op.LINK, path, lambda: self.inner.readlink(path))

    def run(self, argv: Sequence[str], **kw) -> Answer:
        return self._answer(Op.RUN, command_key(argv), lambda: self.inner.run(argv, **kw))

    def statvfs(self, path: str) -> Answer:
        return self._answer(Op.STATVFS, path, lambda: self.inner.statvfs(path))

    def probe(self, name: str) -> Answer:
        return self._answer(Op.PROBE, name, lambda: self.inner.probe(name))


def recorder(inner: Host) -> tuple[FaultyHost, set[tuple[str, str]]]:
    """A host that passes everything to `inner`, and the set of (op, key) it was asked."""
    asked: set[tuple[str, str]] = set()

    def note(op: str, key: str) -> bool:
        asked.add((op, key))
        return False

    return FaultyHost(inner, "missing", note), asked


# Every tool misbehaving at once, each in one of three ways (tests/test_bounds.py).
MISBEHAVIOURS = {
    "endless": "exec yes",
    "garbage": "exec cat /dev/urandom",
    "hung": "exec sleep 600",
}


def misbehaving_tools(folder: Path, tools: Sequence[str]) -> Path:
    """A PATH folder where `tools` print without end, print binary garbage without end, or
    hang, in turn."""
    from tests.support.commands import fake_command

    folder.mkdir(exist_ok=True)
    scripts = list(MISBEHAVIOURS.values())
    for i, tool in enumerate(tools):
        fake_command(folder, tool, scripts[i % len(scripts)])
    return folder


SPARSE_BYTES = 1 << 30


def misbehaving_bundle(source: Path, dest: Path) -> Path:
    """A copy of the bundle `source` whose commands answered endlessly (a 1 GiB sparse
    stdout), with binary garbage (20 MiB) or not at all (timed out), in turn; its
    `osrelease` is a 1 GiB sparse file too."""
    shutil.copytree(source, dest, symlinks=True)
    garbage = random.Random(0).randbytes(20 << 20)
    for i, folder in enumerate(sorted((dest / "commands").iterdir())):
        kind = list(MISBEHAVIOURS)[i % len(MISBEHAVIOURS)]
        if kind == "endless":
            with open(folder / "stdout", "wb") as f:
                f.truncate(SPARSE_BYTES)
        elif kind == "garbage":
            (folder / "stdout").write_bytes(garbage)
        else:
            meta = json.loads((folder / "command.json").read_text())
            meta.update(status="timeout", timeout_s=10.0)
            (folder / "command.json").write_text(json.dumps(meta))
    with open(dest / "files" / "proc" / "sys" / "kernel" / "osrelease", "wb") as f:
        f.truncate(SPARSE_BYTES)
    return dest
