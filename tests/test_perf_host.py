"""The active tier's host tests (checks/perf_host.py): fio and the memory script run for
real on a temporary folder of this machine's disk and are judged; the parsers read real
captures (tests/fixtures/SOURCES.md, "perf/"); a recorded run replays to its figures."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dldoctor.active import fio, membw, perftest
from dldoctor.checks import perf_host
from dldoctor.facts import Facts
from dldoctor.facts.numa import Numactl, NumaNode, NumaTopology, numa_topology, numactl
from dldoctor.facts.rdma import RdmaPort
from dldoctor.host.base import Answer, AnswerStatus, CommandResult, Op
from dldoctor.host.live import MEASURING_SCRIPTS, LiveHost
from dldoctor.host.recording import RecordingHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import PerfPolicy, PerfReference, Policy, StoragePolicy
from dldoctor.runner import run_check
from tests.support.bundlebuilder import BundleBuilder

FIXTURES = Path(__file__).parent / "fixtures" / "perf"
HOSTS = Path(__file__).parent / "fixtures" / "hosts"
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


def volumes(path: Path, **storage) -> Policy:
    return Policy(storage=StoragePolicy(data_paths=(str(path),),
                                        checkpoint_paths=(str(path),), **storage))  # fmt: skip


def check(fn, facts: Facts, policy: Policy):
    return run_check(fn.__dldoctor_check__, facts, policy)


def figures(finding) -> dict[tuple[str, str], tuple[float, str]]:
    return {(f.subject, f.what): (f.value, f.unit) for f in finding.figures}


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir()]


# --- fio, for real ---------------------------------------------------------------------


@needs_fio
def test_fio_reads_and_writes_a_real_volume_judged_and_replayed(tmp_path):
    volume = tmp_path / "volume"
    volume.mkdir()
    policy = volumes(volume)
    recording = RecordingHost(LiveHost())
    facts = Facts(recording)
    read = check(perf_host.disk_read, facts, policy)
    write = check(perf_host.disk_write, facts, policy)

    assert read.status == Status.PASS, (read.summary, read.details)
    got = figures(read)
    seq, rand = got[(str(volume), "seq_read")], got[(str(volume), "rand_read_4k")]
    assert seq[1] == "GB/s" and seq[0] > 0
    assert rand[1] == "IOPS" and rand[0] > 0
    assert "sequential read" in read.summary and "4K random read" in read.summary
    assert write.status == Status.PASS, (write.summary, write.details)
    value, unit = figures(write)[(str(volume), "seq_write")]
    assert unit == "GB/s" and value > 0
    assert "GB/s" in write.summary
    # The scratch folders and their test files are gone.
    assert leftovers(volume) == []

    # The bundle holds the commands under their placeholders and replays the figures.
    bundle = tmp_path / "bundle"
    recording.write_bundle(str(bundle))
    argv = {tuple(a) for answer, a in recording.answers if a and a[0] == "fio"}
    assert tuple(fio.read_argv()) in argv and tuple(fio.write_argv()) in argv
    replayed = Facts(ReplayHost(str(bundle)))
    assert figures(check(perf_host.disk_read, replayed, policy)) == got
    assert figures(check(perf_host.disk_write, replayed, policy)) == figures(write)


@needs_fio
def test_a_site_reference_fails_a_volume_below_it(tmp_path):
    """A reference no disk reaches (a site's own, as genconf pins it): the volume fails
    and the summary says the figure, its fraction and the reference."""
    policy = replace(volumes(tmp_path), perf=PerfPolicy(
        references=(PerfReference("seq_write", 1e6, str(tmp_path)),)))  # fmt: skip
    finding = check(perf_host.disk_write, Facts(LiveHost()), policy)
    assert finding.status == Status.FAIL
    assert "sequential write" in finding.summary and "of 1000000 GB/s" in finding.summary
    assert finding.figures[0].source.startswith("policy perf.references")


def test_the_free_space_floor_refuses_before_fio_runs(tmp_path):
    """A floor no volume can keep after the test file: nothing is written, the check
    skips and names the policy key."""
    host = RecordingHost(LiveHost())
    policy = volumes(tmp_path, fail_free_percent=100.0)
    for fn in (perf_host.disk_read, perf_host.disk_write):
        finding = check(fn, Facts(host), policy)
        assert finding.status == Status.SKIP
        assert "storage.fail_free_percent" in finding.summary
        assert "256 MiB test file" in finding.summary
    assert not [a for a, argv in host.answers if argv and argv[0] == "fio"]
    assert leftovers(tmp_path) == []


def test_without_fio_the_disk_checks_skip_naming_it(tmp_path, monkeypatch):
    bare = tmp_path / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))
    for fn in (perf_host.disk_read, perf_host.disk_write):
        finding = check(fn, Facts(LiveHost()), volumes(tmp_path))
        assert finding.status == Status.SKIP
        assert finding.summary == "fio is not installed (apt install fio)"


def test_without_policy_paths_the_disk_checks_skip_naming_the_key():
    facts = Facts.given({})
    read = check(perf_host.disk_read, facts, Policy())
    write = check(perf_host.disk_write, facts, Policy())
    assert read.status == write.status == Status.SKIP
    assert "[storage] data_paths" in read.summary
    assert "[storage] checkpoint_paths" in write.summary


def test_a_path_that_does_not_exist_is_not_measured(tmp_path):
    finding = check(perf_host.disk_read, Facts(LiveHost()), volumes(tmp_path / "absent"))
    assert finding.status == Status.SKIP
    assert "does not exist" in finding.summary


# --- fio's JSON ------------------------------------------------------------------------


def test_fio_json_of_a_real_read_run():
    run = fio.parse_fio_json((FIXTURES / "fio-read.json").read_text())
    assert run.version == "fio-3.33" and not run.notes
    seq, rand = run.job("seq_read"), run.job("rand_read_4k")
    assert seq.read_bytes_per_s == 342872581 and seq.error == 0
    assert rand.read_iops == pytest.approx(51555.9, abs=0.1)
    # --group_reporting: the four random jobs are one group, their runtimes summed.
    assert rand.runtime_ms > 3 * seq.runtime_ms


def test_fio_json_of_a_real_write_run():
    run = fio.parse_fio_json((FIXTURES / "fio-write.json").read_text())
    job = run.job("seq_write")
    assert job.write_bytes_per_s == 358985420 and job.read_bytes_per_s == 0


def test_fio_json_after_a_note_on_stdout_and_garbage():
    text = (FIXTURES / "fio-write.json").read_text()
    noted = "note: both iodepth >= 1 and synchronous I/O engine are selected\n" + text
    assert fio.parse_fio_json(noted).job("seq_write") is not None
    assert fio.parse_fio_json("fio: bad option").notes == ("fio printed no JSON",)
    assert fio.parse_fio_json('{"jobs": 3}').notes == ("fio's JSON has no jobs",)
    assert "printed no JSON" in fio.parse_fio_json("\n{oops").notes[0]


def test_a_fio_that_fails_is_an_error_naming_fio(tmp_path):
    space = fio.Space(str(tmp_path), "/", "ext4", "8:1", 1 << 40, 1 << 39, None, None,
                      AnswerStatus.OK)  # fmt: skip
    said = CommandResult(1, b"", b"fio: looks like your file system does not support direct=1\n")
    answer = Answer(Op.RUN, "fio", AnswerStatus.OK, said)
    result = fio._answered(str(tmp_path), space, answer, "fio reads")
    assert (
        result.error
        == "fio exited with 1: fio: looks like your file system does not support direct=1"
    )
    policy = volumes(tmp_path)
    facts = Facts.given({fio.read_fact(str(tmp_path), 5.0): result})
    finding = check(perf_host.disk_read, facts, policy)
    assert finding.status == Status.ERROR and "fio exited with 1" in finding.summary


def test_an_nvme_raid0_is_held_to_the_guides_random_read_figure():
    """The guide's "NVMe RAID0 ≈ 1 GB/s of 4K random reads", only for a volume that the md
    facts show to be a RAID0 of NVMe namespaces."""
    from dldoctor.facts.mdraid import MdArray, MdMember, MdRaid, Mdstat, md_raid

    members = (MdMember("nvme0n1", 0, "active"), MdMember("nvme1n1", 1, "active"))
    raid = MdRaid(Mdstat(arrays=(MdArray("md0", "active", "raid0", members),)))
    space = fio.Space("/data", "/data", "xfs", "9:0", 1 << 42, 1 << 41, None, None,
                      AnswerStatus.OK, source="/dev/md0")  # fmt: skip
    run = fio.parse_fio_json((FIXTURES / "fio-read.json").read_text())  # 52k IOPS: a VM's disk
    measured = fio.DiskMeasurement("/data", space, run=run)
    policy = Policy(storage=StoragePolicy(data_paths=("/data",)))
    facts = Facts.given({md_raid: raid, fio.read_fact("/data", 5.0): measured})
    finding = check(perf_host.disk_read, facts, policy)
    assert finding.status == Status.FAIL
    assert "4K random read 51556 IOPS, 21 % of 244141 IOPS" in finding.summary
    assert any("NVMe RAID0" in line for line in finding.details)
    # The same volume on a plain disk has no built-in reference.
    plain = replace(measured, space=replace(space, source="/dev/nvme0n1p1"))
    facts = Facts.given({md_raid: raid, fio.read_fact("/data", 5.0): plain})
    assert check(perf_host.disk_read, facts, policy).status == Status.PASS


# --- memory bandwidth ------------------------------------------------------------------


def load_script():
    spec = importlib.util.spec_from_file_location(
        "membw_script", Path(MEASURING_SCRIPTS) / "membw.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_memory_bandwidth_of_each_node_for_real(tmp_path):
    recording = RecordingHost(LiveHost())
    facts = Facts(recording)
    finding = check(perf_host.memory_copy, facts, Policy())
    assert finding.status == Status.PASS, (finding.summary, finding.details)
    nodes = facts.get(numa_topology).cpu_nodes
    expected = [f"NUMA node {n.node}" for n in nodes] or ["host"]
    assert [f.subject for f in finding.figures] == expected
    assert all(
        f.unit == "GB/s" and f.value > 0 and f.what == "memory_copy" for f in finding.figures
    )
    assert "memory copy" in finding.summary and "GB/s" in finding.summary
    # Recorded under {python} and {scripts}: the bundle replays the same figures anywhere.
    recording.write_bundle(str(tmp_path / "bundle"))
    replayed = check(perf_host.memory_copy, Facts(ReplayHost(str(tmp_path / "bundle"))), Policy())
    assert replayed.figures == finding.figures


def test_without_numactl_the_script_pins_itself_to_the_nodes_cpus():
    node = NumaNode(0, (0,), "0", 4 << 30)
    argv, pinned = membw.node_argv(node, "")
    assert argv[-2:] == ["--cpus", "0"] and argv[0] == "{python}"
    assert "first touch" in pinned
    with_numactl, _ = membw.node_argv(node, "/usr/bin/numactl")
    assert with_numactl[:3] == ["numactl", "--cpunodebind=0", "--membind=0"]
    # For real: the script run by this interpreter pinned to CPU 0.
    facts = Facts.given({numa_topology: NumaTopology((node,), None), numactl: Numactl("")})
    facts.host = LiveHost()
    nodes = membw.memory_bandwidth.compute(_context(facts))
    assert nodes[0].gb_per_s > 0 and nodes[0].workers == 1 and "first touch" in nodes[0].pinned


def _context(facts):
    from dldoctor.facts import FactContext

    return FactContext(facts, [])


def test_the_memory_scripts_own_logic():
    script = load_script()
    assert script.parse_cpus("0-3,8-9") == {0, 1, 2, 3, 8, 9}
    with pytest.raises(ValueError):
        script.parse_cpus("3-1")
    assert membw.working_set(NumaNode(0, (0,), "0", 4 << 30)) == 256 << 20
    assert membw.working_set(NumaNode(0, (0,), "0", 1 << 40)) == 2 << 30
    assert membw.working_set(None) == 512 << 20


def test_the_memory_script_refuses_a_working_set_the_cache_would_hold(capsys):
    script = load_script()
    assert script.main(["--bytes", "1024", "--seconds", "1"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert "at least" in out["error"]
    answer = Answer(Op.RUN, "x", AnswerStatus.OK, CommandResult(2, json.dumps(out).encode(), b""))
    value, _, error = membw.parse_membw(answer)
    assert value is None and error.startswith("the memory script: ValueError")


# --- RDMA loopback ---------------------------------------------------------------------


def test_ib_write_bw_tables_of_a_real_run():
    for name in ("ib_write_bw-client.txt", "ib_write_bw-server.txt"):
        result = perftest.parse_ib_write_bw((FIXTURES / name).read_text())
        assert result.gbits == 98.03 and result.bytes == 65536
    mb = (FIXTURES / "ib_write_bw-client.txt").read_text().replace("Gb/sec", "MB/sec")
    assert perftest.parse_ib_write_bw(mb).notes == ("ib_write_bw reported MB/sec, not Gb/sec",)
    nothing = (FIXTURES / "ib_write_bw-no-device.stderr").read_text()
    assert perftest.parse_ib_write_bw(nothing).gbits is None


def rdma_bundle(tmp_path: Path, stdout: str, stderr: str = "", returncode: int = 0) -> Path:
    """The healthy HGX fixture host (two ACTIVE 400 Gb/s NDR ports) with perftest's answers."""
    bundle = tmp_path / "host"
    shutil.copytree(HOSTS / "hgx-h100x8-healthy", bundle, symlinks=True)
    builder = BundleBuilder(bundle).command(["ib_write_bw", "--version"], "Version: 6.06\n",
                                            returncode=1)  # fmt: skip
    for nth, device in enumerate(("mlx5_0", "mlx5_1")):
        port = RdmaPort(device, 1, state="ACTIVE", link_layer="InfiniBand")
        argv = perftest.loopback_argv(port, nth)
        builder.command(argv, stdout, stderr=stderr, returncode=returncode)
    return bundle


def test_a_port_at_a_quarter_of_its_rate_fails(tmp_path):
    """A real 98 Gb/s run, replayed on 400 Gb/s ports: 25 % of the rate."""
    bundle = rdma_bundle(tmp_path, (FIXTURES / "ib_write_bw-client.txt").read_text())
    finding = check(perf_host.rdma_write, Facts(ReplayHost(str(bundle))), Policy())
    assert finding.status == Status.FAIL
    assert "mlx5_0:1 RDMA write loopback 12.3 GB/s, 25 % of 50.0 GB/s" in finding.summary
    assert {f.subject for f in finding.figures} == {"mlx5_0:1", "mlx5_1:1"}
    assert all(f.unit == "GB/s" and f.reference == 50.0 for f in finding.figures)


def test_a_port_near_its_rate_passes():
    port = RdmaPort("mlx5_0", 1, state="ACTIVE", rate_gbps=100.0, rate_text="100 Gb/sec (4X EDR)")
    loop = perftest.Loopback((perftest.PortBandwidth(port, 98.03 / 8),))
    finding = check(perf_host.rdma_write, Facts.given({perftest.rdma_loopback: loop}), Policy())
    assert finding.status == Status.PASS
    assert finding.summary == "RDMA write loopback 12.3 GB/s, 98 % of 12.5 GB/s"


def test_an_ib_write_bw_that_fails_is_an_error_naming_it(tmp_path):
    stderr = (FIXTURES / "ib_write_bw-no-device.stderr").read_text()
    bundle = rdma_bundle(tmp_path, "", stderr, returncode=1)
    finding = check(perf_host.rdma_write, Facts(ReplayHost(str(bundle))), Policy())
    assert finding.status == Status.ERROR
    assert finding.summary == (
        "mlx5_0:1: ib_write_bw exited with 1: Unable to find the Infiniband/RoCE device"
    )


def test_no_rdma_device_or_no_perftest_skips(tmp_path):
    finding = check(perf_host.rdma_write, Facts(LiveHost(root=str(tmp_path))), Policy())
    assert finding.status == Status.SKIP and finding.summary == "no RDMA device"
    bundle = tmp_path / "host"
    shutil.copytree(HOSTS / "hgx-h100x8-healthy", bundle, symlinks=True)
    BundleBuilder(bundle).command(["ib_write_bw", "--version"], status="not_installed")
    finding = check(perf_host.rdma_write, Facts(ReplayHost(str(bundle))), Policy())
    assert finding.summary == "perftest is not installed (apt install perftest)"


def test_the_loopback_command_line_is_one_bounded_sh(tmp_path):
    roce = RdmaPort("mlx5_2", 1, state="ACTIVE", link_layer="Ethernet",
                    gids=(perftest_gid(1, "RoCE v1"), perftest_gid(3, "RoCE v2")))  # fmt: skip
    argv = perftest.loopback_argv(roce)
    assert argv[:2] == ["sh", "-c"] and argv[-4:] == ["mlx5_2", "1", "3", "18515"]
    assert perftest.loopback_argv(roce, 2)[-1] == "18517"
    assert "-D 2" in argv[2] and "kill $server" in argv[2]
    assert perftest.gid_index(RdmaPort("mlx5_0", 1, link_layer="InfiniBand")) == ""
    # The sh line itself, run here (perftest installed, no device): the client's error.
    if shutil.which("ib_write_bw") and shutil.which("sh"):
        answer = LiveHost().measure(argv, timeout=20)
        assert answer.ok and answer.value.returncode != 0


def perftest_gid(index: int, kind: str):
    from dldoctor.facts.rdma import Gid

    return Gid(index, "0000:0000:0000:0000:0000:ffff:c0a8:0101", kind)


def test_the_checks_are_active_perf_checks():
    from dldoctor.registry import builtin_checks

    ids = {s.id: s for s in builtin_checks(active=True)}
    for name in ("perf.disk.read", "perf.disk.write", "perf.memory.bandwidth",
                 "perf.rdma.loopback"):  # fmt: skip
        assert ids[name].active and ids[name].category == "perf"
    assert "perf.disk.read" not in {s.id for s in builtin_checks()}
    assert sys.executable  # the memory script runs under this interpreter, as {python}
