"""Firmware: gpu.vbios, network.firmware, storage.firmware, on real captures (the procfs
sysfs trees, `ethtool -i` outputs from public issues: fixtures/SOURCES.md) and the
hgx-h100x8-mixed-firmware fixture host."""

from __future__ import annotations

import pytest

from dldoctor.checks import driver, network, storage
from dldoctor.checks.firmware import firmware_at_least
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.net import nic_firmware, parse_ethtool_info
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.pci import PciBus, pci_devices
from dldoctor.facts.rdma import RdmaDevice, RdmaDevices, rdma_devices
from dldoctor.facts.storage import nvme
from dldoctor.host import LiveHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import FirmwareMinimum, FirmwarePolicy, Policy
from tests.support.bundlebuilder import BundleBuilder
from tests.support.hostgen import pci_device
from tests.support.paths import FIXTURES, HOSTS

ETHTOOL = FIXTURES / "ethtool"
IB_TREE = FIXTURES / "corpus/infiniband/procfs-fixtures-sysfs"
NVME_TREE = FIXTURES / "corpus/nvme-sysfs"


def minimum(match: str, version: str, **kw) -> Policy:
    return Policy(firmware=FirmwarePolicy((FirmwareMinimum(match, version),), **kw))


@pytest.mark.parametrize(
    ("found", "wanted", "verdict"),
    [
        ("28.39.1002", "28.39.1002", True),
        ("28.37.1014", "28.39.1002", False),
        ("28.39.1002 (MT_0000000838)", "28.38", True),  # mlx5's ethtool adds the PSID
        ("96.00.74.00.1F", "96.00.74.00.1E", True),  # a VBIOS ends in hex
        ("96.00.61.00.01", "96.00.74.00.1F", False),
        ("4.22 0x80010446 1.3197.0", "4.40", False),  # Intel: NVM version first
        ("1B2QEXP7", "1B2QEXP7", True),  # an NVMe code: text against text of its length
        ("1B2QEXP7", "2B2QEXP7", False),
        ("1B2QEXP7", "28.39", None),  # a code against a number: not comparable
        ("GDC5902Q", "GDC59", None),
        ("14.23", "14.23.0", True),
        ("", "1.0", None),
    ],
)
def test_firmware_versions_compare_part_by_part(found, wanted, verdict):
    assert firmware_at_least(found, wanted) is verdict


def test_ethtool_info_of_real_nics():
    ice = parse_ethtool_info((ETHTOOL / "ethq27-ice-e810.txt").read_text())
    assert ice == {"driver": "ice", "firmware": "4.22 0x80010446 1.3197.0",
                   "bus_info": "0000:3b:00.0"}  # fmt: skip
    assert parse_ethtool_info((ETHTOOL / "ethq27-iavf-vf.txt").read_text())["firmware"] == "N/A"
    assert parse_ethtool_info((ETHTOOL / "ethq12-virtio-net.txt").read_text())["firmware"] == ""
    i40e = parse_ethtool_info((ETHTOOL / "openshift-checks22-i40e-xxv710.txt").read_text())
    assert i40e["firmware"] == "6.00 0x800036cb 1.1747.0"
    assert parse_ethtool_info("\x00\xff garbage:\n::\nfirmware-version") == {}


def nic_bundle(tmp_path, outputs: dict[str, str]):
    """A host whose /sys/class/net holds `outputs`' interfaces (PCI functions 3b:00.N) and
    lo; ethtool -i answers each with the given text."""
    b = BundleBuilder(tmp_path / "nics")
    b.link("/sys/class/net/lo", "../../devices/virtual/net/lo")
    for i, (name, text) in enumerate(outputs.items()):
        address = f"0000:3b:00.{i}"
        pci_device(b, address, "8086", "1593", "020000", "ice", 0)
        b.link(f"/sys/class/net/{name}", f"../../devices/pci0000:3a/{address}/net/{name}")
        b.command(["ethtool", "-i", name], text.replace("0000:3b:00.0", address))
    return Facts(ReplayHost(str(b.root)))


def test_nic_firmware_of_an_intel_nic_and_of_real_hcas(tmp_path):
    ice = (ETHTOOL / "ethq27-ice-e810.txt").read_text()
    facts = nic_bundle(tmp_path, {"enp59s0f0": ice, "enp59s0f1": ice})
    found = facts.get(nic_firmware)
    assert [n.interface for n in found.nics] == ["enp59s0f0", "enp59s0f1"]  # not lo
    outcome = network.firmware(facts, Policy())
    assert outcome.status == Status.PASS
    assert outcome.summary == "2 NIC(s): 4.22 0x80010446 1.3197.0"
    assert "enp59s0f0 ice 8086:1593: 4.22 0x80010446 1.3197.0" in outcome.details
    # A site's minimum for the E810, matched in the driver and PCI id.
    old = network.firmware(facts, minimum("8086:1593", "4.40"))
    assert old.status == Status.WARN and "older than 4.40" in old.details[0]


def test_one_nic_of_a_model_on_another_firmware_warns(tmp_path):
    ice = (ETHTOOL / "ethq27-ice-e810.txt").read_text()
    newer = ice.replace("4.22 0x80010446 1.3197.0", "4.40 0x8001c7d4 1.3534.0")
    facts = nic_bundle(tmp_path, {"enp59s0f0": ice, "enp59s0f1": newer})
    outcome = network.firmware(facts, Policy())
    assert outcome.status == Status.WARN
    assert outcome.summary.startswith("ice 8086:1593: 2 versions (")
    allowed = Policy(firmware=FirmwarePolicy(allow_mixed=True))
    assert network.firmware(facts, allowed).status == Status.PASS


