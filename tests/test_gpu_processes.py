"""gpu.processes on real `nvidia-smi -q -x` captures (tests/fixtures/corpus/nvidia-smi-xml,
SOURCES.md): a Tesla T4 with Xorg and a python job, an RTX 3080 with 9184 MiB in use and
no process listed (a capture taken inside telegraf's container), idle GPUs; and a real
process holding a stand-in /dev/nvidia file, as tests/test_active_plumbing.py does."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import time

import pytest

from dldoctor.checks.gpu_processes import gpu_processes
from dldoctor.facts import Facts
from dldoctor.facts.gpu import GpuProcess, NvidiaStack
from dldoctor.facts.gpuusers import GpuUser, GpuUsers, gpu_users
from dldoctor.facts.nvidia import _gpu_from_probe, nvidia
from dldoctor.facts.nvsmi import parse_nvidia_smi_xml
from dldoctor.facts.system import Container, container
from dldoctor.host.live import LiveHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from dldoctor.probes import gpu_users as gpu_users_probe
from tests.support.paths import FIXTURES, HOSTS

XML = FIXTURES / "corpus" / "nvidia-smi-xml"
HOST = Container(in_container=False, runtime="")
NOBODY = GpuUsers(recorded=True)
PROLOG = dataclasses.replace(
    Policy(), gpu=dataclasses.replace(Policy().gpu, processes_allowed=False)
)


def stack(name: str) -> NvidiaStack:
    return parse_nvidia_smi_xml((XML / name).read_text())


def judged(found: NvidiaStack, users=NOBODY, where=HOST, policy=None):
    facts = Facts.given({nvidia: found, gpu_users: users, container: where})
    return gpu_processes(facts, policy or Policy())


def test_the_process_lists_and_memory_in_use_are_read_from_the_xml():
    t4 = stack("telegraf-tesla-t4.xml").gpus[0]
    assert t4.memory_used_mib == 1032
    assert t4.processes == (
        GpuProcess(675, "G", "/usr/lib/xorg/Xorg", 22),
        GpuProcess(5762, "C", "python", 1005),
    )
    assert stack("telegraf-rtx-3080-v13.xml").gpus[0].processes == ()
    assert stack("telegraf-rtx-3080-v13.xml").gpus[0].memory_used_mib == 9184
    # The old schema of a GTX 1070 Ti prints no <processes>: not reported, not "none".
    assert stack("telegraf-gtx-1070-ti.xml").gpus[0].processes is None


def test_memory_held_with_no_owner_fails_on_a_host():
    outcome = judged(stack("telegraf-rtx-3080-v13.xml"))
    assert outcome.status == Status.FAIL
    assert outcome.summary == "memory held with no owner on GPU 0"
    assert outcome.details[0] == (
        "GPU 0: 9184 MiB in use, above the policy's 2048 MiB, and no process holds it"
    )


def test_inside_a_container_an_empty_list_is_said_not_called_orphaned():
    inside = Container(in_container=True, runtime="docker", signs=("/.dockerenv exists",))
    outcome = judged(stack("telegraf-rtx-3080-v13.xml"), where=inside)
    assert outcome.status == Status.WARN
    assert "no process visible from here (GPU 0): running inside a container (docker)" in (
        outcome.summary
    )
    assert any("PID namespace" in line for line in outcome.details)


def test_processes_are_listed_and_fail_a_prolog():
    t4 = stack("telegraf-tesla-t4.xml")
    listed = judged(t4)
    assert listed.status == Status.PASS
    assert listed.summary == "2 process(es) on GPU 0: pid 675 (Xorg), pid 5762 (python)"
    assert "GPU 0: pid 5762 (python, C, 1005 MiB): python" in listed.details
    prolog = judged(t4, policy=PROLOG)
    assert prolog.status == Status.FAIL
    assert prolog.summary.startswith("2 process(es) on GPU 0, and the policy allows none")


def test_idle_gpus_pass_under_the_driver_reservation():
    # R525+ reports the reservation apart: 450 MiB reserved, 7 MiB used on an idle 3090.
    outcome = judged(stack("telegraf-3090-v13.xml"), policy=PROLOG)
    assert outcome.status == Status.PASS
    assert outcome.summary == "no process holds a GPU; at most 7 MiB in use"
    assert judged(stack("telegraf-dual_2070-v13.xml")).status == Status.PASS


def test_nothing_reported_is_a_skip_never_a_pass():
    old = stack("telegraf-gtx-1070-ti.xml")
    outcome = judged(old, users=GpuUsers(recorded=False), policy=PROLOG)
    assert outcome.status == Status.SKIP
    assert outcome.summary == "the processes on the GPUs are not reported (at most 42 MiB in use)"
    # Memory in use and no source that could name its owner: no verdict either.
    heavy = dataclasses.replace(old, gpus=(dataclasses.replace(old.gpus[0], memory_used_mib=3000),))
    unnamed = judged(heavy, users=GpuUsers(recorded=False))
    assert unnamed.status == Status.SKIP and "whose owner no source could name" in unnamed.summary


def test_watchers_are_exempt_even_when_the_driver_lists_them():
    found = stack("telegraf-3090-v13.xml")
    gpu = dataclasses.replace(found.gpus[0], processes=(GpuProcess(1800, "C", "", 300),))
    dcgm = GpuUser(1800, "root", "nv-hostengine", "nv-hostengine", ("/dev/nvidia0",))
    users = GpuUsers(recorded=True, watchers=(dcgm,))
    outcome = judged(dataclasses.replace(found, gpus=(gpu,)), users=users, policy=PROLOG)
    assert outcome.status == Status.PASS and outcome.summary.startswith("no process holds")
    named = dataclasses.replace(gpu, processes=(GpuProcess(9, "C", "/usr/bin/dcgm-exporter", 1),))
    assert judged(dataclasses.replace(found, gpus=(named,)), policy=PROLOG).status == Status.PASS


def test_nvml_process_lists_merge_compute_and_graphics():
    gpu = _gpu_from_probe(
        0,
        {
            "memory_used_bytes": {"value": 2048 * 2**20},
            "compute_processes": {"value": [[4242, 1536 * 2**20], [77, None]]},
            "graphics_processes": {"value": [[77, 10 * 2**20], ["x", 1]]},
        },
    )
    assert gpu.memory_used_mib == 2048
    assert gpu.processes == (GpuProcess(77, "C+G", "", 10), GpuProcess(4242, "C", "", 1536))
    assert any("not a process" in n for n in gpu.notes)
    # A driver without the calls: not reported.
    assert _gpu_from_probe(0, {}).processes is None


@pytest.fixture
def holder(tmp_path):
    """A real process holding the stand-in /dev/nvidia0 open (its minor tied to the GPU by
    the driver's table, as tests/test_active_plumbing.py writes it)."""
    root = tmp_path / "root"
    folder = root / "proc/driver/nvidia/gpus/0000:01:00.0"
    folder.mkdir(parents=True)
    (folder / "information").write_text("Model: \t\t T4\nDevice Minor: \t 0\n")
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia0").write_text("")
    proc = subprocess.Popen(
        ["sh", "-c", '(exec 3<"$1"; exec sleep 30) & echo $!; wait', "sh", str(dev / "nvidia0")],
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = int(proc.stdout.readline())
    for _ in range(200):  # until the subshell has become `sleep 30`
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if f.read().startswith(b"sleep"):
                break
        time.sleep(0.01)
    try:
        probe = functools.partial(gpu_users_probe, prefix=str(dev / "nvidia"))
        yield LiveHost(str(root), probes={"gpu_users": probe}), pid
    finally:
        os.kill(pid, 9)
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_a_real_holder_of_the_device_file_owns_the_memory(holder):
    host, pid = holder
    users = Facts(host).get(gpu_users)
    found = stack("telegraf-rtx-3080-v13.xml")  # 9184 MiB in use, no process listed
    bus = dataclasses.replace(found.gpus[0], pci_bus_id="0000:01:00.0")
    outcome = judged(dataclasses.replace(found, gpus=(bus,)), users=users)
    assert outcome.status == Status.PASS
    user = users.users[0].user
    assert outcome.summary == f"1 process(es) on GPU 0: pid {pid} (sleep, user {user})"
    assert outcome.details[0] == f"GPU 0: pid {pid} (sleep, user {user}): sleep 30"
    assert judged(dataclasses.replace(found, gpus=(bus,)), users=users, policy=PROLOG).status == (
        Status.FAIL
    )


def test_the_orphan_memory_host_fails_and_names_the_stray_process():
    host = ReplayHost(str(HOSTS / "hgx-h100x8-orphan-memory"))
    outcome = gpu_processes(Facts(host), Policy())
    assert outcome.status == Status.FAIL
    assert outcome.summary == (
        "memory held with no owner on GPU 5; 1 process(es) on GPU 2: pid 48213 (python, "
        "user user1042)"
    )
    # nvidia-persistenced holds every GPU: a watcher, not an owner of GPU 5's memory.
    assert not any("persistenced" in line for line in outcome.details)
    healthy = gpu_processes(Facts(ReplayHost(str(HOSTS / "hgx-h100x8-healthy"))), PROLOG)
    assert (healthy.status, healthy.summary) == (
        Status.PASS, "no process holds a GPU; at most 517 MiB in use")  # fmt: skip


def test_a_gpu_whose_processes_were_not_listed_is_said_in_a_pass():
    two = stack("telegraf-dual_2070-v13.xml")
    unlisted = dataclasses.replace(two.gpus[1], processes=None)
    outcome = judged(dataclasses.replace(two, gpus=(two.gpus[0], unlisted)),
                     users=GpuUsers(recorded=False))  # fmt: skip
    assert outcome.status == Status.PASS
    assert "GPU 1: the driver did not list the processes" in outcome.details
