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
import contextlib
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


class JournalError(FixError):
    """A journal that cannot be read, or is not what dldoctor writes: exit 4, never a
    traceback."""


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


def _missing_folders(target: Target, path: str) -> list[str]:
    """The folders above `path` not there yet, outermost first: writing the file makes
    them, and putting it back removes them again."""
    missing: list[str] = []
    folder = os.path.dirname(path)
    while folder != "/" and not os.path.isdir(target.path(folder)):
        missing.insert(0, folder)
        folder = os.path.dirname(folder)
    return missing


def _backup(target: Target, path: str) -> dict:
    real = target.path(path)
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        return {"path": path, "existed": False, "made_folders": _missing_folders(target, path)}
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
    """The file as `saved` says. Nothing is written where it already is so: a rollback in
    a folder that is read-only or full touches only what the apply changed there."""
    real = target.path(saved["path"])
    if not saved["existed"]:
        try:
            os.unlink(real)
        except FileNotFoundError:
            pass
        for folder in reversed(saved.get("made_folders", [])):
            with contextlib.suppress(OSError):  # not empty: something else lives there now
                os.rmdir(target.path(folder))
        return
    if _backup(target, saved["path"]) == saved:
        return
    _write_atomically(real, base64.b64decode(saved["content_b64"]), saved["mode"])
    try:
        os.chown(real, saved["uid"], saved["gid"])
    except PermissionError:  # not root: the owner was ours anyway
        pass


def _restore_attribute(target: Target, saved: dict) -> None:
    now = target.read(saved["path"])
    if now is None or now.decode("ascii", "replace").strip() != saved["value"]:
        _write_in_place(target.path(saved["path"]), saved["value"])


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(s, str) and "\0" not in s for s in value)


def _argvs(value) -> bool:
    return isinstance(value, list) and all(_strings(a) and a and a[0] for a in value)


