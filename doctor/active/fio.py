"""Disk throughput through `fio --output-format=json` (Debian's `fio`): the read throughput
of a policy `data_paths` volume and the write throughput of a `checkpoint_paths` volume.

Each measurement is one fio run on one file in a scratch folder of the volume (`{scratch}`,
removed when fio ends), with O_DIRECT so that the page cache does not answer for the disk.
The file is `FILE_BYTES`; it is never written where the volume's free space after it would
fall below the policy's floor (`storage.fail_free_percent`): the fact says so and the
check skips. Facts do not see the policy, so each fact is made for its path and floor
(`read_fact`, `write_fact`), like the storage facts of policy paths.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from dldoctor.active import measure
from dldoctor.facts import Fact, FactContext, fact
from dldoctor.facts.reading import load_json
from dldoctor.facts.storage import Space, space_fact
from dldoctor.host.base import Answer, AnswerStatus

# The test file: big enough that a drive's own read cache does not hold it, small enough to
# lay out in a second or two on an NVMe volume (fio writes it before reading). A hardware
# RAID controller with a larger cache still flatters the read figures.
FILE_BYTES = 256 << 20
FILE_NAME = "dldoctor.fio"
RAMP_S = 1  # unmeasured: queues fill, a drive wakes up
RUN_S = 2  # measured, per job
# fio's own start, the layout of the file, its removal: on a slow or busy volume more than
# the jobs themselves (the read test took 11 s of its 6 s of jobs on the loaded build VM).
SLACK_S = 20.0
# 4K random reads: four jobs of 16 requests in flight each, what a data loader's workers
# ask of a volume, and enough for an NVMe drive or a RAID0 of them to show its IOPS.
RAND_JOBS = 4
RAND_DEPTH = 16
SEQ_DEPTH = 8
MISSING = "fio is not installed (apt install fio)"


@dataclass(frozen=True)
class FioJob:
    """One job (or group of jobs: `--group_reporting` sums them) of fio's JSON."""

    name: str
    read_bytes_per_s: float = 0.0
    read_iops: float = 0.0
    write_bytes_per_s: float = 0.0
    write_iops: float = 0.0
    runtime_ms: int = 0
    error: int = 0  # fio's errno for the job; 0 when it ran


@dataclass(frozen=True)
class FioRun:
    jobs: tuple[FioJob, ...] = ()
    version: str = ""
    notes: tuple[str, ...] = ()

    def job(self, name: str) -> FioJob | None:
        return next((j for j in self.jobs if j.name == name), None)


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _job(data: dict) -> FioJob:
    read = data.get("read") if isinstance(data.get("read"), dict) else {}
    write = data.get("write") if isinstance(data.get("write"), dict) else {}
    return FioJob(
        name=str(data.get("jobname", "")),
        read_bytes_per_s=_number(read.get("bw_bytes")),
        read_iops=_number(read.get("iops")),
        write_bytes_per_s=_number(write.get("bw_bytes")),
        write_iops=_number(write.get("iops")),
        runtime_ms=int(_number(data.get("job_runtime"))),
        error=int(_number(data.get("error"))),
    )


def parse_fio_json(text: str) -> FioRun:
    """fio 3.x `--output-format=json`. fio prints some warnings on stdout before the JSON
    ("note: both iodepth >= 1 and synchronous I/O engine ..."): the JSON starts at the first
    line that opens an object. Never raises: what it could not read is a note."""
    start = text.find("\n{") + 1 if not text.startswith("{") else 0
    if not text.startswith("{") and start == 0:
        return FioRun(notes=("fio printed no JSON",))
    data, why = load_json(text[start:])
    if why:
        return FioRun(notes=(f"fio printed no JSON ({why})",))
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        return FioRun(notes=("fio's JSON has no jobs",))
    jobs = tuple(_job(j) for j in data["jobs"] if isinstance(j, dict))
    return FioRun(jobs, str(data.get("fio version", "")))


def _common(size: int) -> list[str]:
    return [
        "fio",
        "--output-format=json",
        "--directory={scratch}",
        f"--filename={FILE_NAME}",
        f"--size={size}",
        "--direct=1",
        "--ioengine=libaio",
        "--time_based",
        f"--ramp_time={RAMP_S}",
        f"--runtime={RUN_S}",
        "--group_reporting",
    ]


