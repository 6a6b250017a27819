"""Storage facts: md RAID (/proc/mdstat, mdadm --detail), NVMe inventory and SMART, mounts,
free space and network filesystems.

Parsers run on real captures (fixtures/corpus/mdstat, mdadm-detail, nvme-sysfs; see
fixtures/SOURCES.md) and on fixtures/storage (own fixtures, see its SOURCES.md); the facts
on hand-built bundles, on the nvme sysfs tree through LiveHost(root=...), and a hung
statvfs through LiveHost with os.statvfs made to block for one mount.
"""

from __future__ import annotations

import os
import threading

import pytest

from dldoctor.facts import Facts
from dldoctor.facts import mdraid as md
from dldoctor.facts import storage as st
from dldoctor.facts.mdraid import MdadmMember, MdArray, MdMember, SyncProgress
from dldoctor.facts.mountinfo import parse_mountinfo
from dldoctor.host import LiveHost
from dldoctor.host import live as live_host
from dldoctor.host.recording import RecordingHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Evidence
from tests.support.bundlebuilder import BundleBuilder
from tests.support.guards import returns
from tests.support.paths import FIXTURES
from tests.support.storage import OWN, nvme_bundle

CORPUS = FIXTURES / "corpus"
MDSTAT = CORPUS / "mdstat"
MDADM = CORPUS / "mdadm-detail"
NVME_TREE = CORPUS / "nvme-sysfs"
GIB = 1024**3


def facts_of(b: BundleBuilder) -> Facts:
    return Facts(ReplayHost(str(b.root)))


def mdstat_of(name: str) -> md.Mdstat:
    return md.parse_mdstat((MDSTAT / name).read_text())


# --- expected-array helpers -----------------------------------------------------------


def act(name: str, index: int) -> MdMember:
    return MdMember(name, index, "active", ())


def spare(name: str, index: int) -> MdMember:
    return MdMember(name, index, "spare", ("S",))


def failed(name: str, index: int) -> MdMember:
    return MdMember(name, index, "failed", ("F",))


def array(name, level, members, blocks, disks=None, *, state="active", status="",
          degraded=False, sync=None, bitmap="", metadata="", chunk="", external=""):  # fmt: skip
    n, m = disks if disks else (None, None)
    return MdArray(
        name=name,
        state=state,
        level=level,
        members=tuple(members),
        blocks=blocks,
        raid_disks=n,
        active_disks=m,
        status_map=status,
        degraded=degraded,
        sync=sync,
        bitmap=bitmap,
        external=external,
        metadata=metadata,
        chunk=chunk,
    )


def sync(action, percent, done, total, finish, speed):
    return SyncProgress(action, percent, done, total, finish, speed)


ALL_PERSONALITIES = ("raid6", "raid5", "raid4", "linear", "multipath", "raid0", "raid1", "raid10")
R1456 = ("raid1", "raid6", "raid5", "raid4")


# --- /proc/mdstat: one test per corpus file -------------------------------------------


def test_mdstat_pymdstat_01_empty_no_arrays_no_final_newline():
    text = (MDSTAT / "pymdstat-01-empty-no-arrays.txt").read_text()
    assert not text.endswith("\n")
    assert md.parse_mdstat(text) == md.Mdstat((), (), (), ())


def test_mdstat_pymdstat_02_partitionable_md_d0_raid5_bitmap():
    got = mdstat_of("pymdstat-02-raid5-md_d0-bitmap-clean.txt")
    assert got.personalities == R1456
    assert got.arrays == (
        array("md_d0", "raid5",
              [act("sde1", 0), act("sdf1", 4), act("sdb1", 5), act("sdd1", 2), act("sdc1", 1)],
              1250241792, (5, 5), status="UUUUU", bitmap="0/10 pages [0KB], 16384KB chunk",
              metadata="1.2", chunk="64k"),
    )  # fmt: skip
    assert got.notes == () and got.unused_devices == ()


def test_mdstat_pymdstat_04_three_raid1_and_ten_disk_raid5():
    got = mdstat_of("pymdstat-04-raid1x3-plus-raid5-10disk-clean.txt")
    assert got.personalities == R1456
    ten = [act(f"sd{c}1", i) for i, c in reversed(list(enumerate("cdefghijkl")))]
    assert got.arrays == (
        array("md1", "raid1", [act("sdb2", 1), act("sda2", 0)], 136448, (2, 2), status="UU"),
        array("md2", "raid1", [act("sdb3", 1), act("sda3", 0)], 129596288, (2, 2), status="UU"),
        array("md3", "raid5", ten, 1318680576, (10, 10), status="U" * 10, chunk="1024k"),
        array("md0", "raid1", [act("sdb1", 1), act("sda1", 0)], 16787776, (2, 2), status="UU"),
    )
    assert got.notes == ()


def test_mdstat_pymdstat_05_raid5_degraded_recovering_12_percent():
    text = (MDSTAT / "pymdstat-05-raid5-degraded-recovery-12pct.txt").read_text()
    assert text.endswith("<none> ")  # trailing space, no newline
    got = md.parse_mdstat(text)
    members = [act("sdh1", 6), act("sdg1", 4), act("sdf1", 3), act("sde1", 2), act("sdd1", 1),
               act("sdc1", 0)]  # fmt: skip
    assert got.arrays == (
        array("md127", "raid5", members, 1464725760, (6, 5), status="UUUUU_", degraded=True,
              sync=sync("recovery", 12.6, 37043392, 292945152, 127.5, 33440), chunk="64k"),
    )  # fmt: skip
    assert got.notes == () and got.unused_devices == ()


