"""The active tier's host tests (docs/active.md, "Host tests"): the read throughput of the
data volumes, the write throughput of the checkpoint volumes, the memory bandwidth of each
NUMA node and the loopback bandwidth of each ACTIVE RDMA port. Each is measured by a fact
(doctor/active/fio.py, membw.py, perftest.py) and judged here (doctor/active/judge.py).

Disks and memory have no datasheet to be held to: a site pins its own figures (policy
`perf.references`, genconf from a healthy host), and the parts of one host measured alike
(its volumes, its NUMA nodes) are held to their median. Two references are built in: the
deployment guide's "NVMe RAID0 ≈ 1 GB/s of 4K random reads" for a volume that the md facts
show to be a RAID0 of NVMe devices, and an RDMA port's own link rate.
"""

from __future__ import annotations

import posixpath

from dldoctor.active import fio
from dldoctor.active.fio import DiskMeasurement
from dldoctor.active.judge import Measured, Reference, amount, judge
from dldoctor.active.membw import memory_bandwidth
from dldoctor.active.perftest import rdma_loopback
from dldoctor.facts import Facts
from dldoctor.facts.mdraid import md_raid
from dldoctor.facts.rdma import RdmaPort
from dldoctor.facts.storage import Space
from dldoctor.model import Outcome, errored, skipped
from dldoctor.policy import Policy
from dldoctor.registry import check

GB = 1e9
# The guide's figure for a RAID0 of NVMe drives, as IOPS of 4 KiB (1 GB/s / 4096 B); below
# half of it the array reads like one SATA SSD (~100k IOPS), which is what it guards against.
NVME_RAID0_IOPS = GB / 4096
NVME_RAID0_FLOOR = 0.5
NVME_RAID0_SOURCE = "the deployment guide: an NVMe RAID0 reads ≈ 1 GB/s of 4K random reads"
# A healthy port's loopback ib_write_bw reaches 90-97 % of its link rate with 64 KiB
# messages (one queue pair); 0.8 leaves room for PCIe and loopback overheads, and a rail at
# half its rate (a PCIe link trained at half width, a port at a lower speed) fails.
RDMA_FLOOR = 0.8


def _where(space: Space | None) -> str:
    if space is None or not space.mount_point:
        return ""
    return f" ({space.fstype or '?'} on {space.mount_point}, from {space.source or '?'})"


def _nvme_raid0(facts: Facts, space: Space | None) -> bool:
    """Whether the volume is an md RAID0 whose members are all NVMe namespaces."""
    if space is None or not space.source.startswith("/dev/md"):
        return False
    name = posixpath.basename(space.source)
    mdstat = facts.get(md_raid).mdstat
    arrays = [a for a in (mdstat.arrays if mdstat else ()) if a.name == name]
    return (
        bool(arrays)
        and arrays[0].level == "raid0"
        and bool(arrays[0].members)
        and all(m.name.startswith("nvme") for m in arrays[0].members)
    )


def _untold(results: list[DiskMeasurement], key: str) -> Outcome | None:
    """The outcome when nothing was measured (a skip or an error), else None."""
    errors = [f"{r.path}: {r.error}" for r in results if r.error]
    if errors:
        said = errors[0] if len(errors) == 1 else f"{len(errors)} volumes: {errors[0]}"
        return errored(said, errors + _notes(results))
    if all(r.refused for r in results):
        if all(r.refused == fio.MISSING for r in results):
            return skipped(fio.MISSING)
        said = [f"not measured: {r.refused}" for r in results]
        return skipped(said[0] if len(said) == 1 else f"no {key} volume measured", said)
    return None


def _notes(results: list[DiskMeasurement]) -> list[str]:
    return [f"{r.path}: not measured: {r.refused}" for r in results if r.refused]


def _judged(facts: Facts, policy: Policy, test: str, kind: str, paths, figures_of) -> Outcome:
    """The volumes of `[storage] <kind>_paths` measured by fio's `test`, each volume's
    figures made by `figures_of(facts, measurement)` (an Outcome when fio's JSON lacks
    a job), and judged together."""
    if not paths:
        return skipped(f"the policy names no {kind} paths ([storage] {kind}_paths)")
    floor = policy.storage.fail_free_percent
    results = [facts.get(fio.disk_fact(test, p, floor)) for p in paths]
    untold = _untold(results, kind)
    if untold:
        return untold
    measured, details = [], []
    for r in results:
        if r.run is None:
            continue
        got = figures_of(facts, r)
        if isinstance(got, Outcome):
            return got
        measured += got[0]
        details.append(f"{r.path}{_where(r.space)}: fio {r.run.version}, a "
                       f"{r.file_bytes >> 20} MiB file, O_DIRECT; {got[1]}")  # fmt: skip
    return judge(measured, policy, details=details + _notes(results),
                 no_reference="no reference for this volume (pin one: genconf)")  # fmt: skip


