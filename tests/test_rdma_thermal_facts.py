"""RDMA and thermal facts: parsers on real captures (fixtures/corpus, see
fixtures/SOURCES.md) and odd input; the corpus sysfs trees read through LiveHost(root=...);
RoCE ports, GPUDirect and hwmon chips on hand-built bundles.

There is no real RoCE sysfs tree and no hwmon tree in the corpus: the RoCE ports and
hwmon chips below are hand-written, in the layout the kernel uses (class entries are
links into /sys/devices; GID slots, gid_attrs/types, gid_attrs/ndevs; temp*_input,
temp*_label, temp*_crit, temp*_max), with invented values.
"""

from __future__ import annotations

import pytest

from dldoctor.facts import Facts
from dldoctor.facts import rdma as rf
from dldoctor.facts import thermal as tf
from dldoctor.facts.rdma import gpudirect, rdma_devices
from dldoctor.facts.thermal import thermal_sensors
from dldoctor.host import LiveHost
from dldoctor.host.base import ProbeFailed
from dldoctor.host.replay import ReplayHost
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "corpus"
IB_TREE = CORPUS / "infiniband/procfs-fixtures-sysfs"
IB_CLASS = IB_TREE / "sys/class/infiniband"
THERMAL_TREE = CORPUS / "thermal/procfs-fixtures-sysfs"
DEVINFO = CORPUS / "ibstat/tensorflow-gdr-ibv_devinfo-mlx4-2port-roce-ethernet.txt"


def facts_of(b: BundleBuilder) -> Facts:
    return Facts(ReplayHost(str(b.root)))


def keys(facts: Facts, f) -> set[str]:
    return {e.key for e in facts.evidence(f)}


# --- parsers --------------------------------------------------------------------------


@pytest.mark.parametrize("text, parsed", [
    ("4: ACTIVE", (4, "ACTIVE")),
    ("4: ACTIVE\n", (4, "ACTIVE")),
    ("2: INIT", (2, "INIT")),
    ("1: DOWN", (1, "DOWN")),
    ("3: ARMED", (3, "ARMED")),
    ("5: LinkUp", (5, "LinkUp")),
    ("2: Polling", (2, "Polling")),
    ("3: Disabled", (3, "Disabled")),
    ("7: PhyTest", (7, "PhyTest")),
    ("  5:LinkUp  ", (5, "LinkUp")),
    ("4:", (4, "")),
    ("ACTIVE", (None, "ACTIVE")),
    ("", (None, "")),
    ("\n\n", (None, "")),
    ("x: y", (None, "x: y")),
    ("99999: HUGE", (None, "99999: HUGE")),
    ("4: ACTIVE\n5: LinkUp", (4, "ACTIVE")),
    ("\x00\xff", (None, "\x00\xff")),
])  # fmt: skip
def test_parse_state(text, parsed):
    assert rf.parse_state(text) == parsed


@pytest.mark.parametrize("text, gbps", [
    ("100 Gb/sec (4X EDR)", 100.0),
    ("100 Gb/sec (4X EDR)\n", 100.0),
    ("25 Gb/sec (1X EDR)", 25.0),
    ("2.5 Gb/sec (1X SDR)", 2.5),
    ("40 Gb/sec (4X QDR)", 40.0),
    ("56 Gb/sec (4X FDR)", 56.0),
    ("200 Gb/sec (4X HDR)", 200.0),
    ("400 Gb/sec (4X NDR)", 400.0),
    ("10 Gb/sec (4X)", 10.0),
    ("Unknown", None),
    ("", None),
    ("0 Gb/sec (1X SDR)", None),
    ("fast Gb/sec", None),
    ("100 Mb/sec", None),
    ("100Gb/secs", None),
])  # fmt: skip
def test_parse_rate(text, gbps):
    assert rf.parse_rate(text) == gbps


@pytest.mark.parametrize("gid, zero", [
    ("0000:0000:0000:0000:0000:0000:0000:0000", True),
    ("0000:0000:0000:0000:0000:0000:0000:0000\n", True),
    ("fe80:0000:0000:0000:0ac0:ebff:fe4a:1b2c", False),
    ("0000:0000:0000:0000:0000:ffff:c0a8:010a", False),
    ("", False),
    (":::", False),
])  # fmt: skip
def test_is_zero_gid(gid, zero):
    assert rf.is_zero_gid(gid) is zero


def test_gid_addresses():
    mapped = rf.Gid(3, "0000:0000:0000:0000:0000:ffff:c0a8:010a", "RoCE v2", "ens1f0np0")
    local = rf.Gid(0, "fe80:0000:0000:0000:0ac0:ebff:fe4a:1b2c", "IB/RoCE v1")
    global_v6 = rf.Gid(5, "fd00:0000:0000:0000:0000:0000:0000:0010", "RoCE v2")
    garbage = rf.Gid(7, "not a gid")
    assert (mapped.ipv4, mapped.link_local) == ("192.168.1.10", False)
    assert (local.ipv4, local.link_local) == ("", True)
    assert (global_v6.ipv4, global_v6.link_local) == ("", False)
    assert (garbage.ipv4, garbage.link_local) == ("", False)


