"""Storage checks over every corpus /proc/mdstat (fixtures/corpus/mdstat, see SOURCES.md)
and a hung network mount."""

from __future__ import annotations

import pytest

from dldoctor.checks import storage
from dldoctor.facts import Facts
from dldoctor.facts.storage import NetFs, netfs
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import FIXTURES

MDSTAT = FIXTURES / "corpus/mdstat"

VERDICTS = {
    # md42 (degraded, reshaping) and md6 (degraded; a recovery line but no member in a slot
    # to rebuild onto) were once "rebuilding": neither is being repaired.
    "procfs-composite-many-states-reshape-check-imsm.txt": ("fail", "4 array(s) degraded or inactive: md4, md6, md7, md42"),
    "pymdstat-01-empty-no-arrays.txt": ("skip", "no software RAID arrays"),
    "pymdstat-02-raid5-md_d0-bitmap-clean.txt": ("pass", "1 array(s) clean"),
    "pymdstat-04-raid1x3-plus-raid5-10disk-clean.txt": ("pass", "4 array(s) clean"),
    "pymdstat-05-raid5-degraded-recovery-12pct.txt": ("warn", "1 degraded array(s) recovering: md127 recovery 12.6%, about 128 min left"),
    "pymdstat-07-raid1-6way-failed-member-degraded.txt": ("fail", "1 array(s) degraded or inactive: md1"),
    "pymdstat-10-raid1-raid0-nvme-mixed-clean.txt": ("pass", "4 array(s) clean"),
    "pymdstat-12-raid0-loop-devices.txt": ("pass", "1 array(s) clean"),
    "pymdstat-14-raid0-trailing-space-personalities.txt": ("pass", "1 array(s) clean"),
    "pymdstat-16-raid5-8disk-no-trailing-unused.txt": ("pass", "1 array(s) clean"),
}  # fmt: skip


def test_every_corpus_file_has_a_verdict():
    assert sorted(p.name for p in MDSTAT.glob("*.txt")) == sorted(VERDICTS)


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_raid_verdict_per_corpus_mdstat(tmp_path, name):
    b = BundleBuilder(tmp_path / "b").file("/proc/mdstat", (MDSTAT / name).read_bytes())
    outcome = storage.raid(Facts(ReplayHost(str(b.root))), Policy())
    assert (outcome.status.value, outcome.summary) == VERDICTS[name]


def test_recovery_shows_progress_and_finish(tmp_path):
    text = (MDSTAT / "pymdstat-05-raid5-degraded-recovery-12pct.txt").read_bytes()
    b = BundleBuilder(tmp_path / "b").file("/proc/mdstat", text)
    outcome = storage.raid(Facts(ReplayHost(str(b.root))), Policy())
    assert outcome.details == (
        "md127: active raid5 [6/5] [UUUUU_] — recovery 12.6%, about 128 min left",
        NO_MDADM,
    )


def one_array(name: str, source: str = "procfs-composite-many-states-reshape-check-imsm.txt"):
    """The Personalities line and one array's stanza of a corpus mdstat, lines unchanged."""
    lines = (MDSTAT / source).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name} :"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].strip())
    return "\n".join([lines[0], "", *lines[start:end], "", "unused devices: <none>", ""])


NO_MDADM = (
    "mdadm is not installed (or not recorded): no `mdadm --detail`; install the mdadm "
    "package for member states"
)


def raid_of(tmp_path, mdstat: str, **commands):
    b = BundleBuilder(tmp_path / "b").file("/proc/mdstat", mdstat)
    for name, output in commands.items():
        b.command(["mdadm", "--detail", f"/dev/{name}"], output)
    return storage.raid(Facts(ReplayHost(str(b.root))), Policy())


