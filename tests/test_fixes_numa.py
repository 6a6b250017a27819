"""numa.balancing and fix.numa.balancing under a temporary root copied from the fixture host
whose kernel left automatic NUMA balancing on: previewed, applied (the sysctl written in
place, a sysctl.d file for the boots), re-checked on the changed root, undone byte for
byte, for a Debian and a RHEL os-release."""

from __future__ import annotations

import os
import shutil

import pytest

from dldoctor.checks import numa
from dldoctor.facts import Facts
from dldoctor.facts.numa import NumaNode, NumaTopology, numa_topology
from dldoctor.facts.pcie import PcieLinks, pcie_links
from dldoctor.facts.system import Container, container
from dldoctor.fixes import builder
from dldoctor.fixes.numa import BALANCING, BALANCING_CONF, FIX
from dldoctor.fixes.plan import FixError, Target, WriteAttribute, WriteFile, apply, undo
from dldoctor.fixes.verify import recheck, verdict
from dldoctor.host.live import LiveHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS
from tests.support.pcie import link
from tests.support.recording import Recorder
from tests.support.trees import tree

HOST = HOSTS / "hgx-h100x8-numa-balancing"


def _root(tmp_path, release_from: str = "hgx-h100x8-numa-balancing"):
    root = tmp_path / "root"
    shutil.copytree(HOST / "files", root, symlinks=True)
    shutil.copy(HOSTS / release_from / "files/etc/os-release", root / "etc/os-release")
    return root


def test_the_finding_offers_the_fix():
    report = report_of(run_dldoctor("--check", "--json", "--from", str(HOST)))
    (finding,) = [f for f in report["findings"] if f["id"] == "numa.balancing"]
    assert finding["status"] == "warn" and finding["fixes"] == [FIX]
    assert "2 NUMA nodes and 8 GPU(s)" in finding["summary"]


@pytest.mark.parametrize("release_from", ["hgx-h100x8-numa-balancing", "rhel72-legacy"])
def test_balancing_previewed_applied_fixed_undone(tmp_path, release_from):
    root = _root(tmp_path, release_from)
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    # systemd-sysctl reads sysctl.d on Debian, Ubuntu and the RHEL family alike.
    assert plan.steps == (
        WriteAttribute(BALANCING, "0"),
        WriteFile(BALANCING_CONF, b"# written by dldoctor (fix.numa.balancing)\n"
                                  b"kernel.numa_balancing = 0\n"),
    )  # fmt: skip
    assert not plan.reboot and plan.resolves == ("numa.balancing",)
    runner = Recorder()
    target = Target(str(root), runner)
    before = tree(root)
    text = plan.preview(target)
    assert tree(root) == before and runner.ran == []
    assert f"set {BALANCING} = 0 (now 1)" in text and "+kernel.numa_balancing = 0" in text
    assert recheck(plan.resolves, LiveHost(str(root)), Policy()) == {"numa.balancing": "warn"}

    record = apply(plan, target)
    assert runner.ran == []  # nothing to run: the sysctl is written, not `sysctl -w`-ed
    assert (root / BALANCING.lstrip("/")).read_text() == "0\n"
    assert record["attributes"] == [{"path": BALANCING, "value": "1"}]
    statuses = recheck(plan.resolves, LiveHost(str(root)), Policy())
    assert statuses == {"numa.balancing": "pass"}
    assert verdict(plan, statuses, rebooted=False) == "fixed"

    undo(record["id"], target)
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before
    assert recheck(plan.resolves, LiveHost(str(root)), Policy()) == {"numa.balancing": "warn"}


def test_balancing_through_the_cli(tmp_path):
    root = _root(tmp_path)
    before = tree(root)
    listed = run_dldoctor("fix", "--root", str(root))
    assert f"{FIX:32} resolves numa.balancing (warn:" in listed.stdout
    applied = run_dldoctor("fix", FIX, "--apply", "--yes", "--root", str(root))
    assert applied.returncode == 0, applied.stderr
    assert "fixed (numa.balancing pass)" in applied.stdout
    assert (root / BALANCING_CONF.lstrip("/")).read_text().endswith("kernel.numa_balancing = 0\n")
    journal_id = run_dldoctor("fix", "--history", "--root", str(root)).stdout.split()[0]
    undone = run_dldoctor("fix", "--undo", journal_id, "--root", str(root))
    assert undone.returncode == 0, undone.stderr
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before


