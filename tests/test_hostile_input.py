"""Inputs that used to raise out of a parser (issue 9, section 1), one test each.

Each was found by fuzzing: a number past int()'s 4,300-digit limit, a digit str.isdigit()
accepts and int() refuses ("²"), JSON nested deeper than the decoder's recursion limit.
The parser must return what it understood, with a note, and never raise.
"""

from __future__ import annotations

import json

import pytest

from dldoctor.cudacompat import judge
from dldoctor.facts import Facts
from dldoctor.facts.acs import iommu
from dldoctor.facts.amd import parse_rocm_smi_json
from dldoctor.facts.cudalibs import parse_cudnn_header
from dldoctor.facts.limits import parse_limits_conf, parse_proc_limits, systemd_limit
from dldoctor.facts.mdraid import parse_mdadm_detail, parse_mdstat
from dldoctor.facts.numa import parse_cpulist_notes, parse_node_meminfo
from dldoctor.facts.nvsmi import parse_nvidia_smi_xml
from dldoctor.facts.pythonenv import python_environments
from dldoctor.facts.rdma import parse_ibv_devinfo, rdma_devices
from dldoctor.facts.reading import load_json
from dldoctor.facts.storage import parse_nvme_smart_log, parse_smartctl_json
from dldoctor.facts.system import PATH_PYTHON_ARGV, cgroup_memory_limit, parse_meminfo, path_python
from dldoctor.facts.toolkit import cuda_version_from_header, parse_version_json
from dldoctor.host.replay import ReplayHost
from dldoctor.versions import at_least, version_tuple
from tests.support.bundlebuilder import BundleBuilder
from tests.support.opens import watch_opens

HUGE = "1" * 4301  # one digit past int()'s default limit for a string
DEEP = "[" * 990  # past the JSON decoder's recursion limit under pytest's stack
DEEPER = "[" * 100_000

# --- integers past int()'s limit --------------------------------------------------------


def test_meminfo_with_a_huge_total_keeps_the_other_lines():
    values, notes = parse_meminfo(f"MemTotal: {HUGE} kB\nMemFree: 10 kB\n")
    assert values == {"MemFree": 10240}
    assert len(notes) == 1 and notes[0].startswith("unparsed line: 'MemTotal:")


def test_cpulist_with_a_huge_number():
    cpus, notes = parse_cpulist_notes(f"0-1,{HUGE},4-{HUGE}")
    assert cpus == (0, 1)
    assert len(notes) == 2 and all("too long" in n for n in notes)


def test_node_meminfo_with_a_huge_value():
    values, notes = parse_node_meminfo(f"Node 0 MemTotal: {HUGE} kB\nNode 0 MemFree: 1 kB\n")
    assert values == {"MemFree": 1024}
    assert len(notes) == 1


@pytest.mark.parametrize("text", [HUGE, f"12.{HUGE}", f"{HUGE}.4-generic"])
def test_version_tuple_of_a_huge_part_is_unparseable(text):
    assert version_tuple(text) is None
    assert at_least(text, "12.0") is None


def test_version_tuple_keeps_its_longest_readable_part():
    assert version_tuple("1" * 4300 + ".2") == (int("1" * 4300), 2)


def test_cuda_compatibility_judge_with_a_huge_version():
    for runtime, driver in ((HUGE, "535.104.05"), ("12.4", HUGE)):
        verdict = judge(runtime, driver)
        assert verdict is not None  # a verdict on unreadable versions, not a traceback


def test_proc_limits_with_a_huge_value_is_noted():
    text = (
        "Limit                     Soft Limit           Hard Limit           Units\n"
        f"Max open files            {HUGE}               1048576              files\n"
        "Max locked memory         unlimited            unlimited            bytes\n"
    )
    limits, notes = parse_proc_limits(text)
    assert "nofile" not in limits
    assert limits["memlock"] == (None, None)
    assert len(notes) == 1


def test_limits_conf_with_a_huge_value_is_noted():
    entries, notes = parse_limits_conf(f"* soft nofile {HUGE}\n* hard nofile 65536\n", "l.conf")
    assert [(e.type, e.value) for e in entries] == [("hard", 65536)]
    assert len(notes) == 1 and "is not a number" in notes[0]


def test_systemd_limit_with_a_huge_value_is_not_unlimited():
    assert systemd_limit(HUGE) == (False, None)
    assert systemd_limit("65536") == (True, 65536)


def test_mdstat_with_a_huge_member_index():
    got = parse_mdstat(
        f"Personalities : [raid1]\nmd0 : active raid1 sda[{HUGE}] sdb[0]\n"
        "      1000 blocks super 1.2 [2/2] [UU]\n"
    )
    (array,) = got.arrays
    assert [m.name for m in array.members] == ["sdb"] and array.blocks == 1000


def test_mdadm_detail_with_huge_numbers():
    got = parse_mdadm_detail(
        f"/dev/md0:\n        Raid Level : raid1\n      Raid Devices : {HUGE}\n"
        "    Number   Major   Minor   RaidDevice State\n"
        f"       {HUGE}       8        0        0      active sync   /dev/sda\n"
    )
    assert got.level == "raid1" and got.raid_devices is None


