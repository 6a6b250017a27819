"""The GPU side of the active tier on a host without a GPU: the parsers of nvbandwidth,
nccl-tests' all_reduce_perf and dcgmi diag on real captures (tests/fixtures/SOURCES.md),
the per-SKU table, the checks on replayed bundles that hold those captures as the
commands' answers, and the PyTorch measuring script's own logic and its clean refusal
where torch is absent."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys

import pytest

from dldoctor.active import nvbandwidth as nvb
from dldoctor.active.dcgm import ARGV as DCGM_ARGV
from dldoctor.active.dcgm import parse as parse_dcgm
from dldoctor.active.nccltests import argv_for
from dldoctor.active.nccltests import parse as parse_nccl
from dldoctor.active.output import json_document
from dldoctor.active.skus import SKUS, sku_of
from dldoctor.active.torchmeasure import SCRIPT, TorchMeasure, torch_measure, torch_python
from dldoctor.active.torchmeasure import parse as parse_torch
from dldoctor.checks import perf_gpu
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.frameworks import Framework
from dldoctor.facts.nvidia import nvidia
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, checks_in
from dldoctor.runner import Runner
from tests.support.bundlebuilder import BundleBuilder
from tests.support.hostgen import gpu_server
from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "corpus"
NVB = CORPUS / "nvbandwidth"
NCCL = CORPUS / "nccl-tests"
DCGM = CORPUS / "dcgmi-diag"
SCRIPT_PATH = FIXTURES.parent.parent / "doctor" / "active" / "scripts" / "torch_measure.py"
TORCH_PYTHON = "/opt/venv/bin/python3"  # the fixture host's framework interpreter (hostgen)
GPU_IDS = {
    "perf.gpu.gemm",
    "perf.gpu.memory",
    "perf.gpu.pcie",
    "perf.gpu.p2p",
    "perf.nccl.allreduce",
    "perf.gpu.dcgm",
}


def text(path) -> str:
    return path.read_text()


# --- nvbandwidth ----------------------------------------------------------------------


def test_nvbandwidth_json_of_one_gpu():
    found = nvb.parse(text(NVB / "nvbandwidth-v0.5-1gpu.json"))
    assert (found.version, found.error) == ("v0.5", "")
    assert found.h2d == {0: 12.3964} and found.d2h == {0: 13.2001}
    assert found.statuses[nvb.D2D] == "Waived" and found.d2d == {}
    assert not found.has(nvb.LOCAL)


def test_nvbandwidth_json_found_among_its_warnings():
    clean = nvb.parse(text(NVB / "nvbandwidth-v0.5-1gpu.json"))
    noisy = nvb.parse(text(NVB / "nvbandwidth-v0.5-1gpu-noisy.txt"))
    assert noisy.matrices == clean.matrices and noisy.statuses == clean.statuses


def test_nvbandwidth_text_of_eight_gpus():
    found = nvb.parse(text(NVB / "nvbandwidth-v0.2-rtx4090x8-text.txt"))
    assert found.version == "v0.2" and sorted(found.h2d) == list(range(8))
    assert min(found.h2d.values()) == 23.90 and found.d2h[7] == 26.83


def test_nvbandwidth_text_pairs_without_its_running_line():
    """The pasted log lost "Running ...": the SUM line names the matrix."""
    found = nvb.parse(text(NVB / "nvbandwidth-v0.8-a6000x6-d2d-text.txt"))
    pairs = found.d2d
    assert len(pairs) == 30 and (0, 0) not in pairs
    assert pairs[(0, 1)] == 26.34 and pairs[(0, 3)] == 21.95 and pairs[(5, 4)] == 26.35


def test_a_local_copy_counts_what_was_read_and_written():
    doc = json.loads(text(NVB / "nvbandwidth-v0.5-1gpu.json"))
    (case,) = (c for c in doc["nvbandwidth"]["testcases"] if c["name"] == nvb.H2D)
    case["name"] = nvb.LOCAL  # the same 1 x N shape nvbandwidth gives device_local_copy
    assert nvb.parse_json(doc).local_copy == {0: pytest.approx(2 * 12.3964)}


@pytest.mark.parametrize("garbage", ["", "Error: CUDA driver version is insufficient\n", "{]"])
def test_nvbandwidth_without_results_says_so(garbage):
    found = nvb.parse(garbage)
    assert found.matrices == {} and found.error


# --- all_reduce_perf ------------------------------------------------------------------


def test_all_reduce_perf_with_root_and_wrong_columns():
    found = parse_nccl(text(NCCL / "all_reduce_perf-a100x8-oci.log"))
    assert (len(found.rows), found.gpus, found.avg_busbw, found.wrong) == (28, 8, 81.112, 0)
    assert found.largest.size == 8 << 30 and found.largest.busbw == 235.21


def test_all_reduce_perf_before_the_root_column():
    found = parse_nccl(text(NCCL / "all_reduce_perf-a100x8-superbench.log"))
    assert len(found.rows) == 34 and found.avg_busbw == 68.4048
    assert found.largest.busbw == 235.26 and found.largest.wrong == -1  # "N/A": not checked


def test_all_reduce_perf_argv_is_sized_and_counts_the_gpus():
    assert argv_for(8) == ("all_reduce_perf", "-b", "8M", "-e", "1G", "-f", "2", "-g", "8")
    assert parse_nccl("all_reduce_perf: command not found\n").error


# --- dcgmi diag -----------------------------------------------------------------------


def test_dcgm_failures_name_the_gpus_and_dcgms_message():
    diag = parse_dcgm(json.loads(text(DCGM / "dcgmi-diag-4gpu-sm-stress-fail.json")))
    failed = diag.with_status("fail")
    assert [(r.test, r.who) for r in failed] == [("sm_stress", f"GPU {i}") for i in (0, 2, 3)]
    assert failed[0].warnings == (
        "Max stress level of 2128.7 did not exceed desired stress level of 3000.0 for GPU 0",
    )
    assert diag.version == "1.7" and len(diag.with_status("pass")) > 10


def test_dcgm_deployment_results_pass():
    diag = parse_dcgm(json.loads(text(DCGM / "dcgmi-diag-4gpu-deployment.json")))
    assert len(diag.results) == 10 and {r.status for r in diag.results} == {"pass"}
    assert diag.results[0].who == "GPUs 0,1,2,3"


def test_dcgm_without_its_document_is_an_error():
    assert parse_dcgm({"something": "else"}).error
    assert json_document("Error: unable to establish a connection to localhost\n") is None


# --- the per-SKU table ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "sku"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM 141GB"),
        ("NVIDIA GH200 480GB", "GH200 480GB"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10", "A10"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2"),
        ("NVIDIA A10G", None),  # AWS's own part: not the A10's figures
        ("NVIDIA GeForce RTX 4090", None),
        ("NVIDIA H800", None),
    ],
)
def test_skus_match_the_names_drivers_report(name, sku):
    found = sku_of(name)
    assert (found.name if found else None) == sku


def test_every_sku_says_where_its_figures_and_floors_come_from():
    for sku in SKUS:
        assert sku.datasheet.startswith("NVIDIA") and sku.dense16_tflops and sku.memory_gbps
        assert 0.4 < sku.memory_floor < 0.9, sku.name
        assert "diag-skus.yaml.in" in sku.memory_source or not sku.dcgm_entry
    h100 = sku_of("NVIDIA H100 80GB HBM3")
    assert h100.memory_floor == 0.57 and "minimum_bandwidth 1905 GB/s" in h100.memory_source
    assert h100.nvlink_direction_gbps == 450


# --- the checks on replayed bundles ---------------------------------------------------


def h100_host(tmp_path, answers: dict[tuple[str, ...], dict], **server) -> Facts:
    """An HGX H100 fixture host (tests/support/hostgen) whose measuring commands answered
    `answers`: argv -> BundleBuilder.command's keywords."""
    b = BundleBuilder(tmp_path / "bundle")
    gpu_server(b, "perf-h100", **server)
    b.probe("gpu_users", {"users": [], "unseen": 0})  # a host no other process uses
    for argv, said in answers.items():
        b.command(list(argv), **said)
    return Facts(ReplayHost(str(tmp_path / "bundle")))