def _read_figures(facts: Facts, r: DiskMeasurement):
    seq, rand = r.run.job("seq_read"), r.run.job("rand_read_4k")
    if seq is None or rand is None:
        return errored(f"fio's JSON for {r.path} lacks the seq_read or rand_read_4k job")
    raid = _nvme_raid0(facts, r.space)
    ref = Reference(NVME_RAID0_IOPS, NVME_RAID0_SOURCE, NVME_RAID0_FLOOR) if raid else None
    measured = [
        Measured(
            r.path, "seq_read", "sequential read", seq.read_bytes_per_s / GB, "GB/s", alike=False
        ),
        Measured(
            r.path, "rand_read_4k", "4K random read", rand.read_iops, "IOPS", ref, alike=False
        ),
    ]
    said = (
        f"1 MiB reads {fio.SEQ_DEPTH} deep; 4K random reads {fio.RAND_JOBS} x "
        f"{fio.RAND_DEPTH} deep = {amount(rand.read_bytes_per_s / GB, 'GB/s')}"
    )
    return measured, said + ("; an md RAID0 of NVMe drives" if raid else "")


def _write_figures(facts: Facts, r: DiskMeasurement):
    job = r.run.job("seq_write")
    if job is None:
        return errored(f"fio's JSON for {r.path} lacks the seq_write job")
    value = job.write_bytes_per_s / GB
    measured = [Measured(r.path, "seq_write", "sequential write", value, "GB/s", alike=False)]
    return measured, f"1 MiB writes {fio.SEQ_DEPTH} deep, fsync at the end"


@check(
    "perf.disk.read",
    "Data volume read throughput",
    active=True,
    remediation="A volume reading below its reference or its siblings: check its RAID "
    "(a degraded or resyncing md array, a member missing), the PCIe link of its NVMe drives, "
    "their temperature, and other I/O on it while measured.",
)
def disk_read(facts: Facts, policy: Policy) -> Outcome:
    return _judged(facts, policy, "read", "data", policy.storage.data_paths, _read_figures)


@check(
    "perf.disk.write",
    "Checkpoint volume write throughput",
    active=True,
    remediation="A checkpoint volume writing below its reference or its siblings: check its "
    "RAID and drives (a full or worn SSD writes slowly: `nvme smart-log`), its free space, "
    "and other writes to it while measured.",
)
def disk_write(facts: Facts, policy: Policy) -> Outcome:
    paths = policy.storage.checkpoint_paths
    return _judged(facts, policy, "write", "checkpoint", paths, _write_figures)


@check(
    "perf.memory.bandwidth",
    "Memory bandwidth per NUMA node",
    active=True,
    remediation="A NUMA node copying below its siblings or its reference: a memory channel "
    "without its DIMM or a DIMM at a lower speed (`dmidecode -t memory`), a node short of "
    "free memory (`numastat`), or other work on its CPUs while measured.",
)
def memory_copy(facts: Facts, policy: Policy) -> Outcome:
    nodes = facts.get(memory_bandwidth)
    errors = [f"{n.subject}: {n.error}" for n in nodes if n.error]
    if errors:
        return errored(errors[0], errors)
    measured = [
        Measured(n.subject, "memory_copy", "memory copy", n.gb_per_s or 0.0, "GB/s") for n in nodes
    ]
    details = [f"{n.subject}: {n.workers} copying processes, pinned by {n.pinned}" for n in nodes]
    details.append("bytes copied per second, counted as mbw does (the memory moves twice that)")
    return judge(measured, policy, details=details,
                 no_reference="no reference for this host (pin one: genconf)")  # fmt: skip


def _rate_reference(port: RdmaPort) -> Reference | None:
    if not port.rate_gbps:
        return None
    rate = port.rate_text or f"{port.rate_gbps:g} Gb/sec"
    return Reference(port.rate_gbps / 8, f"the port's link rate, {rate} (sysfs)", RDMA_FLOOR)


@check(
    "perf.rdma.loopback",
    "RDMA loopback bandwidth",
    active=True,
    remediation="A port below its link rate in loopback: the HCA's PCIe link (`lspci -vv`: "
    "LnkSta below LnkCap), its NUMA placement, its firmware, or a RoCE port without a RoCE v2 "
    "GID; a healthy port reaches 90 % of its rate.",
)
def rdma_write(facts: Facts, policy: Policy) -> Outcome:
    loop = facts.get(rdma_loopback)
    if loop.missing:
        return skipped(loop.missing)
    if not loop.ports:
        if loop.not_active:
            return skipped(f"no ACTIVE RDMA port: {', '.join(loop.not_active[:4])}")
        return skipped("no RDMA device")
    errors = [f"{p.port.device}:{p.port.port}: {p.error}" for p in loop.ports if p.error]
    if errors:
        return errored(errors[0], errors)
    measured = [
        Measured(
            f"{p.port.device}:{p.port.port}",
            "rdma_write",
            "RDMA write loopback",
            p.gb_per_s or 0.0,
            "GB/s",
            _rate_reference(p.port),
        )  # fmt: skip
        for p in loop.ports
    ]
    details = ["ib_write_bw, server and client on the port, 64 KiB messages, one queue pair"]
    details += [f"not measured: {name}" for name in loop.not_active]
    return judge(measured, policy, details=details,
                 no_reference="no reference: the port's rate is not known")  # fmt: skip