def test_mdstat_pymdstat_07_raid1_six_way_with_failed_member():
    got = mdstat_of("pymdstat-07-raid1-6way-failed-member-degraded.txt")
    assert got.personalities == ("raid1",)
    members = [failed("sde1", 6), act("sdg1", 1), act("sdb1", 4), act("sdd1", 3), act("sdc1", 2)]
    assert got.arrays == (
        array("md1", "raid1", members, 488383936, (6, 4), status="_UUUU_", degraded=True),
    )
    assert got.arrays[0].failed_members == (failed("sde1", 6),)


def test_mdstat_pymdstat_10_raid1_and_raid0_on_sd_and_nvme():
    got = mdstat_of("pymdstat-10-raid1-raid0-nvme-mixed-clean.txt")
    assert got.personalities == ("raid0", "raid1", "linear", "multipath", "raid6", "raid5",
                                 "raid4", "raid10")  # fmt: skip
    six = [act("sdg", 4), act("sdc", 1), act("sdf", 3), act("sdh", 5), act("sde", 2), act("sdb", 0)]
    assert got.arrays == (
        array("md129", "raid1", [act("sda3", 0), act("sdd3", 1)], 15825920, (2, 2),
              status="UU", metadata="1.2"),
        array("md128", "raid1", [act("sda2", 0), act("sdd2", 1)], 126887936, (2, 2),
              status="UU", metadata="1.2", bitmap="1/1 pages [4KB], 65536KB chunk"),
        array("md125", "raid0", six, 2306837760, metadata="1.2", chunk="128k"),
        array("md126", "raid0", [act("nvme0n1", 0), act("nvme1n1", 1)], 999948288,
              metadata="1.2", chunk="3072k"),
    )  # fmt: skip


def test_mdstat_pymdstat_12_raid0_on_loop_devices():
    got = mdstat_of("pymdstat-12-raid0-loop-devices.txt")
    assert got.arrays == (
        array("md127", "raid0", [act("loop1", 1), act("loop0", 0)], 10475520,
              metadata="1.2", chunk="32k"),
    )  # fmt: skip
    assert got.arrays[0].degraded is False and got.arrays[0].raid_disks is None


def test_mdstat_pymdstat_14_trailing_no_break_space_after_personalities():
    text = (MDSTAT / "pymdstat-14-raid0-trailing-space-personalities.txt").read_text()
    assert "[raid0]\u00a0\n" in text
    got = md.parse_mdstat(text)
    assert got.personalities == ("raid0",)
    assert got.arrays == (
        array("md127", "raid0", [act("sda", 0), act("sdb", 1)], 4188160, metadata="1.2",
              chunk="256k"),
    )  # fmt: skip
    assert got.notes == ()


def test_mdstat_pymdstat_16_no_unused_devices_line():
    text = (MDSTAT / "pymdstat-16-raid5-8disk-no-trailing-unused.txt").read_text()
    assert "unused" not in text
    got = md.parse_mdstat(text)
    assert got.personalities == ALL_PERSONALITIES
    members = [act("sdd", 2), act("sdf", 8), act("sdb", 6), act("sda", 0), act("sdh", 5),
               act("sdc", 1), act("sde", 7), act("sdg", 3)]  # fmt: skip
    assert got.arrays == (
        array("md1", "raid5", members, 95705752576, (8, 8), status="U" * 8, metadata="1.2",
              chunk="512k", bitmap="2/102 pages [8KB], 65536KB chunk"),
    )  # fmt: skip


def test_mdstat_procfs_composite_every_state():
    got = mdstat_of("procfs-composite-many-states-reshape-check-imsm.txt")
    assert got.personalities == ("linear", "multipath", "raid0", "raid1", "raid6", "raid5",
                                 "raid4", "raid10")  # fmt: skip
    assert got.notes == () and got.unused_devices == ()
    md3_members = [act("sda1", 8), act("sdh1", 7), act("sdg1", 6), act("sdf1", 5),
                   act("sde1", 11), act("sdd1", 3), act("sdc1", 10), act("sdb1", 9),
                   spare("sdd1", 10), spare("sdd2", 11)]  # fmt: skip
    expected = (
        array("md3", "raid6", md3_members, 5853468288, (8, 8), status="U" * 8,
              metadata="1.2", chunk="64k"),
        array("md127", "raid1", [act("sdi2", 0), act("sdj2", 1)], 312319552, (2, 2),
              status="UU"),
        array("md0", "raid1", [act("sdi1", 0), act("sdj1", 1)], 248896, (2, 2), status="UU"),
        array("md4", "raid1", [failed("sda3", 0), spare("sdb3", 1)], 4883648, (2, 2),
              state="inactive", status="UU"),
        array("md6", "raid1", [failed("sdb2", 2), spare("sdc", 1), act("sda2", 0)], 195310144,
              (2, 1), status="U_", degraded=True,
              sync=sync("recovery", 8.5, 16775552, 195310144, 17.0, 259783)),
        array("md8", "raid1", [act("sdb1", 1), act("sda1", 0), spare("sdc", 2), spare("sde", 3)],
              195310144, (2, 2), status="UU",
              sync=sync("resync", 8.5, 16775552, 195310144, 17.0, 259783)),
        array("md201", "raid1", [act("sda3", 0), act("sdb3", 1)], 1993728, (2, 2), status="UU",
              metadata="1.2", sync=sync("check", 5.7, 114176, 1993728, 0.2, 114176)),
        array("md7", "raid6", [act("sdb1", 0), act("sde1", 3), act("sdd1", 2), failed("sdc1", 1)],
              7813735424, (4, 3), status="U_UU", degraded=True, metadata="1.2", chunk="512k",
              bitmap="0/30 pages [0KB], 65536KB chunk"),
        array("md9", "raid1", [act("sdc2", 2), act("sdd2", 3), act("sdb2", 1), act("sda2", 0),
                               failed("sde", 4), failed("sdf", 5), spare("sdg", 6)],
              523968, (4, 4), status="UUUU", metadata="1.2",
              sync=SyncProgress("resync", delayed=True)),
        array("md10", "raid0", [act("sda1", 0), act("sdb1", 1)], 314159265, chunk="64k"),
        array("md11", "raid1", [act("sdb2", 0), act("sdc2", 1), failed("sdc3", 2),
                                spare("hda", 4), spare("ssdc2", 3)],
              4190208, (2, 2), state="active (auto-read-only)", status="UU", metadata="1.2",
              sync=SyncProgress("resync", pending=True)),
        array("md12", "raid0", [act("sdc2", 0), act("sdd2", 1)], 3886394368, metadata="1.2",
              chunk="512k"),
        array("md126", "raid0", [act("sdb", 1), act("sdc", 0)], 1855870976,
              metadata="external:/md127/0", external="/md127/0", chunk="128k"),
        array("md219", "", [spare("sdb", 2), spare("sdc", 1), spare("sda", 0)], 7932,
              state="inactive", metadata="external:imsm", external="imsm"),
        array("md00", "raid0", [act("xvdb", 0)], 4186624, metadata="1.2", chunk="256k"),
        array("md120", "linear", [act("sda1", 1), act("sdb1", 0)], 2095104, metadata="1.2"),
        array("md101", "raid0", [act("sdb", 2), act("sdd", 1), act("sdc", 0)], 322560,
              state="active (read-only)", metadata="1.2", chunk="512k"),
        array("md42", "raid5", [spare("sda1", 3), act("sdd1", 0), act("sde1", 1)], 1953381440,
              (3, 2), status="UU_", degraded=True, metadata="1.2", chunk="64k",
              sync=sync("reshape", 56.1, 1096879076, 1953381440, 1868.1, 7640),
              bitmap="4/15 pages [16KB], 65536KB chunk"),
    )  # fmt: skip
    assert [a.name for a in got.arrays] == [a.name for a in expected]
    for have, want in zip(got.arrays, expected, strict=True):
        assert have == want, have.name
    assert [a.name for a in got.arrays if a.degraded] == ["md6", "md7", "md42"]