def read_argv(size: int = FILE_BYTES) -> list[str]:
    """Sequential 1 MiB reads, then (stonewall: one after the other) 4K random reads, on
    one file that fio lays out first."""
    return [
        *_common(size),
        "--name=seq_read",
        "--rw=read",
        "--bs=1M",
        f"--iodepth={SEQ_DEPTH}",
        "--name=rand_read_4k",
        "--stonewall",
        "--rw=randread",
        "--bs=4k",
        f"--iodepth={RAND_DEPTH}",
        f"--numjobs={RAND_JOBS}",
    ]


def write_argv(size: int = FILE_BYTES) -> list[str]:
    """Sequential 1 MiB writes, O_DIRECT, and an fsync at the end (the drive's own write
    cache flushed too): what saving a checkpoint asks of the volume."""
    return [*_common(size), "--end_fsync=1", "--name=seq_write", "--rw=write", "--bs=1M",
            f"--iodepth={SEQ_DEPTH}"]  # fmt: skip


READ_COST_S = 2 * (RAMP_S + RUN_S) + SLACK_S
WRITE_COST_S = RAMP_S + RUN_S + SLACK_S


@dataclass(frozen=True)
class DiskMeasurement:
    """One volume measured, or why it was not (`refused`: a skip) or could not be (`error`)."""

    path: str
    space: Space | None = None
    file_bytes: int = FILE_BYTES
    run: FioRun | None = None
    refused: str = ""
    error: str = ""


def room_for(space: Space, floor_percent: float, file_bytes: int = FILE_BYTES) -> str:
    """Why the test file may not be written on this volume ("" when it may)."""
    if space.size_bytes is None or space.free_bytes is None:
        return next(iter(space.notes), f"no free space known for {space.path}")
    left = space.free_bytes - file_bytes
    floor = space.size_bytes * floor_percent / 100
    if left < floor:
        gib = 1 << 30
        return (
            f"{space.path} has {space.free_bytes / gib:.1f} GiB free of "
            f"{space.size_bytes / gib:.1f} GiB: a {file_bytes >> 20} MiB test file would "
            f"leave less than the policy's floor of {floor_percent:g} % "
            "(storage.fail_free_percent)"
        )
    return ""


def _answered(path: str, space: Space, answer: Answer, what: str) -> DiskMeasurement:
    if answer.status in (AnswerStatus.NOT_INSTALLED, AnswerStatus.MISSING):
        return DiskMeasurement(path, space, refused=MISSING)
    if not answer.ok:
        return DiskMeasurement(path, space, error=f"fio ({what}): {answer.describe()}")
    run = parse_fio_json(answer.text)
    result = answer.value
    if not run.jobs:
        said = result.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[0][:200] if said else "; ".join(run.notes)
        return DiskMeasurement(
            path, space, run=run, error=f"fio exited with {result.returncode}: {why}"
        )
    failed = [j for j in run.jobs if j.error]
    if failed:
        why = f"fio's job {failed[0].name} failed with errno {failed[0].error}"
        return DiskMeasurement(path, space, run=run, error=why)
    return DiskMeasurement(path, space, run=run)


# What each test runs: its command line, its limit, how a check waiting on it names it.
TESTS = {
    "read": (read_argv, READ_COST_S, "fio reads"),
    "write": (write_argv, WRITE_COST_S, "fio writes"),
}


@functools.cache
def disk_fact(test: str, path: str, floor_percent: float) -> Fact[DiskMeasurement]:
    """The fact of one test ("read", "write") of one volume under one free-space floor:
    the same arguments give the same Fact, so the store measures it once."""
    argv, cost, what = TESTS[test]

    @fact(f"perf.disk.{test}:{path}")
    def disk(ctx: FactContext) -> DiskMeasurement:
        space = ctx.get(space_fact((path,)))[0]
        refused = room_for(space, floor_percent)
        if refused:
            return DiskMeasurement(path, space, refused=refused)
        answer = measure(ctx, argv(), cost_s=cost, what=f"{what} of {path}", scratch_in=path)
        return _answered(path, space, answer, what)

    return disk


def read_fact(path: str, floor_percent: float) -> Fact[DiskMeasurement]:
    return disk_fact("read", path, floor_percent)


def write_fact(path: str, floor_percent: float) -> Fact[DiskMeasurement]:
    return disk_fact("write", path, floor_percent)
