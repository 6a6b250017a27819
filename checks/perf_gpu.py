"""The GPU side of the active tier (docs/active.md, "GPU tests"): what each GPU delivers
(GEMM, memory copy, PCIe both ways), what its peers copy to it (NVLink or PCIe), the host's
all-reduce, and DCGM's own diagnostic. Each figure is judged by judge() against the
per-SKU table (dldoctor/active/skus.py) or the GPU's own PCIe link; the field's tools
measure where present (nvbandwidth, nccl-tests, dcgmi), PyTorch in the host's framework
interpreter where not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dldoctor.active.dcgm import LEVEL, DcgmDiag, dcgm_diag
from dldoctor.active.gpus import idle_gpus
from dldoctor.active.judge import Measured, Reference, amount, judge
from dldoctor.active.nccltests import nccl_tests
from dldoctor.active.nvbandwidth import LOCAL, nvbandwidth
from dldoctor.active.skus import GEMM_FLOOR, NVLINK_FLOOR, Sku, sku_of
from dldoctor.active.torchmeasure import TorchMeasure, torch_measure
from dldoctor.checks.nvlink import is_sxm
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.nvlink import nvlinks
from dldoctor.facts.pci import pci_devices
from dldoctor.facts.pcie import pcie_links
from dldoctor.model import Outcome, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check

# What every GPU measurement needs first: GPUs the driver reports, none of them used by
# another process unless --force (dldoctor.active.gpus.idle_gpus asks nvidia_gpus first).
GPU_REQUIRES: tuple[Callable[..., Outcome | None | list], ...] = (idle_gpus,)

NO_REFERENCE = "no reference for this GPU"
NO_TORCH = "a PyTorch interpreter with CUDA"

# A healthy GPU copies to and from the host at 0.77-0.84 of its link's rate: DCGM's pcie
# test inputs (12.1-13.1 of 15.75 GB/s, Gen3 x16), nvbandwidth issue 15 (8 RTX 4090s,
# 23.9-27.1 of 31.5 GB/s, Gen4 x16). 0.85 of that.
PCIE_FLOOR = 0.7
# Peers over PCIe copy at 0.69-0.84 of the link between sockets and switches (nvbandwidth
# issue 50, 6 A6000s at Gen4 x16); more hops lose more: half the link is a broken path.
PCIE_PEER_FLOOR = 0.5
# GT/s a lane for each PCIe generation (NVML reports the generation, sysfs the rate).
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def subject(index: int) -> str:
    return f"GPU {index}"


def gpus_by_index(facts: Facts) -> dict[int, g.Gpu]:
    return {x.index: x for x in facts.get(nvidia).gpus}


def sku_for(gpus: dict[int, g.Gpu], index: int) -> Sku | None:
    gpu = gpus.get(index)
    return sku_of(gpu.name) if gpu else None


# --- PCIe links -----------------------------------------------------------------------


def encoding(gts: float) -> float:
    """The share of a lane's transfers that carry data: 8b/10b to 5 GT/s (PCIe 1-2),
    128b/130b to 32 GT/s (3-5), FLIT mode's 242/256 at 64 GT/s (6)."""
    if gts <= 5.0:
        return 0.8
    if gts <= 32.0:
        return 128 / 130
    return 242 / 256


def link_rate_gbps(gts: float, width: int) -> float:
    """What a link carries one way: GT/s a lane x lanes x encoding, in bytes."""
    return gts * width * encoding(gts) / 8


def pcie_reference(facts: Facts, gpu: g.Gpu | None) -> Reference | None:
    """The GPU's link at its trained width and the fastest rate both ends can run (an
    idle GPU drops its rate and raises it under load: the measurement loads it)."""
    if gpu is None:
        return None
    links = facts.get(pcie_links)
    link = links.get(gpu.pci_bus_id) if gpu.pci_bus_id else None
    where = "sysfs"
    if link and link.current_width and link.max_gts:
        port = links.get(link.upstream[0]) if link.upstream else None
        gts = min(x for x in (link.max_gts, port.max_gts if port else None) if x)
        width = link.current_width
    elif gpu.pcie_width_current and GEN_GTS.get(gpu.pcie_gen_max or 0):
        gts, width, where = GEN_GTS[gpu.pcie_gen_max or 0], gpu.pcie_width_current, "NVML"
    else:
        return None
    rate = link_rate_gbps(gts, width)
    source = (
        f"the PCIe link of GPU {gpu.index} ({where}): x{width} at {gts:g} GT/s, "
        f"{amount(rate, 'GB/s')} a direction"
    )
    return Reference(rate, source, PCIE_FLOOR)