def test_parse_ibv_devinfo_corpus():
    got = rf.parse_ibv_devinfo(DEVINFO.read_text())
    port = {"hca_id": "mlx4_0", "state": "ACTIVE", "state_code": 4, "active_mtu": 1024,
            "max_mtu": 4096, "link_layer": "Ethernet"}  # fmt: skip
    assert got.ports == (rf.IbvPort(port=1, **port), rf.IbvPort(port=2, **port))
    assert got.fw_ver == {"mlx4_0": "2.40.7000"}
    assert got.notes == ()


def test_parse_ibv_devinfo_two_hcas_and_verbose_lines():
    text = (
        "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002\n"
        "\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_INIT (2)\n"
        "\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t4096 (5)\n"
        "\t\t\tlink_layer:\t\tInfiniBand\n"
        "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:a088:c203:0032:6d1c\n\n"
        "hca_id:\tmlx5_1\n\tfw_ver:\t\t\t\t28.39.1002\n\t\tport:\t1\n"
        "\t\t\tstate:\t\t\tPORT_DOWN (1)\n\t\t\tactive_mtu:\t\t1024 (3)\n"
        "\t\t\tlink_layer:\t\tEthernet\n"
    )
    got = rf.parse_ibv_devinfo(text)
    assert [(p.hca_id, p.port, p.state, p.state_code, p.active_mtu, p.max_mtu, p.link_layer)
            for p in got.ports] == [
        ("mlx5_0", 1, "INIT", 2, 4096, 4096, "InfiniBand"),
        ("mlx5_1", 1, "DOWN", 1, 1024, None, "Ethernet"),
    ]  # fmt: skip
    assert got.fw_ver == {"mlx5_0": "28.39.1002", "mlx5_1": "28.39.1002"}
    assert got.notes == ()


@pytest.mark.parametrize("text, n_ports, n_notes", [
    ("", 0, 0),
    ("No IB devices found\n", 0, 0),
    ("\x00\xff\ngarbage\n", 0, 0),
    ("\tport:\t1\n\tstate:\tPORT_ACTIVE (4)\n", 1, 1),  # a port before any hca_id
    ("hca_id:\tmlx5_0\n\tport:\tone\n\tstate:\tPORT_ACTIVE (4)\n", 0, 1),
    ("hca_id:\tmlx5_0\n\tport:\t1\n\tactive_mtu:\tbig\n\tstate:\tweird\n", 1, 1),
])  # fmt: skip
def test_parse_ibv_devinfo_odd_input(text, n_ports, n_notes):
    got = rf.parse_ibv_devinfo(text)
    assert len(got.ports) == n_ports and len(got.notes) == n_notes


def test_parse_ibv_devinfo_odd_state_kept_as_text():
    got = rf.parse_ibv_devinfo("hca_id:\tx\n\tport:\t1\n\tstate:\tweird\n")
    assert (got.ports[0].state, got.ports[0].state_code) == ("weird", None)


# --- rdma.devices on the corpus tree ----------------------------------------------------

HFI1_COUNTERS = {
    "VL15_dropped": 0, "excessive_buffer_overrun_errors": 0, "link_downed": 0,
    "link_error_recovery": 0, "local_link_integrity_errors": 0,
    "port_rcv_constraint_errors": 0, "port_rcv_data": 345091702026, "port_rcv_errors": 0,
    "port_rcv_packets": 638036947, "port_rcv_remote_physical_errors": 0,
    "port_rcv_switch_relay_errors": 0, "port_xmit_constraint_errors": 0,
    "port_xmit_data": 273558326543, "port_xmit_discards": 0, "port_xmit_packets": 568318856,
    "port_xmit_wait": 0, "symbol_error": 0,
}  # fmt: skip