def run_gpu_checks(facts: Facts) -> dict[str, object]:
    specs = [s for s in checks_in(perf_gpu) if s.id in GPU_IDS]
    return {f.id: f for f in Runner(specs, facts, Policy(), check_timeout=60).run()}


NOT_INSTALLED = {"status": "not_installed", "returncode": -1}


def torch_argv(tests: str) -> tuple[str, ...]:
    return (TORCH_PYTHON, SCRIPT, "--json", "--tests", tests)


def test_replayed_captures_give_their_verdicts(tmp_path):
    """nvbandwidth's one-GPU JSON, 8 A100s' all-reduce and DCGM's failed sm_stress, as the
    commands of an HGX H100 host: GPU 0's host copies are a fifth of its Gen5 link, the
    all-reduce half of H100 NVLink, DCGM's failure is DCGM's message; the script that was
    to measure the rest left no answer in the bundle."""
    facts = h100_host(tmp_path, {
        nvb.ARGV: {"stdout": text(NVB / "nvbandwidth-v0.5-1gpu.json")},
        argv_for(8): {"stdout": text(NCCL / "all_reduce_perf-a100x8-oci.log")},
        DCGM_ARGV: {"stdout": text(DCGM / "dcgmi-diag-4gpu-sm-stress-fail.json"),
                    "returncode": 226},
    })  # fmt: skip
    found = run_gpu_checks(facts)
    pcie = found["perf.gpu.pcie"]
    assert pcie.status == Status.FAIL
    assert pcie.summary.startswith("GPU 0 host to GPU 12.4 GB/s, 20 % of 63.0 GB/s")
    assert [(f.what, f.value, f.reference) for f in pcie.figures][:1] == [
        ("h2d", 12.3964, pytest.approx(63.0154, abs=1e-3))
    ]
    allreduce = found["perf.nccl.allreduce"]
    assert allreduce.status == Status.FAIL and "235 GB/s, 52 % of 450 GB/s" in allreduce.summary
    dcgm = found["perf.gpu.dcgm"]
    assert dcgm.status == Status.FAIL
    assert dcgm.summary.startswith("DCGM's sm_stress failed on GPU 0: Max stress level of 2128.7")
    # The script's answer is not recorded: not measured then, no verdict on the host.
    gemm = found["perf.gpu.gemm"]
    assert gemm.status == Status.SKIP and "without --active" in gemm.summary, gemm