# --- NVLink peers ---------------------------------------------------------------------


def linked_gpus(facts: Facts) -> set[int]:
    """The GPUs with at least one NVLink up."""
    return {
        x.index for x in facts.get(nvlinks).gpus if any(s is True for s in x.nvlink_states or ())
    }


def peer_kind(facts: Facts, src: int, dst: int) -> str:
    """ "NVLink", "PCIe", or "unknown" for a pair of GPUs. Two GPUs with links up are
    NVLink peers when an NVSwitch joins every GPU, when they are the only two with links
    (a bridged pair), or on a 4-GPU SXM board (HGX A100/H100 4-GPU are wired all to all);
    a pair of which one has no link up copies over PCIe. Others (bridged pairs among four
    PCIe cards, Volta's hybrid cube mesh) are not told apart without the link map."""
    linked = linked_gpus(facts)
    if src not in linked or dst not in linked:
        return "PCIe"
    gpus = gpus_by_index(facts)
    sxm4 = len(linked) == 4 and all(
        is_sxm(gpus[i]) and "V100" not in gpus[i].name for i in linked if i in gpus
    )
    if facts.get(pci_devices).nvswitches or len(linked) == 2 or sxm4:
        return "NVLink"
    return "unknown"


def nvlink_reference(sku: Sku | None) -> Reference | None:
    if sku is None or not sku.nvlink_direction_gbps:
        return None
    source = (
        f"{sku.name} NVLink {sku.nvlink_gbps:g} GB/s per GPU both ways, "
        f"{sku.nvlink_direction_gbps:g} one way ({sku.datasheet})"
    )
    return Reference(sku.nvlink_direction_gbps, source, NVLINK_FLOOR)


# --- outcomes -------------------------------------------------------------------------


def with_errors(outcome: Outcome, errors: Iterable[str]) -> Outcome:
    """A test that failed on some GPU (a CUDA error, an allocation that failed) fails the
    check whatever the others measured."""
    errors = list(errors)
    if not errors:
        return outcome
    return failed(
        f"{len(errors)} measurement(s) failed: {errors[0]}",
        [*errors, *outcome.details],
        figures=outcome.figures,
    )


def torch_errors(tm: TorchMeasure, test: str) -> list[str]:
    return [e for e in tm.errors if e.startswith(f"{test} ") or e.startswith(f"{test}:")]


def unmeasured(tool_error: str, tm: TorchMeasure, tool: str) -> Outcome:
    """Neither the field tool nor the script measured: a skip where neither is there, an
    error naming what failed otherwise."""
    missing_tool = tool_error.endswith("is not installed")
    if missing_tool and not tm.python:
        return skipped(f"neither {tool} nor {NO_TORCH} found")
    return errored("; ".join(x for x in (tool_error, tm.error) if x) or "nothing measured")


def measured_by(
    facts: Facts,
    tool: tuple[object, str] | None,
    test: str,
    script: tuple[Callable[[TorchMeasure], object], str],
    missing: tuple[str, str],
) -> tuple[object, str, list[str]] | Outcome:
    """(the figures, what measured them, the failures): the field tool's (`tool`: its
    figures and its name) where it measured, else the script's (`script`: its figures from
    the script's output, how it measured); else the Outcome. `missing`: what the script
    did not measure, and why the tool did not."""
    if tool:
        return (*tool, [])
    tm = facts.get(torch_measure)
    figures, how = script[0](tm), script[1]
    if figures:
        return figures, f"PyTorch {tm.torch} {how}", torch_errors(tm, test)
    if tm.python and not tm.error:
        return errored(f"the measuring script measured no {missing[0]}", tm.errors)
    return unmeasured(missing[1], tm, "nvbandwidth")


def judged(
    found: tuple[object, str, list[str]] | Outcome,
    parts: Callable[[object], tuple[list[Measured], list[str]]],
    policy: Policy,
    *,
    no_reference: str = NO_REFERENCE,
) -> Outcome:
    """The outcome of what `measured_by` found: `parts` makes the figures the parts judged
    and any lines more to say."""
    if isinstance(found, Outcome):
        return found
    figures, tool, errors = found
    measured, lines = parts(figures)
    details = [*lines, f"measured by {tool}"]
    return with_errors(judge(measured, policy, details=details, no_reference=no_reference), errors)


# --- checks ---------------------------------------------------------------------------