def test_rdma_devices_corpus():
    facts = Facts(LiveHost(root=str(IB_TREE)))
    devices = facts.get(rdma_devices)
    assert isinstance(devices, tuple) and devices.notes == ()
    assert [d.name for d in devices] == ["hfi1_0", "mlx4_0", "mlx5_0"]
    hfi1, mlx4, mlx5 = devices
    assert (hfi1.fw_ver, hfi1.board_id, hfi1.hca_type, hfi1.node_guid) == (
        "1.27.0", "HPE 100Gb 1-port OP101 QSFP28 x16 PCIe Gen3 with Intel Omni-Path Adapter",
        "", "")  # fmt: skip
    assert (mlx4.fw_ver, mlx4.board_id, mlx4.hca_type, mlx4.node_guid) == (
        "2.31.5050",
        "SM_1141000001000",
        "MT4099",
        "",
    )
    assert (mlx5.fw_ver, mlx5.board_id, mlx5.hca_type, mlx5.node_guid) == (
        "14.28.2006",
        "SM_2001000001034",
        "MT4118",
        "0a7f:bc12:45ef:d23b",
    )
    assert all(d.notes == () for d in devices)

    ports = {(p.device, p.port): p for d in devices for p in d.ports}
    assert list(ports) == [("hfi1_0", 1), ("mlx4_0", 1), ("mlx4_0", 2), ("mlx5_0", 1)]
    summary = {key: (p.state_code, p.state, p.phys_state_code, p.phys_state, p.rate_gbps,
                     p.rate_text, p.link_layer) for key, p in ports.items()}  # fmt: skip
    assert summary == {
        ("hfi1_0", 1): (4, "ACTIVE", 5, "LinkUp", 100.0, "100 Gb/sec (4X EDR)", "InfiniBand"),
        ("mlx4_0", 1): (4, "ACTIVE", 5, "LinkUp", 40.0, "40 Gb/sec (4X QDR)", "InfiniBand"),
        ("mlx4_0", 2): (4, "ACTIVE", 5, "LinkUp", 40.0, "40 Gb/sec (4X QDR)", "InfiniBand"),
        # The upstream fixture's mlx5 phys_state is "4: ACTIVE" (hand-edited there): kept as read.
        ("mlx5_0", 1): (4, "ACTIVE", 4, "ACTIVE", 25.0, "25 Gb/sec (1X EDR)", "InfiniBand"),
    }
    for p in ports.values():
        assert (p.netdev, p.mtu, p.gids, p.notes, p.roce) == ("", None, (), (), False)

    assert ports["hfi1_0", 1].counters == HFI1_COUNTERS
    m41, m42 = ports["mlx4_0", 1].counters, ports["mlx4_0", 2].counters
    assert (m41["port_xmit_wait"], m41["port_xmit_data"], m41["port_rcv_packets"]) == (
        3599,
        26509113295,
        87169372,
    )
    assert (m42["port_xmit_wait"], m42["port_xmit_data"], m42["port_rcv_packets"]) == (
        3846,
        26540356890,
        89332064,
    )
    m5 = ports["mlx5_0", 1]
    assert (m5.counters["unicast_xmit_packets"], m5.counters["port_xmit_data"]) == (
        10907922116,
        2880761508848,
    )
    assert len(m5.counters) == 21  # hw_counters are not read: no check uses them
    for (device, port), p in ports.items():  # every counter file, read here independently
        folder = IB_CLASS / device / "ports" / str(port)
        for kind, got in (("counters", p.counters),):
            files = sorted((folder / kind).iterdir()) if (folder / kind).is_dir() else []
            assert got == {f.name: int(f.read_text()) for f in files}
            for name in ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors"):
                if kind == "counters":
                    assert got[name] == 0


def test_rdma_devices_missing_or_denied(tmp_path):
    facts = facts_of(BundleBuilder(tmp_path / "none"))
    assert facts.get(rdma_devices) == () and facts.get(rdma_devices).notes == ()
    denied = BundleBuilder(tmp_path / "denied").answer(
        "list", "/sys/class/infiniband", status="permission_denied"
    )
    got = facts_of(denied).get(rdma_devices)
    assert got == () and got.notes == ("/sys/class/infiniband: permission_denied",)


def test_rdma_devices_listing_timeout_is_probe_failed(tmp_path):
    b = BundleBuilder(tmp_path).answer("list", "/sys/class/infiniband", status="timeout",
                                       timeout_s=2.0)  # fmt: skip
    with pytest.raises(ProbeFailed):
        facts_of(b).get(rdma_devices)


# --- RoCE, hand-built -----------------------------------------------------------------