def test_every_corpus_mdstat_file_has_a_test_and_parses_without_notes():
    names = sorted(p.name for p in MDSTAT.iterdir())
    assert len(names) == 10
    for name in names:
        got = mdstat_of(name)
        assert got.notes == () and all(a.notes == () for a in got.arrays), name


def test_mdstat_write_mostly_replacement_journal_and_unused_devices():
    got = md.parse_mdstat(
        (OWN / "handwritten-mdstat-write-mostly-replacement-journal.txt").read_text()
    )
    assert got.personalities == ("raid1", "raid6", "raid5", "raid4", "raid10")
    assert got.unused_devices == ("sdy", "sdz")
    md5, md6, md7, md8, md9 = got.arrays
    assert md5.members == (MdMember("sdb1", 1, "write-mostly", ("W",)), act("sda1", 0))
    assert md6.members[0] == MdMember("sdd1", 4, "replacement", ("R",))
    assert md6.sync == sync("recovery", 6.3, 61697024, 976630272, 85.2, 178944)
    assert md6.degraded is False  # a replacement is rebuilt while the array stays whole
    assert md7.members[0] == MdMember("sde", 3, "failed", ("W", "F"))
    assert (md7.level, md7.chunk, md7.raid_disks, md7.active_disks, md7.status_map) == (
        "raid10", "512k", 4, 3, "UUU_")  # fmt: skip
    assert md7.degraded is True
    assert md8.members[0] == MdMember("nvme2n1", 3, "journal", ("J",))
    assert (md9.state, md9.level, md9.members, md9.blocks) == (
        "inactive", "", (spare("sdx", 0),), 976630488)  # fmt: skip
    assert got.notes == () and all(a.notes == () for a in got.arrays)


@pytest.mark.parametrize("text", [
    "",
    "\n\n",
    "garbage\x00\xff",
    "md0 : active raid1 sda1[0] ???\n      100 blocks [2/2] [UU]\n      weird line\n",
    "      100 blocks [2/2] [UU]\n",
    "md0 : somethingelse\n",
    "md0 :\n",
    "Personalities : [raid1\n",
])  # fmt: skip
def test_parse_mdstat_never_raises_and_notes_odd_lines(text):
    got = md.parse_mdstat(text)
    assert isinstance(got, md.Mdstat)


def test_parse_mdstat_odd_lines_are_noted():
    got = md.parse_mdstat("md0 : active raid1 sda1[0] ???\n  100 blocks [2/2] [UU]\n  weird\n")
    (a,) = got.arrays
    assert a.members == (act("sda1", 0),)
    assert a.notes == ("unparsed member '???'", "unparsed line 'weird'")
    assert md.parse_mdstat("  100 blocks\n").notes == ("line outside any array: '100 blocks'",)


# --- mdadm --detail -------------------------------------------------------------------


def test_mdadm_detail_md0_raid5_reshaping_with_spare():
    got = md.parse_mdadm_detail((MDADM / "insights-mdadm-d-content-md0.txt").read_text())
    assert (got.device, got.level, got.state) == ("/dev/md0", "raid5", "active, reshaping")
    assert (got.raid_devices, got.total_devices, got.active, got.working, got.failed,
            got.spare) == (21, 22, 21, 22, 0, 1)  # fmt: skip
    assert got.reshape_status == "28% complete" and got.rebuild_status == ""
    assert got.fields["Delta Devices"] == "6, (15->21)"
    assert got.fields["Name"] == "hostname:0  (local to host hostname)"
    assert len(got.members) == 22
    assert got.members[0] == MdadmMember(0, 0, "active sync", "/dev/sdo1")
    assert got.members[14] == MdadmMember(15, 14, "active sync", "/dev/sdb1")
    assert got.members[15] == MdadmMember(22, 15, "active sync", "/dev/sdv1")
    assert got.members[-1] == MdadmMember(16, None, "spare", "/dev/sda1")
    assert [m.raid_device for m in got.members[:-1]] == list(range(21))
    assert got.notes == ()


