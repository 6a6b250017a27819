"""GPUDirect Storage (storage.gds) on real captures: NVIDIA's default /etc/cufile.json,
`gdscheck -p` outputs of GDS 1.7 and 1.16 and the stats header of nvidia-fs
(fixtures/gds, SOURCES.md), and the hgx-h100x8-gds-compat-mode fixture host."""

from __future__ import annotations

from dldoctor.checks import storage
from dldoctor.facts import Facts
from dldoctor.facts.gds import (
    Gds,
    gds,
    parse_cufile,
    parse_gdscheck,
    parse_stats,
    strip_comments,
)
from dldoctor.facts.mountinfo import Mount
from dldoctor.facts.storage import NvmeController, mounts, nvme
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from tests.support.paths import FIXTURES, HOSTS

GDS = FIXTURES / "gds"
DEFAULT = (GDS / "cufile-nvidia-default-gds_sandbox.json").read_text()
GDS_1_7 = (GDS / "gdscheck-p-1.7.1.12-gds-nvidia-fs-issue31-excerpt.txt").read_text()
GDS_1_16 = (GDS / "gdscheck-p-1.16.1.26-gds-nvidia-fs-issue77-excerpt.txt").read_text()
STATS = (GDS / "nvidia-fs-stats-troubleshooting-guide-weka-excerpt.txt").read_text()


def test_nvidias_default_cufile_json_parses_through_its_comments():
    cufile = parse_cufile(DEFAULT)
    assert cufile.error == ""
    assert cufile.get("properties", "allow_compat_mode") is True
    assert cufile.get("fs.weka", "rdma_write_support") is False
    assert cufile.get("fs.lustre", "posix_gds_min_kb") == 0
    assert cufile.get("denylist", "filesystems") == []
    assert cufile.get("fs.nfs", "rdma_dev_addr_list", "unset") == "unset"  # commented out


def test_comments_are_stripped_outside_strings_only():
    text = '{"url": "http://x//y", /* a */ "n": [1, 2,], // c\n "s": "/*k*/",}'
    assert parse_cufile(text).settings == {"url": "http://x//y", "n": [1, 2], "s": "/*k*/"}
    assert strip_comments('"a\\"//b"') == '"a\\"//b"'


def test_a_broken_cufile_json_is_an_answer_not_a_crash():
    for text in ("{", "[1, 2]", "\x00\xff", '{"properties": {"allow_compat_mode": tru}}', ""):
        cufile = parse_cufile(text)
        assert cufile.settings is None and cufile.error


def test_gdscheck_outputs_of_gds_1_7_and_1_16():
    old = parse_gdscheck(GDS_1_7)
    assert (old.release, old.nvidia_fs, old.nvidia_fs_minimum) == ("1.7.1.12", "2.17", "")
    assert old.drivers["NVMe"] is False and old.drivers["Userspace RDMA"] is False
    assert "--Mellanox PeerDirect" not in old.drivers and old.platform == ""
    new = parse_gdscheck(GDS_1_16)
    assert (new.release, new.nvidia_fs, new.nvidia_fs_minimum) == ("1.16.1.26", "2.27", "2.12")
    assert set(new.drivers) >= {"ScaTeFS", "VIRTIOFS", "BeeGFS"}
    assert parse_gdscheck("\x1b[2J garbage : Supported?\n").drivers == {}


def test_stats_header_versions():
    assert parse_stats(STATS) == ("1.0.0.80", "2.7.49")
    assert parse_stats("GDS Version: 0.9.0.743\nNVFS Driver(version: 2:3:1)\n") == (
        "0.9.0.743",
        "2.3.1",
    )
    assert parse_stats("") == ("", "")


def judged(found: Gds, table=(), drives=()):
    return storage.gpudirect_storage(
        Facts.given({gds: found, mounts: tuple(table), nvme: tuple(drives)}), Policy()
    )


def loaded(**kw) -> Gds:
    base = dict(nvidia_fs=True, nvidia_fs_version="2.27.3", stats=True,
                stats_gds_version="1.16.1.26", cufile=parse_cufile(DEFAULT))  # fmt: skip
    return Gds(**{**base, **kw})


def test_the_compat_mode_host_warns_and_a_host_without_gds_skips():
    outcome = storage.gpudirect_storage(
        Facts(ReplayHost(str(HOSTS / "hgx-h100x8-gds-compat-mode"))), Policy()
    )
    assert outcome.status == Status.WARN
    assert outcome.summary.startswith("nvidia_fs is not loaded: cuFile runs in compatibility")
    healthy = storage.gpudirect_storage(
        Facts(ReplayHost(str(HOSTS / "hgx-h100x8-healthy"))), Policy()
    )
    assert healthy.status == Status.SKIP and "not set up" in healthy.summary


def test_compat_mode_off_without_the_module_fails():
    strict = parse_cufile(
        DEFAULT.replace('"allow_compat_mode": true', '"allow_compat_mode": false')
    )
    outcome = judged(Gds(cufile=strict))
    assert outcome.status == Status.FAIL
    assert "every cuFile read and write fails" in outcome.summary


def test_a_cufile_json_that_is_not_json_warns():
    outcome = judged(loaded(cufile=parse_cufile('{"properties": {,}')))
    assert outcome.status == Status.WARN and "is not valid JSON" in outcome.summary


def test_gdscheck_minimum_and_nvme_support():
    # GDS 1.16 printed its minimum: a module older than it fails.
    older = parse_gdscheck(GDS_1_16.replace("nvidia_fs version:  2.27", "nvidia_fs version:  2.11"))
    assert judged(loaded(gdscheck=older)).status == Status.FAIL
    # NVMe Unsupported on a host with NVMe drives: GDS cannot reach them.
    drive = NvmeController("nvme0", model="SAMSUNG MZWLR7T6HALA-00007", firmware="MPK7525Q")
    outcome = judged(loaded(gdscheck=parse_gdscheck(GDS_1_16)), drives=[drive])
    assert outcome.status == Status.WARN and "NVMe Unsupported" in outcome.summary
    # The same output with NVMe Supported (edited) and the platform verified: a pass.
    good = GDS_1_16.replace("NVMe               : Unsupported", "NVMe               : Supported")
    fine = judged(loaded(gdscheck=parse_gdscheck(good + " Platform verification succeeded\n")),
                  drives=[drive])  # fmt: skip
    assert fine.status == Status.PASS
    assert fine.summary == "nvidia_fs 2.27.3 loaded; /proc/driver/nvidia-fs/stats (GDS 1.16.1.26)"
    assert "supported: NVMe, platform verification succeeded" in fine.details[1]


def test_network_filesystems_gds_cannot_use_are_named():
    tcp = Mount("/mnt/nfs", "nfs4", "filer:/export", "rw", "0:52", super_options="rw,proto=tcp")
    rdma = Mount("/mnt/fast", "nfs4", "filer:/fast", "rw", "0:53", super_options="proto=rdma")
    lnet = Mount("/lustre", "lustre", "10.0.0.1@tcp:/fs", "rw", "0:54")
    weka = Mount("/weka", "wekafs", "weka01/fs", "rw", "0:55")
    outcome = judged(loaded(), table=[tcp, rdma, lnet, weka])
    assert outcome.status == Status.PASS
    said = "\n".join(outcome.details)
    assert "/mnt/nfs (nfs4 from filer:/export): over TCP" in said and "/mnt/fast" not in said
    assert "/lustre (lustre from 10.0.0.1@tcp:/fs): LNet over TCP" in said
    assert "/weka (wekafs from weka01/fs): writes go through POSIX" in said