@check(
    "perf.gpu.gemm",
    "GPU GEMM throughput",
    active=True,
    requires=GPU_REQUIRES,
    remediation="A GPU far below its dense peak, or below its siblings: look for clocks held "
    "down (gpu.clocks: power or thermal slowdown), a power cap, ECC or Xid errors, and "
    "another process on it; reseat or RMA a part that stays slow.",
)
def gemm(facts: Facts, policy: Policy) -> Outcome:
    tm = facts.get(torch_measure)
    if not tm.python:
        return skipped(f"no {NO_TORCH} found: the GEMM runs in PyTorch")
    if tm.error:
        return errored(tm.error)
    gpus = gpus_by_index(facts)
    measured = []
    for row in tm.gemm:
        sku, dtype = sku_for(gpus, row["gpu"]), str(row.get("dtype", ""))
        peak = (sku.tf32_tflops if dtype == "tf32" else sku.dense16_tflops) if sku else None
        ref = (
            Reference(peak, f"{sku.name} dense {dtype.upper()}: {sku.datasheet}", GEMM_FLOOR)
            if sku and peak
            else None
        )
        measured.append(
            Measured(
                subject(row["gpu"]),
                f"gemm_{dtype}",
                f"{dtype.upper()} GEMM",
                row["tflops"],
                "TFLOPS",
                ref,
            )
        )
    if not measured:
        return errored("the measuring script measured no GEMM", tm.errors)
    n = tm.gemm[0].get("n", "?")
    details = [f"{n}x{n}x{n} matmul by PyTorch {tm.torch} ({tm.python})"]
    outcome = judge(measured, policy, details=details, no_reference=NO_REFERENCE)
    return with_errors(outcome, torch_errors(tm, "gemm"))


def memory_figures(facts: Facts) -> tuple[dict[int, float], str, list[str]] | Outcome:
    """GB/s of memory traffic per GPU, what measured it, the failures; or the Outcome."""
    bw = facts.get(nvbandwidth)
    tool = (bw.local_copy, f"nvbandwidth {bw.version} {LOCAL} (read and written)")
    return measured_by(
        facts,
        tool if bw.has(LOCAL) else None,
        "memory",
        (lambda tm: {int(r["gpu"]): float(r["gbps"]) for r in tm.memory},
         "copy_ (read and written)"),
        ("memory copy", bw.error or "nvbandwidth has no device_local_copy"),
    )  # fmt: skip


@check(
    "perf.gpu.memory",
    "GPU memory bandwidth",
    active=True,
    requires=GPU_REQUIRES,
    remediation="A GPU whose memory copies slowly: check its memory clock and throttle "
    "reasons, ECC errors and remapped rows (gpu.memory.*); one far below its siblings is "
    "a hardware fault for the vendor.",
)
def memory(facts: Facts, policy: Policy) -> Outcome:
    gpus = gpus_by_index(facts)

    def parts(figures: dict[int, float]) -> tuple[list[Measured], list[str]]:
        return [memory_part(sku_for(gpus, i), i, v) for i, v in sorted(figures.items())], []

    return judged(memory_figures(facts), parts, policy)


def memory_part(sku: Sku | None, index: int, value: float) -> Measured:
    ref = None
    if sku:
        ref = Reference(sku.memory_gbps, f"{sku.name} {sku.memory_source}", sku.memory_floor)
    label = f"{sku.memory if sku else 'memory'} copy"
    return Measured(subject(index), "memory_copy", label, value, "GB/s", ref)


def pcie_figures(facts: Facts) -> tuple[dict[int, tuple[float, float]], str, list[str]] | Outcome:
    bw = facts.get(nvbandwidth)
    both = {i: (bw.h2d[i], bw.d2h[i]) for i in bw.h2d if i in bw.d2h}
    return measured_by(
        facts,
        (both, f"nvbandwidth {bw.version} (copy engines, pinned memory)") if both else None,
        "pcie",
        (lambda tm: {int(r["gpu"]): (float(r["h2d_gbps"]), float(r["d2h_gbps"]))
                     for r in tm.pcie}, "copy_ of pinned memory"),
        ("host copy", bw.error or "nvbandwidth measured no host copy"),
    )  # fmt: skip


@check(
    "perf.gpu.pcie",
    "GPU host copies (PCIe)",
    active=True,
    requires=GPU_REQUIRES,
    remediation="Host copies below what the link carries: a link that trained slower or "
    "narrower under load (pci.link.*), the IOMMU in translated mode, the copy's memory on the "
    "far NUMA node, ACS redirecting through the root complex.",
)
def pcie(facts: Facts, policy: Policy) -> Outcome:
    gpus = gpus_by_index(facts)

    def parts(figures: dict[int, tuple[float, float]]) -> tuple[list[Measured], list[str]]:
        measured = []
        for index, (h2d, d2h) in sorted(figures.items()):
            ref = pcie_reference(facts, gpus.get(index))
            measured.append(Measured(subject(index), "h2d", "host to GPU", h2d, "GB/s", ref))
            measured.append(Measured(subject(index), "d2h", "GPU to host", d2h, "GB/s", ref))
        return measured, []

    return judged(pcie_figures(facts), parts, policy, no_reference="no PCIe link read for this GPU")