def test_nvlink_peers_at_pcie_speed_fail_and_healthy_ones_pass(tmp_path):
    slow = h100_host(tmp_path / "slow", {
        nvb.ARGV: {"stdout": text(NVB / "nvbandwidth-v0.8-a6000x6-d2d-text.txt")},
    })  # fmt: skip
    p2p = perf_gpu.p2p(slow, Policy())
    assert p2p.status == Status.FAIL and "GPU 0 → GPU 1 NVLink copy 26.3 GB/s, 6 %" in p2p.summary
    assert any("at PCIe speed" in line for line in p2p.details)
    healthy = h100_host(tmp_path / "ok", {
        nvb.ARGV: {"stdout": text(NVB / "nvbandwidth-dcgm-test-d2d-8gpu-2rows.json")},
    })  # fmt: skip
    p2p = perf_gpu.p2p(healthy, Policy())
    assert p2p.status == Status.PASS, p2p.summary
    assert p2p.summary == "NVLink copy 371–374 GB/s on 14 pairs, 82–83 % of 450 GB/s"


def test_nvlinks_down_make_peers_pcie_peers(tmp_path):
    """With GPU 1's links down its copies go over PCIe: judged against the PCIe link."""
    facts = h100_host(tmp_path, {
        nvb.ARGV: {"stdout": text(NVB / "nvbandwidth-dcgm-test-d2d-8gpu-2rows.json")},
    }, links_down={1: tuple(range(18))})  # fmt: skip
    assert perf_gpu.peer_kind(facts, 0, 1) == "PCIe" and perf_gpu.peer_kind(facts, 0, 2) == "NVLink"
    figures = {f.subject: f for f in perf_gpu.p2p(facts, Policy()).figures}
    assert figures["GPU 0 → GPU 1"].what == "p2p_pcie"
    assert figures["GPU 0 → GPU 2"].what == "p2p_nvlink"


