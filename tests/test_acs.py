"""PCIe ACS (lspci -vvv) and IOMMU facts: parsers on real captures (fixtures/acs, see
fixtures/acs/SOURCES.md), the facts through replayed bundles."""

from __future__ import annotations

import pytest

from dldoctor.facts import Facts, acs
from dldoctor.host import LiveHost, ProbeFailed
from dldoctor.host.replay import ReplayHost
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import FIXTURES

ACS = FIXTURES / "acs"
ALL_OFF = frozenset()
FULL_REDIRECT = frozenset({"SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"})


def facts_of(b: BundleBuilder) -> Facts:
    return Facts(ReplayHost(str(b.root)))


def fixture(name: str) -> str:
    return (ACS / name).read_text()


# --- parse_lspci_acs on real captures -------------------------------------------------


def test_gpud_dell_root_ports_srcvalid_without_redirect():
    parsed = acs.parse_lspci_acs(fixture("gpud-dell-root-ports.txt"))
    # Seven devices; only the two root ports have an ACS capability.
    assert sorted(parsed.devices) == ["0000:00:0c.0", "0000:00:0e.0"]
    for address in ("0000:00:0c.0", "0000:00:0e.0"):
        dev = parsed.devices[address]
        assert dev.capable == {"SrcValid", "TransBlk", "UpstreamFwd"}
        assert dev.enabled == {"SrcValid"}
        assert dev.any_enabled and not dev.redirect
    assert parsed.devices["0000:00:0c.0"].description.startswith(
        "PCI bridge: Intel Corporation Device 1bbc (rev 11)"
    )
    assert not parsed.restricted and parsed.notes == ()


def test_kvm_matisse_gpp_bridge_redirects():
    parsed = acs.parse_lspci_acs(fixture("kvm-matisse-gpp-bridge.txt"))
    dev = parsed.devices["0000:03:02.0"]
    assert dev.description == (
        "PCI bridge: Advanced Micro Devices, Inc. [AMD] Matisse PCIe GPP Bridge "
        "(prog-if 00 [Normal decode])"
    )
    assert dev.capable == {
        "SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans"
    }  # fmt: skip
    assert dev.enabled == FULL_REDIRECT
    assert dev.redirect
    assert not parsed.restricted and parsed.notes == ()


def test_access_denied_is_restricted():
    parsed = acs.parse_lspci_acs(fixture("kvm-matisse-access-denied.txt"))
    assert parsed.devices == {}
    assert parsed.restricted
    assert any("root" in n for n in parsed.notes)


def test_access_denied_next_to_a_readable_acsctl_is_not_restricted():
    text = fixture("kvm-matisse-access-denied.txt") + "\n" + fixture("kvm-matisse-gpp-bridge.txt")
    parsed = acs.parse_lspci_acs(text)
    assert not parsed.restricted
    assert list(parsed.devices) == ["0000:03:02.0"]
    assert any("1 device(s) showed <access denied>" in n for n in parsed.notes)


def test_grep_output_has_no_device_blocks():
    parsed = acs.parse_lspci_acs(fixture("nccl-523-grep-acsctl.txt"))
    assert parsed.devices == {} and not parsed.restricted
    assert any("12 ACS line(s) outside any device block" in n for n in parsed.notes)


def test_handwritten_D_output_domains_and_states():
    parsed = acs.parse_lspci_acs(fixture("handwritten-plx-two-gpus-D.txt"))
    assert sorted(parsed.devices) == ["0000:00:01.0", "0000:02:08.0", "0000:02:10.0"]
    assert parsed.devices["0000:00:01.0"].enabled == FULL_REDIRECT
    assert parsed.devices["0000:02:08.0"].redirect
    assert parsed.devices["0000:02:08.0"].capable == set(acs.ACS_FLAGS)
    assert parsed.devices["0000:02:10.0"].enabled == ALL_OFF
    assert not parsed.devices["0000:02:10.0"].redirect
    assert parsed.notes == ()


def test_space_indentation_reads_the_same_as_tabs():
    text = fixture("kvm-matisse-gpp-bridge.txt")
    spaced = acs.parse_lspci_acs(text.replace("\t", "        "))
    assert spaced.devices == acs.parse_lspci_acs(text).devices