def p2p_figures(facts: Facts) -> tuple[tuple[dict, dict], str, list[str]] | Outcome:
    """(GB/s, latency in us) by (src, dst), what measured them, the failures."""
    bw = facts.get(nvbandwidth)
    latency = {k: v / 1000 for k, v in bw.d2d_latency_ns.items()}
    return measured_by(
        facts,
        ((bw.d2d, latency), f"nvbandwidth {bw.version} (copy engines, reads)") if bw.d2d else None,
        "p2p",
        (_script_p2p, "copy_ between GPUs"),
        ("copy between GPUs", bw.error or "nvbandwidth found no peers"),
    )


def _script_p2p(tm: TorchMeasure) -> tuple[dict, dict] | None:
    if not tm.p2p:
        return None
    rates = {(int(r["src"]), int(r["dst"])): float(r["gbps"]) for r in tm.p2p}
    latency = {
        (int(r["src"]), int(r["dst"])): float(r["latency_us"])
        for r in tm.p2p
        if isinstance(r.get("latency_us"), int | float)
    }
    return rates, latency


def _latency_lines(latency: dict, kinds: dict) -> list[str]:
    lines = []
    for kind in ("NVLink", "PCIe", "unknown"):
        values = [v for k, v in latency.items() if kinds.get(k) == kind]
        if values:
            lines.append(
                f"{kind} peers' latency {min(values):.1f}–{max(values):.1f} us "
                f"({len(values)} pairs)"
            )
    return lines


@check(
    "perf.gpu.p2p",
    "GPU peer copies (NVLink, PCIe)",
    active=True,
    requires=GPU_REQUIRES,
    remediation="NVLink peers copying at PCIe speed: links down or degraded (gpu.nvlink), "
    "Fabric Manager not running on NVSwitch systems (gpu.fabricmanager), peer access "
    "refused (IOMMU, ACS, a VM). Slow PCIe peers: ACS redirecting through the root complex.",
)
def p2p(facts: Facts, policy: Policy) -> Outcome:
    if len(facts.get(nvidia).gpus) < 2:
        return skipped("one GPU: no peers to copy between")

    def parts(figures: tuple[dict, dict]) -> tuple[list[Measured], list[str]]:
        rates, latency = figures
        kinds = {pair: peer_kind(facts, *pair) for pair in rates}
        found = [p2p_part(facts, pair, kinds[pair], value) for pair, value in sorted(rates.items())]
        lines = [line for _, line in found if line] + _latency_lines(latency, kinds)
        if "unknown" in kinds.values():
            lines.append("pairs of GPUs with NVLinks up but no NVSwitch: which are joined is "
                         "not known here, so those pairs have no reference")  # fmt: skip
        return [m for m, _ in found], lines

    return judged(p2p_figures(facts), parts, policy, no_reference="no reference for these GPUs")


def p2p_part(facts: Facts, pair: tuple[int, int], kind: str, value: float) -> tuple[Measured, str]:
    """A pair's copy judged by its kind, and a line when NVLink peers copy at PCIe speed."""
    src, dst = pair
    gpus = gpus_by_index(facts)
    refs = [r for r in (pcie_reference(facts, gpus.get(i)) for i in pair) if r]
    pcie_ref = min(refs, key=lambda r: r.value, default=None)
    ref, line = None, ""
    if kind == "NVLink":
        ref = nvlink_reference(sku_for(gpus, src))
        if pcie_ref and value < 1.1 * pcie_ref.value:
            line = (
                f"GPU {src} → GPU {dst}: {amount(value, 'GB/s')}, at PCIe speed "
                f"({amount(pcie_ref.value, 'GB/s')} the link): its NVLinks carry nothing"
            )
    elif kind == "PCIe" and pcie_ref:
        ref = Reference(pcie_ref.value, pcie_ref.source, PCIE_PEER_FLOOR)
    what, label = ("p2p_nvlink", "NVLink copy") if kind == "NVLink" else ("p2p_pcie", "peer copy")
    # PCIe peers within a switch copy about twice as fast as peers across sockets: their
    # spread is the host's layout, so they are held to the link alone, not to each other.
    pair_name = f"GPU {src} → GPU {dst}"
    return Measured(pair_name, what, label, value, "GB/s", ref, alike=kind == "NVLink"), line