def test_a_degraded_array_that_reshapes_is_not_being_repaired(tmp_path):
    outcome = raid_of(tmp_path, one_array("md42"))  # raid5 [3/2] [UU_], reshape 56.1%
    assert (outcome.status, outcome.summary) == (
        Status.FAIL,
        "1 array(s) degraded or inactive: md42",
    )
    assert outcome.details == (
        "md42: active raid5 [3/2] [UU_] — degraded (empty slot 2); reshape 56.1%, about 31 h "
        "left: a reshape does not repair it",
        NO_MDADM,
    )
    # Its spare takes the slot only after the reshape: no "wait", and no new disk needed.
    assert outcome.remediation == "md42: spare sda1 is rebuilt onto once the reshape ends."


def test_a_degraded_array_without_a_recovery_names_the_member_to_replace(tmp_path):
    outcome = raid_of(tmp_path, one_array("md7"))  # raid6 [4/3] [U_UU], sdc1[1](F)
    assert outcome.status == Status.FAIL
    # sdc1[1] held slot 1: the slot it left is not a second hole.
    assert outcome.details == (
        "md7: active raid6 [4/3] [U_UU] — degraded (failed: sdc1 in slot 1)",
        NO_MDADM,
    )
    assert outcome.remediation == (
        "md7: replace failed member sdc1 (`mdadm /dev/md7 --remove /dev/sdc1`, swap the disk); "
        "`mdadm /dev/md7 --add /dev/<new disk>` starts the recovery onto it."
    )
    assert "wait" not in outcome.remediation.lower()


def test_two_missing_slots_and_one_failed_member_ask_for_both(tmp_path):
    text = (MDSTAT / "pymdstat-07-raid1-6way-failed-member-degraded.txt").read_text()
    outcome = raid_of(tmp_path, text)  # raid1 [6/4] [_UUUU_], sde1[6](F)
    assert "replace failed member sde1" in outcome.remediation
    assert "put a new disk in the empty slot(s) (0, 5)" in outcome.remediation
    # sde1[6]: its number is no slot of [_UUUU_], so which empty slot it held is not known.
    assert "degraded (failed: sde1; empty slots 0, 5 (one of them sde1's))" in outcome.details[0]


def test_a_timed_out_mdadm_and_an_unreadable_attribute_show_in_every_outcome(tmp_path):
    mdstat = "Personalities : [raid1]\nmd2 : active raid1 sdb1[1] sda1[0]\n      1000 blocks [2/2] [UU]\n\nunused devices: <none>\n"
    b = BundleBuilder(tmp_path / "b").file("/proc/mdstat", mdstat)
    b.command(["mdadm", "--detail", "/dev/md2"], status="timeout", timeout_s=5)
    b.file("/sys/block/md2/md/degraded", "0\n")
    b.answer("read", "/sys/block/md2/md/array_state", status="error", error="Input/output error")
    outcome = storage.raid(Facts(ReplayHost(str(b.root))), Policy())
    assert outcome.status == Status.PASS
    assert outcome.details[0] == "md2: active raid1 [2/2] [UU]"
    assert any("array_state" in d and "Input/output error" in d for d in outcome.details[1:])
    assert any("mdadm --detail /dev/md2" in d and "timed out" in d for d in outcome.details[1:])


def test_an_inactive_array_of_unknown_level_is_not_called_raid0(tmp_path):
    outcome = raid_of(
        tmp_path, (FIXTURES / "hosts/hgx-h100x8-raid-degraded/files/proc/mdstat").read_text()
    )
    assert outcome.status == Status.FAIL
    md1 = next(step for step in outcome.remediation.split(". ") if step.startswith("md1:"))
    assert "RAID 0" not in md1 and "raid0" not in md1
    assert (
        md1 == "md1: `mdadm --assemble --scan` (`mdadm --examine` of its members tells its level)"
    )
    assert "degraded (failed: nvme0n1p2 in slot 1)" in outcome.details[1]


def test_an_inactive_raid0_known_from_mdadm_says_it_has_no_redundancy(tmp_path):
    mdstat = "Personalities : [raid0]\nmd3 : inactive sdb[1](S) sda[0](S)\n      2000 blocks super 1.2\n\nunused devices: <none>\n"
    detail = (
        "/dev/md3:\n        Version : 1.2\n     Raid Level : raid0\n          State : inactive\n"
    )
    outcome = raid_of(tmp_path, mdstat, md3=detail)
    assert outcome.status == Status.FAIL
    assert outcome.remediation == (
        "md3: `mdadm --assemble --scan`; raid0 has no redundancy: if it does not assemble, "
        "restore its data."
    )


