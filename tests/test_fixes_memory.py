"""fix.memory.devshm under a temporary root copied from a fixture host: previewed, applied
(fstab edited, the remount recorded), undone byte for byte, for a Debian and a RHEL
os-release; advice only in a container.

The memory.devshm fact reads the size of /dev/shm from statvfs of the mount itself, which
no file of a temporary root can fake: a folder there answers with the size of the
filesystem it is on. So the re-check runs where this test may mount a real tmpfs at the
root's /dev/shm (root, CAP_SYS_ADMIN), and `mount` is a fake first on PATH that remounts
that tmpfs instead of the machine's /dev/shm: the re-check then reads what the remount
really did. Elsewhere that test skips; the others need no mount."""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager

import pytest

from dldoctor.facts import Facts
from dldoctor.fixes import builder
from dldoctor.fixes.memory import FIX, FSTAB, tmpfs_size, with_shm_size
from dldoctor.fixes.plan import FixError, RunCommand, Target, WriteFile, apply, undo
from dldoctor.fixes.verify import recheck
from dldoctor.host.live import LiveHost
from dldoctor.policy import MemoryPolicy, Policy
from tests.support.cli import report_of, run_dldoctor
from tests.support.commands import fake_command
from tests.support.paths import HOSTS
from tests.support.recording import Recorder
from tests.support.trees import tree

HOST = HOSTS / "hgx-h100x8-healthy"  # 2048 GiB of RAM: half is 1024g
CONTAINER = HOSTS / "docker-h100-devshm-64m"

# The header Ubuntu's installer writes, a root and a swap line, and a size someone pinned.
UBUNTU_FSTAB = b"""\
# /etc/fstab: static file system information.
#
# Use 'blkid' to print the universally unique identifier for a
# device; this may be used with UUID= as a more robust way to name devices
# that works even if disks are added and removed. See fstab(5).
#
# <file system> <mount point>   <type>  <options>       <dump>  <pass>
/dev/md0        /               ext4    errors=remount-ro 0       1
/swap.img\tnone\tswap\tsw\t0\t0
#tmpfs /dev/shm tmpfs defaults 0 0
tmpfs           /dev/shm        tmpfs   defaults,size=512m,nosuid  0  0
"""


def _root(tmp_path, release_from: str = "hgx-h100x8-healthy", fstab: bytes = UBUNTU_FSTAB):
    root = tmp_path / "root"
    shutil.copytree(HOST / "files", root, symlinks=True)
    shutil.copy(HOSTS / release_from / "files/etc/os-release", root / "etc/os-release")
    (root / FSTAB.lstrip("/")).write_bytes(fstab)
    (root / "dev/shm").mkdir(parents=True)
    return root


def _size(path) -> int:
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize


def _folder_size(root) -> int:
    """What the fact reads for the root's /dev/shm when it is a folder: the size of the
    temporary filesystem, which must be below the size the fix gives for it to act."""
    size = _size(root / "dev/shm")
    if size >= 1024 * 2**30:
        pytest.skip("the temporary filesystem is larger than the size the fix gives")
    return size


@contextmanager
def real_tmpfs(path, size: str):
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"no tmpfs can be mounted here: {done.stderr.strip()[:80]}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_the_finding_offers_the_fix():
    report = report_of(run_dldoctor("--check", "--json", "--from", str(CONTAINER)))
    (finding,) = [f for f in report["findings"] if f["id"] == "memory.devshm"]
    assert finding["status"] == "fail" and finding["fixes"] == [FIX]


@pytest.mark.parametrize("release_from", ["hgx-h100x8-healthy", "rhel72-legacy"])
def test_devshm_previewed_applied_undone(tmp_path, release_from):
    root = _root(tmp_path, release_from)
    old = _folder_size(root)
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    # mount(8) and fstab are the same on both families: one plan.
    assert plan.steps == (
        WriteFile(FSTAB, UBUNTU_FSTAB.replace(b"defaults,size=512m,nosuid ",
                                              b"defaults,nosuid,size=1024g ")),
        RunCommand(("mount", "-o", "remount,size=1024g", "/dev/shm"),
                   undo_argv=("mount", "-o", f"remount,size={tmpfs_size(old)}", "/dev/shm")),
    )  # fmt: skip
    runner = Recorder()
    target = Target(str(root), runner)
    before = tree(root)
    text = plan.preview(target)
    assert tree(root) == before and runner.ran == []
    assert "+tmpfs           /dev/shm        tmpfs   defaults,nosuid,size=1024g  0  0" in text
    assert "run mount -o remount,size=1024g /dev/shm" in text

    record = apply(plan, target)
    assert runner.ran == [["mount", "-o", "remount,size=1024g", "/dev/shm"]]
    assert b"size=1024g" in (root / FSTAB.lstrip("/")).read_bytes()
    undo(record["id"], target)
    assert runner.ran[-1] == ["mount", "-o", f"remount,size={tmpfs_size(old)}", "/dev/shm"]
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before