def test_ibv_devinfo_with_a_huge_mtu():
    got = parse_ibv_devinfo(
        "hca_id:\tmlx5_0\n\tfw_ver:\t\t\t\t28.39.1002\n\t\tport:\t1\n"
        "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
        f"\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t{HUGE}\n"
    )
    (port,) = got.ports
    assert port.state == "ACTIVE" and port.max_mtu == 4096 and port.active_mtu is None


@pytest.mark.parametrize("parse", [parse_nvme_smart_log, parse_smartctl_json])
def test_smart_json_with_a_huge_integer_is_a_note(parse):
    got = parse('{"temperature": ' + HUGE + ', "media_errors": 0}')
    assert got.media_errors is None and got.temperature_c is None
    assert len(got.notes) == 1 and "printed no JSON" in got.notes[0]


def test_smart_json_with_a_huge_digit_string_is_no_number():
    got = parse_nvme_smart_log(json.dumps({"media_errors": HUGE, "critical_warning": 0}))
    assert got.media_errors is None and got.critical_warning == 0


# --- "²": a digit to str.isdigit(), not to int() ---------------------------------------


def test_cuda_header_with_a_superscript_version():
    assert cuda_version_from_header("#define CUDA_VERSION ¹\n", "CUDA_VERSION") == ""


def test_cudnn_header_with_a_superscript_major():
    version, notes = parse_cudnn_header("#define CUDNN_MAJOR ²\n#define CUDNN_MINOR 1\n")
    assert version == "" and notes


def test_iommu_group_named_superscript_two(tmp_path):
    b = BundleBuilder(tmp_path).file("/proc/cmdline", "intel_iommu=on\n")
    b.file("/sys/class/iommu/dmar0/x", "")
    b.file("/sys/kernel/iommu_groups/²/type", "DMA\n")
    b.file("/sys/kernel/iommu_groups/0/type", "identity\n")
    got = Facts(ReplayHost(str(tmp_path))).get(iommu)
    assert got.enabled is True and got.groups == 2
    assert got.default_domain == "identity"  # group 0 sorts first, "²" after the numbers


def test_infiniband_port_and_gid_named_superscript_two(tmp_path):
    base = "/sys/class/infiniband/mlx5_0"
    b = BundleBuilder(tmp_path).file(f"{base}/fw_ver", "28.39.1002\n")
    b.file(f"{base}/ports/²/state", "4: ACTIVE\n")
    b.file(f"{base}/ports/1/state", "4: ACTIVE\n")
    b.file(f"{base}/ports/1/gids/²", "fe80:0000:0000:0000:0000:0000:0000:0001\n")
    b.file(f"{base}/ports/1/gids/0", "fe80:0000:0000:0000:0000:0000:0000:0002\n")
    (device,) = Facts(ReplayHost(str(tmp_path))).get(rdma_devices)
    assert [p.port for p in device.ports] == [1]
    assert [g.index for g in device.ports[0].gids] == [0]


def test_cgroup_memory_max_of_superscript_two(tmp_path):
    BundleBuilder(tmp_path).file("/sys/fs/cgroup/memory.max", "²\n")
    assert Facts(ReplayHost(str(tmp_path))).get(cgroup_memory_limit) is None


# --- JSON nested past the recursion limit ---------------------------------------------


@pytest.mark.parametrize("text", [DEEP, DEEPER])
def test_deep_json_in_the_smart_readers(text):
    for parse in (parse_nvme_smart_log, parse_smartctl_json):
        got = parse(text)
        assert got.media_errors is None and len(got.notes) == 1


@pytest.mark.parametrize("text", [DEEP, DEEPER])
def test_deep_json_from_rocm_smi(text):
    gpus, driver, notes = parse_rocm_smi_json(text)
    assert (gpus, driver) == ([], "") and notes[0].startswith("rocm-smi printed no JSON")


@pytest.mark.parametrize("text", [DEEP, DEEPER])
def test_deep_cuda_version_json(text):
    version, notes = parse_version_json(text)
    assert version == "" and notes[0].startswith("version.json is not JSON")


def test_load_json_says_why_and_never_raises():
    assert load_json('{"a": 1}') == ({"a": 1}, "")
    assert load_json(DEEPER) == (None, "nested too deeply")
    data, why = load_json(HUGE)  # ValueError without .msg: the old error path raised
    assert data is None and "4300" in why
    assert load_json("nope")[0] is None and load_json("nope")[1]


# --- the Python facts -----------------------------------------------------------------


def test_python_probe_with_a_relative_sys_path_entry(tmp_path):
    # normpath("") is "." and "." has no parent: the real-path helper recursed forever.
    BundleBuilder(tmp_path).probe(
        "python", {"executable": "/usr/bin/python3", "version": "3.10.12", "sys_path": ["x"]}
    )
    got = Facts(ReplayHost(str(tmp_path))).get(python_environments)
    assert got.environments[0].site_dirs == ("x",)