PCI = "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"
GID_LINK_LOCAL = "fe80:0000:0000:0000:0ac0:ebff:fe4a:1b2c"
GID_V4 = "0000:0000:0000:0000:0000:ffff:c0a8:010a"  # ::ffff:192.168.1.10
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def roce_bundle(root, *, ndevs: bool = True, slots: int = 16) -> BundleBuilder:
    """A ConnectX-6 Dx port in RoCE mode (hand-written): 100GbE, MTU 9000, the four GIDs
    mlx5 creates for one IPv4 address (v1 and v2 of the link-local and of the address)."""
    dev = f"{PCI}/infiniband/mlx5_0"
    port = f"{dev}/ports/1"
    b = BundleBuilder(root)
    b.link("/sys/class/infiniband/mlx5_0", "../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/mlx5_0")  # fmt: skip
    b.link(f"{dev}/device", "../../../0000:3b:00.0")
    b.link("/sys/class/net/ens1f0np0", "../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net/ens1f0np0")  # fmt: skip
    b.file(f"{PCI}/net/ens1f0np0/mtu", "9000\n").file(f"{PCI}/net/ens1f0np0/dev_port", "0\n")
    b.file(f"{dev}/fw_ver", "22.36.1010\n").file(f"{dev}/board_id", "MT_0000000359\n")
    b.file(f"{dev}/hca_type", "MT4125\n").file(f"{dev}/node_guid", "0ac0:eb03:004a:1b2c\n")
    b.file(f"{port}/state", "4: ACTIVE\n").file(f"{port}/phys_state", "5: LinkUp\n")
    b.file(f"{port}/rate", "100 Gb/sec (2X HDR)\n").file(f"{port}/link_layer", "Ethernet\n")
    b.file(f"{port}/counters/symbol_error", "0\n").file(f"{port}/counters/link_downed", "2\n")
    b.file(f"{port}/hw_counters/np_cnp_sent", "12\n")
    b.file(f"{port}/hw_counters/out_of_sequence", "7\n")
    used = {0: (GID_LINK_LOCAL, "IB/RoCE v1"), 1: (GID_LINK_LOCAL, "RoCE v2"),
            2: (GID_V4, "IB/RoCE v1"), 3: (GID_V4, "RoCE v2")}  # fmt: skip
    for i in range(slots):
        gid, kind = used.get(i, (ZERO_GID, None))
        b.file(f"{port}/gids/{i}", gid + "\n")
        if kind:
            b.file(f"{port}/gid_attrs/types/{i}", kind + "\n")
            if ndevs:
                b.file(f"{port}/gid_attrs/ndevs/{i}", "ens1f0np0\n")
        else:  # the kernel answers EINVAL for the attributes of an unused slot
            b.answer("read", f"/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/{i}",
                     status="error", error="Invalid argument")  # fmt: skip
    return b


def test_roce_port(tmp_path):
    facts = facts_of(roce_bundle(tmp_path))
    (device,) = facts.get(rdma_devices)
    assert (device.name, device.fw_ver, device.board_id, device.hca_type, device.node_guid) == (
        "mlx5_0",
        "22.36.1010",
        "MT_0000000359",
        "MT4125",
        "0ac0:eb03:004a:1b2c",
    )
    (port,) = device.ports
    assert port.roce and port.link_layer == "Ethernet"
    assert (port.state, port.phys_state, port.rate_gbps) == ("ACTIVE", "LinkUp", 100.0)
    assert (port.netdev, port.mtu) == ("ens1f0np0", 9000)
    assert port.gids == (
        rf.Gid(0, GID_LINK_LOCAL, "IB/RoCE v1", "ens1f0np0"),
        rf.Gid(1, GID_LINK_LOCAL, "RoCE v2", "ens1f0np0"),
        rf.Gid(2, GID_V4, "IB/RoCE v1", "ens1f0np0"),
        rf.Gid(3, GID_V4, "RoCE v2", "ens1f0np0"),
    )
    routable_v2 = [g.index for g in port.gids if g.type == "RoCE v2" and g.ipv4]
    assert routable_v2 == [3]
    assert port.counters == {"link_downed": 2, "symbol_error": 0}
    assert port.notes == () and device.notes == ()
    # Attributes of unused slots are never read (the kernel would answer EINVAL).
    assert not any("gid_attrs/types/5" in k for k in keys(facts, rdma_devices))


def test_roce_netdev_from_device_net_when_no_ndevs(tmp_path):
    b = roce_bundle(tmp_path, ndevs=False)
    facts = facts_of(b)
    (port,) = facts.get(rdma_devices)[0].ports
    assert (port.netdev, port.mtu) == ("ens1f0np0", 9000)
    assert all(g.ndev == "" for g in port.gids) and port.notes == ()


def test_two_port_device_net_matched_by_dev_port(tmp_path):
    """A dual-port ConnectX-3 (mlx4, RoCE, hand-written): both interfaces sit under the
    one PCI function; dev_port (0-based) says which is which."""
    dev = "/sys/devices/pci0000:00/0000:00:03.0/0000:04:00.0"
    b = BundleBuilder(tmp_path)
    b.link("/sys/class/infiniband/mlx4_0", "../../devices/pci0000:00/0000:00:03.0/0000:04:00.0/infiniband/mlx4_0")  # fmt: skip
    b.link(f"{dev}/infiniband/mlx4_0/device", "../../../0000:04:00.0")
    for p, (name, mtu) in enumerate((("enp4s0", "1500"), ("enp4s0d1", "9000"))):
        b.file(f"{dev}/net/{name}/dev_port", f"{p}\n").file(f"{dev}/net/{name}/mtu", mtu)
        b.link(f"/sys/class/net/{name}", f"../../devices/pci0000:00/0000:00:03.0/0000:04:00.0/net/{name}")  # fmt: skip
        port = f"{dev}/infiniband/mlx4_0/ports/{p + 1}"
        b.file(f"{port}/state", "4: ACTIVE\n").file(f"{port}/link_layer", "Ethernet\n")
    got = facts_of(b).get(rdma_devices)[0].ports
    assert [(p.port, p.netdev, p.mtu, p.notes) for p in got] == [
        (1, "enp4s0", 1500, ()),
        (2, "enp4s0d1", 9000, ()),
    ]