def _remount_only_the_roots_shm(tmp_path, shm):
    """(env, log): a PATH whose `mount` does only the remount of /dev/shm, and only of the
    root's (`shm`): never the machine's; each call logged."""
    real_mount, log = shutil.which("mount"), tmp_path / "mount.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_command(
        bindir,
        "mount",
        f"""echo "$*" >> {log}
[ "$#" = 3 ] && [ "$1" = -o ] && [ "$3" = /dev/shm ] || exit 1
exec {real_mount} -o "$2" {shm}""",
    )
    return {"PATH": f"{bindir}:{os.environ['PATH']}"}, log


def test_devshm_through_the_cli_rechecked_on_a_real_tmpfs(tmp_path):
    root = _root(tmp_path)
    shm = root / "dev/shm"
    env, log = _remount_only_the_roots_shm(tmp_path, shm)
    with real_tmpfs(shm, "512m"):
        before = tree(root)
        assert recheck(["memory.devshm"], LiveHost(str(root)), Policy()) == {
            "memory.devshm": "fail"
        }
        applied = run_dldoctor("fix", FIX, "--apply", "--yes", "--root", str(root), env=env)
        assert applied.returncode == 0, applied.stderr
        assert "fixed (memory.devshm pass)" in applied.stdout
        assert _size(shm) == 1024 * 2**30
        journal_id = run_dldoctor("fix", "--history", "--root", str(root)).stdout.split()[0]
        undone = run_dldoctor("fix", "--undo", journal_id, "--root", str(root), env=env)
        assert undone.returncode == 0, undone.stderr
        assert _size(shm) == 512 * 2**20
        assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before
    assert log.read_text().splitlines() == ["-o remount,size=1024g /dev/shm",
                                            "-o remount,size=512m /dev/shm"]  # fmt: skip


def test_an_unmounted_devshm_gets_a_tmpfs_mounted_over_it(tmp_path):
    root = _root(tmp_path)
    mountinfo = root / "proc/self/mountinfo"
    mountinfo.write_text("".join(ln for ln in mountinfo.read_text().splitlines(True)
                                 if " /dev/shm " not in ln))  # fmt: skip
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert plan.steps[1] == RunCommand(
        ("mount", "-t", "tmpfs", "-o", "nosuid,nodev,size=1024g", "tmpfs", "/dev/shm"),
        undo_argv=("umount", "/dev/shm"),
    )


def test_an_fstab_that_cannot_be_read_is_never_replaced(tmp_path):
    root = _root(tmp_path)
    (root / "etc/fstab").unlink()
    (root / "etc/fstab").mkdir()  # read fails, and not as "missing": no fstab to start from
    _folder_size(root)
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert [type(s).__name__ for s in plan.steps] == ["RunCommand"]
    assert "left as it is" in plan.notes[0] and "size=1024g in /etc/fstab" in plan.notes[0]


def test_in_a_container_the_fix_is_advice(tmp_path):
    root = tmp_path / "root"
    shutil.copytree(CONTAINER / "files", root, symlinks=True)
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert plan.steps == ()
    advice = "\n".join(plan.notes)
    assert "in a docker container: /dev/shm is sized from outside it" in advice
    assert "`docker run --shm-size=1024g ...`" in advice and "`--ipc=host`" in advice
    assert "emptyDir volume with `medium: Memory`" in advice and "mountPath: /dev/shm" in advice
    with pytest.raises(FixError, match="nothing to apply here"):
        apply(plan, Target(str(root), Recorder()))


def test_a_devshm_big_enough_already_is_left_alone(tmp_path):
    root = _root(tmp_path)
    with real_tmpfs(root / "dev/shm", "1100g"):
        plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert plan.steps == () and plan.notes == ("/dev/shm is 1100g already: nothing to change",)


