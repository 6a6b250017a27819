"""[4/9] RDMA and thermal checks on real sysfs trees (fixtures/corpus) and hand-built facts."""

from __future__ import annotations

import dataclasses

from dldoctor.checks import needs, network, thermal
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.kmod import Modules, modules
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.pci import PciBus, PciDevice, pci_devices
from dldoctor.facts.rdma import (
    UNREAD,
    Gid,
    GpuDirect,
    RdmaDevice,
    RdmaDevices,
    RdmaPort,
    gpudirect,
    rdma_devices,
)
from dldoctor.facts.system import Container, Kernel, container, environ, kernel
from dldoctor.host import LiveHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import NetworkPolicy, Policy
from tests.support.paths import FIXTURES, HOSTS

IB_TREE = FIXTURES / "corpus/infiniband/procfs-fixtures-sysfs"
THERMAL_TREE = FIXTURES / "corpus/thermal/procfs-fixtures-sysfs"


def test_corpus_ib_ports_active_but_three_below_100_gbps():
    facts = Facts(LiveHost(root=str(IB_TREE)))
    assert network.ib_state(facts, Policy()).status == Status.PASS
    rate = network.ib_rate(facts, Policy())
    assert rate.status == Status.FAIL
    assert rate.details == ("mlx4_0:1 (InfiniBand): 40 Gb/sec (4X QDR)",
                            "mlx4_0:2 (InfiniBand): 40 Gb/sec (4X QDR)",
                            "mlx5_0:1 (InfiniBand): 25 Gb/sec (1X EDR)")  # fmt: skip
    assert network.ib_errors(facts, Policy()).status == Status.PASS  # all counters are 0 there
    # A site with 40 Gb/s QDR as its floor: only the 25 Gb/s port fails.
    qdr = Policy(network=NetworkPolicy(min_rate_gbps=40))
    assert network.ib_rate(facts, qdr).details == ("mlx5_0:1 (InfiniBand): 25 Gb/sec (1X EDR)",)


def test_corpus_thermal_zone_at_minus_44_is_unreliable_not_cold():
    outcome = thermal.board_sensors(Facts(LiveHost(root=str(THERMAL_TREE))), Policy())
    assert outcome.status == Status.PASS
    assert outcome.summary == "hottest 50 °C (thermal_zone0 bcm2835_thermal)"
    assert "thermal_zone1 (acpitz)" in outcome.details[0]


def ib(port=1, state="ACTIVE", phys="LinkUp", **kw):
    return RdmaPort("mlx5_0", port, state=state, phys_state=phys, rate_gbps=400.0,
                    rate_text="400 Gb/sec (4X NDR)", link_layer="InfiniBand", **kw)  # fmt: skip


def devices(*ports):
    return RdmaDevices((RdmaDevice("mlx5_0", "28.39.1002", "MT_0000000838", "MT4129", "", ports),))


def test_port_in_init_fails_and_an_unused_down_port_is_judged_by_its_sibling():
    init = network.ib_state(Facts.given({rdma_devices: devices(ib(state="INIT"))}), Policy())
    assert init.status == Status.FAIL and "no subnet manager" in init.details[0]
    # The unplugged second port of a dual-port HCA whose first port is ACTIVE: a note.
    spare = devices(ib(), ib(port=2, state="DOWN", phys="Polling"))
    outcome = network.ib_state(Facts.given({rdma_devices: spare}), Policy())
    assert outcome.status == Status.PASS and "beside an ACTIVE port" in outcome.details[-1]
    # An HCA with no ACTIVE port at all: a warning.
    dead = devices(ib(state="DOWN", phys="Polling"))
    assert network.ib_state(Facts.given({rdma_devices: dead}), Policy()).status == Status.WARN
    # A port the site says must be up: a failure.
    pinned = Policy(network=NetworkPolicy(ib_ports=("mlx5_0:2",)))
    assert network.ib_state(Facts.given({rdma_devices: spare}), pinned).status == Status.FAIL


