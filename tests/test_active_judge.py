"""The one judge of every measuring check: a site's reference first, else the SKU table's,
then the straggler among siblings; the figure and its unit in every summary."""

from __future__ import annotations

import pytest

from dldoctor.active.judge import Measured, Reference, amount, judge
from dldoctor.model import Status
from dldoctor.policy import PerfPolicy, PerfReference, Policy

H100_HBM = Reference(3350.0, "NVIDIA H100 SXM5 datasheet", 0.75)


def gpus(*values: float, reference: Reference | None = H100_HBM) -> list[Measured]:
    return [
        Measured(f"GPU {i}", "hbm_copy", "HBM copy", v, "GB/s", reference)
        for i, v in enumerate(values)
    ]


def test_healthy_gpus_pass_with_the_range_and_fraction_of_the_reference():
    outcome = judge(gpus(2610, 2625, 2640, 2615), Policy())
    assert outcome.status == Status.PASS
    assert outcome.summary == "HBM copy 2610–2640 GB/s on 4 GPUs, 78–79 % of 3350 GB/s"
    assert "reference: NVIDIA H100 SXM5 datasheet" in outcome.details
    assert [f.fraction for f in outcome.figures] == pytest.approx(
        [2610 / 3350, 2625 / 3350, 2640 / 3350, 2615 / 3350]
    )
    assert {f.source for f in outcome.figures} == {"NVIDIA H100 SXM5 datasheet"}


def test_a_gpu_below_the_floor_fails_naming_it_its_figure_and_the_floor():
    outcome = judge(gpus(2610, 2625, 1400, 2615), Policy())
    assert outcome.status == Status.FAIL
    assert outcome.summary == (
        "GPU 2 HBM copy 1400 GB/s, 42 % of 3350 GB/s (a healthy part reaches 75 %)"
    )
    assert "GPU 2: HBM copy 1400 GB/s, 42 % of 3350 GB/s" in outcome.details


def test_a_straggler_above_the_floor_warns_against_its_siblings_median():
    # 2300 is 69 % of the datasheet: above a 0.6 floor, but 88 % of its siblings.
    loose = Reference(3350.0, "datasheet", 0.6)
    outcome = judge(gpus(2610, 2620, 2300, 2630, reference=loose), Policy())
    assert outcome.status == Status.WARN
    assert outcome.summary == "GPU 2 HBM copy 2300 GB/s, 88 % of its siblings' median 2615 GB/s"


def test_a_site_reference_comes_before_the_sku_table_and_uses_the_policy_floor():
    pinned = PerfPolicy(references=(PerfReference("hbm_copy", 3000.0),), floor=0.9)
    outcome = judge(gpus(2610, 2625), Policy(perf=pinned))
    assert outcome.status == Status.FAIL  # 87 % of the site's own 3000 GB/s, floor 90 %
    assert "of 3000 GB/s (a healthy part reaches 90 %)" in outcome.summary
    assert outcome.figures[0].source == "policy perf.references (hbm_copy)"


def test_a_site_reference_for_one_part_wins_over_one_for_every_part():
    refs = (PerfReference("hbm_copy", 3000.0), PerfReference("hbm_copy", 2000.0, "GPU 1"))
    outcome = judge(gpus(2700, 2650), Policy(perf=PerfPolicy(references=refs)))
    assert [f.reference for f in outcome.figures] == [3000.0, 2000.0]
    assert outcome.figures[1].source == "policy perf.references (hbm_copy, GPU 1)"


def test_no_reference_reports_the_figure_and_passes():
    outcome = judge(gpus(812.0, reference=None), Policy(), no_reference="no reference for this GPU")
    assert outcome.status == Status.PASS
    assert outcome.summary == "HBM copy 812 GB/s: no reference for this GPU"
    assert outcome.figures[0].reference is None


def test_parts_are_named_by_their_kind():
    volumes = [
        Measured(path, "seq_read", "sequential read", v, "GB/s")
        for path, v in (("/data", 1.2), ("/scratch", 1.3))
    ]
    assert judge(volumes, Policy()).summary.startswith(
        "sequential read 1.20–1.30 GB/s on 2 volumes"
    )
    nodes = [Measured(f"NUMA node {n}", "copy", "memory copy", 12.0 + n, "GB/s") for n in range(2)]
    assert "on 2 NUMA nodes" in judge(nodes, Policy()).summary


def test_a_summary_names_three_parts_and_counts_the_rest():
    outcome = judge(gpus(100, 100, 100, 100, 100), Policy())
    assert outcome.summary.count("GPU ") == 3
    assert outcome.summary.endswith("; and 2 more")


@pytest.mark.parametrize(
    ("value", "text"), [(2610.4, "2610 GB/s"), (45.67, "45.7 GB/s"), (1.234, "1.23 GB/s")]
)
def test_amounts_keep_three_significant_digits(value, text):
    assert amount(value, "GB/s") == text


def test_parts_held_to_different_references_are_no_siblings():
    # A 100 Gb/s RoCE port beside 400 Gb/s rails, each at its rate: no straggler.
    rails = [
        Measured(
            f"mlx5_{i}:1", "rdma_write", "RDMA write", 48.0, "GB/s", Reference(50.0, "rate", 0.8)
        )
        for i in range(4)
    ]
    roce = Measured(
        "mlx5_4:1", "rdma_write", "RDMA write", 12.0, "GB/s", Reference(12.5, "rate", 0.8)
    )
    assert judge([*rails, roce], Policy()).status == Status.PASS
    # The same figure held to the rails' reference is a straggler.
    same = Measured(
        "mlx5_4:1", "rdma_write", "RDMA write", 40.0, "GB/s", Reference(50.0, "rate", 0.8)
    )
    assert judge([*rails, same], Policy()).status == Status.WARN


def test_parts_not_alike_are_held_to_their_reference_alone():
    # Volumes on different devices: their spread is the host's layout, not a fault.
    volumes = [
        Measured("/data", "seq_read", "sequential read", 6.0, "GB/s", alike=False),
        Measured("/scratch", "seq_read", "sequential read", 0.5, "GB/s", alike=False),
    ]
    assert judge(volumes, Policy()).status == Status.PASS
    alike = [Measured(m.subject, m.what, m.label, m.value, m.unit) for m in volumes]
    assert judge(alike, Policy()).status == Status.WARN
