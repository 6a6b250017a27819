"""GPU checks on hand-built facts: the cases the fixture hosts do not cover."""

from __future__ import annotations

from dldoctor.checks import driver, gpu_memory, precision
from dldoctor.checks.needs import WHY
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.kmod import Modules, modules
from dldoctor.facts.nvidia import library_version, nvidia
from dldoctor.facts.nvsmi import parse_nvidia_smi_xml
from dldoctor.facts.pci import PciBus, PciDevice, pci_devices
from dldoctor.facts.system import Container, container
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from dldoctor.runner import run_check
from tests.support.paths import FIXTURES, HOSTS

H100 = g.Gpu(0, name="NVIDIA H100 80GB HBM3", pci_bus_id="0000:18:00.0", compute_capability="9.0")
BUS = PciBus((PciDevice("0000:18:00.0", "10de", "2330", "030200", "nvidia"),))


def stack(**kw):
    return g.NvidiaStack("nvml", driver_version="535.154.05", gpus=(H100,), **kw)


def test_module_and_library_differ_after_an_upgrade_without_reboot():
    mods = Modules(frozenset({"nvidia"}), True, "535.154.05")
    facts = {nvidia: stack(), modules: mods, library_version: "535.183.01"}
    outcome = driver.driver_module(Facts.given(facts), Policy())
    assert outcome.status == Status.FAIL
    assert outcome.summary == "kernel module 535.154.05, user-space library 535.183.01"
    same = {**facts, library_version: "535.154.05"}
    assert driver.driver_module(Facts.given(same), Policy()).status == Status.PASS


def test_nvml_version_mismatch_fails_the_driver_and_module_checks():
    broken = g.NvidiaStack("nvml", error=g.VERSION_MISMATCH, error_message="LibRmVersionMismatch")
    facts = Facts.given({nvidia: broken, pci_devices: BUS,
                         modules: Modules(frozenset({"nvidia"}), True, "535.154.05")})  # fmt: skip
    loaded = driver.driver_loaded(facts, Policy())
    assert loaded.status == Status.FAIL and "without a reboot" in loaded.summary
    assert driver.driver_module(facts, Policy()).status == Status.FAIL
    # The other GPU checks say why they cannot look (their requirement), instead of failing.
    ecc = run_check(gpu_memory.ecc_errors.__dldoctor_check__, facts, Policy())
    assert (ecc.status, ecc.summary) == (Status.SKIP, WHY[g.VERSION_MISMATCH])


def test_no_permission_is_a_warning_not_a_verdict_on_the_gpus():
    denied = g.NvidiaStack("nvml", error=g.NO_PERMISSION, error_message="NoPermission")
    outcome = driver.driver_loaded(Facts.given({nvidia: denied, pci_devices: BUS}), Policy())
    assert outcome.status == Status.WARN


def test_driver_sees_fewer_gpus_than_the_bus():
    bus = PciBus(BUS.devices + (PciDevice("0000:29:00.0", "10de", "2330", "030200", "nvidia"),))
    facts = {nvidia: stack(), pci_devices: bus, container: Container(False, "")}
    outcome = driver.gpu_count(Facts.given(facts), Policy())
    assert outcome.status == Status.FAIL
    assert "not seen by the driver: 0000:29:00.0" in outcome.details
    # A GPU given to a VM (vfio-pci) is not the host driver's to see.
    vm = PciBus(BUS.devices + (PciDevice("0000:29:00.0", "10de", "2330", "030200", "vfio-pci"),))
    assert driver.gpu_count(Facts.given({**facts, pci_devices: vm}), Policy()).status == Status.PASS
    # Inside a container the bus shows the host's eight GPUs; the container was given one.
    inside = {**facts, container: Container(True, "docker")}
    assert driver.gpu_count(Facts.given(inside), Policy()).status == Status.PASS


def test_a_container_without_gpus_is_told_how_to_get_them():
    none = g.NvidiaStack("nvml", error=g.NO_DRIVER, error_message="LibraryNotFound")
    facts = {nvidia: none, pci_devices: BUS, container: Container(True, "docker")}
    outcome = driver.driver_loaded(Facts.given(facts), Policy())
    assert outcome.status == Status.WARN and "--gpus all" in outcome.remediation
    bare = {**facts, container: Container(False, "")}
    assert driver.driver_loaded(Facts.given(bare), Policy()).status == Status.FAIL