def allreduce_reference(facts: Facts) -> Reference | None:
    """NVLink's one-way rate per GPU where every pair of GPUs are NVLink peers of one SKU;
    none on a PCIe host (its switches and sockets decide: a site pins its own)."""
    gpus = gpus_by_index(facts)
    indexes = sorted(gpus)
    skus = {sku_for(gpus, i) for i in indexes}
    all_nvlink = all(peer_kind(facts, s, d) == "NVLink" for s in indexes for d in indexes if s != d)
    if len(skus) != 1 or not all_nvlink:
        return None
    return nvlink_reference(skus.pop())


@check(
    "perf.nccl.allreduce",
    "NCCL all-reduce bus bandwidth",
    active=True,
    requires=GPU_REQUIRES,
    remediation="An all-reduce below its links: NVLinks down (gpu.nvlink), NCCL falling back "
    "to PCIe or sockets (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE in the environment; run with "
    "NCCL_DEBUG=INFO and read the transport), a GPU slower than the others.",
)
def allreduce(facts: Facts, policy: Policy) -> Outcome:
    count = len(facts.get(nvidia).gpus)
    if count < 2:
        return skipped("one GPU: no all-reduce to measure")
    ref = allreduce_reference(facts)
    nccl = facts.get(nccl_tests)
    where = f"all {count} GPUs"
    if nccl.rows:
        largest = nccl.largest
        if nccl.wrong:
            return failed(
                f"all_reduce_perf found {nccl.wrong} wrong value(s): the GPUs or links corrupt data"
            )
        measured = [
            Measured(
                where, "allreduce_busbw", "all-reduce bus bandwidth", largest.busbw, "GB/s", ref
            )
        ]
        avg = f"; its average over all sizes {nccl.avg_busbw:g} GB/s" if nccl.avg_busbw else ""
        details = [f"nccl-tests all_reduce_perf, {largest.size >> 20} MiB{avg}"]
        return judge(measured, policy, details=details, no_reference=_no_allreduce_ref(facts))
    tm = facts.get(torch_measure)
    if tm.allreduce:
        measured = [
            Measured(
                where,
                "allreduce_busbw",
                "all-reduce bus bandwidth",
                float(tm.allreduce["busbw_gbps"]),
                "GB/s",
                ref,
            )
        ]
        size = int(tm.allreduce.get("bytes", 0)) >> 20
        details = [f"torch.distributed NCCL all_reduce of {size} MiB, PyTorch {tm.torch}"]
        outcome = judge(measured, policy, details=details, no_reference=_no_allreduce_ref(facts))
        return with_errors(outcome, torch_errors(tm, "allreduce"))
    if tm.python and not tm.error:
        return errored("the measuring script measured no all-reduce", tm.errors)
    return unmeasured(nccl.error, tm, "all_reduce_perf (nccl-tests)")


def _no_allreduce_ref(facts: Facts) -> str:
    if all(peer_kind(facts, 0, d) != "NVLink" for d in gpus_by_index(facts) if d != 0):
        return "no reference for a PCIe host (pin this host's own with genconf)"
    return NO_REFERENCE


def _dcgm_line(r) -> str:
    said = "; ".join(r.warnings)
    return f"{r.category} / {r.test} ({r.who}): {r.status}{f': {said}' if said else ''}"


@check(
    "perf.gpu.dcgm",
    "DCGM diagnostic",
    active=True,
    requires=GPU_REQUIRES,
    remediation="Read DCGM's message for the test that failed: it names the GPU and the "
    "fix (dcgmi diag's documentation lists each test's failure codes).",
)
def dcgm(facts: Facts, policy: Policy) -> Outcome:
    diag: DcgmDiag = facts.get(dcgm_diag)
    if not diag.installed:
        return skipped("dcgmi (NVIDIA DCGM) is not installed")
    if diag.error:
        return errored(diag.error)
    bad, warn = diag.with_status("fail"), diag.with_status("warn")
    details = [_dcgm_line(r) for r in (*bad, *warn)]
    details += [f"DCGM {diag.version} level {LEVEL}: {len(diag.results)} result(s)"]
    if bad:
        first = bad[0]
        why = f": {first.warnings[0]}" if first.warnings else ""
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        return failed(f"DCGM's {first.test} failed on {first.who}{why}{more}", details)
    if warn:
        return warned(f"DCGM's {warn[0].test} warns on {warn[0].who}", details)
    ran = [r for r in diag.results if r.status == "pass"]
    skip = len(diag.results) - len(ran)
    return passed(
        f"DCGM's level-{LEVEL} diagnostic passed {len(ran)} result(s)"
        f"{f', {skip} skipped' if skip else ''}",
        details,
    )