def test_fstab_without_a_devshm_line_gets_one_appended_and_keeps_every_byte():
    # No newline at the end, a commented-out /dev/shm line that is not a mount, and a
    # comment in Latin-1 (not UTF-8): its byte comes back as it was.
    fstab = b"# disques de l'\xe9quipe\n" + UBUNTU_FSTAB.replace(b"tmpfs           /dev/shm        tmpfs   "
                                 b"defaults,size=512m,nosuid  0  0\n", b"").rstrip(b"\n")  # fmt: skip
    assert with_shm_size(fstab, "8g") == fstab + (
        b"\n# written by dldoctor (fix.memory.devshm)\n"
        b"tmpfs /dev/shm tmpfs defaults,nosuid,nodev,size=8g 0 0\n"
    )
    assert with_shm_size(b"", "8g").endswith(b"size=8g 0 0\n")


def test_fstab_options_are_edited_in_place():
    assert with_shm_size(b"none /dev/shm tmpfs rw,nr_blocks=100,mode=1777 0 0\r\n", "4g") == (
        b"none /dev/shm tmpfs rw,mode=1777,size=4g 0 0\r\n"
    )
    assert (
        with_shm_size(b"tmpfs\t/dev/shm\ttmpfs\n", "4g")
        == b"tmpfs\t/dev/shm\ttmpfs defaults,size=4g\n"
    )
    assert with_shm_size(b"/run/shm /dev/shm none bind 0 0\n", "4g") is None  # not a tmpfs


SITE = Policy(memory=MemoryPolicy(min_devshm_gib=2048))  # above half of the 2048 GiB of RAM


def test_a_policy_floor_above_half_the_ram_is_what_the_fix_gives(tmp_path):
    root = _root(tmp_path)
    if _size(root / "dev/shm") >= 2048 * 2**30:
        pytest.skip("the temporary filesystem is larger than the size the fix gives")
    plan = builder(FIX)(Facts(LiveHost(str(root))), SITE)
    assert plan.steps[1].argv == ("mount", "-o", "remount,size=2048g", "/dev/shm")
    assert plan.title.startswith("give /dev/shm 2048g")
    policy = tmp_path / "site.toml"
    policy.write_text("[memory]\nmin_devshm_gib = 2048\n")
    before = tree(root)
    preview = run_dldoctor("fix", FIX, "--root", str(root), "--policy", str(policy))
    assert preview.returncode == 0, preview.stderr
    assert "defaults,nosuid,size=2048g" in preview.stdout and "1024g" not in preview.stdout
    assert tree(root) == before


def test_devshm_rechecked_under_the_policy_on_a_real_tmpfs(tmp_path):
    root = _root(tmp_path)
    shm = root / "dev/shm"
    env, log = _remount_only_the_roots_shm(tmp_path, shm)
    policy = tmp_path / "site.toml"
    policy.write_text("[memory]\nmin_devshm_gib = 2048\n")
    with real_tmpfs(shm, "512m"):
        # The built-in plan's 1024g meets the built-in floor, not the site's.
        target = Target(str(root), Recorder())
        record = apply(builder(FIX)(Facts(LiveHost(str(root))), Policy()), target)
        subprocess.run(["mount", "-o", "remount,size=1024g", str(shm)], check=True)
        assert recheck(["memory.devshm"], LiveHost(str(root)), Policy()) == {
            "memory.devshm": "pass"
        }
        assert recheck(["memory.devshm"], LiveHost(str(root)), SITE) == {"memory.devshm": "fail"}
        undo(record["id"], target)
        subprocess.run(["mount", "-o", "remount,size=512m", str(shm)], check=True)
        # Through the CLI under the site's policy: planned for it, and verified by it.
        applied = run_dldoctor("fix", FIX, "--apply", "--yes", "--root", str(root),
                               "--policy", str(policy), env=env)  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        assert f"fixed (memory.devshm pass; under the policy {policy})" in applied.stdout
        assert _size(shm) == 2048 * 2**30
        journal_id = applied.stdout.split("applied (", 1)[1].split(")", 1)[0]
        undone = run_dldoctor("fix", "--undo", journal_id, "--root", str(root), env=env)
        assert undone.returncode == 0, undone.stderr
        assert _size(shm) == 512 * 2**20
    assert log.read_text().splitlines() == ["-o remount,size=2048g /dev/shm",
                                            "-o remount,size=512m /dev/shm"]  # fmt: skip