def test_a_recovery_line_without_a_member_to_rebuild_onto_does_not_repair(tmp_path):
    # md6: [2/1] [U_] with "recovery = 8.5%", but its only other members are sdb2(F) and
    # the spare sdc(S): nothing in a slot is being rebuilt.
    outcome = raid_of(tmp_path, one_array("md6"))
    assert outcome.status == Status.FAIL
    assert "no member in a slot is being rebuilt" in outcome.details[0]
    assert "spare sdc is not being used" in outcome.remediation


def test_a_recovery_onto_a_member_warns_with_progress_and_says_do_not_reboot(tmp_path):
    text = (MDSTAT / "pymdstat-05-raid5-degraded-recovery-12pct.txt").read_text()
    outcome = raid_of(tmp_path, text)  # [6/5], six members in slots: one is being rebuilt
    assert outcome.status == Status.WARN
    assert "12.6%, about 128 min left" in outcome.summary
    assert "do not reboot" in outcome.remediation


def test_a_recovery_that_leaves_a_slot_empty_still_fails(tmp_path):
    # md_seq_show() format: raid6 missing two members, one new member (sde1) being rebuilt.
    text = (
        "Personalities : [raid6]\n"
        "md5 : active raid6 sde1[4] sdc1[2] sdb1[1] sda1[0]\n"
        "      3906764800 blocks super 1.2 level 6, 512k chunk, algorithm 2 [5/3] [UUU__]\n"
        "      [=>...................]  recovery =  9.0% (175813632/1953382400) "
        "finish=150.2min speed=197231K/sec\n\nunused devices: <none>\n"
    )
    outcome = raid_of(tmp_path, text)
    assert outcome.status == Status.FAIL
    assert outcome.details[0].endswith("1 slot(s) stay empty after it")


@pytest.mark.parametrize(
    ("name", "running"),
    [("md8", "resync 8.5%, about 17 min left"), ("md201", "check 5.7%, under a minute left"),
     ("md9", "resync waiting (DELAYED)")],
)  # fmt: skip
def test_resync_or_check_of_a_whole_array_passes(tmp_path, name, running):
    outcome = raid_of(tmp_path, one_array(name))
    assert outcome.status == Status.PASS
    assert outcome.summary == f"1 array(s) clean; {name} busy (resync/check/reshape)"
    assert running in outcome.details[0]


def test_the_reshape_of_a_whole_array_passes(tmp_path):
    # /dev/md0 of insights' `mdadm --detail`: 21 of 21 devices active, "active, reshaping";
    # its mdstat written in md_seq_show()'s format.
    detail = (FIXTURES / "corpus/mdadm-detail/insights-mdadm-d-content-md0.txt").read_text()
    members = " ".join(f"sd{c}1[{i}]" for i, c in enumerate("bcdefghijklmnopqrstuv"))
    mdstat = (
        f"Personalities : [raid6] [raid5]\nmd0 : active raid5 {members} sda1[16](S)\n"
        "      21877481472 blocks super 1.2 level 5, 512k chunk, algorithm 2 [21/21] "
        "[UUUUUUUUUUUUUUUUUUUUU]\n"
        "      [=====>...............]  reshape = 28.0% (437549629/1562677248) "
        "finish=2291.1min speed=8183K/sec\n\nunused devices: <none>\n"
    )
    outcome = raid_of(tmp_path, mdstat, md0=detail)
    assert outcome.status == Status.PASS
    assert "mdadm: active, reshaping, reshape 28.0%, about 38 h left" in outcome.details[0]