def test_hcas_of_the_procfs_tree_and_their_minimums():
    # Real fw_ver values: ConnectX-5 (MT4118) 14.28.2006, ConnectX-3 (MT4099) 2.31.5050,
    # Omni-Path hfi1 1.27.0; ethtool not installed on that tree: said, not guessed.
    facts = Facts(LiveHost(root=str(IB_TREE), env={"PATH": "/nonexistent"}))
    outcome = network.firmware(facts, Policy())
    assert outcome.status == Status.PASS
    assert "mlx5_0 MT4118 SM_2001000001034: 14.28.2006" in outcome.details
    old = network.firmware(facts, minimum("MT4118", "16.35"))
    assert old.status == Status.WARN
    assert old.details[0] == "mlx5_0 MT4118 SM_2001000001034: 14.28.2006 older than 16.35"


def test_the_mixed_firmware_host_warns_for_its_gpu_and_its_hca():
    facts = Facts(ReplayHost(str(HOSTS / "hgx-h100x8-mixed-firmware")))
    vbios = driver.vbios(facts, Policy())
    assert vbios.status == Status.WARN
    assert vbios.summary == (
        "NVIDIA H100 80GB HBM3: 2 versions (96.00.61.00.01 on GPU 7; 96.00.74.00.1F on GPU 0-6)"
    )
    nic = network.firmware(facts, Policy())
    assert nic.status == Status.WARN
    assert nic.summary == (
        "MT4129 MT_0000000838: 2 versions (28.37.1014 on mlx5_1; 28.39.1002 on mlx5_0)"
    )
    healthy = Facts(ReplayHost(str(HOSTS / "hgx-h100x8-healthy")))
    assert driver.vbios(healthy, Policy()).summary == "8 GPU(s): 96.00.74.00.1F"
    below = driver.vbios(healthy, minimum("H100", "96.00.89.00.01"))
    assert below.status == Status.WARN and below.summary.startswith("8 GPU(s) below")


def stack(*vbios: str) -> Facts:
    gpus = tuple(g.Gpu(i, name="NVIDIA A100-SXM4-80GB", vbios=v) for i, v in enumerate(vbios))
    return Facts.given({nvidia: g.NvidiaStack("nvml", gpus=gpus)})


def test_vbios_skip_and_garbage():
    assert driver.vbios(stack(), Policy()).status == Status.SKIP
    # A VBIOS string that is no version: listed, and a minimum says it cannot compare.
    odd = driver.vbios(stack("\x1b[31m??"), minimum("A100", "92.00.45"))
    assert odd.status == Status.PASS
    assert odd.details[0] == "GPU 0: \x1b[31m?? cannot be compared with 92.00.45"
    unreported = driver.vbios(stack("", ""), Policy())
    assert unreported.summary == "2 GPU(s): no version reported"


def test_nvme_firmware_of_the_real_samsung_tree():
    facts = Facts(LiveHost(root=str(NVME_TREE), env={"PATH": "/nonexistent"}))
    outcome = storage.firmware(facts, Policy())
    assert outcome.status == Status.PASS and outcome.summary == "1 NVMe drive(s): 1B2QEXP7"
    old = storage.firmware(facts, minimum("Samsung SSD 970 PRO", "1B2QEXP8"))
    assert old.status == Status.WARN
    drive = facts.get(nvme)[0]
    twins = (drive, drive._replace(name="nvme1", firmware="1B2QEXP8"))
    mixed = storage.firmware(Facts.given({nvme: twins}), Policy())
    assert mixed.status == Status.WARN and "2 versions (1B2QEXP7 on nvme0" in mixed.summary
    assert storage.firmware(Facts.given({nvme: ()}), Policy()).status == Status.SKIP


def test_hca_firmware_no_longer_judged_by_storage_firmware():
    hca = RdmaDevice("mlx5_0", "20.1.0", "MT_0000000838", "MT4129")
    facts = Facts.given({nvme: (), rdma_devices: RdmaDevices((hca,))})
    assert storage.firmware(facts, minimum("MT4129", "28.39")).status == Status.SKIP
    given = Facts.given({rdma_devices: RdmaDevices((hca,)), nic_firmware: nic_firmware_none(),
                         pci_devices: PciBus()})  # fmt: skip
    assert network.firmware(given, minimum("MT4129", "28.39")).status == Status.WARN


def nic_firmware_none():
    from dldoctor.facts.net import NicFirmwares

    return NicFirmwares(notes=("ethtool -i: command not installed",))


def test_an_ethtool_that_hangs_is_asked_once_and_said(tmp_path):
    ice = (ETHTOOL / "ethq27-ice-e810.txt").read_text()
    b = BundleBuilder(tmp_path / "hung")
    for i, name in enumerate(("enp59s0f0", "enp59s0f1")):
        b.link(f"/sys/class/net/{name}", f"../../devices/pci0000:3a/0000:3b:00.{i}/net/{name}")
    b.command(["ethtool", "-i", "enp59s0f0"], status="timeout")
    b.command(["ethtool", "-i", "enp59s0f1"], ice)
    facts = Facts(ReplayHost(str(b.root)))
    found = facts.get(nic_firmware)
    assert found.nics == () and found.unread == ("enp59s0f0", "enp59s0f1")
    outcome = network.firmware(Facts.given({rdma_devices: RdmaDevices(), nic_firmware: found}),
                               Policy())  # fmt: skip
    assert outcome.status == Status.SKIP
    assert (
        outcome.summary == "the firmware of 2 physical NIC(s) was not read (enp59s0f0, enp59s0f1)"
    )
