"""A fix as a transaction: a Plan of typed steps, each describing itself and knowing its
undo, applied through a Target (a root directory and a command runner) with a journal and
backups written before the first change.

Preview changes nothing. Apply takes the journal folder's lock (a second apply refuses),
records every file a step will touch, byte for byte with its mode and owner, then runs
the steps; a step that fails rolls the earlier ones back in reverse order, and the journal
says so. Undo restores those files and runs the recorded undo commands.
"""

from __future__ import annotations

import base64
import datetime as _dt
import difflib
import errno
import fcntl
import json
import os
import re
import subprocess
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dldoctor.atomicfile import write_atomically as _write_atomically

JOURNALS = "/var/lib/dldoctor/journal"


class FixError(Exception):
    """A fix that cannot be applied or undone here: one line for the user."""


class StepFailed(FixError):
    pass


@dataclass(frozen=True)
class CommandOutcome:
    returncode: int
    output: str = ""


def run_for_real(argv: Sequence[str]) -> CommandOutcome:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return CommandOutcome(127, str(exc))
    return CommandOutcome(proc.returncode, (proc.stdout + proc.stderr).strip())


@dataclass
class Target:
    """Where a fix acts: files under `root` (/ on the machine, a temporary folder in
    tests) and commands through `runner` (recorded in tests)."""

    root: str = "/"
    runner: Callable[[Sequence[str]], CommandOutcome] = run_for_real

    def path(self, path: str) -> str:
        if not path.startswith("/") or ".." in path.split("/"):
            raise FixError(f"{path}: a fix names absolute paths without '..'")
        return os.path.join(self.root, path.lstrip("/"))

    def read(self, path: str) -> bytes | None:
        try:
            with open(self.path(path), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def run(self, argv: Sequence[str]) -> None:
        outcome = self.runner(list(argv))
        if outcome.returncode != 0:
            said = f": {outcome.output.splitlines()[-1]}" if outcome.output.strip() else ""
            raise StepFailed(f"`{' '.join(argv)}` exited with status {outcome.returncode}{said}")


@dataclass(frozen=True)
class WriteFile:
    path: str
    content: bytes
    mode: int = 0o644

    def touches(self) -> tuple[str, ...]:
        return (self.path,)

    def describe(self, target: Target) -> str:
        old = _diff_lines(target.read(self.path) or b"")
        new = _diff_lines(self.content)
        diff = difflib.unified_diff(old, new, f"a{self.path}", f"b{self.path}")
        return f"write {self.path} (mode {self.mode:o})\n" + "".join(diff)

    def apply(self, target: Target) -> None:
        _write_atomically(target.path(self.path), self.content, self.mode)

    def undo(self, target: Target) -> None:
        """Files are restored from the journal's backups; nothing else to do."""


def _diff_lines(content: bytes) -> list[str]:
    """The lines of a file for a diff, each ending in a newline: a last line without one
    is marked as diff marks it (else the diff glues it to the next line it prints). Split
    at newlines only (str.splitlines also splits at form feeds and the like)."""
    *whole, last = content.decode("utf-8", "replace").split("\n")
    lines = [f"{line}\n" for line in whole]
    if last:
        lines.append(f"{last}\n\\ No newline at end of file\n")
    return lines


@dataclass(frozen=True)
class RemoveFile:
    path: str

    def touches(self) -> tuple[str, ...]:
        return (self.path,)

    def describe(self, target: Target) -> str:
        there = target.read(self.path) is not None
        return f"remove {self.path}" + ("" if there else " (not there: nothing to do)")

    def apply(self, target: Target) -> None:
        try:
            os.unlink(target.path(self.path))
        except FileNotFoundError:
            pass

    def undo(self, target: Target) -> None:
        """Restored from the journal's backups."""


@dataclass(frozen=True)
class RunCommand:
    argv: tuple[str, ...]
    undo_argv: tuple[str, ...] | None = None  # None: nothing to run back
    # Derived state (an initramfs, grub.cfg): run again once the files are restored, so
    # that undo rebuilds it from the files as they were.
    regenerate: bool = False

    def touches(self) -> tuple[str, ...]:
        return ()

    def describe(self, target: Target) -> str:
        back = f"  (undo: {' '.join(self.undo_argv)})" if self.undo_argv else ""
        back += "  (run again on undo, after the files)" if self.regenerate else ""
        return f"run {' '.join(self.argv)}{back}"

    def apply(self, target: Target) -> None:
        target.run(self.argv)

    def undo(self, target: Target) -> None:
        if self.undo_argv:
            target.run(self.undo_argv)


@dataclass(frozen=True)
class WriteAttribute:
    """A kernel attribute set now: a /proc/sys or /sys file written in place (they take
    no temporary file and rename), its old value kept in the journal and written back."""

    path: str
    value: str

    def touches(self) -> tuple[str, ...]:
        return ()

    def describe(self, target: Target) -> str:
        old = target.read(self.path)
        was = old.decode("ascii", "replace").strip() if old is not None else "absent"
        return f"set {self.path} = {self.value} (now {was})"

    def remember(self, target: Target) -> dict:
        old = target.read(self.path)
        if old is None:
            raise FixError(f"{self.path} does not exist here")
        return {"path": self.path, "value": old.decode("ascii", "replace").strip()}

    def apply(self, target: Target) -> None:
        _write_in_place(target.path(self.path), self.value)

    def undo(self, target: Target) -> None:
        """Written back from the journal's record of the old value."""


def _write_in_place(path: str, value: str) -> None:
    # No O_CREAT: an attribute that is not there is not created as a plain file.
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, (value + "\n").encode())
    finally:
        os.close(fd)