def test_mdadm_detail_md2_clean_raid1_on_nvme():
    got = md.parse_mdadm_detail((MDADM / "insights-mdadm-d-content-md2.txt").read_text())
    assert (got.device, got.level, got.state, got.raid_devices, got.total_devices) == (
        "/dev/md2", "raid1", "clean", 2, 2)  # fmt: skip
    assert (got.active, got.working, got.failed, got.spare) == (2, 2, 0, 0)
    assert got.members == (
        MdadmMember(0, 0, "active sync", "/dev/nvme2n1"),
        MdadmMember(1, 1, "active sync", "/dev/nvme3n1"),
    )
    assert got.fields["Consistency Policy"] == "bitmap"
    assert got.notes == ()


def test_mdadm_examine_output_gives_what_it_shares_and_says_so():
    got = md.parse_mdadm_detail((MDADM / "insights-mdadm-content.txt").read_text())
    assert (got.device, got.level, got.state) == ("/dev/loop0", "raid1", "clean")
    assert got.raid_devices == 2
    assert got.members == () and got.active is None and got.total_devices is None
    assert got.fields["Device Role"] == "Active device 0"
    assert got.fields["Array State"].startswith("AA (")
    assert got.fields["Checksum"] == "395066e8 - correct"
    assert len(got.notes) == 1 and "--examine" in got.notes[0]


def test_mdadm_detail_degraded_rebuilding_removed_and_faulty_rows():
    got = md.parse_mdadm_detail(
        (OWN / "handwritten-mdadm-detail-degraded-rebuilding.txt").read_text()
    )
    assert got.state == "clean, degraded, recovering"
    assert got.rebuild_status == "12% complete"
    assert (got.raid_devices, got.active, got.working, got.failed, got.spare) == (3, 1, 2, 1, 1)
    assert got.members == (
        MdadmMember(0, 0, "active sync", "/dev/sda1"),
        MdadmMember(2, 1, "spare rebuilding", "/dev/sdb1"),
        MdadmMember(None, 2, "removed", ""),
        MdadmMember(3, None, "faulty", "/dev/sdc1"),
    )
    assert got.notes == ()


@pytest.mark.parametrize("text", ["", "mdadm: must be super-user\n", "\x00\xff", "/dev/md0:\n"
                                  "   Raid Devices : lots\n    Number Major\n   0 1\n"])  # fmt: skip
def test_parse_mdadm_detail_never_raises(text):
    got = md.parse_mdadm_detail(text)
    assert isinstance(got, md.MdadmDetail)
    assert got.notes


# --- the raid.md fact -----------------------------------------------------------------


def md_bundle(tmp_path) -> BundleBuilder:
    b = BundleBuilder(tmp_path / "b")
    b.file(
        "/proc/mdstat", (MDSTAT / "pymdstat-07-raid1-6way-failed-member-degraded.txt").read_text()
    )
    for attr, value in (("degraded", "2"), ("sync_action", "idle"), ("array_state", "clean"),
                        ("raid_disks", "6")):  # fmt: skip
        b.file(f"/sys/block/md1/md/{attr}", value + "\n")
    return b


def test_raid_md_fact_reads_mdstat_sysfs_and_mdadm(tmp_path):
    b = md_bundle(tmp_path)
    b.command(["mdadm", "--detail", "/dev/md1"],
              (MDADM / "insights-mdadm-d-content-md2.txt").read_text())  # fmt: skip
    got = facts_of(b).get(md.md_raid)
    assert [a.name for a in got.mdstat.arrays] == ["md1"]
    assert got.sysfs == {"md1": {"degraded": "2", "sync_action": "idle",
                                 "array_state": "clean", "raid_disks": "6"}}  # fmt: skip
    assert got.details["md1"].level == "raid1"
    assert got.notes == ()


