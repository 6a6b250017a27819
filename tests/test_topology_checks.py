"""[3/9] checks on real sysfs trees (fixtures/corpus, see SOURCES.md) and hand-built facts."""

from __future__ import annotations

from dataclasses import replace

from dldoctor.checks import cpu, numa, pci
from dldoctor.facts import Facts
from dldoctor.facts.cpu import CpuFrequency, cpu_frequency
from dldoctor.facts.numa import NumaNode, NumaTopology, numa_topology
from dldoctor.facts.pcie import PcieLink, PcieLinks, pcie_links, read_link_files
from dldoctor.facts.system import Container, container
from dldoctor.host import LiveHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from tests.support.paths import FIXTURES
from tests.support.pcie import link

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


def test_a_downstream_port_is_judged_by_the_device_below_it():
    # Root port -> switch upstream port -> downstream port (x16 capable) -> x4 NVMe drive.
    rp = link("0000:00:01.0", "060400", 16, 16)
    usp = link("0000:16:00.0", "060400", 16, 16, [rp.address])
    dsp = link("0000:17:02.0", "060400", 4, 16, [usp.address, rp.address])
    nvme = link("0000:19:00.0", "010802", 4, 4, [dsp.address, usp.address, rp.address])
    facts = Facts.given(
        {pcie_links: PcieLinks((rp, usp, dsp, nvme)), container: Container(False, "")}
    )
    assert pci.link_width(facts, Policy()).status == Status.PASS
    # The switch's own uplink trained down is a real fault:
    narrowed = replace(usp, current_width=8)
    facts = Facts.given({pcie_links: PcieLinks((rp, narrowed, dsp, nvme)),
                         container: Container(False, "")})  # fmt: skip
    outcome = pci.link_width(facts, Policy())
    assert (
        outcome.status == Status.FAIL and outcome.details[0] == "port 0000:16:00.0: x8, can be x16"
    )


def test_a_gen5_card_in_a_gen4_slot_is_not_slow():
    rp = link("0000:30:01.0", "060400", 16, 16, cur=16.0, top=16.0)
    nic = link("0000:31:00.0", "020000", 16, 16, [rp.address], cur=16.0, top=32.0)
    assert (
        pci.link_speed(Facts.given({pcie_links: PcieLinks((rp, nic))}), Policy()).status
        == Status.PASS
    )


def test_a_bmc_vga_is_not_a_gpu():
    vga = link("0000:03:00.0", "030000", 1, 1, vendor="1a03")
    assert pci.kind(vga) == "display controller"
    h100 = link("0000:18:00.0", "030200", 16, 16, vendor="10de")
    assert pci.kind(h100) == "GPU"


def test_redirect_on_root_ports_alone_is_not_a_failure():
    from dldoctor.facts.acs import AcsReport, AcsState, pci_acs

    gpus = (link("0000:18:00.0", "030200", 16, 16, ["0000:00:01.0"], vendor="10de"),
            link("0000:28:00.0", "030200", 16, 16, ["0000:00:02.0"], vendor="10de"))  # fmt: skip
    redirect = frozenset({"SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"})
    report = AcsReport(True, False, tuple(AcsState(a, "PCI bridge", redirect, redirect)
                                          for a in ("0000:00:01.0", "0000:00:02.0")))  # fmt: skip
    facts = Facts.given({pcie_links: PcieLinks(gpus), pci_acs: report})
    assert pci.acs(facts, Policy()).status == Status.PASS


def test_memlock_judges_the_launchers_jobs_inherit_from():
    from dldoctor.checks import limits
    from dldoctor.facts.limits import (
        ConfiguredLimits,
        ProcessLimits,
        SystemdLimits,
        UnitLimits,
        configured_limits,
        process_limits,
        systemd_limits,
    )  # fmt: skip
    from dldoctor.facts.net import Interfaces, interfaces

    units = SystemdLimits(True, {}, (UnitLimits("docker.service", {"memlock": 8 << 20}),
                                     UnitLimits("containerd.service", {"memlock": None}),
                                     UnitLimits("kubelet.service", {"memlock": 8 << 20})))  # fmt: skip
    facts = Facts.given({
        process_limits: ProcessLimits({"memlock": (None, None)}),
        configured_limits: ConfiguredLimits((), ()),
        systemd_limits: units,
        interfaces: Interfaces(infiniband=("mlx5_0",)),
    })  # fmt: skip
    # Containers are containerd's children (unlimited); docker.service and kubelet are not judged.
    assert limits.memlock(facts, Policy()).status == Status.PASS