V2_GID = Gid(3, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2", "ens1f0")


def roce_port(mtu=9000, gids=(V2_GID,)):
    return RdmaPort("mlx5_0", 1, state="ACTIVE", link_layer="Ethernet", netdev="ens1f0", mtu=mtu,
                    gids=gids)  # fmt: skip


def test_roce_needs_a_v2_gid_an_mtu_and_a_matching_gid_index():
    good = Facts.given({rdma_devices: devices(roce_port()), environ: {"NCCL_IB_GID_INDEX": "3"}})
    assert network.roce(good, Policy()).status == Status.PASS
    v1_only = (Gid(0, "fe80:0000:0000:0000:0000:0000:0000:0001", "RoCE v1", "ens1f0"),)
    bad = Facts.given({rdma_devices: devices(roce_port(mtu=1500, gids=v1_only)),
                       environ: {"NCCL_IB_GID_INDEX": "0"}})  # fmt: skip
    outcome = network.roce(bad, Policy())
    assert outcome.status == Status.FAIL
    assert outcome.details[:3] == (
        "mlx5_0:1: no routable RoCE v2 GID",
        "mlx5_0:1: NCCL_IB_GID_INDEX=0 is RoCE v1, not RoCE v2",
        "mlx5_0:1: ens1f0 MTU 1500 (needs ≥ 4200)",
    )
    # The MTU alone is a warning: RoCE works, slower.
    low = Facts.given({rdma_devices: devices(roce_port(mtu=1500)), environ: {}})
    assert network.roce(low, Policy()).status == Status.WARN
    # An Ethernet RDMA NIC beside an InfiniBand fabric is not held to RoCE's rules.
    both = RdmaDevices(devices(ib()) + devices(roce_port(mtu=1500, gids=v1_only)))
    mixed = Facts.given({rdma_devices: both, environ: {}})
    assert network.roce(mixed, Policy()).status == Status.SKIP


def roce_hca(name, state="ACTIVE", phys="LinkUp", rate=200.0):
    port = RdmaPort(name, 1, state=state, phys_state=phys, rate_gbps=rate,
                    rate_text=f"{rate:g} Gb/sec (2X NDR)", link_layer="Ethernet")  # fmt: skip
    return RdmaDevice(name, "28.39.1002", "MT_0000000838", "MT4129", "", (port,))


def test_a_roce_rail_down_fails_naming_its_gpu_in_the_fixture_host():
    facts = Facts(ReplayHost(str(HOSTS / "hgx-h100x8-roce-rail-down")))
    state = network.ib_state(facts, Policy())
    assert state.status == Status.FAIL
    assert state.summary == "mlx5_1:1 (RoCE, GPU rail of GPU 4) is DOWN (Disabled)"
    assert "mlx5_0:1 (RoCE, GPU rail of GPU 0): ACTIVE (LinkUp), 200 Gb/sec (2X NDR)" in (
        state.details
    )
    # Its GIDs and MTU are right: network.roce has nothing to say of a port that is down.
    assert network.roce(facts, Policy()).status == Status.PASS
    assert network.ib_rate(facts, Policy()).status == Status.PASS


def test_a_roce_port_off_the_gpu_rails_that_is_down_or_slow_only_warns():
    # No PCI address known: no GPU rail (a front-end or storage NIC, as far as one knows).
    dead = Facts.given({rdma_devices: RdmaDevices((roce_hca("mlx5_2", "DOWN", "Disabled"),))})
    outcome = network.ib_state(dead, Policy())
    assert outcome.status == Status.WARN
    assert outcome.summary == "mlx5_2:1 (RoCE) is DOWN (Disabled)"
    # The policy's ib_ports holds a RoCE port to ACTIVE as it does an InfiniBand one.
    pinned = Policy(network=NetworkPolicy(ib_ports=("mlx5_2:1",)))
    assert network.ib_state(dead, pinned).status == Status.FAIL
    slow = Facts.given({rdma_devices: RdmaDevices((roce_hca("mlx5_2", rate=25.0),))})
    rate = network.ib_rate(slow, Policy())
    assert rate.status == Status.WARN and rate.details == ("mlx5_2:1 (RoCE): 25 Gb/sec (2X NDR)",)
    assert network.ib_state(slow, Policy()).summary == "1 RoCE port(s) ACTIVE"


def test_gpu_ranges_are_written_short():
    assert needs.gpu_words([3, 2]) == "GPU 2-3"
    assert needs.gpu_words([0, 2, 3, 4, 7]) == "GPU 0, 2-4, 7"


def test_an_rdma_device_link_that_names_no_pci_function_places_it_nowhere(tmp_path):
    base = tmp_path / "sys/class/infiniband/rxe0"
    (base / "ports/1").mkdir(parents=True)
    (base / "ports/1/state").write_text("1: DOWN\n")
    (base / "ports/1/link_layer").write_text("Ethernet\n")
    (base / "device").symlink_to("../../../virtual/net/\x1b[31m")  # soft-RoCE, and garbage
    (device,) = Facts(LiveHost(root=str(tmp_path))).get(rdma_devices)
    assert device.pci_address == ""
    outcome = network.ib_state(Facts.given({rdma_devices: RdmaDevices((device,))}), Policy())
    assert outcome.status == Status.WARN and outcome.summary.startswith("rxe0:1 (RoCE) is DOWN")


def test_roce_unread_gids_or_mtu_are_an_error_never_a_verdict():
    def judged(port):
        return network.roce(Facts.given({rdma_devices: devices(port), environ: {}}), Policy())

    unread_type = (dataclasses.replace(V2_GID, type=UNREAD),)
    for port in (roce_port(gids=()), roce_port(gids=unread_type), roce_port(mtu=None)):
        outcome = judged(port)
        assert outcome.status == Status.ERROR and "could not be read" in outcome.details[0]
    # What was read still judges: a low MTU warns beside an unread GID table.
    outcome = judged(roce_port(mtu=1500, gids=()))
    assert outcome.status == Status.WARN
    assert outcome.details[:2] == ("mlx5_0:1: ens1f0 MTU 1500 (needs ≥ 4200)",
                                   "mlx5_0:1: its GID table could not be read")  # fmt: skip


def test_gpudirect_without_peermem_and_a_container_without_devices():
    gpu_bus = PciBus((PciDevice("0000:18:00.0", "10de", "2330", "030200", "nvidia"),))
    base = {rdma_devices: devices(ib()), pci_devices: gpu_bus, container: Container(False, ""),
            modules: Modules(frozenset({"nvidia"}), True, "550.54.15"),
            kernel: Kernel("5.15.0-105-generic", (5, 15, 0))}  # fmt: skip
    without = {**base, gpudirect: GpuDirect(dev_infiniband=("uverbs0",))}
    assert network.gpu_direct(Facts.given(without), Policy()).status == Status.WARN
    loaded = {**base, gpudirect: GpuDirect(peermem="nvidia_peermem", dev_infiniband=("uverbs0",))}
    assert network.gpu_direct(Facts.given(loaded), Policy()).status == Status.PASS
    boxed = {**loaded, container: Container(True, "docker"), gpudirect: GpuDirect("nvidia_peermem")}
    assert network.gpu_direct(Facts.given(boxed), Policy()).status == Status.WARN
    # The open GPU modules on kernel >= 5.12 give NCCL DMA-BUF: no peermem needed.
    dmabuf = {
        **without,
        modules: Modules(frozenset({"nvidia"}), True, "580.65.06", nvidia_open=True),
    }
    assert network.gpu_direct(Facts.given(dmabuf), Policy()).status == Status.PASS


def h100(**kw):
    return g.Gpu(0, name="NVIDIA H100 80GB HBM3", temp_slowdown_c=89, **kw)


def test_gpu_hardware_slowdown_fails_idle_is_benign():
    slowed = g.NvidiaStack(
        "nvml", gpus=(h100(clock_event_reasons=("hw_slowdown", "sw_power_cap")),)
    )
    outcome = thermal.gpu_clocks(Facts.given({nvidia: slowed}), Policy())
    assert outcome.status == Status.FAIL
    assert outcome.details == ("GPU 0 NVIDIA H100 80GB HBM3: hw_slowdown",
                               "benign reasons active: sw_power_cap")  # fmt: skip
    idle = g.NvidiaStack("nvml", gpus=(h100(clock_event_reasons=("gpu_idle",)),))
    assert thermal.gpu_clocks(Facts.given({nvidia: idle}), Policy()).status == Status.PASS


def test_gpu_temperature_margin():
    def verdict(temp):
        stack = g.NvidiaStack("nvml", gpus=(h100(temperature_c=temp),))
        return thermal.gpu_temperature(Facts.given({nvidia: stack}), Policy()).status

    assert (verdict(60), verdict(86), verdict(90)) == (Status.PASS, Status.WARN, Status.FAIL)


def test_zero_degrees_without_a_slowdown_threshold_is_not_a_reading():
    # A vGPU guest whose virtualization mode could not be read reports the physical GPU's
    # temperature as 0 and no thresholds; so does a broken sensor.
    blind = g.Gpu(0, name="NVIDIA A100-40C", temperature_c=0)
    facts = Facts.given({nvidia: g.NvidiaStack("nvml", gpus=(blind,))})
    outcome = thermal.gpu_temperature(facts, Policy())
    assert outcome.status == Status.SKIP and "0 °C and no slowdown threshold" in outcome.summary
    # Beside a GPU that reads, it is left out (with a note) and the other is judged.
    warm = h100(temperature_c=86)
    facts = Facts.given(
        {nvidia: g.NvidiaStack("nvml", gpus=(dataclasses.replace(blind, index=1), warm))}
    )
    outcome = thermal.gpu_temperature(facts, Policy())
    assert outcome.status == Status.WARN
    assert any(d.startswith("GPU 1 NVIDIA A100-40C: 0 °C") for d in outcome.details)
    # 0 °C with a threshold is a (cold) reading and passes.
    cold = h100(temperature_c=0)
    outcome = thermal.gpu_temperature(
        Facts.given({nvidia: g.NvidiaStack("nvml", gpus=(cold,))}), Policy()
    )
    assert outcome.status == Status.PASS and outcome.summary.startswith("hottest GPU 0 °C")


def test_a_port_the_kernel_calls_unknown_is_neither_ib_nor_roce_and_no_error():
    # usNIC and the like: link_layer "Unknown" is the kernel's answer, not a failed read.
    usnic = devices(dataclasses.replace(ib(state="DOWN", phys="Disabled"), link_layer="Unknown"))
    facts = Facts.given({rdma_devices: usnic})
    assert network.ib_state(facts, Policy()).status == Status.SKIP
    unread = devices(dataclasses.replace(ib(state="DOWN"), link_layer=UNREAD))
    outcome = network.ib_state(Facts.given({rdma_devices: unread}), Policy())
    assert outcome.status == Status.ERROR and "could not be read (mlx5_0:1)" in outcome.summary


def test_a_port_state_that_could_not_be_read_is_an_error_not_a_down_rail():
    unread = Facts.given({rdma_devices: RdmaDevices((roce_hca("mlx5_2", state="", phys=""),))})
    outcome = network.ib_state(unread, Policy())
    assert outcome.status == Status.ERROR
    assert outcome.summary == "mlx5_2:1 (RoCE): its state could not be read"