def test_python3_on_path_printing_deep_brackets(tmp_path):
    BundleBuilder(tmp_path).command(list(PATH_PYTHON_ARGV), DEEPER + "\n")
    got = Facts(ReplayHost(str(tmp_path))).get(path_python)
    assert got.executable == "" and got.sys_path == ()
    assert got.notes[0].startswith("python3 on PATH printed '[[[")


# --- nvidia-smi -q -x: one absurd value --------------------------------------------------


def test_nvidia_smi_xml_with_an_absurd_gpu_count_keeps_the_gpus():
    got = parse_nvidia_smi_xml(
        "<nvidia_smi_log><driver_version>535.104.05</driver_version>"
        "<cuda_version>12.2</cuda_version>"
        f"<attached_gpus>{'9' * 400}</attached_gpus>"
        '<gpu id="00000000:3B:00.0"><product_name>NVIDIA H100 80GB HBM3</product_name>'
        "<uuid>GPU-0</uuid></gpu></nvidia_smi_log>"
    )
    assert got.error == "" and got.driver_version == "535.104.05"
    assert [g.name for g in got.gpus] == ["NVIDIA H100 80GB HBM3"]
    assert any(n.startswith("attached_gpus: ") and "out of range" in n for n in got.notes)


def test_a_huge_nvlink_number_is_noted_not_expanded():
    # The link states are a list up to the highest link: `Link 10^13` once took 10 GB.
    from dldoctor.facts.nvlink import parse_nvlink_status

    text = "GPU 0: NVIDIA H100 (UUID: GPU-x)\n\tLink 9999999999999: 26.562 GB/s\n\tLink 1: 26.562 GB/s\n"
    (status,), notes = parse_nvlink_status(text)
    assert status.states == (False, True)
    assert notes == (
        "nvlink -s: link number out of range ignored: 'Link 9999999999999: 26.562 GB/s'",
    )


def test_a_huge_port_state_code_in_ibv_devinfo_is_not_a_crash():
    # Found by the deep property run: `state: PORT_ACTIVE (1111…4,301 digits)`.
    from dldoctor.facts.rdma import parse_ibv_devinfo

    text = (
        "hca_id:\tmlx5_0\n\tfw_ver:\t\t2.40.7000\n\tDevice ports:\n\t\tport:\t1\n"
        f"\t\t\tstate:\t\t\tPORT_ACTIVE ({'1' * 4301})\n\t\t\tactive_mtu:\t\t4096 (5)\n"
    )
    (port,) = parse_ibv_devinfo(text).ports
    assert (port.state, port.state_code, port.active_mtu) == ("ACTIVE", None, 4096)


def test_a_huge_sxid_link_number_is_unknown_not_a_crash():
    # Found by the deep property run: `SXid (...): 20034, Fatal, Link 1111…(4,301 digits)`.
    from dldoctor.facts.sxid import parse_sxid

    line = (
        "[131453.740743] nvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Fatal, "
        f"Link {'1' * 4301} LTSSM Fault Up"
    )
    (event,), _ = parse_sxid(line)
    assert (event.sxid, event.link) == (20034, None)


def test_undecodable_file_names_in_a_bundle_are_replayed_and_recorded(tmp_path):
    # os keeps b"\xff\xfe" as surrogates, which no UTF-8 report or bundle can hold: they
    # made `snapshot --from` exit 5 (UnicodeEncodeError)
    import os
    import shutil

    from tests.support.cli import run_dldoctor
    from tests.support.paths import HOSTS

    host = tmp_path / "host"
    shutil.copytree(HOSTS / "hgx-h100x8-driver535", host, symlinks=True)
    for folder in ("sys/bus/pci/devices", "sys/class/infiniband"):
        os.mkdir(os.fsencode(host / "files" / folder) + b"/\xff\xfe")
    listing = ReplayHost(str(host)).listdir("/sys/class/infiniband")
    assert "\ufffd\ufffd" in listing.value
    out = tmp_path / "again.tar.gz"
    proc = run_dldoctor("snapshot", "--from", str(host), "-o", str(out), "--no-redact")
    assert proc.returncode in (0, 1, 3), proc.stderr
    assert out.stat().st_size > 0 and "internal error" not in proc.stderr


def test_a_fifo_in_a_bundle_is_never_opened(tmp_path, monkeypatch):
    # opening a device runs its driver; opening a FIFO is as much a hostile bundle's choice
    import os
    import shutil

    from tests.support.paths import HOSTS

    host = tmp_path / "host"
    shutil.copytree(HOSTS / "hgx-h100x8-driver535", host, symlinks=True)
    fifo = host / "files" / "proc" / "meminfo"
    fifo.unlink()
    os.mkfifo(fifo)
    (host / "files" / "proc" / "cpuinfo").unlink()
    os.symlink("meminfo", host / "files" / "proc" / "cpuinfo")  # a link to it, inside
    replay = ReplayHost(str(host))
    opened = watch_opens(monkeypatch)
    for path in ("/proc/meminfo", "/proc/cpuinfo"):
        answer = replay.read(path)
        assert (answer.status, answer.error) == ("error", "not a regular file")
    assert replay.read("/proc/mdstat").status == "ok"
    assert [p for p in opened if p.endswith("meminfo")] == [] and len(opened) == 1