def test_nofile_judges_the_soft_limit_that_jobs_get():
    from dldoctor.checks import limits
    from dldoctor.facts.limits import ProcessLimits, process_limits

    def outcome(soft, hard):
        given = Facts.given({process_limits: ProcessLimits({"nofile": (soft, hard)})})
        return limits.nofile(given, Policy())

    # systemd's default 1024/524288: DataLoader workers hit the 1024 (PyTorch does not raise it)
    low_soft = outcome(1024, 524288)
    assert low_soft.status == Status.WARN and "the soft limit is below 65536" in low_soft.summary
    assert "* soft nofile" in low_soft.remediation
    # limits.d's wildcard skips root, and services get their unit's limit, not limits.d's.
    assert "`root soft nofile 1048576`" in low_soft.remediation
    assert "LimitNOFILE=1048576" in low_soft.remediation
    assert "PropagateResourceLimits" in low_soft.remediation
    assert "the hard limit is below" in outcome(1024, 4096).summary
    assert outcome(1048576, 1048576).status == Status.PASS
    assert outcome(None, None).status == Status.PASS  # unlimited


def test_an_unknown_memlock_says_unknown_and_why():
    from dldoctor.checks import limits
    from tests.support.paths import HOSTS

    # The vGPU guest's bundle has no /proc/self/limits.
    facts = Facts(ReplayHost(str(HOSTS / "vm-a100-vgpu-guest")))
    outcome = limits.memlock(facts, Policy())
    assert outcome.status == Status.SKIP
    assert outcome.summary == (
        "no RDMA device; memlock here unknown (read /proc/self/limits: missing)"
    )
    assert limits.nofile(facts, Policy()).details == ("read /proc/self/limits: missing",)


def test_ram_ratio_in_a_container_uses_its_memory_limit():
    from dldoctor.checks import memory
    from dldoctor.facts import gpu as g
    from dldoctor.facts import system as sf
    from dldoctor.facts.nvidia import nvidia

    stack = g.NvidiaStack("nvml", gpus=(g.Gpu(0, name="NVIDIA H100", memory_total_mib=81559),))
    host_ram = sf.Memory(2048 * 2**30, 2000 * 2**30, 0, 0, 0, 0)
    given = {nvidia: stack, sf.memory: host_ram, sf.container: Container(True, "docker"),
             sf.cgroup_memory_limit: 64 * 2**30}  # fmt: skip
    outcome = memory.gpu_ratio(Facts.given(given), Policy())
    assert outcome.status == Status.WARN and "container's memory limit" in outcome.summary
    on_host = {**given, sf.container: Container(False, "")}
    assert memory.gpu_ratio(Facts.given(on_host), Policy()).status == Status.PASS


def test_locality_without_numa_nodes_skips_instead_of_passing():
    gpu = link("0000:18:00.0", "030200", 16, 16, vendor="10de")
    links = {pcie_links: PcieLinks((gpu,)), container: Container(False, "")}
    blind = Facts.given({**links, numa_topology: NumaTopology((), None)})
    outcome = numa.locality(blind, Policy())
    assert (outcome.status, outcome.summary) == (Status.SKIP, "the kernel shows no NUMA nodes")
    assert numa.numactl(blind, Policy()).summary == "the kernel shows no NUMA nodes"
    one = NumaTopology((NumaNode(0, (0, 1), "0-1", None),), 0)
    outcome = numa.locality(Facts.given({**links, numa_topology: one}), Policy())
    assert outcome.status == Status.PASS and outcome.summary.startswith("one NUMA node")


def test_one_front_end_nic_puts_no_gpu_on_the_far_socket():
    # A single ConnectX beside GPU 0 is a front-end port, not a GPUDirect fabric: no GPU
    # is judged far from it; two on one socket are a fabric the other socket lacks.
    from dldoctor.checks.numa import far_from_rails
    from dldoctor.facts.pcie import PcieLink

    def link(address, vendor, klass, node):
        return PcieLink(address, vendor, "0", klass, "", None, None, None, None, (), None,
                        None, None, node, "")  # fmt: skip

    gpus = [link(f"0000:{b}:00.0", "10de", "030200", n) for b, n in (("18", 0), ("58", 1))]
    one = [link("0000:19:00.0", "15b3", "020000", 0)]
    two = one + [link("0000:29:00.0", "15b3", "020700", 0)]
    intel = [link("0000:29:00.0", "8086", "020000", 0)]
    assert far_from_rails(gpus, one) == [] == far_from_rails(gpus, one + intel)
    assert [g.address for g in far_from_rails(gpus, two)] == ["0000:58:00.0"]