@pytest.mark.parametrize("text", [
    "",
    "\n\n\n",
    "garbage\n\tACSCtl:\n",
    "0000:00:01.0\n",  # an address with nothing after it is not a device line
    "00:01.0 PCI bridge: X\n\tCapabilities: [100 v1] Access Control Services\n",
    "00:01.0 PCI bridge: X\n\tACSCtl:\tSrcValid+ ??? ReqRedir* CmpltRedir+\n",
    "\x00\xff binary \x1b[31m\n",
    "zz:zz.z PCI bridge\n\tACSCtl: SrcValid+\n",
])  # fmt: skip
def test_odd_input_never_raises(text):
    parsed = acs.parse_lspci_acs(text)
    assert isinstance(parsed.devices, dict) and isinstance(parsed.notes, tuple)


def test_odd_input_notes():
    no_ctl = acs.parse_lspci_acs(
        "00:01.0 PCI bridge: X\n\tCapabilities: [100 v1] Access Control Services\n"
    )
    assert no_ctl.devices["0000:00:01.0"].enabled == ALL_OFF
    assert any("no readable ACSCtl" in n for n in no_ctl.notes)
    odd = acs.parse_lspci_acs("00:01.0 PCI bridge: X\n\tACSCtl:\tSrcValid+ ??? CmpltRedir+\n")
    assert odd.devices["0000:00:01.0"].enabled == {"SrcValid", "CmpltRedir"}
    assert any("not understood: ???" in n for n in odd.notes)
    twice = acs.parse_lspci_acs(fixture("kvm-matisse-gpp-bridge.txt") * 2)
    assert any("more than once" in n for n in twice.notes)


def test_normalise_address():
    assert acs.normalise_address("3B:00.0") == "0000:3b:00.0"
    assert acs.normalise_address("0000:3b:00.0") == "0000:3b:00.0"
    assert acs.normalise_address("10000:01:00.0") == "10000:01:00.0"  # Intel VMD domain
    assert acs.normalise_address(" pci0000:00 ") == "pci0000:00"


# --- bridges_between ------------------------------------------------------------------

RP = "0000:00:01.0"
SW1_UP, SW1_A, SW1_B = "0000:01:00.0", "0000:02:08.0", "0000:02:10.0"
SW2_UP, SW2_A = "0000:05:00.0", "0000:06:08.0"
RP2, SW3_UP, SW3_A = "0000:80:01.0", "0000:81:00.0", "0000:82:08.0"


def test_bridges_same_switch():
    gpu0 = (SW1_A, SW1_UP, RP)
    gpu1 = (SW1_B, SW1_UP, RP)
    assert acs.bridges_between(gpu0, gpu1) == (SW1_A, SW1_UP, SW1_B)
    assert acs.bridges_between(gpu1, gpu0) == (SW1_B, SW1_UP, SW1_A)


def test_bridges_different_switches_under_one_root_port():
    gpu = (SW1_A, SW1_UP, RP)
    nic = (SW2_A, SW2_UP, RP)
    assert acs.bridges_between(gpu, nic) == (SW1_A, SW1_UP, RP, SW2_UP, SW2_A)


def test_bridges_different_root_complexes_share_nothing():
    gpu = (SW1_A, SW1_UP, RP)
    far = (SW3_A, SW3_UP, RP2)
    assert acs.bridges_between(gpu, far) == ()
    # The whole route, root ports included, when asked for (NVIDIA/nccl#2079).
    assert acs.bridges_between(gpu, far, include_roots=True) == (
        SW1_A, SW1_UP, RP, RP2, SW3_UP, SW3_A
    )  # fmt: skip


def test_bridges_edge_cases():
    # Two functions behind the same downstream port: just that port.
    assert acs.bridges_between((SW1_A, SW1_UP, RP), (SW1_A, SW1_UP, RP)) == (SW1_A,)
    # Two devices directly under one root port, addresses without domain, any case.
    assert acs.bridges_between(["00:01.0"], ["0000:00:01.0"]) == (RP,)
    assert acs.bridges_between((), (RP,)) == ()
    assert acs.bridges_between((), (), include_roots=True) == ()
    # One device's chain contains the other device's nearest bridge.
    assert acs.bridges_between((SW1_A, SW1_UP, RP), (SW1_UP, RP)) == (SW1_A, SW1_UP)


