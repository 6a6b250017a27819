"""The fix journal when things go wrong (issue 13): an apply killed at any step is rolled
back by the next run, byte for byte; a rollback in a read-only or full folder ends in one
line, not a traceback; a journal that is truncated or edited is refused with exit 4; undo
removes the folders the apply made. Everything under a temporary root."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter

import pytest

from dldoctor.fixes import command
from dldoctor.fixes.plan import (
    JOURNALS,
    CommandOutcome,
    FixError,
    Journal,
    JournalError,
    Plan,
    RemoveFile,
    RunCommand,
    Target,
    WriteAttribute,
    WriteFile,
    apply,
    undo,
)
from tests.support.fixroots import BLACKLIST_NOUVEAU, IOMMU_PASSTHROUGH, iommu_root, nouveau_root
from tests.support.trees import example_root

BALANCING = "/proc/sys/kernel/numa_balancing"


def snapshot(root) -> dict[str, tuple]:
    """Every folder, file and link under root, the journal folder aside: bytes, mode,
    owner. Stray temporary files are in it too, so they count as a difference."""
    found = {}
    journals = os.path.join(str(root), "var/lib/dldoctor")
    for folder, dirs, files in os.walk(root):
        if folder.startswith(journals):
            continue
        for name in dirs + files:
            path = os.path.join(folder, name)
            if path == journals:
                continue
            st = os.lstat(path)
            data = None
            if os.path.islink(path):
                data = os.readlink(path).encode()
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    data = f.read()
            found[os.path.relpath(path, root)] = (data, st.st_mode, st.st_uid, st.st_gid)
    return found


def strays(root) -> list[str]:
    """Temporary files of an interrupted write, anywhere under root (the journal too)."""
    return [
        os.path.join(folder, n)
        for folder, _, files in os.walk(root)
        for n in files
        if n.startswith(".dldoctor-")
    ]


def make_root(path) -> str:
    """test_fix_plan's root, with what the example's attribute and commands act on."""
    example_root(path)
    (path / "proc/sys/kernel").mkdir(parents=True)
    (path / BALANCING.lstrip("/")).write_text("1\n")
    (path / "run").mkdir()
    (path / "run/modules").write_text("nouveau\n")
    (path / "boot").mkdir()
    (path / "var/lib").mkdir(parents=True)  # the journal's folder goes under it
    (path / "boot/initrd").write_text("options nvidia NVreg_EnableGpuFirmware=0\n")
    return str(path)


class Machine:
    """The commands of the example plan acting on files under the root, as the real ones
    act on the machine: modprobe loads and unloads (a set, so loading twice is loading
    once), update-initramfs rebuilds /boot/initrd from /etc/modprobe.d. Their writes are
    writes a kill can cut short, like any other."""

    def __init__(self, root: str):
        self.root = root

    def __call__(self, argv):
        modules = os.path.join(self.root, "run/modules")
        if argv[0] == "modprobe":
            with open(modules) as f:
                loaded = set(f.read().split())
            loaded = loaded - {argv[-1]} if argv[1] == "-r" else loaded | {argv[-1]}
            with open(modules, "w") as f:
                f.write("".join(f"{m}\n" for m in sorted(loaded)))
        elif argv[0] == "update-initramfs":
            folder = os.path.join(self.root, "etc/modprobe.d")
            parts = []
            for name in sorted(os.listdir(folder)):
                if name.endswith(".conf"):
                    with open(os.path.join(folder, name)) as f:
                        parts.append(f.read())
            with open(os.path.join(self.root, "boot/initrd"), "w") as f:
                f.write("".join(parts))
        return CommandOutcome(0)


def every_kind_of_step() -> Plan:
    """test_fix_plan's example, but with a file in folders that are not there yet, an
    attribute and a regenerating command: each kind of step, each kind of write."""
    return Plan(
        "fix.test.example",
        "an example",
        (
            WriteFile("/etc/modprobe.d/local.conf", b"blacklist nouveau\n"),
            WriteFile("/etc/dldoctor.d/made/new.conf", b"options nouveau modeset=0\n"),
            RemoveFile("/etc/old.conf"),
            WriteAttribute(BALANCING, "0"),
            RunCommand(("modprobe", "-r", "nouveau"), undo_argv=("modprobe", "nouveau")),
            RunCommand(("update-initramfs", "-u"), regenerate=True),
        ),
    )


WRITES = ("open", "os.rename", "os.remove", "os.chmod", "os.chown", "os.mkdir", "os.rmdir")
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC


def killed_before_write(k: int, root: str, act) -> bool:
    """`act()` in a forked child that SIGKILLs itself just before its k-th write under
    root (an audit hook sees every open for writing, rename, chmod, chown, unlink, mkdir,
    rmdir): True when it was killed, False when it ran to its end first."""
    pid = os.fork()
    if pid == 0:  # the child: never returns to its caller
        code = 1
        try:
            seen = [0]

            def hook(event, args):
                if event not in WRITES or not isinstance(args[0], str):
                    return
                if not args[0].startswith(root):
                    return
                if event == "open" and not (args[2] or 0) & WRITING:
                    return
                seen[0] += 1
                if seen[0] == k:
                    os.kill(os.getpid(), signal.SIGKILL)

            sys.addaudithook(hook)
            act()
            code = 0
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return True
    assert os.waitstatus_to_exitcode(status) == 0, "the act failed in the child"
    return False


@pytest.fixture
def quick(tmp_path_factory):
    """A folder on a tmpfs where there is one: the kill loop applies some 40 times, and
    each apply fsyncs every file it writes."""
    if os.access("/dev/shm", os.W_OK):
        folder = tempfile.mkdtemp(prefix="dldoctor-test-", dir="/dev/shm")
        yield pathlib.Path(folder)
        shutil.rmtree(folder)
    else:
        yield tmp_path_factory.mktemp("kills")


REPO = pathlib.Path(__file__).resolve().parent.parent


def in_fresh_python(function: str, folder, *, before: tuple[str, ...] = ()):
    """What `function(folder)` of this module returns, run in a new interpreter (under the
    command `before`, such as `unshare -m`)."""
    script = (
        "import json, sys\n"
        "from tests import test_fix_journal as t\n"
        "print(json.dumps(getattr(t, sys.argv[1])(sys.argv[2])))\n"
    )
    proc = subprocess.run(
        [*before, sys.executable, "-c", script, function, str(folder)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def kill_points(folder: pathlib.Path, ready):
    """(k, root, its snapshot, target) for each k at which the act `ready(target)` returns,
    run in a child, is killed before its k-th write under a fresh root; until the act runs
    to its end (every point covered), which ends the loop."""
    for k in range(1, 500):
        root = make_root(folder / f"k{k}")
        before = snapshot(root)
        target = Target(root, Machine(root))
        if not killed_before_write(k, root, ready(target)):
            return
        yield k, root, before, target
        shutil.rmtree(root)
    raise AssertionError("the act never ran to its end")


def apply_killed_at_every_write(folder: str) -> int:
    """Run in a fresh interpreter (`in_fresh_python`): a fork is safe only where no other
    thread runs. The number of kill points."""
    points = 0
    for k, root, before, target in kill_points(
        pathlib.Path(folder), lambda t: lambda: apply(every_kind_of_step(), t)
    ):
        points += 1
        seen = []

        def recovered(record, root=root, before=before, k=k, seen=seen):
            seen.append(record["state"])
            assert snapshot(root) == before and strays(root) == [], f"killed at write {k}"

        ids = Journal(target).ids()
        if not ids:  # killed before its journal was saved: nothing had changed yet
            try:
                undo("20260101T000000Z-000000", target, on_recovered=recovered)
            except FixError as exc:
                assert "no journal" in str(exc), exc
            assert seen == [] and snapshot(root) == before and strays(root) == [], k
        elif k % 2:  # the next apply rolls it back before it starts
            apply(every_kind_of_step(), target, on_recovered=recovered)
        else:  # and so does an undo, of it or of any other
            assert undo(ids[0], target, on_recovered=recovered)["state"] == seen[0]
        if ids:
            assert seen == [f"rolled back: interrupted after step {seen[0][-1]}"], seen
    return points


def undo_killed_at_every_write(folder: str) -> int:
    def ready(target):
        journal_id = apply(every_kind_of_step(), target)["id"]
        return lambda: undo(journal_id, target)

    points = 0
    for k, root, before, target in kill_points(pathlib.Path(folder), ready):
        points += 1
        (record,) = Journal(target).history()
        if record["state"] == "applied":  # killed before it said "undone": undo again
            undo(record["id"], target)
        assert snapshot(root) == before and strays(root) == [], f"killed at write {k}"
    return points


def test_an_apply_killed_before_any_write_is_rolled_back_by_the_next_run(quick):
    points = in_fresh_python("apply_killed_at_every_write", quick)
    # the lock and the journal first, then each step's writes: a temporary file, its mode,
    # its rename, the journal saved after it (a temporary file, its mode, its rename), ...
    print(f"{points} kill points")
    assert points >= 30, points


def test_an_undo_killed_before_any_write_is_finished_by_the_next_undo(quick):
    points = in_fresh_python("undo_killed_at_every_write", quick)
    print(f"{points} kill points in undo")
    assert points >= 15, points


def test_fix_apply_and_undo_roll_back_an_apply_killed_after_its_first_rename(tmp_path, capsys):
    root, log, env = nouveau_root(tmp_path)
    (root / "var/lib").mkdir(parents=True, exist_ok=True)
    before = snapshot(root)
    killer = (
        "import os, signal, sys\n"
        "renamed = []\n"
        "def hook(event, args):\n"
        "    if renamed and event in ('open', 'os.chmod', 'os.rename'):\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    if event == 'os.rename' and '/var/lib/dldoctor/' not in args[1]:\n"
        "        renamed.append(args[1])\n"
        "sys.addaudithook(hook)\n"
        "from dldoctor.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )

    def killed_apply():
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                killer,
                "fix",
                BLACKLIST_NOUVEAU,
                "--apply",
                "--yes",
                "--root",
                str(root),
            ],
            env={**os.environ, **env, "DLDOCTOR_NO_PLUGINS": "1"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        (record,) = [r for r in Journal(Target(str(root))).history() if r["state"] == "applying"]
        assert snapshot(root) != before  # the blacklist is in place
        return record["id"]

    from tests.support.cli import run_dldoctor

    first = killed_apply()
    assert command.main(["--history", "--root", str(root)]) == 0
    hint = "interrupted, unless it runs now: the next --apply or --undo rolls it back"
    assert capsys.readouterr().out == f"{first}  {BLACKLIST_NOUVEAU:32} applying: {hint}\n"
    undone = run_dldoctor("fix", "--undo", first, "--root", str(root), env=env)
    assert undone.returncode == 0, undone.stderr
    assert f"{BLACKLIST_NOUVEAU}: rolled back: interrupted after step 0 ({first})" in undone.stdout
    assert snapshot(root) == before and strays(root) == []

    second = killed_apply()
    applied = run_dldoctor(
        "fix", BLACKLIST_NOUVEAU, "--apply", "--yes", "--root", str(root), env=env
    )
    assert applied.returncode == 0, applied.stderr
    assert applied.stderr.startswith(
        f"dldoctor: {BLACKLIST_NOUVEAU} ({second}): rolled back: interrupted"
    )
    states = {r["id"]: r["state"] for r in Journal(Target(str(root))).history()}
    assert states[second] == "rolled back: interrupted after step 0"
    assert "applied" in states.values() and strays(root) == []


# --- malformed journals ----------------------------------------------------------------


def applied_journal(root: str) -> tuple[str, str]:
    """A real journal of an applied fix whose commands are harmless here (`true`, by its
    absolute path): (its id, its file)."""
    nothing = (shutil.which("true"),)
    files = every_kind_of_step().steps[:4]
    steps = (*files, RunCommand(nothing, undo_argv=nothing, regenerate=True))
    record = apply(Plan("fix.test.example", "an example", steps), Target(root))
    return record["id"], os.path.join(root, JOURNALS.lstrip("/"), record["id"], "journal.json")


def outcome(args, capsys) -> tuple[int, str]:
    code = command.main(args)  # an exception here is the traceback the user would see
    err = capsys.readouterr().err
    return code, err


def test_undo_and_history_of_a_journal_without_backups_say_so_in_one_line(tmp_path, capsys):
    root = make_root(tmp_path / "root")
    journal_id, path = applied_journal(root)
    record = json.loads(pathlib.Path(path).read_text())
    del record["backups"]
    with open(path, "w") as f:
        json.dump(record, f)
    for args in (["--undo", journal_id], ["--history"]):
        code, err = outcome([*args, "--root", root], capsys)
        assert code == 4
        assert err == f"dldoctor: journal {journal_id} has no 'backups'\n"


def mutations(record):
    """The record with one thing changed: each key removed, each value swapped for one of
    another type, at every depth."""
    swaps = [None, -1, 2**70, True, "x", "/..", [0], {"a": 1}]

    def at(node, trail):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in list(items):
            if isinstance(node, dict):
                yield trail + [(key, "remove")]
            for swap in swaps:
                if type(swap) is not type(value) or swap != value:
                    yield trail + [(key, swap)]
            if isinstance(value, (dict, list)):
                yield from at(value, trail + [(key, None)])

    for trail in at(record, []):
        changed = copy.deepcopy(record)
        node = changed
        for key, _ in trail[:-1]:
            node = node[key]
        key, swap = trail[-1]
        if swap == "remove":
            del node[key]
        else:
            node[key] = copy.deepcopy(swap)
        yield changed


def test_no_truncation_or_edit_of_a_journal_ends_in_a_traceback(quick, capsys, monkeypatch):
    """The journal cut at every byte (read back: unreadable; every 16th cut undone and
    listed too) and edited at every key (removed, or given a value of another type):
    undone and listed through the API, every 50th case through the CLI too, for its exit
    code. Only FixError comes out: JournalError (exit 4) when it cannot
    be read, FixError (exit 1) when undo refuses it."""
    root = make_root(quick / "root")
    journal_id, path = applied_journal(root)
    monkeypatch.setenv("PATH", str(quick / "no-commands"))  # an edited command runs nothing
    original = pathlib.Path(path).read_bytes()
    applied = snapshot(root)
    shutil.copytree(root, quick / "applied", symlinks=True)
    target = Target(root, lambda argv: CommandOutcome(0))  # the CLI's run `true` for real
    seen: Counter[str] = Counter()

    def judge(data: bytes, which: str) -> None:
        acts = (lambda: Journal(target).history(), lambda: undo(journal_id, target))
        for act in acts:
            pathlib.Path(path).write_bytes(data)
            try:
                act()
                seen["read"] += 1
            except JournalError:
                seen["unreadable"] += 1
                continue  # refused on reading, before anything is done
            except FixError as exc:
                assert "\n" not in str(exc), which
                seen["refused"] += 1
            if act is not acts[0] and snapshot(root) != applied:  # undo could act on it
                shutil.rmtree(root)
                shutil.copytree(quick / "applied", root, symlinks=True)
        if sum(seen.values()) % 100 < 2:
            for args in (["--undo", journal_id], ["--history"]):
                pathlib.Path(path).write_bytes(data)
                code, err = outcome([*args, "--root", root], capsys)
                assert code in (0, 1, 4), (which, args, code, err)
                assert code == 0 or (err.startswith("dldoctor: ") and err.count("\n") == 1)
                seen[f"exit {code}"] += 1
            shutil.rmtree(root)
            shutil.copytree(quick / "applied", root, symlinks=True)

    journal = Journal(target)
    for end in range(len(original)):  # every cut: unreadable, whatever it leaves
        pathlib.Path(path).write_bytes(original[:end])
        with pytest.raises(JournalError):
            journal.load(journal_id)
        if end % 16 == 0:
            judge(original[:end], f"truncated at {end}")
    assert seen["unreadable"] == 2 * len(range(0, len(original), 16))
    edits = 0
    for changed in mutations(json.loads(original)):
        judge(json.dumps(changed).encode(), json.dumps(changed))
        edits += 1
    judge(b"\xff\xfe" + original, "not UTF-8")
    judge(b"[" * 100_000, "nested past the recursion limit")
    assert edits > 300 and seen["read"] and seen["refused"], seen
    assert seen["exit 4"] and seen["exit 0"] + seen["exit 1"], seen


def test_undo_removes_the_folders_the_apply_made(quick):
    root = make_root(quick / "root")
    before = snapshot(root)
    target = Target(root, Machine(root))
    record = apply(every_kind_of_step(), target)
    assert os.path.isdir(os.path.join(root, "etc/dldoctor.d/made"))
    undo(record["id"], target)
    assert snapshot(root) == before  # /etc/dldoctor.d and its made/ gone with new.conf


def test_undo_leaves_a_made_folder_that_holds_something_else_now(quick):
    root = make_root(quick / "root")
    target = Target(root, Machine(root))
    record = apply(every_kind_of_step(), target)
    pathlib.Path(root, "etc/dldoctor.d/mine.conf").write_text("an admin's\n")
    undo(record["id"], target)
    assert os.listdir(os.path.join(root, "etc/dldoctor.d")) == ["mine.conf"]


# --- read-only and full folders --------------------------------------------------------
# Root writes through chmod 0555, so a read-only folder is a read-only bind mount and a
# full one a small tmpfs, each in a private mount namespace (`unshare -m`) that ends with
# the child: nothing is mounted on this machine.


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def fill(folder: str) -> None:
    """`folder`'s filesystem full: a file grown until not one more byte fits."""
    fd = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * chunk)
    finally:
        os.close(fd)


