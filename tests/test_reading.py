"""facts/reading.py: the one rule for an answer a fact reads, and the one integer parser.

The rule is tried on LiveHost over small trees made here (a FIFO nobody writes to is a
read that blocks), and on a replayed bundle for what root cannot be denied.
"""

from __future__ import annotations

import os

import pytest

from dldoctor.facts import Facts
from dldoctor.facts.cudalibs import parse_cudnn_header
from dldoctor.facts.mdraid import md_raid, member_map, parse_mdstat
from dldoctor.facts.reading import answer_text, read_listing, read_text, to_int
from dldoctor.facts.storage import nvme
from dldoctor.facts.system import cgroup_memory_limit
from dldoctor.facts.thermal import thermal_sensors
from dldoctor.facts.toolkit import cuda_version_from_header
from dldoctor.host import LiveHost
from dldoctor.host.base import ProbeFailed
from dldoctor.host.replay import ReplayHost
from tests.support.bundlebuilder import BundleBuilder
from tests.support.guards import returns
from tests.support.marks import nonroot

# --- the rule on a live tree -----------------------------------------------------------


def test_ok_is_the_stripped_text_and_missing_is_none_without_a_note(tmp_path):
    (tmp_path / "dev0").mkdir()
    (tmp_path / "dev0" / "model").write_text("  Samsung PM9A3 \n")
    host, notes = LiveHost(root=str(tmp_path)), []
    assert read_text(host, "/dev0/model", notes) == "Samsung PM9A3"
    assert read_listing(host, "/dev0", notes) == ("model",)
    assert read_text(host, "/dev0/absent", notes) is None
    assert read_listing(host, "/absent", notes) is None
    assert notes == []


def test_an_error_is_none_and_a_note_naming_the_path(tmp_path):
    (tmp_path / "dev0" / "power").mkdir(parents=True)  # a folder where a file is read
    os.symlink("loop_b", tmp_path / "loop_a")
    os.symlink("loop_a", tmp_path / "loop_b")
    host, notes = LiveHost(root=str(tmp_path)), []
    assert read_text(host, "/dev0/power", notes) is None
    assert read_listing(host, "/loop_a", notes) is None
    assert len(notes) == 2
    assert notes[0].startswith("read /dev0/power: ") and "directory" in notes[0].lower()
    assert notes[1].startswith("list /loop_a: ")


def test_a_note_keeps_a_long_path_whole(tmp_path):
    folder = tmp_path / "sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors"
    folder.mkdir(parents=True)
    notes: list[str] = []
    path = "/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors"
    assert read_text(LiveHost(root=str(tmp_path)), path, notes) is None
    assert notes[0].startswith(f"read {path}: ")  # describe() would cut it at 57 characters


@nonroot
def test_permission_denied_live(tmp_path):
    secret = tmp_path / "serial"
    secret.write_text("S1234\n")
    secret.chmod(0)
    notes: list[str] = []
    assert read_text(LiveHost(root=str(tmp_path)), "/serial", notes) is None
    assert notes == ["read /serial: permission denied"]


def test_permission_denied_replayed(tmp_path):
    b = BundleBuilder(tmp_path).file("/sys/class/nvme/nvme0/model", "PM9A3\n")
    b.answer("read", "/sys/class/nvme/nvme0/serial", status="permission_denied")
    b.answer("list", "/sys/class/nvme/nvme0", status="permission_denied")
    host, notes = ReplayHost(str(tmp_path)), []
    assert read_text(host, "/sys/class/nvme/nvme0/serial", notes) is None
    assert read_listing(host, "/sys/class/nvme/nvme0", notes) is None
    assert read_text(host, "/sys/class/nvme/nvme0/model", notes) == "PM9A3"
    assert notes == [
        "read /sys/class/nvme/nvme0/serial: permission denied",
        "list /sys/class/nvme/nvme0: permission denied",
    ]


@pytest.fixture
def blocking_fifo(tmp_path):
    """A FIFO with no writer: opening it for reading blocks until a writer comes."""
    fifo = tmp_path / "temp"
    os.mkfifo(fifo)
    yield fifo
    try:  # let the reader thread the timeout left behind finish
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # no reader is waiting any more
        pass


def test_a_timeout_raises_probe_failed(tmp_path, blocking_fifo):
    host = LiveHost(root=str(tmp_path), fs_timeout=0.2)

    def read():  # blocks on the FIFO, whose writer never comes, until the timeout fires
        with pytest.raises(ProbeFailed) as raised:
            read_text(host, "/temp", [])
        return raised.value

    assert returns(read).answer.status == "timeout"
    # Even where failures are not noted, a timeout is not a value.
    with pytest.raises(ProbeFailed):
        answer_text(host.read("/temp"), None)


def test_notes_none_leaves_an_error_unnoted(tmp_path):
    (tmp_path / "power").mkdir()
    answer = LiveHost(root=str(tmp_path)).read("/power")
    assert answer.status == "error"
    assert answer_text(answer, None) is None


# --- the rule in the facts that moved to it -------------------------------------------


def test_nvme_attribute_timeout_fails_the_fact(tmp_path):
    b = BundleBuilder(tmp_path).file("/sys/class/nvme/nvme0/serial", "S1234\n")
    b.answer("read", "/sys/class/nvme/nvme0/model", status="timeout", timeout_s=5.0)
    with pytest.raises(ProbeFailed):
        Facts(ReplayHost(str(tmp_path))).get(nvme)