def test_a_driver_that_did_not_answer_is_an_error_not_a_verdict():
    hung = g.NvidiaStack("nvml", error=g.TIMED_OUT, error_message="probe nvml did not answer")
    facts = {nvidia: hung, pci_devices: BUS, container: Container(False, "")}
    outcome = driver.driver_loaded(Facts.given(facts), Policy())
    assert outcome.status == Status.ERROR and "1 NVIDIA GPU(s) on the PCI bus" in outcome.summary
    assert any("Xid 79" in line for line in outcome.details)
    # A slow first NVML call on a host without persistence mode looks the same: say so.
    assert any("nvidia-persistenced" in d and "nvml_s" in d for d in outcome.details)
    smi = {**facts, nvidia: g.NvidiaStack("nvidia-smi", error=g.TIMED_OUT, error_message="hung")}
    outcome = driver.driver_loaded(Facts.given(smi), Policy())
    assert not any("nvidia-persistenced" in d for d in outcome.details)
    # No NVIDIA device on a fully read bus: nothing was missed, the check does not apply.
    bare = {**facts, pci_devices: PciBus(())}
    outcome = driver.driver_loaded(Facts.given(bare), Policy())
    assert outcome.status == Status.SKIP and "no NVIDIA GPU on the PCI bus" in outcome.summary
    # A device whose attributes did not answer may be the GPU: still no verdict, an error.
    partial = {**facts, pci_devices: PciBus((), True, ("0000:18:00.0: read ... timed out",))}
    assert driver.driver_loaded(Facts.given(partial), Policy()).status == Status.ERROR


def test_a_malformed_nvml_answer_is_an_error_not_a_missing_driver(tmp_path):
    from dldoctor.host.replay import ReplayHost
    from tests.support.bundlebuilder import BundleBuilder

    b = BundleBuilder(tmp_path / "b").file("/sys/bus/pci/devices/0000:18:00.0/vendor", "0x10de\n")
    b.file("/sys/bus/pci/devices/0000:18:00.0/class", "0x030200\n")
    b.file("/sys/bus/pci/devices/0000:18:00.0/device", "0x2330\n")
    for text in ('{"status": "ok", "value": "garbage"}', "{not json"):
        (b.root / "nvml.json").write_text(text)
        facts = Facts(ReplayHost(str(b.root)))
        assert facts.get(nvidia).error == g.PROBE_FAILED
        outcome = driver.driver_loaded(facts, Policy())
        assert outcome.status == Status.ERROR, outcome
        assert outcome.remediation is None  # not "Install the NVIDIA datacenter driver"


def test_idle_consumer_gpu_without_persistence_is_fine():
    rtx = g.Gpu(0, name="NVIDIA GeForce RTX 4090", persistence_mode=False)
    outcome = driver.persistence(
        Facts.given({nvidia: g.NvidiaStack("nvml", gpus=(rtx,))}), Policy()
    )
    assert outcome.status == Status.PASS
    dc = g.Gpu(0, name="NVIDIA A100-SXM4-80GB", persistence_mode=False)
    assert driver.persistence(Facts.given({nvidia: g.NvidiaStack("nvml", gpus=(dc,))}),
                              Policy()).status == Status.WARN  # fmt: skip


def test_remapping_failure_outranks_pending():
    bad = g.Gpu(0, name="NVIDIA A100", remap_pending=True, remap_failure=True)
    outcome = gpu_memory.remapped_rows(
        Facts.given({nvidia: g.NvidiaStack("nvml", gpus=(bad,))}), Policy()
    )
    assert outcome.status == Status.FAIL and "RMA" in outcome.summary


def test_precision_from_compute_capability():
    assert precision.precisions("7.5") == ["FP16"]
    assert precision.precisions("8.6") == ["FP16", "BF16", "TF32"]
    assert precision.precisions("9.0") == ["FP16", "BF16", "TF32", "FP8"]
    assert precision.precisions("6.1") == []


def test_one_unreadable_pci_device_does_not_hide_the_bus(tmp_path):
    from dldoctor.host.replay import ReplayHost
    from tests.support.bundlebuilder import BundleBuilder
    from tests.support.hostgen import pci_device

    b = BundleBuilder(tmp_path / "b")
    pci_device(b, "0000:18:00.0", "10de", "2330", "030200", "nvidia", 0)
    pci_device(b, "0000:29:00.0", "10de", "2330", "030200", "nvidia", 0)
    b.answer("read", "/sys/bus/pci/devices/0000:29:00.0/class", status="error",
             error="Input/output error")  # fmt: skip
    bus = Facts(ReplayHost(str(b.root))).get(pci_devices)
    assert [d.address for d in bus.devices] == ["0000:18:00.0"]
    assert "Input/output error" in bus.notes[0]


