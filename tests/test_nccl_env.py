"""NCCL variables that name devices, against the devices a host has."""

from __future__ import annotations

import pytest

from dldoctor.checks.nccl import nccl_env, nccl_selection, unmatched
from dldoctor.facts import Facts
from dldoctor.facts.net import Interfaces, interfaces
from dldoctor.facts.system import environ, parse_environ
from dldoctor.model import Status
from dldoctor.policy import Policy

HOST = Interfaces(net=("eno1", "ib0", "ib1", "lo"), infiniband=("mlx5_0", "mlx5_1"))


@pytest.mark.parametrize("value, parsed", [
    ("ib", (False, False, ["ib"])),
    ("^docker,lo", (True, False, ["docker", "lo"])),
    ("=mlx5_0:1,mlx5_1:1", (False, True, ["mlx5_0", "mlx5_1"])),
])  # fmt: skip
def test_nccl_list_syntax(value, parsed):
    assert nccl_selection(value) == parsed


def test_prefix_and_exact_matching():
    assert unmatched("ib", list(HOST.net)) == []
    assert unmatched("=ib", list(HOST.net)) == ["ib"]  # exact: no interface is called "ib"
    assert unmatched("^eth", list(HOST.net)) == []


@pytest.mark.parametrize("env, status", [
    ({}, Status.SKIP),
    ({"NCCL_SOCKET_IFNAME": "ib", "NCCL_IB_HCA": "mlx5"}, Status.PASS),
    ({"NCCL_SOCKET_IFNAME": "ib,eth"}, Status.WARN),      # eth* missing, ib* still found
    ({"NCCL_SOCKET_IFNAME": "bond0"}, Status.FAIL),       # NCCL finds no interface
    ({"NCCL_IB_HCA": "=mlx5_2:1"}, Status.FAIL),
])  # fmt: skip
def test_nccl_env_check(env, status):
    assert nccl_env(Facts.given({environ: env, interfaces: HOST}), Policy()).status == status


def test_parse_environ():
    assert parse_environ(b"A=1\0EMPTY=\0BROKEN\0PATH=/bin:/usr/bin\0") == {
        "A": "1", "EMPTY": "", "PATH": "/bin:/usr/bin"}  # fmt: skip
