"""What each GPU is sold for, with where the figure comes from, and the fraction of it a
healthy part reaches (docs/active.md, "GPU tests").

The figures are NVIDIA's datasheets' (dense: the datasheets print tensor-core TFLOPS with
2:4 sparsity and mark them so; dense is half). The floors come from measured results:

- GEMM: a healthy part's best BF16 matmul reaches 80-86 % of its dense peak (the "Maximum
  Achievable Matmul FLOPS" table of stas00/ml-engineering, compute/accelerator/README.md:
  A100 SXM 85.9 %, A100 PCIe 82.2 %, H100 SXM 80.1 %, GH200 83.0 %); a fixed 8192-cube
  shape is a little below the best shape. DCGM holds its stress tests to 0.75 of what a
  healthy part measured; 0.75 x 0.8 = 0.6 of the datasheet.
- Memory: DCGM's `memory_bandwidth` test fails a GPU below `minimum_bandwidth`, which its
  `nvvs/diag-skus.yaml.in` (NVIDIA/DCGM 4.6.0) sets to 0.75 of what a healthy part of that
  SKU measured. Held as a fraction of the datasheet's bandwidth, that is the floor here
  (H100 SXM: 1905 of 3350 GB/s = 0.57). Where DCGM has no usable figure, 0.6.
- P2P and all-reduce over NVLink: a healthy H100 pair copies ~373 GB/s of NVLink's 450
  GB/s a direction (DCGM's nvbandwidth plugin test inputs), 8 A100s all-reduce at a bus
  bandwidth of 235 of 300 GB/s (microsoft/superbenchmark's captured nccl-tests log): 0.78-
  0.83; 0.75 of that is 0.6.

Matching is by the name the driver reports ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-
32GB"); a name matching nothing has no reference, and its figures pass as measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The floors argued above.
GEMM_FLOOR = 0.6
MEMORY_FLOOR = 0.6
NVLINK_FLOOR = 0.6

DCGM_SKUS = "NVIDIA/DCGM nvvs/diag-skus.yaml.in (DCGM 4.6.0)"
DCGM_MARGIN = 0.75  # DCGM's minimum_bandwidth: 0.75 of what a healthy part measured


@dataclass(frozen=True)
class Sku:
    name: str  # how a summary names it: "H100 SXM5 80GB"
    pattern: str  # a regular expression over the driver's name, lower case
    dense16_tflops: float | None  # dense BF16 (FP16 before Ampere) tensor-core TFLOPS
    tf32_tflops: float | None  # dense TF32 tensor-core TFLOPS; None: no TF32 (Volta)
    memory_gbps: float  # the memory's bandwidth, GB/s
    nvlink_gbps: float | None  # NVLink per GPU, both directions together; None: none
    datasheet: str  # where the figures above come from
    dcgm_min_gbps: float | None = None  # DCGM's minimum_bandwidth, in GB/s (see memory_floor)
    dcgm_entry: str = ""  # the diag-skus.yaml.in entry it comes from: "H100 80GB HBM3 (2330)"
    bf16: bool = True  # False: FP16 is the 16-bit precision it is sold for (Volta)
    memory: str = "HBM"  # or "GDDR": how a summary names its memory

    @property
    def dense16(self) -> str:
        return "BF16" if self.bf16 else "FP16"

    @property
    def dcgm_usable(self) -> bool:
        """DCGM's minimum is 0.75 of what it measured on a healthy part: a measurement above
        the datasheet's bandwidth counted otherwise (read and write twice, other units),
        and is no fraction of it (A100 SXM4 40GB: 1830 of 1555 GB/s; A10: 641 of 600)."""
        return bool(self.dcgm_min_gbps) and self.dcgm_min_gbps / DCGM_MARGIN <= self.memory_gbps

    @property
    def memory_floor(self) -> float:
        """DCGM's minimum bandwidth as a fraction of the datasheet's, where DCGM has one."""
        if self.dcgm_usable:
            return round(self.dcgm_min_gbps / self.memory_gbps, 2)
        return MEMORY_FLOOR

    @property
    def memory_source(self) -> str:
        entry = f"{DCGM_SKUS} {self.dcgm_entry}, minimum_bandwidth {self.dcgm_min_gbps:g} GB/s"
        if self.dcgm_usable:
            return f"{self.datasheet}; floor: {entry}"
        if self.dcgm_entry:
            measured = self.dcgm_min_gbps / DCGM_MARGIN
            return f"{self.datasheet}; floor {MEMORY_FLOOR}: {entry}, of {measured:.0f} measured"
        return self.datasheet

    @property
    def nvlink_direction_gbps(self) -> float | None:
        """What NVLink carries one way, per GPU: half the datasheet's both-ways figure."""
        return self.nvlink_gbps / 2 if self.nvlink_gbps else None