def test_no_nvidia_device_on_a_bus_read_in_full_spares_the_nvidia_smi_fallback(tmp_path):
    # NVML finds no library and sysfs shows no NVIDIA device: nvidia-smi (here hung) could
    # only repeat that, so it is not asked; with an NVIDIA device on the bus it is.
    from dldoctor.facts.nvidia import nvidia
    from dldoctor.host.replay import ReplayHost
    from tests.support.bundlebuilder import BundleBuilder
    from tests.support.hostgen import pci_device

    no_library = {"binding": "", "init": {"error": "LibraryNotFound", "code": 12, "message": ""}}
    for vendor, asked in (("8086", False), ("10de", True)):
        b = BundleBuilder(tmp_path / vendor).probe("nvml", no_library)
        pci_device(b, "0000:00:02.0", vendor, "1234", "030000", "", -1)
        b.command(["nvidia-smi", "-q", "-x"], status="timeout", timeout_s=10)
        facts = Facts(ReplayHost(str(tmp_path / vendor)))
        stack = facts.get(nvidia)
        assert stack.error == (g.TIMED_OUT if asked else g.NO_DRIVER)
        ran = [e.key for e in facts.evidence(nvidia) if e.op == "run"]
        assert ran == (["nvidia-smi -q -x"] if asked else [])


def test_compute_mode_on_real_captures():
    # hgx-h100x8-healthy's NVML answers: every GPU in the Default mode.
    finding = run_check(
        driver.compute_mode.__dldoctor_check__,
        Facts(ReplayHost(str(HOSTS / "hgx-h100x8-healthy"))),
        Policy(),
    )
    assert (finding.status, finding.summary) == (Status.PASS, "Default on 8 GPU(s)")
    # A real two-GPU nvidia-smi document, its modes set as `nvidia-smi -c` would.
    xml = (FIXTURES / "corpus/nvidia-smi-xml/telegraf-dual_2070-v13.xml").read_text()
    xml = xml.replace("<compute_mode>Default", "<compute_mode>Exclusive_Process", 1)
    exclusive = Facts.given({nvidia: parse_nvidia_smi_xml(xml)})
    outcome = driver.compute_mode(exclusive, Policy())
    assert (outcome.status, outcome.summary) == (
        Status.PASS,
        "1 of 2 GPU(s) take one process at a time",
    )
    xml = xml.replace("<compute_mode>Default", "<compute_mode>Prohibited")
    outcome = driver.compute_mode(Facts.given({nvidia: parse_nvidia_smi_xml(xml)}), Policy())
    assert (outcome.status, outcome.summary) == (
        Status.FAIL,
        "1 GPU(s) in the Prohibited compute mode: CUDA cannot use them",
    )
    assert [d.rsplit(" ", 1)[-1] for d in outcome.details] == [
        "(0000:02:00.0)",
        "Exclusive_Process",
    ]
    unknown = g.NvidiaStack("nvml", gpus=(H100,))
    assert driver.compute_mode(Facts.given({nvidia: unknown}), Policy()).summary == (
        "no GPU reports its compute mode"
    )


def test_nouveau_holding_a_gpu_fails_even_when_the_command_line_cannot_be_read():
    # The failure stands without the blacklists: an unread /proc/cmdline must not turn a
    # Nouveau that holds the GPU into an error. Only the "is it blacklisted?" verdict needs
    # the command line.
    from dldoctor.diagnose import diagnose
    from dldoctor.host.replay import ReplayHost
    from dldoctor.policy import Policy
    from dldoctor.registry import builtin_checks
    from tests.support.faults import FaultyHost

    bundle = str(HOSTS / "workstation-rtx4090-nouveau")
    host = FaultyHost(ReplayHost(bundle), "timeout", lambda op, key: key == "/proc/cmdline")
    specs = [s for s in builtin_checks() if s.id == "gpu.nouveau"]
    (finding,) = diagnose(host, Policy(), specs).findings
    assert finding.status.value == "fail", finding
    assert finding.summary.startswith("Nouveau drives ")
    assert any("the blacklists are not known" in d for d in finding.details), finding.details
    assert host.hits == 1