def test_a_hung_mount_is_an_error_naming_it():
    hung = (NetFs("/mnt/lustre", "lustre", "10.0.0.1@o2ib:/fs", "timeout", None, None),
            NetFs("/home", "nfs4", "nas:/home", "ok", 2**40, 2**39))  # fmt: skip
    outcome = storage.network_filesystems(Facts.given({netfs: hung}), Policy())
    assert outcome.status == Status.ERROR
    assert (
        outcome.summary
        == "1 mount(s) did not answer: /mnt/lustre (lustre from 10.0.0.1@o2ib:/fs): timeout"
    )


def test_mdadm_detail_state_is_shown_when_mdadm_answers(tmp_path):
    mdstat = "Personalities : [raid1]\nmd2 : active raid1 sdb1[1] sda1[0]\n      1000 blocks [2/2] [UU]\n\nunused devices: <none>\n"
    detail = (FIXTURES / "corpus/mdadm-detail/insights-mdadm-d-content-md2.txt").read_text()
    b = BundleBuilder(tmp_path / "b").file("/proc/mdstat", mdstat)
    b.command(["mdadm", "--detail", "/dev/md2"], detail)
    outcome = storage.raid(Facts(ReplayHost(str(b.root))), Policy())
    assert outcome.status == Status.PASS
    assert outcome.details[0].startswith("md2: active raid1 [2/2] [UU]; mdadm: ")


def test_an_imsm_container_is_not_an_inactive_array(tmp_path):
    # Intel VROC/RST: the container (external:imsm) is always "inactive"; the volume inside
    # it (external:/md127/0) is the array. Written in md_seq_show()'s format.
    text = (
        "Personalities : [raid1]\n"
        "md126 : active raid1 sda[1] sdb[0]\n"
        "      488383488 blocks super external:/md127/0 [2/2] [UU]\n\n"
        "md127 : inactive sdb[1](S) sda[0](S)\n"
        "      5288 blocks super external:imsm\n\n"
        "unused devices: <none>\n"
    )
    b = BundleBuilder(tmp_path / "b").file("/proc/mdstat", text)
    outcome = storage.raid(Facts(ReplayHost(str(b.root))), Policy())
    assert outcome.status == Status.PASS
    assert "md127: IMSM container" in outcome.details


def test_read_only_images_and_refused_mounts_are_not_problems():
    from dldoctor.facts.storage import Space, space

    image = Space("/datasets/imagenet", "/datasets/imagenet", "squashfs", "7:0", 131 * 2**30, 0,
                  None, None, "ok")  # fmt: skip
    outcome = storage.free_space(Facts.given({space: (image,)}), Policy())
    assert outcome.status == Status.PASS and "read-only image" in outcome.details[0]
    refused = (
        NetFs("/home/alice/remote", "fuse.sshfs", "alice@box:", "permission_denied", None, None),
    )
    assert (
        storage.network_filesystems(Facts.given({netfs: refused}), Policy()).status == Status.PASS
    )


def test_a_path_this_user_may_not_see_is_not_an_error():
    from dldoctor.facts.storage import Space, space

    root = Space("/", "/", "ext4", "259:2", 100 * 2**30, 60 * 2**30, 1000, 900, "ok")
    hidden = Space("/scratch/alice", "", "", "", None, None, None, None, "permission_denied")
    outcome = storage.free_space(Facts.given({space: (root, hidden)}), Policy())
    assert outcome.status == Status.PASS
    hung = Space("/mnt/nfs", "/mnt/nfs", "nfs4", "0:52", None, None, None, None, "timeout")
    assert storage.free_space(Facts.given({space: (root, hung)}), Policy()).status == Status.ERROR


