"""The fix machinery (issue 11): a Plan previewed, applied with a journal written first,
rolled back when a step fails, undone byte for byte — all under a temporary root, with
the commands a fix runs recorded instead of run."""

from __future__ import annotations

import json
import os

import pytest

from dldoctor.fixes.plan import (
    JOURNALS,
    CommandOutcome,
    FixError,
    Journal,
    Plan,
    RemoveFile,
    RunCommand,
    StepFailed,
    Target,
    WriteAttribute,
    WriteFile,
    apply,
    undo,
)
from tests.support.recording import Recorder
from tests.support.trees import example_root, tree


@pytest.fixture
def root(tmp_path):
    return example_root(tmp_path)


def plan() -> Plan:
    return Plan(
        "fix.test.example",
        "an example",
        (
            WriteFile("/etc/modprobe.d/local.conf", b"blacklist nouveau\n"),
            WriteFile("/etc/modprobe.d/new.conf", b"options nouveau modeset=0\n"),
            RemoveFile("/etc/old.conf"),
            RunCommand(("modprobe", "-r", "nouveau"), undo_argv=("modprobe", "nouveau")),
            RunCommand(("update-initramfs", "-u")),
        ),
        resolves=("gpu.nouveau",),
        reboot=True,
    )


def test_preview_changes_nothing_and_shows_the_exact_change(root):
    before = tree(root)
    runner = Recorder()
    text = plan().preview(Target(str(root), runner))
    assert tree(root) == before and runner.ran == []
    assert not (root / JOURNALS.lstrip("/")).exists()
    assert "-options nvidia NVreg_EnableGpuFirmware=0\n+blacklist nouveau" in text
    assert "run modprobe -r nouveau  (undo: modprobe nouveau)" in text
    assert "remove /etc/old.conf" in text and "a reboot is needed" in text


def test_apply_writes_the_journal_before_the_first_change(root):
    target = Target(str(root), Recorder())
    journal = Journal(target)
    seen = []

    def runner(argv):  # runs after the file steps: the journal already holds their backups
        seen.append(journal.history()[0])
        return CommandOutcome(0)

    target.runner = runner
    record = apply(plan(), target)
    assert record["state"] == "applied"
    assert seen[0]["state"] == "applying" and seen[0]["done"] == 3
    saved = {b["path"]: b for b in seen[0]["backups"]}
    assert saved["/etc/modprobe.d/new.conf"]["existed"] is False
    assert saved["/etc/modprobe.d/local.conf"]["mode"] == 0o640
    assert (root / "etc/modprobe.d/local.conf").read_bytes() == b"blacklist nouveau\n"
    assert not (root / "etc/old.conf").exists()
    mode = os.stat(root / JOURNALS.lstrip("/") / record["id"] / "journal.json").st_mode
    assert mode & 0o777 == 0o600


def test_a_step_failing_midway_rolls_the_earlier_ones_back(root):
    before = tree(root)
    runner = Recorder(fail=("update-initramfs",))
    with pytest.raises(StepFailed, match="rolled back: step 5 failed: `update-initramfs -u`"):
        apply(plan(), Target(str(root), runner))
    assert tree(root) == before  # files, modes and owners as they were
    assert runner.ran == [["modprobe", "-r", "nouveau"], ["update-initramfs", "-u"],
                          ["modprobe", "nouveau"]]  # fmt: skip
    (record,) = Journal(Target(str(root))).history()
    assert record["state"].startswith("rolled back: step 5 failed")


def test_undo_restores_every_file_byte_for_byte(root):
    before = tree(root)
    runner = Recorder()
    target = Target(str(root), runner)
    record = apply(plan(), target)
    assert tree(root) != before
    undone = undo(record["id"], target)
    assert undone["state"] == "undone"
    assert tree(root) == before
    assert runner.ran[-1] == ["modprobe", "nouveau"]
    with pytest.raises(FixError, match="nothing to undo"):
        undo(record["id"], target)
    history = Journal(target).history()
    assert [h["state"] for h in history] == ["undone"]
    assert json.loads(json.dumps(history))  # plain JSON, readable by `fix --history`


def test_a_second_apply_refuses_while_one_runs(root):
    target = Target(str(root), Recorder())
    held = Journal(target).lock()
    try:
        before = tree(root)
        with pytest.raises(FixError, match="another dldoctor fix is being applied: try again"):
            apply(plan(), target)
        assert tree(root) == before
    finally:
        os.close(held)


@pytest.mark.parametrize("path", ["etc/x", "/etc/../../x", "/etc/a/../b"])
def test_a_step_cannot_name_a_path_outside_the_root(root, path):
    with pytest.raises(FixError):
        apply(Plan("fix.test.bad", "bad", (WriteFile(path, b"x"),)), Target(str(root)))


