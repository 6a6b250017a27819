"""Generated node reports for the fleet tests and benchmarks/fleet.py.

A real report (a fixture host replayed by the real dldoctor) is the healthy node; the odd
ones are that report with what differs between a rack's nodes changed in its inventory and
in the findings that see it: an older driver, a missing GPU, a GPU trained down to x8, an
HCA on older firmware.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

from tests.support.paths import HOSTS

HEALTHY = HOSTS / "hgx-h100x8-healthy"
Change = Callable[[dict], None]


def real_report(host=HEALTHY) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "dldoctor", "--check", "--json", "--from", str(host)],
        capture_output=True,
        env={**os.environ, "DLDOCTOR_NO_PLUGINS": "1"},
        check=False,
        timeout=120,
    )
    return json.loads(proc.stdout)


def dump(report: dict) -> bytes:
    """As `--check --json` writes it to a pipe (render/jsondoc.py)."""
    return (json.dumps(report, separators=(",", ":"), ensure_ascii=True) + "\n").encode()


def finding(report: dict, check: str, status: str, summary: str) -> None:
    for f in report["findings"]:
        if f["id"] == check:
            f.update(status=status, summary=summary)
            return
    raise KeyError(check)


def older_driver(version: str = "535.161.08", cuda: str = "12.2") -> Change:
    def change(report: dict) -> None:
        report["inventory"]["driver"].update(version=version, cuda=cuda)

    return change


def missing_gpu(index: int = 7) -> Change:
    def change(report: dict) -> None:
        inv = report["inventory"]
        bus = inv["gpus"][index]["bus_id"]
        inv["gpus"] = [g for g in inv["gpus"] if g["index"] != index]
        inv["pcie"] = [d for d in inv["pcie"] if d["address"] != bus]
        finding(report, "gpu.count", "fail", f"{len(inv['gpus'])} GPU(s), the policy expects 8")

    return change


def narrow_gpu(index: int = 2, width: int = 8) -> Change:
    def change(report: dict) -> None:
        inv = report["inventory"]
        gpu = inv["gpus"][index]
        gpu["pcie_width"] = width
        for d in inv["pcie"]:
            if d["address"] == gpu["bus_id"]:
                d["width"] = width
        finding(report, "pci.link.width", "fail", "1 link(s) trained narrower than they can be")

    return change


def old_nic_firmware(device: str = "mlx5_1", firmware: str = "28.37.1014") -> Change:
    def change(report: dict) -> None:
        for port in report["inventory"]["rdma"]:
            if port["device"] == device:
                port["firmware"] = firmware

    return change


def measured(**kwargs) -> Change:
    """The findings of an --active run added: judged by the real judge
    (tests/support/perffigures.py; `slow`, `jitter`, `disk_gbs` as there)."""

    def change(report: dict) -> None:
        from tests.support.perffigures import perf_findings

        report["findings"].extend(f.to_dict() for f in perf_findings(**kwargs))

    return change


def write_fleet(
    folder, base: dict, names: list[str], odd: dict[str, list[Change]] | None = None
) -> None:
    """`<name>.json` for each name, as `fleet run` leaves them: the base report, or a copy
    of it with the node's changes."""
    os.makedirs(folder, exist_ok=True)
    healthy = dump(base)
    for name in names:
        data = healthy
        if odd and name in odd:
            report = json.loads(healthy)
            for change in odd[name]:
                change(report)
            data = dump(report)
        with open(os.path.join(folder, f"{name}.json"), "wb") as f:
            f.write(data)


def latency(us: float) -> Change:
    def change(report: dict) -> None:
        from tests.support.perffigures import latency_finding

        report["findings"].append(latency_finding(us).to_dict())

    return change


# Real reports of other fixture hosts, one node each, for a fleet whose odd ones are real.
REAL_ODD = ("hgx-h100x8-gpu3-x8", "hgx-h100x8-driver535", "hgx-h100x8-nvlink-down",
            "workstation-rtx4090-nouveau")  # fmt: skip


def real_fleet(folder, count: int = 1000, odd_hosts=REAL_ODD) -> dict[str, str]:
    """`gpu0001.json` ... as `fleet run` leaves them: the healthy host's real report on every
    node but one per odd host (spread through the fleet), whose own real report that node
    gets; the same report is one file linked under each name, so 1,000 nodes cost five
    replays. Returns {odd node: its host}."""
    os.makedirs(folder, exist_ok=True)
    reports = {}
    for host in (HEALTHY.name, *odd_hosts):
        reports[host] = os.path.join(folder, f".{host}.report")
        with open(reports[host], "wb") as f:
            f.write(dump(real_report(HOSTS / host)))
    step = count // (len(odd_hosts) + 1)
    odd = {f"gpu{step * (i + 1):04d}": host for i, host in enumerate(odd_hosts)}
    for n in range(1, count + 1):
        name = f"gpu{n:04d}"
        os.link(reports[odd.get(name, HEALTHY.name)], os.path.join(folder, f"{name}.json"))
    for path in reports.values():
        os.unlink(path)  # the links keep the bytes; a dot-file would be read as a node
    return odd