def test_a_gid_type_not_read_is_unread_and_a_missing_one_empty(tmp_path):
    port = "/sys/class/infiniband/mlx5_0/ports/1"
    b = BundleBuilder(tmp_path)
    for i in range(3):
        b.file(f"{port}/gids/{i}", f"fe80:0000:0000:0000:0000:0000:0000:{i + 1:04x}\n")
    b.answer("read", f"{port}/gid_attrs/types/0", status="permission_denied")
    b.file(f"{port}/gid_attrs/types/1", "RoCE v3\n")  # no kernel's word
    (p,) = facts_of(b).get(rdma_devices)[0].ports
    assert [g.type for g in p.gids] == [rf.UNREAD, rf.UNREAD, ""]  # slot 2: no attribute
    assert p.notes == (f"read {port}/gid_attrs/types/0: permission denied",
                       f"{port}/gid_attrs/types/1 reads 'RoCE v3'")  # fmt: skip


def test_ambiguous_device_net_is_noted(tmp_path):
    dev = "/sys/class/infiniband/mlx4_0"
    b = BundleBuilder(tmp_path)
    b.file(f"{dev}/ports/1/state", "4: ACTIVE\n")
    b.file(f"{dev}/device/net/eth0/mtu", "1500").file(f"{dev}/device/net/eth1/mtu", "1500")
    (port,) = facts_of(b).get(rdma_devices)[0].ports
    assert port.netdev == "" and port.mtu is None
    assert port.notes == (f"{dev}/device/net holds eth0, eth1: none is clearly port 1",)


def test_gids_are_capped(tmp_path):
    port = "/sys/class/infiniband/mlx5_0/ports/1"
    b = BundleBuilder(tmp_path)
    for i in range(40):
        b.file(f"{port}/gids/{i}", f"fe80:0000:0000:0000:0000:0000:0000:{i + 1:04x}\n")
        b.file(f"{port}/gid_attrs/types/{i}", "RoCE v2\n")
    (p,) = facts_of(b).get(rdma_devices)[0].ports
    assert len(p.gids) == rf.MAX_GIDS and p.gids[-1].index == rf.MAX_GIDS - 1
    assert p.notes == (f"more than {rf.MAX_GIDS} GIDs in use; only the first {rf.MAX_GIDS} kept",)


def test_odd_port_attributes_are_noted(tmp_path):
    dev = "/sys/class/infiniband/bnxt_re0"
    port = f"{dev}/ports/1"
    b = BundleBuilder(tmp_path)
    b.file(f"{port}/state", "garbage").file(f"{port}/rate", "fast")
    b.file(f"{port}/counters/symbol_error", "lots\n").file(f"{port}/counters/link_downed", "0x10")
    b.answer("read", f"{port}/counters/port_rcv_errors", status="error", error="EIO")
    b.file(f"{port}/counters/port_rcv_errors", "0")  # the recorded answer wins
    b.file(f"{dev}/ports/notaport/state", "4: ACTIVE")
    (device,) = facts_of(b).get(rdma_devices)
    (p,) = device.ports
    assert (p.state, p.state_code, p.rate_gbps, p.rate_text) == ("garbage", None, None, "fast")
    assert p.counters == {"link_downed": 16}
    assert p.notes == (
        "rate 'fast' not understood",
        f"read {port}/counters/port_rcv_errors: EIO",
        f"{port}/counters/symbol_error: 'lots' is not a number",
    )


def test_device_without_ports_is_noted(tmp_path):
    b = BundleBuilder(tmp_path).file("/sys/class/infiniband/siw0/fw_ver", "0.0.0\n")
    (device,) = facts_of(b).get(rdma_devices)
    assert device.ports == () and device.notes == ("/sys/class/infiniband/siw0/ports: missing",)


def test_counter_timeout_is_probe_failed(tmp_path):
    port = "/sys/class/infiniband/mlx5_0/ports/1"
    b = BundleBuilder(tmp_path).file(f"{port}/state", "4: ACTIVE\n")
    b.file(f"{port}/counters/symbol_error", "0")
    b.answer("read", f"{port}/counters/symbol_error", status="timeout", timeout_s=2.0)
    with pytest.raises(ProbeFailed):
        facts_of(b).get(rdma_devices)


# --- rdma.gpudirect -------------------------------------------------------------------