H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (dense: half the sparsity figures)"
H200_SHEET = "NVIDIA H200 Tensor Core GPU datasheet (dense: half the sparsity figures)"
A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (dense figures)"

# Most specific first: "h100 nvl" before "h100".
SKUS: tuple[Sku, ...] = (
    Sku("H200 NVL", r"\bh200 nvl\b", 835.5, 417.5, 4800, 900, H200_SHEET,
        2212.5, "H200 (233b)"),
    Sku("H200 SXM 141GB", r"\bh200\b", 989.5, 494.5, 4800, 900, H200_SHEET,
        2333, "H200 (2335)"),
    Sku("GH200 480GB", r"\bgh200\b", 989.5, 494.5, 4000, 900,
        "NVIDIA GH200 Grace Hopper Superchip datasheet (96 GB HBM3; dense figures)",
        2130, "SkinnyJoe A02 (2342)"),
    Sku("H100 NVL", r"\bh100 nvl\b", 835.5, 417.5, 3900, 600, H100_SHEET,
        2043, "H100NVL (2321)"),
    Sku("H100 PCIe", r"\bh100 pcie\b", 756.5, 378, 2000, 600, H100_SHEET,
        1230, "Nvidia P1010 (2331)"),
    Sku("H100 SXM5 80GB", r"\bh100 (80gb hbm3|sxm)", 989.5, 494.5, 3350, 900, H100_SHEET,
        1905, "H100 80GB HBM3 (2330)"),
    Sku("A100 SXM4 80GB", r"\ba100-sxm4-80gb\b", 312, 156, 2039, 600, A100_SHEET,
        1173, "A100-SXM4-80GB (20b2)"),
    Sku("A100 SXM4 40GB", r"\ba100-sxm4-40gb\b", 312, 156, 1555, 600, A100_SHEET,
        1372.5, "GA100 20b0 (20b0)"),
    Sku("A100 PCIe 80GB", r"\ba100 80gb pcie\b", 312, 156, 1935, 600, A100_SHEET,
        1121.25, "A100-20b5 (20b5)"),
    Sku("A100 PCIe 40GB", r"\ba100-pcie-40gb\b", 312, 156, 1555, 600, A100_SHEET,
        969.75, "A100 PCIe (20f1)"),
    Sku("L40S", r"\bl40s\b", 362.05, 183, 864, None,
        "NVIDIA L40S datasheet (dense: half the sparsity figures)", 525, "NVIDIA L40S (26b9)",
        memory="GDDR"),
    Sku("L4", r"\bl4\b", 121, 60, 300, None,
        "NVIDIA L4 Tensor Core GPU datasheet (dense: half the sparsity figures)",
        198.5, "Nvidia L4 (27b8)", memory="GDDR"),
    Sku("A10", r"\ba10\b", 125, 62.5, 600, None,
        "NVIDIA A10 Tensor Core GPU datasheet (dense: half the sparsity figures)",
        480.525, "A10c/noc - PG133 SKU215 (22361482)", memory="GDDR"),
    Sku("V100 SXM2", r"\bv100-sxm2\b", 125, None, 900, 300,
        "NVIDIA Tesla V100 datasheet (FP16 tensor-core figure; no BF16 or TF32)",
        607.5, "Tesla V100 32GB (1db5)", bf16=False),
    Sku("V100 PCIe", r"\bv100-pcie\b", 112, None, 900, None,
        "NVIDIA Tesla V100 datasheet (FP16 tensor-core figure; no BF16 or TF32)",
        607.5, "Tesla V100 PCI-E-32GB (Passive) (1db6)", bf16=False),
)  # fmt: skip

_COMPILED = tuple((re.compile(s.pattern), s) for s in SKUS)


def sku_of(gpu_name: str) -> Sku | None:
    """The table's entry for a GPU named so by its driver; None: not in the table."""
    name = " ".join(gpu_name.lower().split())
    return next((sku for pattern, sku in _COMPILED if pattern.search(name)), None)
