"""Reports that hold the active tier's figures, for the outputs that carry them (schema,
renderers, diff, fleet report, genconf).

The findings are made the way a measuring check makes them: its figures judged by the real
judge (dldoctor.active.judge.judge) and turned into a Finding by the runner's own
finding_for, then added to the report of a real fixture host's replay. The references are
a STAND-IN for gpuperf's per-SKU table (the H100 SXM5 datasheet's 3.35 TB/s of HBM and 989
dense BF16 TFLOPS, with the floors the judge's docstring names); the measured values are of
the order an H100 SXM5 delivers (nvbandwidth's device-local copy ~2.6 TB/s, a BF16 GEMM
~700 TFLOPS), each GPU a little off the next as real ones are.
"""

from __future__ import annotations

from collections.abc import Mapping

from dldoctor.active.judge import Measured, Reference, judge
from dldoctor.diagnose import diagnose
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Finding, Report
from dldoctor.policy import Policy
from dldoctor.registry import CheckSpec, builtin_checks, ordered
from dldoctor.runner import finding_for
from tests.support.paths import HOSTS

DATASHEET = "stand-in for the SKU table: NVIDIA H100 SXM5 datasheet"
# check id, title, what, label, unit, healthy value, reference (None: none known)
PERF = (
    ("perf.gpu.memory", "GPU memory bandwidth", "hbm_copy", "HBM copy", "GB/s", 2610.0,
     Reference(3350.0, DATASHEET, 0.75)),
    ("perf.gpu.gemm", "GPU GEMM throughput", "gemm_bf16", "GEMM BF16", "TFLOPS", 702.0,
     Reference(989.0, DATASHEET, 0.60)),
)  # fmt: skip
DISK = ("perf.disk.read", "Data volume read throughput", "seq_read", "sequential read", "GB/s")

Slow = Mapping[tuple[str, int], float]  # (what, GPU index) -> the fraction it delivers


def _spec(check_id: str, title: str) -> CheckSpec:
    return CheckSpec(check_id, title, "perf", fn=lambda facts, policy: None, active=True)


def perf_findings(
    gpus: int = 8,
    *,
    slow: Slow | None = None,
    disk_gbs: float = 6.2,
    jitter: float = 1.0,
    policy: Policy | None = None,
) -> list[Finding]:
    """The GPU memory and GEMM findings of `gpus` GPUs and a data volume's read, judged;
    `slow` makes some GPUs deliver a fraction of their healthy figure, `jitter` scales the
    node's GPUs (one node is a little off the next)."""
    policy, slow = policy or Policy(), slow or {}
    found = []
    for check_id, title, what, label, unit, healthy, ref in PERF:
        measured = [
            Measured(
                f"GPU {i}",
                what,
                label,
                round(healthy * jitter * (1 - 0.004 * (i % 3)) * slow.get((what, i), 1.0), 1),
                unit,
                ref,
            )  # fmt: skip
            for i in range(gpus)
        ]
        found.append(finding_for(_spec(check_id, title), judge(measured, policy), (), 1.5))
    check_id, title, what, label, unit = DISK
    disk = judge([Measured("/data", what, label, disk_gbs, unit)], policy)
    found.append(finding_for(_spec(check_id, title), disk, (), 4.0))
    return found


def host_report(host: str = "hgx-h100x8-healthy") -> Report:
    return diagnose(ReplayHost(str(HOSTS / host)), Policy(), ordered(builtin_checks()))


def measured_report(host: str = "hgx-h100x8-healthy", **kwargs) -> Report:
    """A fixture host's report with the perf findings of `perf_findings(**kwargs)` added."""
    report = host_report(host)
    report.findings.extend(perf_findings(**kwargs))
    return report


def latency_finding(us: float) -> Finding:
    """A P2P latency of one pair, judged (no reference known): a figure of which less is
    better."""
    m = Measured("GPU 0->GPU 1", "p2p_latency", "P2P latency", us, "us")
    return finding_for(_spec("perf.gpu.p2p", "GPU peer-to-peer"), judge([m], Policy()), (), 1.0)