# --- the pci.acs fact -------------------------------------------------------------------


def test_acs_fact_from_bundle(tmp_path):
    b = BundleBuilder(tmp_path).command(
        list(acs.LSPCI_ARGV), fixture("handwritten-plx-two-gpus-D.txt")
    )
    report = facts_of(b).get(acs.pci_acs)
    assert report.available and not report.restricted
    assert [d.address for d in report.devices] == ["0000:00:01.0", "0000:02:08.0", "0000:02:10.0"]
    assert [d.address for d in report.redirecting] == ["0000:00:01.0", "0000:02:08.0"]
    assert report.device("02:10.0").enabled == ALL_OFF
    assert report.device("0000:03:00.0") is None
    gpu0, gpu1 = ("0000:02:08.0", "0000:01:00.0", RP), ("0000:02:10.0", "0000:01:00.0", RP)
    route = acs.bridges_between(gpu0, gpu1)
    assert [a for a in route if (d := report.device(a)) and d.redirect] == ["0000:02:08.0"]


def test_acs_fact_restricted(tmp_path):
    b = BundleBuilder(tmp_path).command(
        list(acs.LSPCI_ARGV), fixture("kvm-matisse-access-denied.txt")
    )
    report = facts_of(b).get(acs.pci_acs)
    assert report.available and report.restricted and report.devices == ()


def test_acs_fact_lspci_absent(tmp_path):
    b = BundleBuilder(tmp_path).command(list(acs.LSPCI_ARGV), status="not_installed")
    report = facts_of(b).get(acs.pci_acs)
    assert not report.available and report.devices == ()
    assert report.notes == ("lspci is not installed (package pciutils)",)


def test_acs_fact_missing_from_bundle(tmp_path):
    report = facts_of(BundleBuilder(tmp_path)).get(acs.pci_acs)
    assert not report.available and "missing" in report.notes[0]


def test_acs_fact_failed_lspci(tmp_path):
    b = BundleBuilder(tmp_path).command(
        list(acs.LSPCI_ARGV), "", stderr="lspci: Cannot open /sys/bus/pci/devices\n", returncode=1
    )
    report = facts_of(b).get(acs.pci_acs)
    assert not report.available
    assert report.notes == ("lspci exited with status 1: lspci: Cannot open /sys/bus/pci/devices",)


def test_acs_fact_timeout_is_an_error(tmp_path):
    b = BundleBuilder(tmp_path).command(list(acs.LSPCI_ARGV), status="timeout", timeout_s=10.0)
    with pytest.raises(ProbeFailed):
        facts_of(b).get(acs.pci_acs)


# --- IOMMU ------------------------------------------------------------------------------


def test_parse_cmdline_iommu():
    line = (
        "BOOT_IMAGE=/vmlinuz-6.8.0 root=UUID=1 ro intel_iommu=on iommu=pt "
        "iommu.strict=1 quiet iommu=nopt pci=noacs -- iommu=pt"
    )
    assert acs.parse_cmdline_iommu(line) == {
        "intel_iommu": "on",
        "iommu.strict": "1",
        "iommu": "nopt",  # the last one wins; after "--" is init's
    }
    assert acs.parse_cmdline_iommu("amd_iommu=off iommu.passthrough=1\n") == {
        "amd_iommu": "off",
        "iommu.passthrough": "1",
    }
    assert acs.parse_cmdline_iommu("") == {}
    assert acs.parse_cmdline_iommu("intel_iommu iommu_foo=1 xiommu=pt") == {"intel_iommu": ""}


def iommu_bundle(tmp_path, cmdline, units=(), groups=(), domain=None) -> BundleBuilder:
    b = BundleBuilder(tmp_path).file("/proc/cmdline", cmdline + "\n")
    b.answer("list", "/sys/class/iommu", entries=list(units))
    b.answer("list", "/sys/kernel/iommu_groups", entries=list(groups))
    if domain is not None and groups:
        first = sorted(groups, key=int)[0]
        b.file(f"/sys/kernel/iommu_groups/{first}/type", domain + "\n")
    return b


