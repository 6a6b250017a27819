"""[3/9] checks on real sysfs trees (fixtures/corpus, see SOURCES.md) and hand-built facts."""

from __future__ import annotations

from dataclasses import replace

from dldoctor.checks import cpu, numa, pci
from dldoctor.facts import Facts
from dldoctor.facts.cpu import CpuFrequency, cpu_frequency
from dldoctor.facts.pcie import PcieLink, PcieLinks, pcie_links, read_link_files
from dldoctor.host import LiveHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from tests.conftest import FIXTURES

PCI_TREE = FIXTURES / "corpus/pci/procfs-fixtures-sysfs"
NUMA_TREE = FIXTURES / "corpus/numactl/node_exporter-fixtures-sysfs-nodes"


def test_the_corpus_pci_tree_has_no_degraded_link():
    # Its root port 00:02.1 reads x4 of x8, but the NVMe drive below it is an x4 device:
    # the link is as wide as it can be. Comparing each port with its own maximum would
    # report it as degraded, falsely.
    outcome = pci.link_width(Facts(LiveHost(root=str(PCI_TREE))), Policy())
    assert outcome.status == Status.PASS
    assert outcome.details == ("NVMe 0000:01:00.0: x4 of x4", "NIC 0000:a2:00.0: x8 of x8")


def corpus_link(path: str, address: str, klass: str, upstream=()) -> PcieLink:
    files = read_link_files(LiveHost(root=str(PCI_TREE)), f"/sys/devices/pci0000:00/{path}")
    return PcieLink(address, "1000", "0097", klass, "", files.current_gts, files.max_gts,
                    files.current_width, files.max_width, tuple(upstream), None, None, None,
                    None, "")  # fmt: skip


def test_a_narrow_device_in_a_wide_slot_is_not_degraded_but_a_narrowed_one_is():
    # Root port 00:03.0 (x8 of x16) with the SAS HBA 03:00.0 (x8 of x8) below it: both real.
    port = corpus_link("0000:00:03.0", "0000:00:03.0", "060400")
    hba = corpus_link("0000:00:03.0/0000:03:00.0", "0000:03:00.0", "010700", ["0000:00:03.0"])
    ok = pci.link_width(Facts.given({pcie_links: PcieLinks((port, hba))}), Policy())
    assert ok.status == Status.PASS
    # The same HBA trained down to x4 in that slot:
    narrowed = replace(hba, current_width=4)
    bad = pci.link_width(Facts.given({pcie_links: PcieLinks((port, narrowed))}), Policy())
    assert bad.status == Status.FAIL and bad.details[0] == "device 0000:03:00.0: x4, can be x8"


def test_idle_gpus_at_gen1_are_not_a_warning_but_a_slow_nic_is():
    gpu = PcieLink("0000:18:00.0", "10de", "2330", "030200", "nvidia", 2.5, 32.0, 16, 16, (),
                   0, 0, 0, 0, "")  # fmt: skip
    nic = replace(gpu, address="0000:19:00.0", class_code="020700", current_gts=16.0)
    assert (
        pci.link_speed(Facts.given({pcie_links: PcieLinks((gpu,))}), Policy()).status == Status.PASS
    )
    assert (
        pci.link_speed(Facts.given({pcie_links: PcieLinks((gpu, nic))}), Policy()).status
        == Status.WARN
    )


def test_numa_corpus_three_nodes_one_memory_only():
    outcome = numa.topology(Facts(LiveHost(root=str(NUMA_TREE))), Policy())
    assert outcome.status == Status.PASS
    assert outcome.summary == "3 NUMA node(s), 2 with CPUs"
    assert outcome.details[2] == "node 2: CPUs none, 128 GiB"


def test_governor_other_than_performance_warns():
    mixed = CpuFrequency({"powersave": 60, "performance": 4}, "intel_pstate", "on")
    outcome = cpu.governor(Facts.given({cpu_frequency: mixed}), Policy())
    assert outcome.status == Status.WARN
    assert outcome.summary == "not performance: performance on 4 CPU(s), powersave on 60 CPU(s)"
    none = CpuFrequency({}, "", "")
    assert cpu.governor(Facts.given({cpu_frequency: none}), Policy()).status == Status.SKIP