def test_no_tool_and_no_torch_skips_naming_both(tmp_path):
    facts = h100_host(tmp_path, {nvb.ARGV: NOT_INSTALLED, argv_for(8): NOT_INSTALLED,
                                 DCGM_ARGV: NOT_INSTALLED})  # fmt: skip
    facts = with_frameworks(facts, ())
    found = run_gpu_checks(facts)
    assert found["perf.gpu.memory"].summary == (
        "neither nvbandwidth nor a PyTorch interpreter with CUDA found"
    )
    assert found["perf.nccl.allreduce"].summary == (
        "neither all_reduce_perf (nccl-tests) nor a PyTorch interpreter with CUDA found"
    )
    assert found["perf.gpu.gemm"].status == Status.SKIP
    assert found["perf.gpu.dcgm"].summary == "dcgmi (NVIDIA DCGM) is not installed"
    assert {f.status for f in found.values()} == {Status.SKIP}


def with_frameworks(facts: Facts, value) -> Facts:
    """The same replayed host, with `python.frameworks` answering `value`."""
    from dldoctor.facts.frameworks import frameworks

    seeded = Facts(facts.host)
    slot = seeded._slot(frameworks)
    slot.value, slot.done = value, True
    return seeded


def test_the_script_measures_what_the_tools_did_not(tmp_path):
    """nvbandwidth gave host copies only, nccl-tests is absent: the script is asked for the
    GEMM, the memory copy, the peers and the all-reduce, and what it printed is judged."""
    tests = "gemm,memory,p2p,allreduce"
    doc = script_doc({
        "gemm": [{"gpu": i, "dtype": d, "n": 8192, "tflops": t} for i in range(8)
                 for d, t in (("bf16", 700.0 if i != 3 else 400.0), ("tf32", 380.0))],
        "memory": [{"gpu": i, "bytes": 1 << 30, "gbps": 2900.0} for i in range(8)],
        "allreduce": {"gpus": 8, "bytes": 256 << 20, "busbw_gbps": 360.0, "algbw_gbps": 205.7},
    })  # fmt: skip
    facts = h100_host(tmp_path, {
        nvb.ARGV: {"stdout": text(NVB / "nvbandwidth-v0.2-rtx4090x8-text.txt")},
        argv_for(8): NOT_INSTALLED,
        DCGM_ARGV: NOT_INSTALLED,
        torch_argv(tests): {"stdout": json.dumps(doc)},
    })  # fmt: skip
    assert facts.get(torch_measure).tests == tuple(tests.split(","))
    found = run_gpu_checks(facts)
    gemm = found["perf.gpu.gemm"]
    assert gemm.status == Status.FAIL  # GPU 3: 40 % of 989.5, below the 0.6 floor
    assert gemm.summary.startswith("GPU 3 BF16 GEMM 400 TFLOPS, 40 % of 990 TFLOPS")
    assert {f.what for f in gemm.figures} == {"gemm_bf16", "gemm_tf32"}
    assert found["perf.gpu.memory"].status == Status.PASS
    assert found["perf.gpu.memory"].summary == (
        "HBM copy 2900–2900 GB/s on 8 GPUs, 87–87 % of 3350 GB/s"
    )
    assert found["perf.nccl.allreduce"].status == Status.PASS
    assert found["perf.gpu.p2p"].status == Status.ERROR  # asked, and the script said nothing