def _count(value, top: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= top


def _paths(value) -> bool:
    """Absolute paths without '..', as Target.path takes them."""
    return _strings(value) and all(p.startswith("/") and ".." not in p.split("/") for p in value)


def _is_backup(b) -> bool:
    if not isinstance(b, dict) or not _paths([b.get("path")]):
        return False
    if b.get("existed") is False:
        return _paths(b.get("made_folders", []))
    if b.get("existed") is not True or not isinstance(b.get("content_b64"), str):
        return False
    try:
        base64.b64decode(b["content_b64"], validate=True)
    except ValueError:
        return False
    return _count(b.get("mode"), 0o7777) and _count(b.get("uid"), 2**32 - 1) and _count(
        b.get("gid"), 2**32 - 1
    )


def _is_command(c) -> bool:
    return (
        isinstance(c, dict)
        and _count(c.get("step"), 10**6)
        and _argvs([c.get("argv")])
        and (c.get("undo", "") is None or _argvs([c.get("undo")]))
        and isinstance(c.get("regenerate"), bool)
    )


# What load() demands of a journal, so that apply, undo and history read it without a
# traceback whatever the file holds (truncated, edited, another version's).
_FIELDS = {
    "id": lambda v: isinstance(v, str),
    "fix": lambda v: isinstance(v, str),
    "state": lambda v: isinstance(v, str),
    "reboot": lambda v: isinstance(v, bool),
    "resolves": _strings,
    "backups": lambda v: isinstance(v, list) and all(map(_is_backup, v)),
    "done": lambda v: _count(v, 10**6),
}
_OPTIONAL = {
    "attributes": lambda v: isinstance(v, list)
    and all(isinstance(a, dict) and _strings([a.get("path"), a.get("value")]) for a in v),
    "commands": lambda v: isinstance(v, list) and all(map(_is_command, v)),
    "undo_commands": _argvs,  # journals written before "commands"
    "regenerate": _argvs,
    "verdict": lambda v: isinstance(v, str),
    "boot_id": lambda v: isinstance(v, str),
}


def _checked(record, journal_id: str) -> dict:
    if not isinstance(record, dict):
        raise JournalError(f"journal {journal_id} is not a JSON object")
    for key, fits in (*_FIELDS.items(), *_OPTIONAL.items()):
        if (key in _FIELDS or key in record) and not fits(record.get(key)):
            said = "has no" if key not in record else "has an unreadable"
            raise JournalError(f"journal {journal_id} {said} {key!r}")
    if "commands" not in record and not {"undo_commands", "regenerate"} <= record.keys():
        raise JournalError(f"journal {journal_id} has no 'commands'")
    if record["id"] != journal_id:  # it is saved under its id: never another folder
        raise JournalError(f"journal {journal_id} names another id, {record['id']!r}")
    return record


def _commands(record: dict) -> list[dict]:
    """The commands a journal ran, with their step numbers; a journal from before the
    numbers knows only its undo and regenerate commands."""
    if "commands" in record:
        return record["commands"]
    return [
        *({"step": 0, "argv": [], "undo": u, "regenerate": False} for u in record["undo_commands"]),
        *({"step": 0, "argv": r, "undo": None, "regenerate": True} for r in record["regenerate"]),
    ]


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
        if "/" in journal_id or journal_id.startswith(".") or "\0" in journal_id:
            raise FixError(f"{journal_id}: not a journal id")
        try:
            with open(self._file(journal_id), encoding="utf-8") as f:
                record = json.load(f)
        except FileNotFoundError:
            raise FixError(f"no journal {journal_id} (see dldoctor fix --history)") from None
        except (OSError, ValueError, RecursionError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not the JSON dldoctor writes"
            raise JournalError(f"journal {journal_id} is unreadable: {why}") from None
        return _checked(record, journal_id)

    def ids(self) -> list[str]:
        try:
            names = sorted(os.listdir(self.folder))
        except FileNotFoundError:
            return []
        return [n for n in names if os.path.isfile(self._file(n))]

    def history(self) -> list[dict]:
        """Every journal, oldest first; JournalError at the first unreadable one."""
        return [self.load(n) for n in self.ids()]

    def readable(self) -> list[dict]:
        """The journals that can be read: those the next apply or boot may act on."""
        records = []
        for name in self.ids():
            with contextlib.suppress(JournalError):
                records.append(self.load(name))
        return records

    def lock(self):
        """An exclusive lock on the journal folder; FixError when another apply holds it,
        or when the folder cannot be made (read-only, full)."""
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            fd = os.open(os.path.join(self.folder, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise FixError(f"cannot use the journal folder {JOURNALS}: {exc.strerror}") from None
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

    def clear_unsaved(self) -> None:
        """What an apply killed before its first journal was saved left (its folder and a
        temporary file, nothing changed on the machine yet): removed."""
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return
        for name in names:
            folder = os.path.join(self.folder, name)
            if os.path.isdir(folder) and not os.path.islink(folder):
                _remove_temporaries(folder)
                if not os.path.exists(self._file(name)):
                    with contextlib.suppress(OSError):
                        os.rmdir(folder)


def _remove_temporaries(folder: str) -> None:
    """The temporary files of writes cut short in `folder` (atomicfile's prefix)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(".dldoctor-"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))


def _remove_temporaries_beside(record: dict, target: Target) -> None:
    """Those of a write cut short beside each file the journal backs up (an apply or an
    undo killed while it wrote one)."""
    for folder in {os.path.dirname(b["path"]) for b in record["backups"]}:
        _remove_temporaries(target.path(folder))


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _why(exc: BaseException) -> str:
    if isinstance(exc, FixError):
        return str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename
        if where and os.path.basename(where).startswith(".dldoctor-"):
            where = os.path.dirname(where)  # the folder, not a temporary name gone already
        return f"{exc.strerror}" + (f": {where}" if where else "")
    return f"{type(exc).__name__}: {exc}"


def apply(
    plan: Plan, target: Target, *, force: bool = False, on_step=None, on_recovered=None
) -> dict:
    """Apply `plan`; the journal record (state "applied", or "rolled back" with the reason,
    after which the machine is as it was). `force` overrides the GPU interlock of a plan
    that allows it; `on_step(number, step)` is told of each step as it starts, and
    `on_recovered(record)` of each interrupted apply rolled back first."""
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
        _recover(journal, target, on_recovered)
        touched = list(dict.fromkeys(p for s in plan.steps for p in s.touches()))
        record = {
            "id": f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}",
            "fix": plan.fix_id,
            "title": plan.title,
            "started": _now(),
            "state": "applying",
            "reboot": plan.reboot,
            "resolves": list(plan.resolves),
            "steps": [s.describe(target).splitlines()[0] for s in plan.steps],
            "commands": [
                {
                    "step": number,
                    "argv": list(s.argv),
                    "undo": list(s.undo_argv) if s.undo_argv else None,
                    "regenerate": s.regenerate,
                }
                for number, s in enumerate(plan.steps, 1)
                if isinstance(s, RunCommand)
            ],
            "backups": [_backup(target, p) for p in touched],
            "attributes": [s.remember(target) for s in plan.steps if isinstance(s, WriteAttribute)],
            "done": 0,
        }
        try:
            journal.save(record)  # before the first change: a crash leaves what undoes it
        except OSError as exc:
            journal.clear_unsaved()
            raise FixError(
                f"{plan.fix_id}: not applied: the journal could not be written "
                f"({_why(exc)}); nothing was changed"
            ) from None
        try:
            for number, step in enumerate(plan.steps, 1):
                if on_step is not None:
                    on_step(number, step)
                step.apply(target)
                record["done"] = number
                journal.save(record)
            record["state"] = "applied"
            record["ended"] = _now()
            record["boot_id"] = (
                (target.read("/proc/sys/kernel/random/boot_id") or b"")
                .decode("ascii", "replace")
                .strip()
            )
            journal.save(record)  # one it cannot record is one undo could not find: rolled back
        except Exception as exc:
            failed = f"step {number} failed" if record["done"] < number else None
            failed = failed or f"the journal could not be written after step {number}"
            left = _roll_back(record, target, record["done"])
            _settle(journal, record, f"{failed}: {_why(exc)}", left)
            raise StepFailed(f"{plan.fix_id}: {record['state']}") from None
        return record
    finally:
        os.close(fd)


def _roll_back(record: dict, target: Target, upto: int, *, unsure: int = 0) -> list[str]:
    """Undo the first `upto` steps from the journal record alone: undo commands in reverse,
    attributes written back, every file restored, derived state regenerated. Step `unsure`
    may have been cut off before it ran: its undo failing is no problem. Each failure is
    kept and the rest goes on; what could not be put back, one phrase each."""
    left: list[str] = []

    def attempt(action, *args) -> None:
        try:
            action(*args)
        except (OSError, FixError) as exc:
            left.append(_why(exc))

    ran = [c for c in _commands(record) if c["step"] <= upto]
    for command in reversed(ran):
        if command["undo"] and command["step"] == unsure:
            with contextlib.suppress(FixError):
                target.run(command["undo"])
        elif command["undo"]:
            attempt(target.run, command["undo"])
    for attribute in reversed(record.get("attributes", [])):  # one not yet set is skipped
        attempt(_restore_attribute, target, attribute)
    for saved in record["backups"]:
        attempt(_restore, target, saved)
    for command in ran:
        if command["regenerate"]:
            attempt(target.run, command["argv"])
    return left


def _settle(journal: Journal, record: dict, what: str, left: list[str]) -> None:
    """The journal's last word on a rollback: complete, or what is still to put back."""
    if left:
        record["state"] = f"rolled back in part: {what}; not put back: {'; '.join(left)}"
    else:
        record["state"] = f"rolled back: {what}"
    record["ended"] = _now()
    try:
        journal.save(record)
    except OSError as exc:
        record["state"] += f" (the journal could not say so: {_why(exc)})"


def _recover(journal: Journal, target: Target, on_recovered=None) -> list[dict]:
    """Roll back every apply that was killed midway (its journal still "applying"), from
    its journal: the step it was at may have taken effect, so it is undone too. Called
    under the lock, before an apply or an undo acts."""
    journal.clear_unsaved()
    recovered = []
    for record in journal.readable():
        if record["state"] != "applying":
            continue
        _remove_temporaries_beside(record, target)  # first: a folder to remove may hold one
        at = record["done"] + 1
        left = _roll_back(record, target, at, unsure=at)
        _settle(journal, record, f"interrupted after step {record['done']}", left)
        recovered.append(record)
        if on_recovered is not None:
            on_recovered(record)
    return recovered


def undo(journal_id: str, target: Target, *, on_recovered=None) -> dict:
    """Undo an applied fix: its files restored byte for byte (mode and owner too), its
    undo commands run in reverse order. An apply that was interrupted is rolled back
    instead (`on_recovered` is told of it, and of any other)."""
    journal = Journal(target)
    fd = journal.lock()
    try:
        recovered = {r["id"]: r for r in _recover(journal, target, on_recovered)}
        if journal_id in recovered:
            return recovered[journal_id]
        record = journal.load(journal_id)
        if record["state"] != "applied":
            raise FixError(f"{journal_id} is {record['state']!r}: nothing to undo")
        from dldoctor.fixes.interlocks import refuse_unloading_a_used_module

        commands = _commands(record)
        for command in commands:  # all judged before the first one runs
            if command["undo"]:
                refuse_unloading_a_used_module(command["undo"], target)
        for command in reversed(commands):
            if command["undo"]:
                target.run(command["undo"])
        try:
            _remove_temporaries_beside(record, target)  # an undo killed before may leave some
            for attribute in reversed(record.get("attributes", [])):
                _restore_attribute(target, attribute)
            for saved in record["backups"]:
                _restore(target, saved)
        except OSError as exc:  # the journal stays "applied": undo can be run again
            raise FixError(f"{journal_id}: not undone: {_why(exc)}") from None
        for command in commands:
            if command["regenerate"]:
                target.run(command["argv"])
        record["state"] = "undone"
        record["undone"] = _now()
        try:
            journal.save(record)
        except OSError as exc:
            raise FixError(
                f"{journal_id}: undone, but the journal could not say so: {_why(exc)}"
            ) from None
        return record
    finally:
        os.close(fd)