def test_raid_md_fact_without_mdadm_notes_it_once(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.file("/proc/mdstat", (MDSTAT / "pymdstat-04-raid1x3-plus-raid5-10disk-clean.txt").read_text())
    b.command(["mdadm", "--detail", "/dev/md1"], status="not_installed")
    got = facts_of(b).get(md.md_raid)
    assert len(got.mdstat.arrays) == 4
    assert got.details == {}
    assert got.sysfs == {"md1": {}, "md2": {}, "md3": {}, "md0": {}}
    assert len(got.notes) == 1 and "mdadm is not installed" in got.notes[0]


def test_raid_md_fact_mdadm_refused_as_non_root(tmp_path):
    b = md_bundle(tmp_path)
    b.command(["mdadm", "--detail", "/dev/md1"], "", returncode=1,
              stderr="mdadm: must be super-user to perform this action\n")  # fmt: skip
    got = facts_of(b).get(md.md_raid)
    assert got.details == {}
    assert got.notes == (
        "`mdadm --detail /dev/md1` exited 1: mdadm: must be super-user to perform this action",
    )


def test_raid_md_fact_without_mdstat_is_none(tmp_path):
    got = facts_of(BundleBuilder(tmp_path / "b")).get(md.md_raid)
    assert got.mdstat is None and got.details == {} and "md driver" in got.notes[0]


# --- NVMe -----------------------------------------------------------------------------


def test_nvme_sysfs_corpus_tree_through_livehost_root():
    # PATH points nowhere: the commands (which always concern this machine) are "not installed".
    host = LiveHost(root=str(NVME_TREE), env={"PATH": "/nonexistent"})
    (ctrl,) = Facts(host).get(st.nvme)
    assert ctrl.name == "nvme0"
    assert ctrl.model == "Samsung SSD 970 PRO 512GB"  # sysfs pads it with blanks
    assert (ctrl.serial, ctrl.firmware, ctrl.state) == ("S680HF8N190894I", "1B2QEXP7", "live")
    assert ctrl.transport == ""  # the fixture has no transport attribute
    assert ctrl.namespaces == ("nvme0n0",)
    assert ctrl.smart is None
    assert len(ctrl.notes) == 1
    assert "nvme-cli" in ctrl.notes[0] and "smartmontools" in ctrl.notes[0]


def test_smartctl_json_real_capture():
    text = (OWN / "smartctl_exporter-nvme-Samsung_SSD_970_EVO_Plus_250GB-nvme0.json").read_text()
    assert st.parse_smartctl_json(text) == st.SmartHealth(
        "smartctl", critical_warning=0, media_errors=0, percent_used=0, available_spare=100,
        spare_threshold=10, passed=True, temperature_c=35)  # fmt: skip


def test_smartctl_json_failing_drive():
    text = (OWN / "handwritten-smartctl-nvme-failing.json").read_text()
    assert st.parse_smartctl_json(text) == st.SmartHealth(
        "smartctl", critical_warning=4, media_errors=7, percent_used=105, available_spare=5,
        spare_threshold=10, passed=False, temperature_c=41)  # fmt: skip


def test_smartctl_json_permission_denied_has_no_values():
    got = st.parse_smartctl_json((OWN / "handwritten-smartctl-permission-denied.json").read_text())
    assert not got.has_values
    assert got.notes[0] == "smartctl: Smartctl open device: /dev/nvme0 failed: Permission denied"


def test_nvme_cli_1x_smart_log_real_sample():
    got = st.parse_nvme_smart_log((OWN / "handwritten-nvme-cli-1.x-smart-log.json").read_text())
    assert got == st.SmartHealth(
        "nvme-cli", critical_warning=0, media_errors=0, percent_used=4, available_spare=100,
        spare_threshold=10, passed=None, temperature_c=35)  # 308 K  # fmt: skip


def test_nvme_cli_2x_smart_log_with_string_counters():
    got = st.parse_nvme_smart_log(
        (OWN / "handwritten-nvme-cli-2.x-smart-log-worn.json").read_text()
    )
    assert got == st.SmartHealth(
        "nvme-cli", critical_warning=1, media_errors=12, percent_used=97, available_spare=3,
        spare_threshold=10, passed=None, temperature_c=45)  # fmt: skip


def test_nvme_cli_other_key_spellings_and_odd_values():
    got = st.parse_nvme_smart_log(
        '{"critical_warning": {"value": 2}, "percentage_used": 3.0, "available_spare": 99,'
        ' "available_spare_threshold": 10, "media_errors": "n/a"}'
    )
    assert (got.critical_warning, got.percent_used, got.available_spare, got.spare_threshold,
            got.media_errors) == (2, 3, 99, 10, None)  # fmt: skip
    assert got.notes == ("media_errors is not a number: 'n/a'",)


@pytest.mark.parametrize("parse", [st.parse_nvme_smart_log, st.parse_smartctl_json])
@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", "null", '{"smart_status": 3}'])
def test_smart_parsers_never_raise(parse, text):
    got = parse(text)
    assert not got.has_values and got.notes


def test_nvme_fact_with_nvme_cli(tmp_path):
    b = nvme_bundle(tmp_path)
    b.command(
        st.nvme_smart_argv("nvme0"),
        (OWN / "handwritten-nvme-cli-2.x-smart-log-worn.json").read_text(),
    )
    (ctrl,) = facts_of(b).get(st.nvme)
    assert (ctrl.model, ctrl.transport, ctrl.namespaces) == (
        "SAMSUNG MZQL23T8HCLS-00A07",
        "pcie",
        ("nvme0n1",),
    )
    assert ctrl.smart.source == "nvme-cli" and ctrl.smart.critical_warning == 1
    assert ctrl.notes == ()


def test_nvme_fact_falls_back_to_smartctl(tmp_path):
    b = nvme_bundle(tmp_path)
    b.command(st.nvme_smart_argv("nvme0"), status="not_installed")
    b.command(st.smartctl_argv("nvme0"), (OWN / "handwritten-smartctl-nvme-failing.json").read_text(),
              returncode=8)  # fmt: skip
    (ctrl,) = facts_of(b).get(st.nvme)
    assert ctrl.smart.source == "smartctl" and ctrl.smart.passed is False
    assert ctrl.notes == ("`smartctl -H -A -j /dev/nvme0` exited 8",)


def test_nvme_fact_nvme_cli_refused(tmp_path):
    b = nvme_bundle(tmp_path)
    b.command(st.nvme_smart_argv("nvme0"), "", returncode=1, stderr="Permission denied\n")
    (ctrl,) = facts_of(b).get(st.nvme)
    assert ctrl.smart is None
    assert ctrl.notes == (
        "`nvme smart-log /dev/nvme0 --output-format=json` exited 1: Permission denied",
    )


@pytest.mark.parametrize("status", ["timeout", "error"])
def test_nvme_fact_a_smart_read_that_failed_is_not_a_missing_tool(tmp_path, status):
    b = nvme_bundle(tmp_path)
    b.command(st.nvme_smart_argv("nvme0"), status=status, timeout_s=10, error="broken pipe")
    (ctrl,) = facts_of(b).get(st.nvme)
    assert ctrl.smart is None
    assert ctrl.smart_error.startswith("`nvme smart-log /dev/nvme0 --output-format=json`")
    assert ("timed out" in ctrl.smart_error) == (status == "timeout")


def test_nvme_fact_neither_tool(tmp_path):
    b = nvme_bundle(tmp_path)
    b.command(st.nvme_smart_argv("nvme0"), status="not_installed")
    b.command(st.smartctl_argv("nvme0"), status="not_installed")
    (ctrl,) = facts_of(b).get(st.nvme)
    assert ctrl.smart is None and "install nvme-cli or smartmontools" in ctrl.notes[0]
    assert ctrl.smart_error == ""


def test_nvme_fact_dead_controller_is_not_asked(tmp_path):
    (ctrl,) = facts_of(nvme_bundle(tmp_path, state="dead")).get(st.nvme)
    assert ctrl.state == "dead" and ctrl.smart is None
    assert ctrl.notes == ("controller state is 'dead': SMART not asked",)


def test_nvme_fact_no_nvme_class_is_empty(tmp_path):
    assert facts_of(BundleBuilder(tmp_path / "b")).get(st.nvme) == ()


# --- mountinfo ------------------------------------------------------------------------

# Lines of prometheus/procfs mountinfo_test.go (Apache-2.0; see fixtures/storage/SOURCES.md),
# then hand-written ones with the kernel's octal escapes.
MOUNTINFO = (
    "16 21 0:16 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "hello\n"
    "225 20 0:39 / /run/user/112 rw,nosuid,nodev,relatime  - tmpfs tmpfs "
    "rw,size=405096k,mode=700,uid=112,gid=116\n"
    "225 20 0:39 / /run/user/112 rw,nosuid,nodev,relatime shared:177 master:8 foo:bar - tmpfs "
    "tmpfs rw,size=405096k,mode=700,uid=112,gid=116\n"
    "40 22 0:45 / /mnt/my\\040data\\011x rw,relatime - cifs //nas/share\\040one rw,vers=3.1.1\n"
    "41 22 259:3 /sub\\134dir /srv/back\\134slash rw - ext4 /dev/nvme0n1p3 rw\n"
)


def test_parse_mountinfo_fields_and_escapes():
    got = parse_mountinfo(MOUNTINFO)
    assert got[0] == st.Mount("/sys", "sysfs", "sysfs", "rw,nosuid,nodev,noexec,relatime", "0:16",
                              "/", "rw")  # fmt: skip
    assert got[1] == st.Mount("/run/user/112", "tmpfs", "tmpfs", "rw,nosuid,nodev,relatime",
                              "0:39", "/", "rw,size=405096k,mode=700,uid=112,gid=116")  # fmt: skip
    assert got[2] == got[1]  # optional fields, valid or not, do not matter
    assert got[3] == st.Mount("/mnt/my data\tx", "cifs", "//nas/share one", "rw,relatime", "0:45",
                              "/", "rw,vers=3.1.1")  # fmt: skip
    assert (got[4].mount_point, got[4].root) == ("/srv/back\\slash", "/sub\\dir")
    assert len(got) == 5  # "hello" skipped


@pytest.mark.parametrize(
    "text", ["", "\x00", "1 2 3 - x", "a b c d e f - ", "1 2 x:y / / rw - e s o"]
)
def test_parse_mountinfo_never_raises(text):
    assert parse_mountinfo(text) == ()


def test_mount_of_longest_prefix_and_last_mount_wins():
    table = parse_mountinfo(
        "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
        "2 1 8:2 / /data rw - ext4 /dev/sda2 rw\n"
        "3 1 0:50 / /data rw - nfs4 srv:/data rw\n"
        "4 1 8:3 / /data2 rw - xfs /dev/sda3 rw\n"
    )
    assert st.mount_of("/data/x/y", table).source == "srv:/data"
    assert st.mount_of("/data", table).fstype == "nfs4"
    assert st.mount_of("/data2/z", table).fstype == "xfs"
    assert st.mount_of("/datax", table).mount_point == "/"
    assert st.mount_of("/x", ()) is None


# --- free space (replay) --------------------------------------------------------------

ROOT_MOUNTS = (
    "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
    "30 22 0:30 / /tmp rw,nosuid,nodev shared:5 - tmpfs tmpfs rw,size=8g\n"
    "31 22 259:5 / /data rw,relatime shared:6 - xfs /dev/nvme1n1 rw\n"
    "32 22 0:61 / /mnt/lustre rw shared:7 - lustre 10.0.0.1@o2ib:/scratch rw,flock\n"
    "33 22 0:62 / /mnt/btrfs rw shared:8 - btrfs /dev/sdb rw\n"
)


def statvfs(blocks: int, bavail: int, files: int = 1000, ffree: int = 900, frsize: int = 4096):
    return {"f_bsize": 4096, "f_frsize": frsize, "f_blocks": blocks, "f_bfree": bavail,
            "f_bavail": bavail, "f_files": files, "f_ffree": ffree, "f_favail": ffree,
            "f_flag": 0, "f_namemax": 255}  # fmt: skip


def space_bundle(tmp_path) -> BundleBuilder:
    b = BundleBuilder(tmp_path / "b")
    b.file("/proc/self/mountinfo", ROOT_MOUNTS)
    b.answer("statvfs", "/", status="ok", value=statvfs(1000, 250))
    b.answer("statvfs", "/tmp", status="ok", value=statvfs(2000, 2000))
    return b


def test_space_fact_root_and_tmp_without_docker(tmp_path):
    got = facts_of(space_bundle(tmp_path)).get(st.space)
    assert [s.path for s in got] == ["/", "/tmp"]
    root, tmp = got
    assert root == st.Space("/", "/", "ext4", "259:2", 1000 * 4096, 250 * 4096, 1000, 900, "ok",
                            (), "/dev/nvme0n1p2")  # fmt: skip
    assert (tmp.mount_point, tmp.fstype, tmp.size_bytes) == ("/tmp", "tmpfs", 2000 * 4096)


def test_space_fact_docker_root_when_it_exists(tmp_path):
    b = space_bundle(tmp_path)
    b.answer("list", "/var/lib/docker", status="permission_denied")  # exists, not readable
    b.answer("statvfs", "/var/lib/docker", status="ok", value=statvfs(10, 1))
    docker = facts_of(b).get(st.space)[-1]
    assert (docker.path, docker.mount_point, docker.answer_status) == ("/var/lib/docker", "/", "ok")


def test_space_fact_for_policy_paths_link_timeout_missing_and_no_inodes(tmp_path):
    b = space_bundle(tmp_path)
    b.link("/datasets", "/data/sets")
    b.answer("statvfs", "/datasets", status="ok", value=statvfs(5000, 4000))
    b.answer("statvfs", "/mnt/lustre/ckpt", status="timeout", timeout_s=5.0)
    b.answer("statvfs", "/mnt/btrfs", status="ok", value=statvfs(100, 50, files=0, ffree=0))
    fact = st.space_fact(("/datasets", "/mnt/lustre/ckpt", "/gone", "/mnt/btrfs"))
    assert fact.name == "storage.space:/datasets,/mnt/lustre/ckpt,/gone,/mnt/btrfs"
    assert st.space_fact(["/datasets", "/mnt/lustre/ckpt", "/gone", "/mnt/btrfs"]) is fact
    facts = facts_of(b)
    datasets, lustre, gone, btrfs = facts.get(fact)
    assert (datasets.mount_point, datasets.fstype, datasets.free_bytes) == (
        "/data",
        "xfs",
        4000 * 4096,
    )
    assert datasets.notes == ("/datasets is a link to /data/sets",)
    assert lustre.answer_status == "timeout" and lustre.size_bytes is None
    assert (lustre.mount_point, lustre.fstype, lustre.source) == (
        "/mnt/lustre", "lustre", "10.0.0.1@o2ib:/scratch")  # fmt: skip
    assert lustre.notes == (
        "statvfs /mnt/lustre/ckpt did not answer within 5 s (timed out): the lustre filesystem "
        "mounted on /mnt/lustre from 10.0.0.1@o2ib:/scratch hangs",
    )
    assert (gone.answer_status, gone.notes) == ("missing", ("/gone does not exist",))
    assert (btrfs.inodes, btrfs.free_inodes, btrfs.size_bytes) == (None, None, 100 * 4096)
    assert Evidence("statvfs", "/mnt/lustre/ckpt", "timeout") in facts.evidence(fact)


def test_space_permission_denied_and_error_are_results(tmp_path):
    b = space_bundle(tmp_path)
    b.answer("statvfs", "/secret", status="permission_denied")
    b.answer("statvfs", "/broken", status="error", error="Input/output error")
    secret, broken = facts_of(b).get(st.space_fact(("/secret", "/broken")))
    assert secret.answer_status == "permission_denied"
    assert secret.notes == ("statvfs /secret: permission denied (the ext4 filesystem mounted on / "
                            "from /dev/nvme0n1p2)",)  # fmt: skip
    assert broken.answer_status == "error" and "Input/output error" in broken.notes[0]


# --- network filesystems (replay) -----------------------------------------------------

NET_MOUNTS = (
    "22 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
    "40 22 0:50 / /home rw - nfs4 fs1:/home rw,vers=4.2,hard\n"
    "41 22 0:51 / /mnt/lustre rw - lustre 10.0.0.1@o2ib:/scratch rw\n"
    "42 22 0:52 / /mnt/ceph rw - ceph 10.0.0.5:6789:/ rw,name=ml\n"
    "43 22 0:53 / /mnt/remote rw - fuse.sshfs user@host:/data rw,user_id=0\n"
    "44 22 0:54 / /mnt/c rw - 9p drvfs rw,aname=drvfs\n"
    "45 22 0:55 / /net rw - autofs /etc/auto.net rw,fd=7\n"
    "46 22 0:56 / /mnt/wsl rw - tmpfs tmpfs rw\n"
    "47 22 0:57 / /old rw - nfs old:/x rw\n"
    "48 22 0:58 / /old rw - tmpfs tmpfs rw\n"
)


def test_netfs_fact_statuses_never_raise(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.file("/proc/self/mountinfo", NET_MOUNTS)
    b.answer("statvfs", "/home", status="ok", value=statvfs(1 << 20, 1 << 19))
    b.answer("statvfs", "/mnt/lustre", status="timeout", timeout_s=5.0)
    b.answer("statvfs", "/mnt/ceph", status="permission_denied")
    facts = facts_of(b)
    got = facts.get(st.netfs)
    assert [(n.mount_point, n.fstype, n.status) for n in got] == [
        ("/home", "nfs4", "ok"),
        ("/mnt/lustre", "lustre", "timeout"),
        ("/mnt/ceph", "ceph", "permission_denied"),
        ("/mnt/remote", "fuse.sshfs", "missing"),  # not in the bundle
    ]  # 9p, autofs, tmpfs, and the nfs hidden under a tmpfs on /old are not network mounts
    home, lustre, ceph, _ = got
    assert (home.size_bytes, home.free_bytes, home.source) == (
        (1 << 20) * 4096, (1 << 19) * 4096, "fs1:/home")  # fmt: skip
    assert lustre.notes == ("statvfs /mnt/lustre did not answer within 5 s (timed out): the "
                            "lustre filesystem mounted on /mnt/lustre from 10.0.0.1@o2ib:/scratch "
                            "hangs",)  # fmt: skip
    assert "permission denied" in ceph.notes[0] and "/mnt/ceph" in ceph.notes[0]
    assert Evidence("statvfs", "/mnt/lustre", "timeout") in facts.evidence(st.netfs)


def test_netfs_fact_without_network_mounts(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.file("/proc/self/mountinfo", "22 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n")
    assert facts_of(b).get(st.netfs) == ()


# --- a statvfs that blocks, through LiveHost ------------------------------------------


@pytest.fixture
def blocking_statvfs(monkeypatch):
    """os.statvfs as LiveHost calls it, blocked for any path under a `hung*` folder until
    the test ends (a hard NFS mount whose server is gone)."""
    release = threading.Event()
    real = os.statvfs

    def fake(path, *args, **kwargs):
        if "/mnt/hung" in os.fspath(path):
            release.wait(30)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(live_host.os, "statvfs", fake)
    yield
    release.set()


def hung_root(tmp_path, hung: int) -> str:
    root = tmp_path / "root"
    lines = [
        "22 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw",
        "40 22 0:50 / /mnt/ok rw - nfs4 ok:/x rw",
    ]
    (root / "mnt" / "ok").mkdir(parents=True)
    for i in range(hung):
        name = "hung" if i == 0 else f"hung{i}"
        (root / "mnt" / name).mkdir()
        lines.append(f"{41 + i} 22 0:{60 + i} / /mnt/{name} rw - nfs4 dead{i}:/export rw,hard")
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "self" / "mountinfo").write_text("\n".join(lines) + "\n")
    return str(root)


def test_hung_statvfs_finishes_within_the_filesystem_timeout_and_names_the_mount(
    tmp_path, blocking_statvfs
):
    host = RecordingHost(LiveHost(root=hung_root(tmp_path, 1), fs_timeout=0.3))
    facts = Facts(host)
    # The statvfs stays blocked until the test ends: "timeout" is the 0.3 s limit firing.
    got = returns(facts.get, st.netfs)
    ok, hung = got
    assert (ok.mount_point, ok.status) == ("/mnt/ok", "ok") and ok.size_bytes > 0
    assert (hung.mount_point, hung.status, hung.size_bytes) == ("/mnt/hung", "timeout", None)
    assert hung.notes == ("statvfs /mnt/hung did not answer within 0.3 s (timed out): the nfs4 "
                          "filesystem mounted on /mnt/hung from dead0:/export hangs",)  # fmt: skip

    (space,) = returns(facts.get, st.space_fact(("/mnt/hung/checkpoints",)))
    assert (space.answer_status, space.mount_point, space.fstype) == (
        "timeout",
        "/mnt/hung",
        "nfs4",
    )
    assert "/mnt/hung" in space.notes[-1] and "dead0:/export" in space.notes[-1]

    # The recording keeps the timeout: a replay of the bundle says the same.
    host.write_bundle(str(tmp_path / "bundle"))
    assert Facts(ReplayHost(str(tmp_path / "bundle"))).get(st.netfs) == got


def test_several_hung_mounts_cost_about_one_timeout(tmp_path, monkeypatch):
    # Each hung statvfs answers only once all four are blocked at the same time: asked one
    # after the other (four timeouts), each would time out waiting for the others.
    all_asked = threading.Barrier(4)
    real = os.statvfs

    def fake(path, *args, **kwargs):
        if "/mnt/hung" in os.fspath(path):
            all_asked.wait(60)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(live_host.os, "statvfs", fake)
    host = LiveHost(root=hung_root(tmp_path, 4), fs_timeout=10)
    got = returns(Facts(host).get, st.netfs)
    assert [n.status for n in got] == ["ok"] * 5


# --- this machine ---------------------------------------------------------------------


def test_live_host_storage_facts_on_this_machine():
    facts = Facts(LiveHost())
    root = facts.get(st.space)[0]
    assert root.path == "/" and root.answer_status == "ok" and root.size_bytes > 0
    assert root.mount_point == "/"
    assert any(m.mount_point == "/" for m in facts.get(st.mounts))
    assert isinstance(facts.get(st.netfs), tuple)
    assert isinstance(facts.get(st.nvme), tuple)
    raid = facts.get(md.md_raid)
    assert raid.mdstat is None or isinstance(raid.mdstat, md.Mdstat)


def test_member_map_takes_removed_slots_and_the_rebuilt_member_from_mdadm():
    # raid1 [2/1] [U_] recovering onto sdb1; mdadm's table names the member being rebuilt.
    array = MdArray(
        "md0", "active", "raid1", (MdMember("sdb1", 2, "active"), MdMember("sda1", 0, "active")),
        raid_disks=2, active_disks=1, status_map="U_", degraded=True,
        sync=SyncProgress("recovery", 40.0),
    )  # fmt: skip
    detail = md.MdadmDetail(
        raid_devices=2, active=1,
        members=(MdadmMember(0, 0, "active sync", "/dev/sda1"),
                 MdadmMember(2, 1, "spare rebuilding", "/dev/sdb1")),
    )  # fmt: skip
    mm = md.member_map(array, {"degraded": "1"}, detail)
    assert (mm.missing, mm.empty_slots, mm.rebuilding, mm.rebuilding_names) == (
        1,
        (1,),
        1,
        ("sdb1",),
    )
    assert mm.recovery_covers
    gone = md.MdadmDetail(raid_devices=2, active=1,
                          members=(MdadmMember(0, 0, "active sync", "/dev/sda1"),
                                   MdadmMember(None, 1, "removed", "")))  # fmt: skip
    bare = MdArray("md0", "active", "raid1", (MdMember("sda1", 0, "active"),), raid_disks=2,
                   active_disks=1, status_map="U_", degraded=True)  # fmt: skip
    mm = md.member_map(bare, {}, gone)
    assert (mm.missing, mm.empty_slots, mm.rebuilding, mm.recovery_covers) == (1, (1,), 0, False)