def script_doc(results: dict) -> dict:
    """What torch_measure.py prints (its `measure`), for the results given."""
    return {"tool": "torch_measure", "version": 1, "torch": "2.4.0+cu121", "cuda": "12.1",
            "visible_devices": None, "gpus": [], "results": results, "errors": []}  # fmt: skip


def test_a_measurement_that_failed_on_a_gpu_fails_the_check():
    doc = script_doc({"memory": [{"gpu": 0, "bytes": 1, "gbps": 3000.0}]})
    doc["errors"] = [{"test": "memory", "gpu": 1, "error": "CUDA error: an illegal memory access"}]
    measured = parse_torch(doc, TORCH_PYTHON, ("gemm", "memory"))
    stack = g.NvidiaStack("nvml", gpus=tuple(g.Gpu(i, "NVIDIA H100 80GB HBM3") for i in range(2)))
    facts = Facts.given({torch_measure: measured, nvidia: stack,
                         nvb.nvbandwidth: nvb.NvBandwidth(installed=False)})  # fmt: skip
    outcome = perf_gpu.memory(facts, Policy())
    assert outcome.status == Status.FAIL
    assert (
        outcome.summary == "1 measurement(s) failed: memory 1: CUDA error: an illegal memory access"
    )


def test_a_site_reference_comes_before_the_table():
    measured = parse_torch(script_doc({"gemm": [{"gpu": 0, "dtype": "bf16", "tflops": 700.0}]}))
    stack = g.NvidiaStack("nvml", gpus=(g.Gpu(0, "NVIDIA H100 80GB HBM3"),))
    facts = Facts.given({torch_measure: dataclasses.replace(measured, python=TORCH_PYTHON),
                         nvidia: stack})  # fmt: skip
    policy = Policy()
    pinned = dataclasses.replace(policy.perf, references=(perf_ref("gemm_bf16", 900.0),))
    outcome = perf_gpu.gemm(facts, dataclasses.replace(policy, perf=pinned))
    assert outcome.status == Status.FAIL and "78 % of 900 TFLOPS" in outcome.summary


def perf_ref(what: str, value: float):
    from dldoctor.policy import PerfReference

    return PerfReference(what, value)


def test_an_unknown_gpu_passes_with_its_figure():
    measured = parse_torch(script_doc({"gemm": [{"gpu": 0, "dtype": "bf16", "tflops": 150.0}]}))
    stack = g.NvidiaStack("nvml", gpus=(g.Gpu(0, "NVIDIA GeForce RTX 4090"),))
    facts = Facts.given({torch_measure: dataclasses.replace(measured, python=TORCH_PYTHON),
                         nvidia: stack})  # fmt: skip
    outcome = perf_gpu.gemm(facts, Policy())
    assert outcome.status == Status.PASS
    assert outcome.summary == "BF16 GEMM 150 TFLOPS: no reference for this GPU"


def test_the_gpu_checks_skip_on_a_host_without_gpus():
    facts = Facts.given({nvidia: g.NvidiaStack("", error=g.NO_DRIVER)})
    specs = [s for s in builtin_checks(active=True) if s.id in GPU_IDS]
    assert len(specs) == len(GPU_IDS) and all(s.active and s.category == "perf" for s in specs)
    found = Runner(specs, facts, Policy(), check_timeout=60).run()
    assert {(f.status, f.summary) for f in found} == {(Status.SKIP, "no NVIDIA driver installed")}


def test_pcie_rates_follow_the_encoding():
    assert perf_gpu.link_rate_gbps(8.0, 16) == pytest.approx(15.754, abs=1e-3)  # Gen3 x16
    assert perf_gpu.link_rate_gbps(32.0, 16) == pytest.approx(63.015, abs=1e-3)  # Gen5 x16
    assert perf_gpu.link_rate_gbps(5.0, 8) == 4.0  # Gen2 x8: 8b/10b


# --- the measuring script -------------------------------------------------------------