@pytest.mark.parametrize(
    "device, said_too", [("dev/nvidia0", ""), ("dev/nvidia-caps/nvidia-cap21", " (a MIG instance)")]
)
def test_a_fix_that_disturbs_gpus_refuses_while_a_process_holds_one(root, device, said_too):
    import subprocess
    import sys
    from dataclasses import replace

    (root / device).parent.mkdir(parents=True)
    (root / device).write_bytes(b"")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys,time; f=open(sys.argv[1]); print(1, flush=True); "
         "time.sleep(60)", str(root / device)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "1\n"  # it has the device open
        before = tree(root)
        runner = Recorder()
        with pytest.raises(FixError) as refused:
            apply(replace(plan(), disturbs_gpus=True), Target(str(root), runner))
        said = str(refused.value)
        assert f"pid {holder.pid} (" in said and "time.sleep(60)" in said
        assert said.endswith("stop it first") and f"/{device}{said_too}; " in said
        assert tree(root) == before and runner.ran == []
    finally:
        holder.kill()
        holder.communicate()  # reaped, its pipe closed
    record = apply(replace(plan(), disturbs_gpus=True), Target(str(root), Recorder()))
    assert record["state"] == "applied"  # nothing holds it any more


def test_an_attribute_is_set_in_place_and_written_back_on_rollback_and_undo(root):
    (root / "proc/sys/kernel").mkdir(parents=True)
    attribute = root / "proc/sys/kernel/numa_balancing"
    attribute.write_text("1\n")
    steps = (WriteAttribute("/proc/sys/kernel/numa_balancing", "0"),
             RunCommand(("sysctl", "--system")))  # fmt: skip
    example = Plan("fix.test.attribute", "an attribute", steps)
    assert "set /proc/sys/kernel/numa_balancing = 0 (now 1)" in example.preview(Target(str(root)))
    inode = attribute.stat().st_ino

    with pytest.raises(StepFailed, match="rolled back: step 2"):
        apply(example, Target(str(root), Recorder(fail=("sysctl",))))
    assert attribute.read_text() == "1\n"

    target = Target(str(root), Recorder())
    record = apply(example, target)
    assert attribute.read_text() == "0\n" and attribute.stat().st_ino == inode  # not replaced
    assert record["attributes"] == [{"path": "/proc/sys/kernel/numa_balancing", "value": "1"}]
    undo(record["id"], target)
    assert attribute.read_text() == "1\n"


def test_an_attribute_that_is_not_there_is_not_created(root):
    example = Plan("fix.test.attribute", "absent", (WriteAttribute("/sys/nothing/here", "1"),))
    with pytest.raises(FixError, match="/sys/nothing/here does not exist here"):
        apply(example, Target(str(root), Recorder()))
    assert not (root / "sys").exists()


def test_a_plan_with_only_advice_previews_it_and_applies_nothing(root):
    advice = Plan("fix.test.advice", "advice", (), notes=("run the container with --ipc=host",))
    text = advice.preview(Target(str(root)))
    assert "nothing dldoctor can change here" in text and "--ipc=host" in text
    with pytest.raises(FixError, match="nothing to apply here"):
        apply(advice, Target(str(root)))
    assert not (root / JOURNALS.lstrip("/")).exists()


def test_force_is_refused_where_the_fix_does_not_offer_it(root):
    from dataclasses import replace

    before = tree(root)
    with pytest.raises(FixError, match="--force is not offered"):
        apply(replace(plan(), disturbs_gpus=True), Target(str(root), Recorder()), force=True)
    assert tree(root) == before
    record = apply(replace(plan(), disturbs_gpus=True, force_ok=True), Target(str(root), Recorder()),
                   force=True)  # fmt: skip
    assert record["state"] == "applied"


def test_undo_refuses_to_unload_a_module_in_use_before_running_anything(root):
    (root / "proc").mkdir()
    (root / "proc/modules").write_text(
        "nvidia_peermem 16384 2 ib_core, Live 0x0\nnvidia 56012800 30 nvidia_peermem, Live 0x0\n"
    )
    steps = (RunCommand(("modprobe", "nvidia-peermem"),
                        undo_argv=("modprobe", "-r", "nvidia-peermem")),
             WriteFile("/etc/modules-load.d/x.conf", b"nvidia-peermem\n"))  # fmt: skip
    runner = Recorder()
    target = Target(str(root), runner)
    record = apply(Plan("fix.test.module", "module", steps), target)
    with pytest.raises(FixError, match=r"nvidia_peermem is in use \(2 by ib_core\): it cannot"):
        undo(record["id"], target)
    assert runner.ran == [["modprobe", "nvidia-peermem"]]  # no undo command ran
    assert (root / "etc/modules-load.d/x.conf").exists()
    assert Journal(target).load(record["id"])["state"] == "applied"  # still undoable later