def test_iommu_passthrough_from_domain_type(tmp_path):
    b = iommu_bundle(tmp_path, "ro intel_iommu=on iommu=pt", ["dmar0", "dmar1"],
                     ["10", "2", "0", "1"], "identity")  # fmt: skip
    got = facts_of(b).get(acs.iommu)
    assert (got.enabled, got.mode, got.default_domain) == (True, "passthrough", "identity")
    assert got.cmdline == ("intel_iommu=on", "iommu=pt")
    assert got.units == ("dmar0", "dmar1") and got.groups == 4
    assert got.notes == ()


def test_iommu_translated_dma_fq(tmp_path):
    b = iommu_bundle(tmp_path, "ro amd_iommu=on", ["ivhd0"], ["0", "1"], "DMA-FQ")
    got = facts_of(b).get(acs.iommu)
    assert (got.enabled, got.mode, got.default_domain) == (True, "translated", "DMA-FQ")


def test_iommu_domain_type_beats_the_cmdline(tmp_path):
    b = iommu_bundle(tmp_path, "iommu=pt", ["dmar0"], ["0"], "DMA")
    got = facts_of(b).get(acs.iommu)
    assert got.mode == "translated"
    assert any("suggests passthrough" in n for n in got.notes)


def test_iommu_cmdline_when_no_type_file(tmp_path):
    b = iommu_bundle(tmp_path, "iommu.passthrough=1", ["dmar0"], ["0"])
    got = facts_of(b).get(acs.iommu)
    assert (got.enabled, got.mode, got.default_domain) == (True, "passthrough", "")
    unknown = facts_of(iommu_bundle(tmp_path / "u", "intel_iommu=on", ["dmar0"], ["0"]))
    assert unknown.get(acs.iommu).mode == ""
    assert any("mode unknown" in n for n in unknown.get(acs.iommu).notes)


def test_iommu_off_when_nothing_registered(tmp_path):
    got = facts_of(iommu_bundle(tmp_path, "quiet splash")).get(acs.iommu)
    assert (got.enabled, got.mode, got.units, got.groups) == (False, "off", (), 0)
    asked = facts_of(iommu_bundle(tmp_path / "a", "intel_iommu=on")).get(acs.iommu)
    assert asked.enabled is False and any("registered no IOMMU" in n for n in asked.notes)


def test_iommu_sysfs_folders_absent(tmp_path):
    b = BundleBuilder(tmp_path).file("/proc/cmdline", "intel_iommu=off\n")
    got = facts_of(b).get(acs.iommu)
    assert (got.enabled, got.mode, got.groups) == (False, "off", 0)
    assert got.cmdline == ("intel_iommu=off",)
    # Absent folders without a command line that says "off": unknown, not "off" (a kernel
    # without IOMMU support, or a bundle that did not record them).
    c = BundleBuilder(tmp_path / "c").file("/proc/cmdline", "ro quiet\n")
    assert facts_of(c).get(acs.iommu).enabled is None


def test_iommu_unreadable_sysfs_is_unknown(tmp_path):
    b = BundleBuilder(tmp_path).file("/proc/cmdline", "iommu=pt\n")
    b.answer("list", "/sys/class/iommu", status="permission_denied")
    b.answer("list", "/sys/kernel/iommu_groups", status="permission_denied")
    got = facts_of(b).get(acs.iommu)
    assert got.enabled is None and got.groups is None
    assert got.mode == "passthrough"  # what the command line says
    assert len(got.notes) == 2


def test_iommu_groups_without_units(tmp_path):
    # Some platforms register groups without a /sys/class/iommu entry.
    b = iommu_bundle(tmp_path, "", [], ["3", "7"], "identity")
    got = facts_of(b).get(acs.iommu)
    assert (got.enabled, got.mode, got.groups) == (True, "passthrough", 2)


def test_iommu_timeout_is_an_error(tmp_path):
    b = BundleBuilder(tmp_path).file("/proc/cmdline", "quiet\n")
    b.answer("list", "/sys/class/iommu", status="timeout", timeout_s=5.0)
    with pytest.raises(ProbeFailed):
        facts_of(b).get(acs.iommu)


# --- this machine -----------------------------------------------------------------------


def test_live_host_never_crashes():
    facts = Facts(LiveHost())
    report = facts.get(acs.pci_acs)
    assert isinstance(report, acs.AcsReport)
    assert report.available or report.notes
    mmu = facts.get(acs.iommu)
    assert mmu.enabled in (True, False, None)
    assert mmu.mode in ("passthrough", "translated", "off", "")