def test_a_policy_path_that_does_not_exist_is_a_finding_naming_it(tmp_path):
    from tests.support.cli import report_of, run_dldoctor
    from tests.support.paths import HOSTS

    policy = tmp_path / "p.toml"
    policy.write_text('[storage]\ndata_paths = ["/data", "/datasets/gone"]\n'
                      'checkpoint_paths = ["/checkpoints"]\n')  # fmt: skip
    proc = run_dldoctor("--check", "--json", "--only", "storage.space,storage.layout",
                        "--from", str(HOSTS / "hgx-h100x8-healthy"), "--policy", str(policy))  # fmt: skip
    found = {f["id"]: f for f in report_of(proc)["findings"]}
    space, layout = found["storage.space"], found["storage.layout"]
    assert space["status"] == "fail"
    assert space["summary"] == "/datasets/gone ([storage] data_paths) does not exist"
    assert "Mount or create the path" in space["remediation"]
    # Not placed on `/` as if it existed there.
    assert layout["status"] == "warn" and "/datasets/gone" in layout["summary"]
    assert not any(line.startswith("/datasets/gone: device") for line in layout["details"])
    # With only paths that exist, both checks judge as before.
    policy.write_text('[storage]\ndata_paths = ["/data"]\ncheckpoint_paths = ["/checkpoints"]\n')
    proc = run_dldoctor("--check", "--json", "--only", "storage.space,storage.layout",
                        "--from", str(HOSTS / "hgx-h100x8-healthy"), "--policy", str(policy))  # fmt: skip
    statuses = {f["id"]: f["status"] for f in report_of(proc)["findings"]}
    assert statuses == {"storage.space": "pass", "storage.layout": "pass"}


def test_a_missing_checkpoint_path_fails_free_space():
    from dldoctor.facts.storage import Space, space, space_fact
    from dldoctor.policy import StoragePolicy

    root = Space("/", "/", "ext4", "259:2", 100 * 2**30, 60 * 2**30, 1000, 900, "ok")
    gone = Space("/ckpt", "/", "ext4", "259:2", None, None, None, None, "missing")
    policy = Policy(storage=StoragePolicy(checkpoint_paths=("/ckpt",)))
    given = {space: (root,), space_fact(("/ckpt",)): (gone,)}
    outcome = storage.free_space(Facts.given(given), policy)
    assert outcome.status == Status.FAIL
    assert outcome.details == ("/ckpt ([storage] checkpoint_paths) does not exist",)


def nvme_check(b: BundleBuilder):
    return storage.nvme_health(Facts(ReplayHost(str(b.root))), Policy())


def test_a_smart_read_that_timed_out_is_an_error_not_a_pass(tmp_path):
    from dldoctor.facts.storage import nvme_smart_argv
    from tests.support.storage import nvme_bundle

    b = nvme_bundle(tmp_path)
    b.command(nvme_smart_argv("nvme0"), status="timeout", timeout_s=10)
    outcome = nvme_check(b)
    assert outcome.status == Status.ERROR
    assert outcome.summary.startswith("SMART of 1 NVMe drive(s) could not be read: nvme0: ")
    assert "timed out" in outcome.summary


def test_a_failing_drive_still_fails_beside_one_whose_smart_timed_out(tmp_path):
    from dldoctor.facts.storage import nvme_smart_argv, smartctl_argv
    from tests.support.storage import OWN, nvme_bundle

    b = nvme_bundle(tmp_path)
    b.file("/sys/class/nvme/nvme1/state", "live\n")
    b.command(nvme_smart_argv("nvme0"), status="not_installed")
    b.command(smartctl_argv("nvme0"), (OWN / "handwritten-smartctl-nvme-failing.json").read_text())
    b.command(smartctl_argv("nvme1"), status="timeout", timeout_s=10)
    outcome = nvme_check(b)
    assert outcome.status == Status.FAIL
    assert any(
        d.startswith("nvme1: `smartctl -H -A -j /dev/nvme1` did not answer")
        for d in outcome.details
    )


@pytest.mark.parametrize("status", ["not_installed", "permission_denied"])
def test_no_smart_tool_or_no_permission_stays_a_noted_pass(tmp_path, status):
    from dldoctor.facts.storage import nvme_smart_argv, smartctl_argv
    from tests.support.storage import nvme_bundle

    b = nvme_bundle(tmp_path)
    b.command(nvme_smart_argv("nvme0"), status=status)
    b.command(smartctl_argv("nvme0"), status="not_installed")
    outcome = nvme_check(b)
    assert (outcome.status, outcome.summary) == (
        Status.PASS,
        "1 NVMe drive(s) live; SMART unavailable",
    )
    assert outcome.details[-1].startswith("SMART not read: ")