MODULES = (
    "nvidia_uvm 1540096 0 - Live 0x0000000000000000 (POE)\n"
    "nvidia 56414208 2 nvidia_uvm, Live 0x0000000000000000 (POE)\n"
    "ib_core 409600 8 rdma_cm,ib_uverbs,mlx5_ib, Live 0x0000000000000000\n"
)


@pytest.mark.parametrize("extra, nv_mem, peermem, nvidia_fs", [
    ("nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n"
     "nvidia_fs 253952 0 - Live 0x0000000000000000 (OE)\n", None, "nvidia_peermem", True),
    ("nv_peer_mem 16384 0 - Live 0x0000000000000000 (OE)\n", "1.3-0\n", "nv_peer_mem", False),
    ("", "1.1-0\n", "nv_peer_mem", False),  # only the legacy sysfs entry says it
    ("", None, "", False),
])  # fmt: skip
def test_gpudirect_modules(tmp_path, extra, nv_mem, peermem, nvidia_fs):
    b = BundleBuilder(tmp_path).file("/proc/modules", MODULES + extra)
    if nv_mem is not None:
        b.file(rf.NV_MEM_VERSION, nv_mem)
    got = facts_of(b).get(gpudirect)
    assert (got.peermem, got.nvidia_fs, got.modules_readable) == (peermem, nvidia_fs, True)
    assert got.nv_mem_version == (nv_mem or "").strip()
    assert got.dev_infiniband == () and got.uverbs == () and got.notes == ()


def test_gpudirect_dev_infiniband(tmp_path):
    b = BundleBuilder(tmp_path).file("/proc/modules", MODULES)
    for name in ("uverbs0", "uverbs1", "rdma_cm", "umad0", "issm0"):
        b.file(f"/dev/infiniband/{name}", "")
    got = facts_of(b).get(gpudirect)
    assert got.dev_infiniband == ("issm0", "rdma_cm", "umad0", "uverbs0", "uverbs1")
    assert got.uverbs == ("uverbs0", "uverbs1")


def test_gpudirect_unreadable(tmp_path):
    b = BundleBuilder(tmp_path)
    b.answer("list", "/dev/infiniband", status="permission_denied")
    b.answer("read", rf.NV_MEM_VERSION, status="permission_denied")
    got = facts_of(b).get(gpudirect)
    assert (got.peermem, got.modules_readable, got.dev_infiniband) == ("", False, ())
    assert got.notes == (
        "/proc/modules: missing",
        f"{rf.NV_MEM_VERSION}: permission_denied",
        "/dev/infiniband: permission_denied",
    )


def test_gpudirect_dev_timeout_is_probe_failed(tmp_path):
    b = BundleBuilder(tmp_path).file("/proc/modules", MODULES)
    b.answer("list", "/dev/infiniband", status="timeout", timeout_s=2.0)
    with pytest.raises(ProbeFailed):
        facts_of(b).get(gpudirect)


# --- thermal --------------------------------------------------------------------------


@pytest.mark.parametrize("text, celsius", [
    ("49925", 49.925),
    ("49925\n", 49.925),
    ("-44000", -44.0),
    ("0", 0.0),
    ("", None),
    ("N/A", None),
    ("45.0", None),
    ("1e5", None),
    ("99999999999999", None),
    ("\x00\xff", None),
])  # fmt: skip
def test_parse_millidegrees(text, celsius):
    assert tf.parse_millidegrees(text) == celsius


@pytest.mark.parametrize("celsius, cpu, reliable", [
    (49.9, False, True),
    (-40.0, False, True),
    (-44.0, False, False),
    (-273.2, False, False),
    (150.0, False, True),
    (150.5, False, False),
    (255.0, True, False),
    (0.0, False, True),
    (0.0, True, False),
    (None, False, False),
])  # fmt: skip
def test_judge(celsius, cpu, reliable):
    ok, why = tf.judge(celsius, cpu=cpu)
    assert ok is reliable and bool(why) is not reliable


def test_thermal_corpus():
    facts = Facts(LiveHost(root=str(THERMAL_TREE)))
    got = facts.get(thermal_sensors)
    assert got.notes == ()
    assert got == (
        tf.Sensor("thermal_zone0", "bcm2835_thermal", 49.925),
        tf.Sensor("thermal_zone1", "acpitz", -44.0, reliable=False,
                  why_unreliable="-44 C is below -40 C: no sensor behind it"),
    )  # fmt: skip
    # Cooling devices are not sensors.
    assert not any("cooling_device" in k for k in keys(facts, thermal_sensors))


