"""`dldoctor genconf`: a healthy host's expected state as a policy, and the checks that
read its keys (docs/genconf.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dldoctor.diagnose import diagnose
from dldoctor.facts import Facts
from dldoctor.facts.mountinfo import Mount
from dldoctor.facts.pcie import PcieLinks, pcie_links
from dldoctor.facts.storage import mounts, space
from dldoctor.genconf import render
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Finding, Report, Status
from dldoctor.policy import (
    ExpectedLink,
    ExpectedMount,
    Policy,
    PolicyError,
    StoragePolicy,
    load_policy,
    toml_parser,
)
from dldoctor.registry import builtin_checks, ordered
from dldoctor.runner import run_check
from dldoctor.tomllines import basic_string
from dldoctor.versions import matches
from tests.support.cli import report_of, run_dldoctor, verdicts
from tests.support.paths import HOSTS

tomllib = toml_parser()  # tomllib, or tomli on Python 3.10: what policy files are read with

HEALTHY = str(HOSTS / "hgx-h100x8-healthy")
MISSING = str(HOSTS / "hgx-h100x8-gpu-missing")
NARROW = str(HOSTS / "hgx-h100x8-gpu3-x8")


def genconf(tmp_path, host=HEALTHY, *extra):
    proc = run_dldoctor("genconf", "--from", host, *extra)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    path = tmp_path / "policy.toml"
    path.write_text(proc.stdout)
    return path


def check(host, policy):
    proc = run_dldoctor("--check", "--json", "--policy", str(policy), "--from", host)
    assert proc.stderr == "", proc.stderr
    return proc.returncode, {f["id"]: f for f in report_of(proc)["findings"]}


# --- the three cases of the issue, through the CLI ------------------------------------


def test_genconf_then_check_on_the_same_host_passes(tmp_path):
    code, found = check(HEALTHY, genconf(tmp_path))
    assert code == 0
    assert {f["status"] for f in found.values()} <= {"pass", "skip"}
    # The pins were applied, not ignored: the checks say so.
    assert found["gpu.count"]["summary"] == "8 GPU(s) as expected, all NVIDIA H100 80GB HBM3"
    assert "the policy pins 550.54.15" in found["gpu.driver.version"]["summary"]
    assert "10 pinned link(s) as the policy expects" in found["pci.link.width"]["summary"]
    assert "2 expected array(s) in place" in found["storage.raid"]["summary"]
    assert "3 expected mount(s) in place" in found["storage.space"]["summary"]
    assert found["cuda.toolkit"]["summary"].endswith("as the policy expects")
    assert "≥ 400 Gb/s" in found["network.ib.rate"]["summary"]


def test_one_gpu_missing_fails_on_the_gpu_count(tmp_path):
    policy = genconf(tmp_path)
    # The built-in policy cannot see it: bus and driver agree on 7 GPUs.
    proc = run_dldoctor("--check", "--json", "--from", MISSING)
    assert proc.returncode == 0 and verdicts(report_of(proc))["gpu.count"] == "pass"
    code, found = check(MISSING, policy)
    assert code == 1
    assert found["gpu.count"]["status"] == "fail"
    assert found["gpu.count"]["summary"] == "7 GPU(s), the policy expects 8"
    # GPU 7's pinned link is gone with it.
    assert found["pci.link.width"]["summary"] == (
        "0000:88:00.0: not found among the PCI devices (the policy expects x16)"
    )


def test_a_narrowed_link_fails_on_that_device(tmp_path):
    code, found = check(NARROW, genconf(tmp_path))
    assert code == 1
    width = found["pci.link.width"]
    assert width["status"] == "fail"
    assert width["summary"] == "GPU 0000:48:00.0: x8, the policy expects x16"
    failing = {i for i, f in found.items() if f["status"] == "fail"}
    assert failing == {"pci.link.width"}


# --- refusals and usage ---------------------------------------------------------------


def test_a_failing_host_is_refused_with_one_line_and_nothing_on_stdout():
    proc = run_dldoctor("genconf", "--from", NARROW)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert "hgx-h100-02 is not healthy" in proc.stderr
    assert "pci.link.width" in proc.stderr and "--force" in proc.stderr


def test_force_writes_the_failing_state_and_says_so(tmp_path):
    proc = run_dldoctor("genconf", "--from", NARROW, "--force")
    assert proc.returncode == 0, proc.stderr
    assert "# --force: pci.link.width FAILED on this host: " in proc.stdout
    path = tmp_path / "forced.toml"
    path.write_text(proc.stdout)
    policy, _ = load_policy(str(path))
    pinned = {p.address: p.width for p in policy.pci.expected_links}
    assert pinned["0000:48:00.0"] == 8  # what it had, as it warned


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--from", "/nonexistent/bundle"], 4, "/nonexistent/bundle"),
        (["--from", HEALTHY, "--root", "/"], 2, "--from and --root cannot be used together"),
        (["--from", HEALTHY, "--only", "nosuchcheck"], 2, "nosuchcheck"),
        (["--from", HEALTHY, "--policy", "/nonexistent.toml"], 4, "cannot read policy"),
        (["--from", HEALTHY, "--bogus"], 2, "unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_are_one_line_and_their_exit_code(args, code, message):
    proc = run_dldoctor("genconf", *args)
    assert proc.returncode == code
    assert proc.stdout == ""
    assert message in proc.stderr and proc.stderr.count("\n") == 1


def test_output_file_and_only(tmp_path):
    out = tmp_path / "gpu.toml"
    proc = run_dldoctor("genconf", "--from", HEALTHY, "--only", "gpu", "--output", str(out))
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    text = out.read_text()
    data = tomllib.loads(text)
    # What the run did not look at is not pinned: of the firmware, only the GPUs' VBIOS.
    assert set(data) == {"gpu", "firmware"}
    assert data["firmware"]["minimums"] == [
        {"match": "NVIDIA H100 80GB HBM3", "min_version": "96.00.74.00.1F"}
    ]
    assert "# [pci] not pinned: pci.link.width did not run" in text
    policy, _ = load_policy(str(out))
    assert policy.gpu.expected_count == 8
    assert policy.pci == Policy().pci and policy.storage == Policy().storage


def test_genconf_is_listed_in_the_help():
    assert "dldoctor genconf" in run_dldoctor("--help").stdout
    proc = run_dldoctor("genconf", "--help")
    assert proc.returncode == 0 and "--force" in proc.stdout


# --- the round trip, in-process -------------------------------------------------------


def replayed(path: str, policy: Policy | None = None) -> Report:
    return diagnose(ReplayHost(path), policy or Policy(), ordered(builtin_checks()))


def test_round_trip_pins_exactly_the_inventory(tmp_path):
    report = replayed(HEALTHY)
    path = tmp_path / "p.toml"
    path.write_text(render(report))
    policy, _ = load_policy(str(path))
    inv = report.inventory
    assert policy.gpu.expected_count == len(inv["gpus"]) == 8
    assert policy.gpu.expected_model == "NVIDIA H100 80GB HBM3"
    assert policy.gpu.expected_driver == inv["driver"]["version"] == "550.54.15"
    assert policy.cuda.expected_toolkit == inv["cuda"]["toolkit"] == "12.4.1"
    assert policy.network.ib_ports == ("mlx5_0:1", "mlx5_1:1")
    assert policy.network.min_rate_gbps == 400.0
    widths = {d["address"]: d["width"] for d in inv["pcie"] if d["width"]}
    assert {p.address: p.width for p in policy.pci.expected_links} == widths
    assert len(widths) == 10  # 8 GPUs, 2 NICs; the NVSwitches report no width
    assert [(a.name, a.level) for a in policy.storage.expected_raid] == [
        ("md1", "raid0"),
        ("md0", "raid1"),
    ]
    assert [(m.mount_point, m.fstype) for m in policy.storage.expected_mounts] == [
        ("/", "ext4"),
        ("/checkpoints", "ext4"),
        ("/data", "xfs"),
    ]
    assert [(m.match, m.min_version) for m in policy.firmware.minimums] == [
        ("NVIDIA H100 80GB HBM3", "96.00.74.00.1F"),  # the VBIOS of the 8 GPUs
        ("MT_0000000838", "28.39.1002"),  # the two ConnectX-7
        ("SAMSUNG MZWLR7T6HALA-00007", "MPK7525Q"),
    ]
    # Keys genconf does not pin keep their defaults.
    assert policy.gpu.min_driver == Policy().gpu.min_driver
    assert policy.timeouts == Policy().timeouts


SCENARIOS = sorted(p.name for p in HOSTS.iterdir() if p.is_dir())


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_host_never_fails_its_own_pins(tmp_path, scenario):
    """Every fixture host, healthy or not: the policy written from it (as --force would)
    loads, and adds no failure and no error on the same host."""
    before = replayed(str(HOSTS / scenario))
    path = tmp_path / "p.toml"
    path.write_text(render(before))
    policy, _ = load_policy(str(path))
    after = replayed(str(HOSTS / scenario), policy)

    def bad(r):
        return {f.id for f in r.findings if f.status in (Status.FAIL, Status.ERROR)}

    assert bad(after) == bad(before)


def test_unknown_sections_are_comments_not_keys():
    report = Report(
        findings=[Finding("pci.link.width", "PCIe", "pci", Status.ERROR, "timed out")],
        host={"hostname": "n1"},
        inventory=dict.fromkeys(("gpus", "driver", "cuda", "pcie", "rdma", "raid", "mounts")),
    )
    text = render(report)
    assert tomllib.loads(text) == {}
    assert "# [pci] not pinned: pci.link.width error: timed out" in text
    assert "# [gpu] not pinned: gpu.driver.loaded did not run" in text


def test_hostile_names_stay_inside_their_strings_and_comments():
    evil = 'H100"\n[timeouts]\ncommand_s = 0 # \x7f\\'
    report = Report(
        findings=[],
        host={"hostname": "n1\n[gpu]\nexpected_count = 99", "source": "x"},
        inventory={
            "gpus": [{"index": 0, "bus_id": "0000:01:00.0", "model": evil}],
            "driver": {"version": "550.54.15", "source": "nvml"},
            "pcie": [{"address": "0000:01:00.0", "class": "030200", "vendor": "10de",
                      "width": 16, "driver": "nvidia\nwidth = 1"}],
            "mounts": [{"mount_point": "/da ta", "fstype": "xfs", "source": "a\nb = 1"}],
        },
    )  # fmt: skip
    data = tomllib.loads(render(report))
    assert data["gpu"] == {
        "expected_count": 1,
        "expected_model": evil,
        "expected_driver": "550.54.15",
    }
    assert data["pci"] == {"expected_links": [{"address": "0000:01:00.0", "width": 16}]}
    assert data["storage"]["expected_mounts"] == [{"mount_point": "/da ta", "fstype": "xfs"}]


@given(st.text())
def test_any_text_round_trips_as_a_tomlbasic_string(text):
    assert tomllib.loads(f"k = {basic_string(text)}")["k"] == text


# --- the checks that read the new keys ------------------------------------------------


def test_version_pins_match_a_release_or_a_branch():
    assert matches("550.54.15", "550") is True
    assert matches("550.54.15", "550.54.15") is True
    assert matches("550.54.15", "550.54.14") is False
    assert matches("535.154.05", "550") is False
    assert matches("12.4", "12.4.0") is True
    assert matches("", "12.4") is None


def run(check_id: str, facts: Facts, policy: Policy):
    spec = next(s for s in builtin_checks() if s.id == check_id)
    return run_check(spec, facts, policy)


def healthy_facts() -> Facts:
    return Facts(ReplayHost(HEALTHY))


def test_a_pin_wider_than_the_slot_fails_where_the_built_in_policy_passes():
    pin = Policy(pci=replace(Policy().pci, expected_links=(ExpectedLink("0000:19:00.0", 32),)))
    assert run("pci.link.width", healthy_facts(), Policy()).status is Status.PASS
    found = run("pci.link.width", healthy_facts(), pin)
    assert found.status is Status.FAIL
    assert found.summary == "InfiniBand NIC 0000:19:00.0: x16, the policy expects x32"


def test_pinned_links_on_an_unreadable_bus_are_an_error_not_a_verdict():
    unread = Facts.given({pcie_links: PcieLinks((), ("listing: timeout",), readable=False)})
    pin = Policy(pci=replace(Policy().pci, expected_links=(ExpectedLink("0000:19:00.0", 16),)))
    assert run("pci.link.width", unread, pin).status is Status.ERROR
    assert run("pci.link.width", unread, Policy()).status is Status.SKIP


@pytest.mark.parametrize(
    "gpu, status, summary",
    [
        ({"expected_driver": "550"}, "pass", "550.54.15 (≥ 535.154.02; the policy pins 550)"),
        ({"expected_driver": "535.154.05"}, "fail", "550.54.15, the policy pins 535.154.05"),
    ],
)
def test_driver_pin(gpu, status, summary):
    policy = Policy(gpu=replace(Policy().gpu, **gpu))
    found = run("gpu.driver.version", healthy_facts(), policy)
    assert (found.status.value, found.summary) == (status, summary)


def test_model_pin_names_the_other_gpus():
    policy = Policy(gpu=replace(Policy().gpu, expected_model="H200"))
    found = run("gpu.count", healthy_facts(), policy)
    assert found.status is Status.FAIL
    assert found.summary == "8 of 8 GPU(s) are not the policy's 'H200'"
    assert found.details[0] == "GPU 0 NVIDIA H100 80GB HBM3 (0000:18:00.0): not H200"
    short = replace(Policy().gpu, expected_model="h100")  # a part of the name, any case
    assert run("gpu.count", healthy_facts(), Policy(gpu=short)).status is Status.PASS


def test_toolkit_pin():
    from dldoctor.policy import CudaPolicy

    found = run("cuda.toolkit", healthy_facts(), Policy(cuda=CudaPolicy("12.6")))
    assert found.status is Status.FAIL
    assert found.summary.endswith("; the policy expects CUDA 12.6")
    assert run("cuda.toolkit", healthy_facts(), Policy(cuda=CudaPolicy("12.4"))).status is (
        Status.PASS
    )
    bare = run("cuda.toolkit", Facts(ReplayHost(str(HOSTS / "ubuntu2204-healthy"))),
               Policy(cuda=CudaPolicy("12.4")))  # fmt: skip
    assert (bare.status, bare.summary) == (
        Status.FAIL,
        "no CUDA toolkit installed; the policy expects CUDA 12.4",
    )


def storage(**kw) -> Policy:
    return Policy(storage=StoragePolicy(**kw))


def test_raid_pins():
    from dldoctor.policy import ExpectedArray

    found = run("storage.raid", healthy_facts(), storage(expected_raid=(
        ExpectedArray("md0", "raid1"), ExpectedArray("/dev/md1", "raid10"),
        ExpectedArray("md2"))))  # fmt: skip
    assert found.status is Status.FAIL
    assert found.summary == "2 array(s) not as the policy expects"
    assert found.details[:2] == (
        "md1: raid0, the policy expects raid10",
        "md2: not in /proc/mdstat, the policy expects it",
    )
    none = run("storage.raid", Facts(ReplayHost(str(HOSTS / "ubuntu2204-healthy"))),
               storage(expected_raid=(ExpectedArray("md0"),)))  # fmt: skip
    assert (none.status, none.summary) == (
        Status.FAIL,
        "no software RAID arrays; the policy expects 1",
    )


def test_mount_pins():
    found = run("storage.space", healthy_facts(), storage(expected_mounts=(
        ExpectedMount("/data/", "xfs"), ExpectedMount("/checkpoints", "xfs"),
        ExpectedMount("/scratch"))))  # fmt: skip
    assert found.status is Status.FAIL
    assert found.summary == "2 policy paths and mounts are missing"
    assert found.details[:2] == (
        "/checkpoints is ext4 from /dev/nvme6n1, the policy expects xfs",
        "/scratch is not mounted ([storage] expected_mounts)",
    )
    one = run("storage.space", healthy_facts(), storage(expected_mounts=(ExpectedMount("/x"),)))
    assert one.summary == "/x is not mounted ([storage] expected_mounts)"


def test_mount_pins_without_a_mount_table_are_an_error():
    root = Mount("/", "ext4", "/dev/sda1", "rw", "8:1")
    facts = Facts.given({mounts: (), space: ()})
    pinned = storage(expected_mounts=(ExpectedMount("/"),))
    found = run("storage.space", facts, pinned)
    assert found.status is Status.ERROR
    assert "the mount table could not be read" in found.summary
    facts = Facts.given({mounts: (root,), space: ()})
    # "/" is mounted: nothing fails (and no statvfs answered: nothing else to judge).
    assert run("storage.space", facts, pinned).status is Status.SKIP


def test_firmware_pins_the_oldest_of_a_mixed_model_and_it_holds(tmp_path):
    host = str(HOSTS / "hgx-h100x8-mixed-firmware")
    text = render(replayed(host))
    assert "# 8 GPU(s), mixed: 96.00.61.00.01, 96.00.74.00.1F" in text
    data = tomllib.loads(text)
    assert {"match": "MT_0000000838", "min_version": "28.37.1014"} in data["firmware"]["minimums"]
    path = tmp_path / "p.toml"
    path.write_text(text)
    after = {f.id: f for f in replayed(host, load_policy(str(path))[0]).findings}
    # Still mixed, never older than the pin written from the host itself.
    assert after["gpu.vbios"].status == after["network.firmware"].status == Status.WARN
    assert "older than" not in " ".join(after["gpu.vbios"].details)


def test_policy_errors_name_the_new_keys(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[[pci.expected_links]]\naddress = "18:00.0"\nwidth = 16\n')
    with pytest.raises(PolicyError) as info:
        load_policy(str(path))
    assert str(info.value) == (
        f"policy {path}, line 2: pci.expected_links[0].address must be a PCI address such "
        "as \"0000:18:00.0\", not '18:00.0'"
    )


def test_the_refusal_stays_one_line_whatever_the_host_is_called(tmp_path):
    from tests.support.bundlebuilder import BundleBuilder
    from tests.support.hostgen import gpu_server

    gpu_server(BundleBuilder(tmp_path / "b"), "evil\x1b[2Jhost\rx", narrow_gpu=3)
    proc = run_dldoctor("genconf", "--from", str(tmp_path / "b"))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "\x1b" not in proc.stderr and "\r" not in proc.stderr
    assert "pci.link.width" in proc.stderr


# --- the active tier's figures: pinned as [[perf.references]] ---------------------------


def test_figures_are_pinned_as_the_medians_the_judge_then_holds_every_node_to(tmp_path):
    from dldoctor.active.judge import site_reference
    from tests.support.perffigures import measured_report, perf_findings

    # The healthy host, GPU 5's GEMM a little slow (a warning: it still may be pinned).
    report = measured_report(slow={("gemm_bf16", 5): 0.87})
    path = tmp_path / "p.toml"
    path.write_text(render(report))
    policy, _ = load_policy(str(path))
    pins = {(r.what, r.subject): r.value for r in policy.perf.references}
    assert pins == {("hbm_copy", ""): 2599.6, ("gemm_bf16", ""): 699.2,
                    ("seq_read", "/data"): 6.2}  # fmt: skip
    assert 'what = "hbm_copy"  # GB/s, median of 8 part(s), 2589.1-2610 (perf.gpu.memory)' in (
        path.read_text()
    )
    ref = site_reference(policy, "hbm_copy", "GPU 3")
    assert ref and ref.value == 2599.6 and ref.source == "policy perf.references (hbm_copy)"
    # Another node, judged by the real judge under the pins: its slow volume now fails
    # (no datasheet knows a volume), and a GPU below 0.85 of the host's HBM copy too.
    other = {f.id: f for f in perf_findings(slow={("hbm_copy", 2): 0.8}, disk_gbs=4.0,
                                            jitter=0.99, policy=policy)}  # fmt: skip
    assert other["perf.disk.read"].status == Status.FAIL
    assert "/data sequential read 4.00 GB/s, 65 % of 6.20 GB/s" in other["perf.disk.read"].summary
    assert other["perf.gpu.memory"].status == Status.FAIL
    assert "GPU 2 HBM copy 2051 GB/s, 79 % of 2600 GB/s" in other["perf.gpu.memory"].summary
    assert other["perf.gpu.gemm"].status == Status.PASS
    figure = other["perf.gpu.gemm"].figures[0]
    assert figure.reference == 699.2 and figure.source.startswith("policy perf.references")
    assert not [f for f in perf_findings(jitter=0.99, policy=policy) if f.status != Status.PASS]


def test_a_report_without_figures_pins_no_perf_references():
    text = render(replayed(HEALTHY))
    assert "perf" not in text