def two_files(folder: str) -> Plan:
    """Rewrites a file in a folder that takes it, then one in `folder`, which does not."""
    return Plan(
        "fix.test.folders",
        "two files",
        (
            WriteFile("/etc/ok/a.conf", b"changed\n"),
            WriteFile(f"/{folder}/b.conf", b"x" * 200_000),
        ),
    )


def read_only_target(root: str) -> dict:
    mount("--bind", f"{root}/etc/ro", f"{root}/etc/ro")
    mount("-o", "remount,bind,ro", f"{root}/etc/ro")
    return _failing_apply(root, "etc/ro")


def full_target(root: str) -> dict:
    mount("-t", "tmpfs", "-o", "size=64k", "dldoctor-test", f"{root}/etc/full")
    pathlib.Path(root, "etc/full/b.conf").write_text("as it was\n")
    fill(f"{root}/etc/full")
    return _failing_apply(root, "etc/full")


def _failing_apply(root: str, folder: str) -> dict:
    before = snapshot(root)
    said = applying(two_files(folder), root)
    (record,) = Journal(Target(root)).history()
    return {"said": said, "state": record["state"], "same": snapshot(root) == before}


def applying(plan: Plan, root: str) -> str:
    """What apply says: "applied" or its FixError; anything else is the traceback the
    test reports."""
    try:
        apply(plan, Target(root))
    except FixError as exc:
        return str(exc)
    return "applied"