def zone(b: BundleBuilder, n: int, kind: str | None, temp: str | None, **trips) -> None:
    base = f"/sys/devices/virtual/thermal/thermal_zone{n}"
    b.link(f"/sys/class/thermal/thermal_zone{n}", f"../../devices/virtual/thermal/thermal_zone{n}")
    if kind is not None:
        b.file(f"{base}/type", kind + "\n")
    if temp is not None:
        b.file(f"{base}/temp", temp + "\n")
    for i, (trip_kind, value) in enumerate(trips.items()):
        b.file(f"{base}/trip_point_{i}_type", trip_kind.rstrip("_") + "\n")
        b.file(f"{base}/trip_point_{i}_temp", f"{value}\n")


def test_thermal_zones_hand_built(tmp_path):
    b = BundleBuilder(tmp_path)
    zone(b, 0, "x86_pkg_temp", "52000", passive=90000, critical=100000, hot=95000)
    zone(b, 1, "x86_pkg_temp", "0")
    zone(b, 2, None, "31000")
    zone(b, 3, "acpitz", "27800", critical=-273200)  # firmware's "no trip point"
    zone(b, 4, "iwlwifi_1", None)
    b.file("/sys/devices/virtual/thermal/thermal_zone4/temp", "")
    b.answer("read", "/sys/class/thermal/thermal_zone4/temp", status="error", error="ENODATA")
    zone(b, 5, "pch_skylake", "255000")
    zone(b, 6, "acpitz", "N/A")
    b.file("/sys/class/thermal/cooling_device0/type", "Processor\n")
    got = facts_of(b).get(thermal_sensors)
    assert got.notes == ()
    assert got == (
        tf.Sensor("thermal_zone0", "x86_pkg_temp", 52.0, critical_c=100.0, hot_c=95.0),
        tf.Sensor("thermal_zone1", "x86_pkg_temp", 0.0, reliable=False,
                  why_unreliable="0 C on a CPU sensor: the driver has no reading"),
        tf.Sensor("thermal_zone2", "thermal_zone2 (unlabelled)", 31.0),
        tf.Sensor("thermal_zone3", "acpitz", 27.8),
        tf.Sensor("thermal_zone4", "iwlwifi_1", None, reliable=False,
                  why_unreliable="could not be read (error)"),
        tf.Sensor("thermal_zone5", "pch_skylake", 255.0, reliable=False,
                  why_unreliable="255 C is above 150 C: a broken or absent sensor"),
        tf.Sensor("thermal_zone6", "acpitz", None, reliable=False,
                  why_unreliable="'N/A' is not a temperature"),
    )  # fmt: skip


def hwmon_bundle(root) -> BundleBuilder:
    """Hand-written hwmon chips in the kernel's layout: coretemp (a platform device),
    an NVMe drive (hwmon under the nvme class device), and an acpitz chip."""
    b = BundleBuilder(root)
    core = "/sys/devices/platform/coretemp.0/hwmon/hwmon2"
    b.link("/sys/class/hwmon/hwmon2", "../../devices/platform/coretemp.0/hwmon/hwmon2")
    b.file(f"{core}/name", "coretemp\n")
    for n, label, value in ((1, "Package id 0", "61000"), (2, "Core 0", "58000"),
                            (3, "Core 1", "0")):  # fmt: skip
        b.file(f"{core}/temp{n}_label", label + "\n").file(f"{core}/temp{n}_input", value)
        b.file(f"{core}/temp{n}_crit", "100000\n").file(f"{core}/temp{n}_max", "84000\n")
        b.file(f"{core}/temp{n}_crit_alarm", "0\n")
    nvme = "/sys/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/hwmon10"
    b.link("/sys/class/hwmon/hwmon10", "../../devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/hwmon10")  # fmt: skip
    b.file(f"{nvme}/name", "nvme\n")
    b.file(f"{nvme}/temp1_label", "Composite\n").file(f"{nvme}/temp1_input", "38850\n")
    b.file(f"{nvme}/temp1_crit", "84850\n").file(f"{nvme}/temp1_max", "81850\n")
    b.file(f"{nvme}/temp1_min", "-273150\n").file(f"{nvme}/temp1_alarm", "0\n")
    b.file(f"{nvme}/temp2_label", "Sensor 1\n").file(f"{nvme}/temp2_input", "41850\n")
    b.file(f"{nvme}/temp2_max", "65261850\n")  # "no limit" as some drives report it
    b.file(f"{nvme}/temp3_input", "36850\n")  # no label
    b.file(f"{nvme}/temp4_input", "-60000\n")
    b.file(f"{nvme}/temp5_input", "40000\n").file(f"{nvme}/temp5_fault", "1\n")
    b.file(f"{nvme}/temp6_input", "40000\n")
    b.answer("read", "/sys/class/hwmon/hwmon10/temp6_input", status="error", error="EIO")
    acpi = "/sys/devices/virtual/thermal/thermal_zone0/hwmon0"
    b.link("/sys/class/hwmon/hwmon0", "../../devices/virtual/thermal/thermal_zone0/hwmon0")
    b.file(f"{acpi}/name", "acpitz\n").file(f"{acpi}/temp1_input", "27800\n")
    b.file(f"{acpi}/temp1_crit", "119000\n")
    return b