def test_memory_tiering_is_kept_when_normal_balancing_goes(tmp_path):
    root = _root(tmp_path)
    (root / BALANCING.lstrip("/")).write_text("3\n")
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert plan.steps[0] == WriteAttribute(BALANCING, "2")
    assert plan.steps[1].content.endswith(b"kernel.numa_balancing = 2\n")
    apply(plan, Target(str(root), Recorder()))
    assert recheck(plan.resolves, LiveHost(str(root)), Policy()) == {"numa.balancing": "pass"}


def test_a_sysctl_file_read_later_that_turns_it_back_on_is_named(tmp_path):
    root = _root(tmp_path)
    (root / "etc/sysctl.d").mkdir()
    (root / "etc/sysctl.d/10-early.conf").write_text("kernel.numa_balancing = 1\n")  # ours wins
    (root / "etc/sysctl.conf").write_text("# site tuning\nkernel.numa_balancing=1\n")
    os.symlink("../sysctl.conf", root / "etc/sysctl.d/99-sysctl.conf")  # as Debian and RHEL
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert plan.notes == (
        "/etc/sysctl.d/99-sysctl.conf sets kernel.numa_balancing = 1 and is read after this "
        "file: change it there too",
    )


def test_in_a_container_the_fix_is_advice_for_the_host(tmp_path):
    root = _root(tmp_path)
    (root / ".dockerenv").write_text("")
    (root / "proc/1/cgroup").write_text("0::/docker/4f2a\n")
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert plan.steps == () and "on the host, `sysctl -w kernel.numa_balancing=0`" in plan.notes[0]
    with pytest.raises(FixError, match="nothing to apply here"):
        apply(plan, Target(str(root), Recorder()))


GPU = link("0000:18:00.0", "030200", 16, 16, vendor="10de")
NODE0, NODE1 = NumaNode(0, (0, 1), "0-1", None), NumaNode(1, (2, 3), "2-3", None)


@pytest.mark.parametrize(
    "balancing, nodes, gpus, status, summary",
    [
        (None, (NODE0, NODE1), (GPU,), Status.SKIP, "automatic NUMA balancing unknown "
                                                    f"({BALANCING} not read)"),
        (7, (NODE0, NODE1), (GPU,), Status.SKIP, f"automatic NUMA balancing unknown "
                                                 f"({BALANCING} reads 7)"),
        (None, (), (GPU,), Status.SKIP, "the kernel shows no NUMA nodes"),
        (0, (NODE0, NODE1), (GPU,), Status.PASS, "off"),
        (2, (NODE0, NODE1), (GPU,), Status.PASS, "memory tiering only"),
        (1, (NODE0,), (GPU,), Status.PASS, "on, with one NUMA node: no page has another node "
                                           "to move to"),
        (1, (NODE0, NODE1), (), Status.SKIP, "on, but no GPU on the PCI bus"),
        (1, (NODE0, NODE1), (GPU,), Status.WARN, "on, with 2 NUMA nodes and 1 GPU(s): the "
         "kernel moves pages under jobs bound to their GPU's node (latency spikes)"),
        (3, (NODE0, NODE1), (GPU,), Status.WARN, "on (and memory tiering), with 2 NUMA nodes "
         "and 1 GPU(s): the kernel moves pages under jobs bound to their GPU's node (latency "
         "spikes)"),
    ],
)  # fmt: skip
def test_balancing_is_judged_by_mode_nodes_and_gpus(balancing, nodes, gpus, status, summary):
    facts = Facts.given({numa_topology: NumaTopology(nodes, balancing), container:
                         Container(False, ""), pcie_links: PcieLinks(gpus)})  # fmt: skip
    outcome = numa.balancing(facts, Policy())
    assert (outcome.status, outcome.summary) == (status, summary)