def full_journal_folder(root: str, *, room: int = 0) -> str:
    """The journal folder on a tmpfs with `room` pages left, and its filler's path."""
    journals = f"{root}/{JOURNALS.lstrip('/')}"
    os.makedirs(journals)
    mount("-t", "tmpfs", "-o", "size=16k", "dldoctor-test", journals)
    pathlib.Path(journals, ".lock").touch()
    fill(journals)
    filler = os.path.join(journals, "filler")
    if room:
        os.truncate(filler, (os.path.getsize(filler) // 4096 - room) * 4096)
    return filler


def full_journal(root: str) -> dict:
    filler = full_journal_folder(root)
    before = snapshot(root)
    said = applying(two_files("etc/ok"), root)
    left = sorted(set(os.listdir(os.path.dirname(filler))) - {".lock", "filler"})
    return {"said": said, "same": snapshot(root) == before, "left": left}


def journal_full_after_its_first_save(root: str) -> dict:
    filler = full_journal_folder(root, room=1)  # the first save fits, the next one's not
    before = snapshot(root)
    said = applying(two_files("etc/ok"), root)
    same = snapshot(root) == before
    os.unlink(filler)  # room again: the next apply finds the journal still "applying"
    apply(Plan("fix.test.after", "after", (WriteFile("/etc/ok/c.conf", b"c\n"),)), Target(root))
    states = {r["fix"]: r["state"] for r in Journal(Target(root)).history()}
    return {"said": said, "same": same, "states": states}


def in_private_mounts(scenario: str, root) -> dict:
    return in_fresh_python(scenario, root, before=("unshare", "-m", "--propagation", "private"))


def _mounts_here() -> str | None:
    """Why the mount tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "a private mount namespace needs root (CI runs some tests as nobody)"
    if shutil.which("unshare") is None:
        return "no unshare(1) here"
    probe = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "mount",
            "-t",
            "tmpfs",
            "none",
            tempfile.gettempdir(),
        ],  # fmt: skip
        capture_output=True,
    )
    return None if probe.returncode == 0 else "unshare -m cannot mount here (no CAP_SYS_ADMIN)"


_NO_MOUNTS = _mounts_here()
mounts = pytest.mark.skipif(_NO_MOUNTS is not None, reason=_NO_MOUNTS or "")


def folders_root(path) -> str:
    root = make_root(path)
    for folder in ("etc/ok", "etc/ro", "etc/full"):
        os.makedirs(os.path.join(root, folder))
    pathlib.Path(root, "etc/ok/a.conf").write_text("as it was\n")
    pathlib.Path(root, "etc/ro/b.conf").write_text("as it was\n")
    return root


@mounts
@pytest.mark.parametrize("scenario", ["read_only_target", "full_target"])
def test_a_step_failing_in_a_read_only_or_full_folder_is_rolled_back(tmp_path, scenario):
    root = folders_root(tmp_path / "root")
    seen = in_private_mounts(scenario, root)
    why = "Read-only file system" if scenario == "read_only_target" else "No space left"
    assert seen["said"].startswith("fix.test.folders: rolled back: step 2 failed: " + why)
    assert seen["state"].startswith("rolled back: step 2 failed"), seen
    assert seen["same"], seen  # a.conf put back, b.conf never touched


@mounts
def test_a_full_journal_folder_refuses_the_apply_in_one_line(tmp_path):
    root = folders_root(tmp_path / "root")
    seen = in_private_mounts("full_journal", root)
    assert seen["said"].startswith("fix.test.folders: not applied: the journal could not be")
    assert seen["said"].endswith("; nothing was changed") and "No space left" in seen["said"]
    assert seen["same"] and seen["left"] == [], seen


def read_only_grub_defaults(root: str) -> dict:
    mount("--bind", f"{root}/etc/default", f"{root}/etc/default")
    mount("-o", "remount,bind,ro", f"{root}/etc/default")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dldoctor",
            "fix",
            IOMMU_PASSTHROUGH,
            "--apply",
            "--yes",
            "--root",
            root,
        ],
        env={**os.environ, "DLDOCTOR_NO_PLUGINS": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return {"code": proc.returncode, "stderr": proc.stderr}


@mounts
def test_a_real_fix_whose_file_is_on_a_read_only_mount_exits_1_in_one_line(tmp_path):
    root = iommu_root(tmp_path)
    (root / "var/lib").mkdir(parents=True, exist_ok=True)  # the journal's, as on a host
    before = snapshot(root)
    seen = in_private_mounts("read_only_grub_defaults", root)
    assert seen["code"] == 1, seen
    assert seen["stderr"] == (
        f"dldoctor: {IOMMU_PASSTHROUGH}: rolled back: step 1 failed: Read-only file system: "
        f"{root}/etc/default\n"
    )
    assert snapshot(root) == before


@mounts
def test_a_journal_folder_full_midway_rolls_the_apply_back(tmp_path):
    root = folders_root(tmp_path / "root")
    seen = in_private_mounts("journal_full_after_its_first_save", root)
    assert seen["said"].startswith(
        "fix.test.folders: rolled back: the journal could not be written after step 1: "
        "No space left on device"
    ), seen
    assert seen["said"].endswith(")") and "(the journal could not say so: " in seen["said"]
    assert seen["same"], seen  # a.conf put back
    # the journal could not say so, so it still read "applying": the next apply said it
    assert seen["states"]["fix.test.folders"] == "rolled back: interrupted after step 0"


def undo_in_a_read_only_folder(root: str) -> dict:
    plan = Plan("fix.test.undo", "one file", (WriteFile("/etc/ok/a.conf", b"changed\n"),))
    journal_id = apply(plan, Target(root))["id"]
    mount("--bind", f"{root}/etc/ok", f"{root}/etc/ok")
    mount("-o", "remount,bind,ro", f"{root}/etc/ok")
    try:
        undo(journal_id, Target(root))
        said = "undone"
    except FixError as exc:
        said = str(exc)
    return {"said": said, "id": journal_id, "state": Journal(Target(root)).load(journal_id)}


@mounts
def test_an_undo_in_a_read_only_folder_says_so_and_can_be_run_again(tmp_path):
    root = folders_root(tmp_path / "root")
    seen = in_private_mounts("undo_in_a_read_only_folder", root)
    assert seen["said"] == f"{seen['id']}: not undone: Read-only file system: {root}/etc/ok"
    assert seen["state"]["state"] == "applied"  # so undo can be run again once it can write
    assert undo(seen["id"], Target(root))["state"] == "undone"
    assert pathlib.Path(root, "etc/ok/a.conf").read_text() == "as it was\n"