def test_hwmon_hand_built(tmp_path):
    facts = facts_of(hwmon_bundle(tmp_path))
    got = facts.get(thermal_sensors)
    assert got.notes == ()
    S = tf.Sensor
    assert got == (
        S("hwmon0/temp1", "acpitz temp1 (unlabelled)", 27.8, critical_c=119.0),
        S("hwmon2/temp1", "coretemp Package id 0", 61.0, critical_c=100.0, hot_c=84.0),
        S("hwmon2/temp2", "coretemp Core 0", 58.0, critical_c=100.0, hot_c=84.0),
        S("hwmon2/temp3", "coretemp Core 1", 0.0, critical_c=100.0, hot_c=84.0,
          reliable=False, why_unreliable="0 C on a CPU sensor: the driver has no reading"),
        S("hwmon10/temp1", "nvme Composite", 38.85, critical_c=84.85, hot_c=81.85),
        S("hwmon10/temp2", "nvme Sensor 1", 41.85),
        S("hwmon10/temp3", "nvme temp3 (unlabelled)", 36.85),
        S("hwmon10/temp4", "nvme temp4 (unlabelled)", -60.0, reliable=False,
          why_unreliable="-60 C is below -40 C: no sensor behind it"),
        S("hwmon10/temp5", "nvme temp5 (unlabelled)", 40.0, reliable=False,
          why_unreliable="the chip reports a sensor fault"),
        S("hwmon10/temp6", "nvme temp6 (unlabelled)", None, reliable=False,
          why_unreliable="could not be read (error)"),
    )  # fmt: skip
    # Only the attributes the chip lists are read (no probing for temp*_label and such).
    assert "/sys/class/hwmon/hwmon0/temp1_label" not in keys(facts, thermal_sensors)


def test_hwmon_legacy_device_layout(tmp_path):
    """Before Linux 3.x the attributes sat in hwmonN/device/ (hand-written, lm-sensors'
    old layout)."""
    b = BundleBuilder(tmp_path)
    b.file("/sys/class/hwmon/hwmon0/device/name", "k10temp\n")
    b.file("/sys/class/hwmon/hwmon0/device/temp1_input", "35125\n")
    b.file("/sys/class/hwmon/hwmon0/device/temp1_crit", "70000\n")
    got = facts_of(b).get(thermal_sensors)
    assert got == (tf.Sensor("hwmon0/temp1", "k10temp temp1 (unlabelled)", 35.125, 70.0),)


def test_thermal_caps(tmp_path):
    b = BundleBuilder(tmp_path)
    for n in range(70):
        b.file(f"/sys/class/thermal/thermal_zone{n}/type", "acpitz\n")
        b.file(f"/sys/class/thermal/thermal_zone{n}/temp", "30000\n")
    chip = "/sys/class/hwmon/hwmon0"
    b.file(f"{chip}/name", "coretemp\n")
    for n in range(1, 41):
        b.file(f"{chip}/temp{n}_input", "40000\n")
    got = facts_of(b).get(thermal_sensors)
    zones = [s for s in got if s.source.startswith("thermal_zone")]
    temps = [s for s in got if s.source.startswith("hwmon0/")]
    assert len(zones) == tf.MAX_ZONES and zones[-1].source == "thermal_zone63"
    assert len(temps) == tf.MAX_TEMPS and temps[-1].source == "hwmon0/temp32"
    assert got.notes == (
        f"70 thermal zones; only the first {tf.MAX_ZONES} read",
        f"{chip}: 40 temperatures; only the first {tf.MAX_TEMPS} read",
    )


def test_thermal_none_or_denied(tmp_path):
    assert facts_of(BundleBuilder(tmp_path / "none")).get(thermal_sensors) == ()
    b = BundleBuilder(tmp_path / "denied").answer(
        "list", "/sys/class/hwmon", status="permission_denied"
    )
    got = facts_of(b).get(thermal_sensors)
    assert got == () and got.notes == ("list /sys/class/hwmon: permission denied",)


def test_thermal_timeout_is_probe_failed(tmp_path):
    b = BundleBuilder(tmp_path).file("/sys/class/thermal/thermal_zone0/type", "acpitz")
    b.answer("read", "/sys/class/thermal/thermal_zone0/temp", status="timeout", timeout_s=2.0)
    with pytest.raises(ProbeFailed):
        facts_of(b).get(thermal_sensors)


# --- this machine ---------------------------------------------------------------------


def test_live_host_answers_without_failing():
    facts = Facts(LiveHost())
    assert isinstance(facts.get(rdma_devices), tuple)
    assert isinstance(facts.get(thermal_sensors), tuple)
    assert facts.get(gpudirect).peermem in ("", "nvidia_peermem", "nv_peer_mem")