def load_script():
    spec = importlib.util.spec_from_file_location("torch_measure_under_test", SCRIPT_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_imports_without_torch_and_counts_right():
    had_torch = "torch" in sys.modules
    script = load_script()
    assert ("torch" in sys.modules) == had_torch  # torch only inside main and the workers
    assert script.gemm_tflops(8192, 1e-3) == pytest.approx(2 * 8192**3 / 1e-3 / 1e12)
    assert script.copy_gbps(1 << 30, 1.0) == pytest.approx(2 * (1 << 30) / 1e9)
    assert script.transfer_gbps(1 << 30, 1.0) == pytest.approx((1 << 30) / 1e9)
    assert script.busbw_gbps(8 << 30, 1.0, 8) == pytest.approx((8 << 30) / 1e9 * 14 / 8)
    assert script.pairs(3) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert script.chosen("p2p, gemm") == ["gemm", "p2p"]
    with pytest.raises(ValueError, match="unknown test"):
        script.chosen("gemm,fp4")
    assert 0 < script.free_port() < 65536


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed")
def test_the_script_without_torch_prints_a_json_error():
    run = subprocess.run([sys.executable, str(SCRIPT_PATH), "--json"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    doc = json.loads(run.stdout)
    assert run.returncode == 2 and doc["tool"] == "torch_measure"
    assert doc["error"].startswith(f"torch cannot be imported by {sys.executable}")
    assert parse_torch(doc).error == doc["error"]
    bad = subprocess.run([sys.executable, str(SCRIPT_PATH), "--json", "--tests", "fp4"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "unknown test(s) fp4" in json.loads(bad.stdout)["error"]


def test_the_interpreter_is_one_with_a_cuda_torch():
    cpu = Framework("torch", "2.4.0+cpu", "", None, None, "/a/torch", (), ("/a/python",))
    cuda = Framework("torch", "2.4.0", None, None, None, "/b/torch", (), ("/b/python",))
    assert torch_python((cpu, cuda)) == "/b/python" and torch_python((cpu,)) == ""


def test_the_script_output_is_read_defensively():
    assert parse_torch("not a dict").error == "the measuring script printed no result"
    odd = parse_torch(script_doc({"gemm": [{"gpu": 0, "tflops": "fast"}, {"gpu": 1}],
                                  "allreduce": {"busbw_gbps": None}}))  # fmt: skip
    assert odd.gemm == () and odd.allreduce == {} and isinstance(odd, TorchMeasure)


def test_docs_table_is_the_sku_table():
    """docs/active.md prints each SKU's figures and floor as skus.py has them."""
    docs = (FIXTURES.parent.parent / "docs" / "active.md").read_text()
    for sku in SKUS:
        row = next((ln for ln in docs.splitlines() if ln.startswith(f"| {sku.name} |")), "")
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert cells[:5] == [
            sku.name,
            f"{sku.dense16_tflops:g} {sku.dense16}",
            f"{sku.tf32_tflops:g}" if sku.tf32_tflops else "—",
            f"{sku.memory_gbps:g} ({sku.memory})",
            f"{sku.memory_floor:.2f}",
        ], sku.name


def test_dcgm_4s_runtime_error_is_the_error():
    """DCGM 4 names the document "DCGM Diagnostic" and says why it ran nothing in
    `runtime_error` (testing/python3/dcgm_diag_schema.json)."""
    said = "The GPU is in use by another process"
    assert parse_dcgm({"DCGM Diagnostic": {"runtime_error": said}}).error == f"dcgmi diag: {said}"


def test_dcgmi_without_its_host_engine_is_an_error_not_a_verdict(tmp_path):
    """What dcgmi prints when nv-hostengine is not running (dcgmi/Command.cpp's lines)."""
    said = (
        "Error: unable to establish a connection to the specified host: localhost\n"
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n"
    )
    facts = h100_host(tmp_path, {DCGM_ARGV: {"stdout": said, "returncode": 255}})
    outcome = perf_gpu.dcgm(facts, Policy())
    assert outcome.status == Status.ERROR
    assert outcome.summary == (
        "dcgmi failed: Error: Unable to connect to host engine. "
        "Host engine connection invalid/disconnected."
    )