def test_nvme_unreadable_attribute_is_a_note_of_that_controller(tmp_path):
    b = BundleBuilder(tmp_path)
    b.file("/sys/class/nvme/nvme0/state", "dead\n").file("/sys/class/nvme/nvme1/state", "dead\n")
    b.file("/sys/class/nvme/nvme1/model", "PM9A3\n")
    b.answer("read", "/sys/class/nvme/nvme0/model", status="error", error="EIO")
    first, second = Facts(ReplayHost(str(tmp_path))).get(nvme)
    assert (first.model, second.model) == ("", "PM9A3")
    assert "read /sys/class/nvme/nvme0/model: EIO" in first.notes
    assert not any("model" in n for n in second.notes)


def test_md_sysfs_timeout_fails_the_fact(tmp_path):
    b = BundleBuilder(tmp_path).file(
        "/proc/mdstat",
        "Personalities : [raid1]\nmd0 : active raid1 sdb1[1] sda1[0]\n"
        "      1000 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n",
    )
    b.answer("read", "/sys/block/md0/md/degraded", status="timeout", timeout_s=5.0)
    with pytest.raises(ProbeFailed):
        Facts(ReplayHost(str(tmp_path))).get(md_raid)


def test_thermal_unreadable_label_is_noted(tmp_path):
    b = BundleBuilder(tmp_path).file("/sys/class/thermal/thermal_zone0/temp", "41000\n")
    b.answer("read", "/sys/class/thermal/thermal_zone0/type", status="error", error="EIO")
    got = Facts(ReplayHost(str(tmp_path))).get(thermal_sensors)
    assert [(s.label, s.celsius) for s in got] == [("thermal_zone0 (unlabelled)", 41.0)]
    assert got.notes == ("read /sys/class/thermal/thermal_zone0/type: EIO",)


# --- to_int ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, kwargs, expected",
    [
        (" 12\n", {}, 12),
        ("-1", {}, -1),
        ("-1", {"minimum": 0}, None),  # numa_node: the firmware did not say
        ("0", {"minimum": 0}, 0),
        ("0x10", {"base": 0}, 16),
        ("0x10", {}, None),
        ("16", {"base": 0}, 16),
        ("0x41", {"base": 16}, 65),
        ("²", {}, None),  # str.isdigit() says yes, int() raises
        ("1²", {}, None),
        ("٣", {}, None),  # int() reads 3; no kernel writes it
        ("1_000", {}, None),
        ("", {}, None),
        ("   ", {}, None),
        (None, {}, None),
        ("12 kB", {}, None),
        ("4: ACTIVE", {}, None),
        (str(2**64 - 1), {}, 2**64 - 1),  # the widest counter a kernel writes
        (str(2**64), {}, None),
        (str(-(2**64)), {}, None),
        ("1" * 4300, {}, None),  # int() takes it; no host writes it, a float cannot hold it
        ("1" * 4301, {}, None),  # int() raises past its 4,300-digit limit
    ],
)
def test_to_int(text, kwargs, expected):
    assert to_int(text, **kwargs) == expected


def test_to_int_of_64_bits_in_every_base():
    assert to_int("0x" + "f" * 16, base=0) == 2**64 - 1
    assert to_int("f" * 17, base=16) is None
    assert to_int("0b" + "1" * 64, base=0) == 2**64 - 1


# --- the integer parsing that used to raise ---------------------------------------------


def test_md_member_map_takes_a_superscript_degraded_count():
    mdstat = parse_mdstat(
        "Personalities : [raid1]\nmd0 : active raid1 sdb1[1] sda1[0]\n"
        "      1000 blocks super 1.2 [2/1] [U_]\n"
    )
    assert member_map(mdstat.arrays[0], {"degraded": "²"}).missing == 1
    assert member_map(mdstat.arrays[0], {"degraded": "2\n"}).missing == 2


def test_mdstat_with_a_number_past_ints_limit_does_not_raise():
    got = parse_mdstat(
        "Personalities : [raid1]\n"
        f"md0 : active raid1 sdb1[{'7' * 5000}] sda1[0]\n"
        f"      {'9' * 5000} blocks super 1.2 [2/2] [UU]\n"
    )
    (array,) = got.arrays
    assert array.blocks is None and array.raid_disks == 2
    assert [m.name for m in array.members] == ["sda1"]
    assert any("unparsed member" in n for n in array.notes)


def test_headers_with_a_superscript_version_do_not_raise():
    assert cuda_version_from_header("#define CUDART_VERSION 12040\n", "CUDART_VERSION") == "12.4"
    assert cuda_version_from_header("#define CUDART_VERSION 1²\n", "CUDART_VERSION") == ""
    assert parse_cudnn_header("#define CUDNN_MAJOR ²\n#define CUDNN_MINOR 1\n")[0] == ""


@pytest.mark.parametrize(
    "v2, expected", [("68719476736\n", 68719476736), ("max\n", None), ("²\n", None)]
)
def test_cgroup_memory_limit_reads_v2(tmp_path, v2, expected):
    b = BundleBuilder(tmp_path).file("/sys/fs/cgroup/memory.max", v2)
    assert Facts(ReplayHost(str(b.root))).get(cgroup_memory_limit) == expected
