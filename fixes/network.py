"""Fixes for the RDMA network checks."""

from __future__ import annotations

from dldoctor.facts import Facts
from dldoctor.fixes.plan import Plan, RunCommand, WriteFile

PEERMEM_CONF = "/etc/modules-load.d/nvidia-peermem.conf"


def load_peermem(facts: Facts) -> Plan:
    """nvidia_peermem loaded now and at every boot (systemd-modules-load reads
    modules-load.d on Debian, Ubuntu and the RHEL family alike)."""
    return Plan(
        "fix.network.load_peermem",
        "load nvidia_peermem, so NCCL can use GPUDirect RDMA",
        (
            WriteFile(
                PEERMEM_CONF, b"# written by dldoctor (fix.network.load_peermem)\nnvidia-peermem\n"
            ),
            RunCommand(
                ("modprobe", "nvidia-peermem"), undo_argv=("modprobe", "-r", "nvidia-peermem")
            ),
        ),
        resolves=("network.gpudirect",),
    )
