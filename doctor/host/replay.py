"""ReplayHost: answers only from a bundle directory; what the bundle lacks is "missing"."""

from __future__ import annotations

import base64
import binascii
import os
import stat
from collections.abc import Sequence
from typing import Any

from dldoctor.host.base import (
    MAX_READ_BYTES,
    MAX_STDERR_BYTES,
    OUTPUT_BUDGET_BYTES,
    Answer,
    AnswerStatus,
    CommandResult,
    Host,
    Op,
    OutputBudget,
    capped_listing,
    command_key,
    file_name_text,
    stdout_cap,
)
from dldoctor.snapshots.bundle import (
    BundleReader,
    command_folders,
    probe_relpath,
    status_of,
)


def _from_meta(op: Op, key: str, meta: dict[str, Any], value: Any = None) -> Answer:
    timeout = meta.get("timeout_s")
    return Answer(
        op,
        key,
        status_of(meta),
        value,
        error=str(meta.get("error", "")),
        duration_s=float(meta.get("duration_s", 0.0) or 0.0),
        timeout_s=float(timeout) if isinstance(timeout, (int, float)) else None,
    )


class ReplayHost(Host):
    kind = "replay"

    def __init__(self, bundle: str | BundleReader, *, label: str = ""):
        self.bundle = bundle if isinstance(bundle, BundleReader) else BundleReader(bundle)
        # what the user gave: an archive's extracted folder is gone once the run ends
        self.label = label or self.bundle.path
        # A bundle converted from an nvidia-bug-report: what it lacks was never looked at.
        converted = self.bundle.manifest.get("absent") == AnswerStatus.NOT_CAPTURED
        self.absent = AnswerStatus.NOT_CAPTURED if converted else AnswerStatus.MISSING
        self.holds_measurements = self.bundle.manifest.get("active") is True
        self.output_budget = OutputBudget(OUTPUT_BUDGET_BYTES)  # as a live host's

    def _lacks(self, op: Op, key: str, error: str = "") -> Answer:
        if self.absent == AnswerStatus.NOT_CAPTURED:
            error = "not in the capture this bundle was converted from"
        return Answer(op, key, self.absent, error=error)

    def describe(self) -> str:
        return f"replay of {self.label}"

    def _guard(self, op: Op, key: str, fn) -> Answer:
        # Odd bundle content (a loop of links, a folder where a file belongs) is an answer,
        # never an exception that escapes into a check.
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - a Host never raises
            return Answer(
                op, key, AnswerStatus.ERROR, error=f"bad bundle entry: {type(exc).__name__}: {exc}"
            )

    def read(self, path: str, *, max_bytes: int = MAX_READ_BYTES) -> Answer:
        def read() -> Answer:
            meta = self.bundle.entry(Op.READ, path)
            if meta is not None:
                value = None
                if status_of(meta) == AnswerStatus.OK:
                    try:
                        value = base64.b64decode(meta.get("content_b64", ""), validate=True)
                    except (binascii.Error, TypeError) as exc:
                        raise ValueError(f"content_b64 of {path}: {exc}") from None
                    value = value[:max_bytes]
                return _from_meta(Op.READ, path, meta, value)
            # A stat, then one open and one fstat: a FIFO or a device planted in a bundle is
            # never opened (opening a device runs its driver), and a file swapped in since
            # is not read. The last part is looked at without following it; only a link
            # there takes the full resolution inside the bundle. Non-blocking, so a FIFO
            # swapped in cannot hang the open.
            flags = os.O_RDONLY | os.O_NONBLOCK
            try:
                real = self.bundle.files_path(path, follow_last=False)
                mode = os.lstat(real).st_mode
                if stat.S_ISLNK(mode):
                    real = self.bundle.files_path(path)
                    mode = os.stat(real).st_mode
                if not stat.S_ISREG(mode):
                    why = "is a directory" if stat.S_ISDIR(mode) else "not a regular file"
                    return Answer(Op.READ, path, AnswerStatus.ERROR, error=why)
                fd = os.open(real, flags | os.O_NOFOLLOW)
            except (FileNotFoundError, NotADirectoryError):
                return self._lacks(Op.READ, path)
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
                os.close(fd)
                return Answer(Op.READ, path, AnswerStatus.ERROR, error="not a regular file")
            with open(fd, "rb") as f:
                return Answer(Op.READ, path, AnswerStatus.OK, f.read(max_bytes))

        return self._guard(Op.READ, path, read)

    def listdir(self, path: str) -> Answer:
        def listdir() -> Answer:
            meta = self.bundle.entry(Op.LIST, path)
            if meta is not None:
                entries = meta.get("entries", []) if status_of(meta) == AnswerStatus.OK else None
                if entries is not None:
                    entries = tuple(sorted(str(e) for e in entries))
                return _from_meta(Op.LIST, path, meta, entries)
            real = self.bundle.files_path(path)
            if not os.path.isdir(real):
                return self._lacks(Op.LIST, path)
            return Answer(
                Op.LIST, path, AnswerStatus.OK, tuple(sorted(map(file_name_text, os.listdir(real))))
            )

        return capped_listing(self._guard(Op.LIST, path, listdir))

    def readlink(self, path: str) -> Answer:
        def readlink() -> Answer:
            meta = self.bundle.entry(Op.LINK, path)
            if meta is not None:
                return _from_meta(Op.LINK, path, meta, meta.get("target"))
            real = self.bundle.files_path(path, follow_last=False)
            if os.path.islink(real):
                return Answer(Op.LINK, path, AnswerStatus.OK, file_name_text(os.readlink(real)))
            if os.path.exists(real):
                return Answer(Op.LINK, path, AnswerStatus.ERROR, error="not a symbolic link")
            return self._lacks(Op.LINK, path)

        return self._guard(Op.LINK, path, readlink)

    def statvfs(self, path: str) -> Answer:
        def statvfs() -> Answer:
            meta = self.bundle.entry(Op.STATVFS, path)
            if meta is None:
                return self._lacks(Op.STATVFS, path)
            value = meta.get("value")
            if status_of(meta) == AnswerStatus.OK and not isinstance(value, dict):
                raise ValueError(f"statvfs of {path} has no value")
            return _from_meta(Op.STATVFS, path, meta, value)

        return self._guard(Op.STATVFS, path, statvfs)

    def probe(self, name: str) -> Answer:
        def probe() -> Answer:
            meta = self.bundle.json(probe_relpath(name))
            if meta is None:
                return self._lacks(Op.PROBE, name)
            if not isinstance(meta, dict):
                raise ValueError(f"{probe_relpath(name)} is not a JSON object")
            return _from_meta(Op.PROBE, name, meta, meta.get("value"))

        return self._guard(Op.PROBE, name, probe)

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Answer:
        key = command_key(argv)

        def run() -> Answer:
            for name in dict.fromkeys(command_folders(argv)):
                folder = f"commands/{name}"
                if not os.path.isdir(self.bundle.inside(folder)):
                    continue
                meta = self.bundle.json(f"{folder}/command.json") or {}
                if not isinstance(meta, dict):
                    raise ValueError(f"{folder}/command.json is not a JSON object")
                if "argv" in meta and list(meta["argv"]) != list(argv):
                    continue  # another command line that mangles to the same name
                value = None
                if status_of(meta) == AnswerStatus.OK:
                    sizes = 0
                    caps = {"stdout": stdout_cap(argv), "stderr": MAX_STDERR_BYTES}
                    for name, cap in caps.items():
                        # As a live run of the same command: over the cap, no answer. Told
                        # by its size, not read: commands are replayed many at once.
                        size = self.bundle.size(f"{folder}/{name}")
                        if size > cap:
                            why = f"{folder}/{name} is larger than {cap} bytes, the most kept"
                            return Answer(Op.RUN, key, AnswerStatus.ERROR, error=why)
                        sizes += size
                    granted = self.output_budget.take(sizes)
                    if granted < sizes:
                        self.output_budget.give(granted)  # not read: nothing held
                        why = (
                            f"{folder}: the commands of this bundle hold more than "
                            f"{self.output_budget.total} bytes between them, the most kept"
                        )
                        return Answer(Op.RUN, key, AnswerStatus.ERROR, error=why)
                    value = CommandResult(
                        int(meta.get("returncode", 0)),
                        self.bundle.read_bytes(f"{folder}/stdout", caps["stdout"]) or b"",
                        self.bundle.read_bytes(f"{folder}/stderr", MAX_STDERR_BYTES) or b"",
                    )
                return _from_meta(Op.RUN, key, meta, value)
            return self._lacks(Op.RUN, key, error="not in the bundle")

        return self._guard(Op.RUN, key, run)

    def measure(
        self, argv: Sequence[str], *, timeout: float, scratch_in: str | None = None
    ) -> Answer:
        """The measurement as recorded, under its argv as written. One the bundle lacks was
        never made (a bundle taken without --active, or by a dldoctor without that check):
        not captured, so its check is skipped with the reason, never judged as absent."""
        answer = self.run(argv, timeout=timeout)
        if answer.status not in (AnswerStatus.MISSING, AnswerStatus.NOT_CAPTURED):
            return answer
        if self.holds_measurements:
            why = "not measured when the bundle was taken"
        else:
            why = "the bundle was taken without --active: it holds no measurements"
        return Answer(Op.RUN, answer.key, AnswerStatus.NOT_CAPTURED, error=why)