Step = WriteFile | RemoveFile | RunCommand | WriteAttribute


@dataclass(frozen=True)
class Plan:
    fix_id: str
    title: str
    steps: tuple[Step, ...]
    resolves: tuple[str, ...] = ()  # the check ids it claims to fix, re-run after apply
    reboot: bool = False  # the change takes effect at the next boot
    notes: tuple[str, ...] = field(default=())
    disturbs_gpus: bool = False  # unloads a module or resets a GPU: not while GPU work runs
    # --force may override the GPU interlock: the change interrupts running work but loses
    # nothing that a restart of the job does not bring back (an MTU change), unlike a reset.
    force_ok: bool = False

    def preview(self, target: Target) -> str:
        lines = [f"{self.fix_id}: {self.title}"]
        for first, last, text in _numbered(self.steps, target):
            at = f"{first}" if first == last else f"{first}-{last}"
            lines.append(f"  {at}. {text}".rstrip())
        if not self.steps:
            lines.append("  nothing dldoctor can change here; what to do instead:")
        if self.reboot:
            lines.append("  a reboot is needed for it to take effect")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _numbered(steps, target: Target):
    """(first, last, description) per step, a run of more than 3 attributes set to one
    value in sibling files (each CPU's governor) said once."""
    runs: list[list] = []
    for i, step in enumerate(steps, 1):
        shape = (
            (re.sub(r"\d+", "N", step.path), step.value)
            if isinstance(step, WriteAttribute)
            else None
        )
        if shape and runs and runs[-1][0] == shape:
            runs[-1][2].append(step)
        else:
            runs.append([shape, i, [step]])
    for shape, first, group in runs:
        if len(group) <= 3:
            yield from ((first + k, first + k, s.describe(target)) for k, s in enumerate(group))
            continue
        was = Counter(
            (target.read(s.path) or b"absent").decode("ascii", "replace").strip() for s in group
        )
        now = ", ".join(f"{v} on {n}" for v, n in sorted(was.items()))
        text = f"set {shape[0]} = {shape[1]} in {len(group)} files (now {now})"
        yield first, first + len(group) - 1, text


# --- the journal -----------------------------------------------------------------------


def _backup(target: Target, path: str) -> dict:
    real = target.path(path)
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        return {"path": path, "existed": False}
    with open(real, "rb") as f:
        data = f.read()
    return {
        "path": path,
        "existed": True,
        "mode": st.st_mode & 0o7777,
        "uid": st.st_uid,
        "gid": st.st_gid,
        "content_b64": base64.b64encode(data).decode(),
    }


def _restore(target: Target, saved: dict) -> None:
    real = target.path(saved["path"])
    if not saved["existed"]:
        try:
            os.unlink(real)
        except FileNotFoundError:
            pass
        return
    _write_atomically(real, base64.b64decode(saved["content_b64"]), saved["mode"])
    try:
        os.chown(real, saved["uid"], saved["gid"])
    except PermissionError:  # not root: the owner was ours anyway
        pass


class Journal:
    """One folder per application under the Target's /var/lib/dldoctor/journal: the plan,
    the backups and the state, written before the first change and kept after it."""

    def __init__(self, target: Target):
        self.target = target
        self.folder = target.path(JOURNALS)

    def _file(self, journal_id: str) -> str:
        return os.path.join(self.folder, journal_id, "journal.json")

    def save(self, record: dict) -> None:
        path = self._file(record["id"])
        _write_atomically(path, json.dumps(record, indent=1).encode(), 0o600)

    def load(self, journal_id: str) -> dict:
        if "/" in journal_id or journal_id.startswith("."):
            raise FixError(f"{journal_id}: not a journal id")
        try:
            with open(self._file(journal_id), encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            raise FixError(f"no journal {journal_id} (see dldoctor fix --history)") from None

    def history(self) -> list[dict]:
        try:
            names = sorted(os.listdir(self.folder))
        except FileNotFoundError:
            return []
        return [self.load(n) for n in names if os.path.isfile(self._file(n))]

    def lock(self):
        """An exclusive lock on the journal folder; FixError when another apply holds it."""
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(self.folder, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise FixError(
                    "another dldoctor fix is being applied: try again after it"
                ) from None
            raise
        return fd


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def apply(plan: Plan, target: Target, *, force: bool = False, on_step=None) -> dict:
    """Apply `plan`; the journal record (state "applied", or "rolled back" with the reason,
    after which the machine is as it was). `force` overrides the GPU interlock of a plan
    that allows it; `on_step(number, step)` is told of each step as it starts."""
    if not plan.steps:
        raise FixError(f"{plan.fix_id}: nothing to apply here; the preview says what to do")
    if force and not plan.force_ok:
        raise FixError(f"{plan.fix_id}: --force is not offered for this fix")
    if plan.disturbs_gpus and not force:
        from dldoctor.fixes.interlocks import gpu_holders

        holders = gpu_holders(target.root)
        if holders:
            more = f" and {len(holders) - 1} more" if len(holders) > 1 else ""
            also = " (or --force: running jobs may fail)" if plan.force_ok else ""
            raise FixError(
                f"{plan.fix_id} would disturb GPU work: {holders[0]}{more}; stop it first{also}"
            )
    journal = Journal(target)
    fd = journal.lock()
    try:
        touched = list(dict.fromkeys(p for s in plan.steps for p in s.touches()))
        commands = [s for s in plan.steps if isinstance(s, RunCommand)]
        record = {
            "id": f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}",
            "fix": plan.fix_id,
            "title": plan.title,
            "started": _now(),
            "state": "applying",
            "reboot": plan.reboot,
            "resolves": list(plan.resolves),
            "steps": [s.describe(target).splitlines()[0] for s in plan.steps],
            "undo_commands": [list(s.undo_argv) for s in commands if s.undo_argv],
            "regenerate": [list(s.argv) for s in commands if s.regenerate],
            "backups": [_backup(target, p) for p in touched],
            "attributes": [s.remember(target) for s in plan.steps if isinstance(s, WriteAttribute)],
            "done": 0,
        }
        journal.save(record)  # before the first change: a crash leaves what undoes it
        try:
            for i, step in enumerate(plan.steps):
                if on_step is not None:
                    on_step(i + 1, step)
                step.apply(target)
                record["done"] = i + 1
                journal.save(record)
        except Exception as exc:
            why = str(exc) if isinstance(exc, FixError) else f"{type(exc).__name__}: {exc}"
            _roll_back(plan.steps[: record["done"]], record, target)
            record["state"] = f"rolled back: step {record['done'] + 1} failed: {why}"
            journal.save(record)
            raise StepFailed(f"{plan.fix_id}: {record['state']}") from None
        record["state"] = "applied"
        record["ended"] = _now()
        record["boot_id"] = (
            (target.read("/proc/sys/kernel/random/boot_id") or b"")
            .decode("ascii", "replace")
            .strip()
        )
        journal.save(record)
        return record
    finally:
        os.close(fd)


def _roll_back(steps: Sequence[Step], record: dict, target: Target) -> None:
    for step in reversed(steps):
        step.undo(target)
    done = {s.path for s in steps if isinstance(s, WriteAttribute)}
    _restore_attributes(target, [a for a in record["attributes"] if a["path"] in done])
    for saved in record["backups"]:
        _restore(target, saved)
    for step in steps:
        if isinstance(step, RunCommand) and step.regenerate:
            target.run(step.argv)


def _restore_attributes(target: Target, saved: list[dict]) -> None:
    for attribute in reversed(saved):
        _write_in_place(target.path(attribute["path"]), attribute["value"])


def undo(journal_id: str, target: Target) -> dict:
    """Undo an applied fix: its files restored byte for byte (mode and owner too), its
    undo commands run in reverse order."""
    journal = Journal(target)
    fd = journal.lock()
    try:
        record = journal.load(journal_id)
        if record["state"] != "applied":
            raise FixError(f"{journal_id} is {record['state']!r}: nothing to undo")
        from dldoctor.fixes.interlocks import refuse_unloading_a_used_module

        for argv in record["undo_commands"]:  # all judged before the first one runs
            refuse_unloading_a_used_module(argv, target)
        for argv in reversed(record["undo_commands"]):
            target.run(argv)
        _restore_attributes(target, record.get("attributes", []))
        for saved in record["backups"]:
            _restore(target, saved)
        for argv in record["regenerate"]:
            target.run(argv)
        record["state"] = "undone"
        record["undone"] = _now()
        journal.save(record)
        return record
    finally:
        os.close(fd)
