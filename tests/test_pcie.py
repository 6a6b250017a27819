"""PCIe link facts: the sysfs reader on a real assembled tree (fixtures/corpus/pci/
procfs-fixtures-sysfs), the parsers on odd input, the kernel's bandwidth lines (imbue
capture), the topology walk on a hand-built bundle, and the shared `kernel.log` fact.

"Degraded" is computed here as current width < max width only to show what a later check
will find; the facts themselves do not judge."""

from __future__ import annotations

import pytest

from dldoctor.facts import Facts
from dldoctor.facts.kmsg import KEPT_MARKERS, KernelLogText, kept_lines, kernel_log
from dldoctor.facts.pci import PciDevice
from dldoctor.facts.pcie import (
    AerCounters,
    BandwidthLimit,
    PcieLink,
    bandwidth_limits,
    parse_aer_counters,
    parse_bandwidth_limited,
    parse_link_speed,
    parse_link_width,
    parse_upstream,
    pcie_links,
    read_link_files,
    worth_a_link_check,
)
from dldoctor.facts.xid import xid_events
from dldoctor.host import LiveHost
from dldoctor.host.base import ProbeFailed
from dldoctor.host.recording import ObservingHost
from dldoctor.host.replay import ReplayHost
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "corpus" / "pci"
SYS_TREE = CORPUS / "procfs-fixtures-sysfs"
IMBUE = CORPUS / "imbue-dmesg-pcie-bandwidth-limited-x8-of-x16.txt"
JOURNAL = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise"]
T0 = 1714557600.0  # 2024-05-01T10:00:00Z


def degraded(width: tuple[int | None, int | None]) -> bool:
    current, most = width
    return current is not None and most is not None and current < most


# --- the real tree --------------------------------------------------------------------

# Read by hand from the files of the tree. It is assembled from several machines:
# /sys/bus/pci/devices lists three devices, so only those (and their ports) reach the
# fact; 0000:00:03.0 (with a SAS HBA below it), the amdgpu card (class/drm/card0/device,
# PCI_SLOT_NAME 0000:09:00.0) and the I219 NIC 0000:00:1f.6 are read as folders below.
# (address, vendor, device, class, driver, current/max GT/s, current/max width, upstream,
#  AER correctable/nonfatal/fatal, numa, local_cpulist)
CORPUS_LINKS = [
    ("0000:00:02.1", "1022", "1634", "060400", "", 8.0, 8.0, 4, 8, (), None, None, None, None, ""),
    ("0000:01:00.0", "c0a9", "540a", "010802", "nvme", 8.0, 8.0, 4, 4, ("0000:00:02.1",), 0, 0, 0, None, "0-15"),
    ("0000:a2:00.0", "8086", "159b", "020000", "ice", 16.0, 16.0, 8, 8, (), 0, 0, 0, 1, "64-127"),
]  # fmt: skip
# sysfs folder -> (current/max GT/s, current/max width, AER correctable/nonfatal/fatal)
CORPUS_FOLDERS = {
    "/sys/devices/pci0000:00/0000:00:03.0": (8.0, 8.0, 8, 16, 0, 0, 0),
    "/sys/devices/pci0000:00/0000:00:03.0/0000:03:00.0": (8.0, 8.0, 8, 8, 0, 0, 0),  # SAS HBA
    "/sys/class/drm/card0/device": (8.0, 8.0, 16, 16, 0, 0, 0),
    # No link files at all (an integrated NIC); hand-edited AER counts upstream, and the
    # nonfatal file's total line is named TOTAL_ERR_FATAL there.
    "/sys/devices/pci0000:00/0000:00:1f.6": (None, None, None, None, 9, 48, 28),
}


def link_row(link: PcieLink) -> tuple:
    return (
        link.address, link.vendor, link.device, link.class_code, link.driver,
        link.current_gts, link.max_gts, link.current_width, link.max_width, link.upstream,
        link.aer_correctable, link.aer_nonfatal, link.aer_fatal, link.numa_node,
        link.local_cpulist,
    )  # fmt: skip


def test_corpus_links_through_the_fact():
    facts = Facts(LiveHost(root=str(SYS_TREE)))
    links = facts.get(pcie_links)
    assert links.readable and links.notes == ()
    assert [link_row(link) for link in links.links] == CORPUS_LINKS
    assert all(link.notes == () for link in links.links)
    nvme = links.get("0000:01:00.0")
    assert [link.address for link in links.chain(nvme)] == ["0000:01:00.0", "0000:00:02.1"]
    assert links.get("0000:00:02.1").is_bridge and not nvme.is_bridge
    # The NVMe drive runs at its full x4; the root port above it at x4 of its x8.
    narrow = {link.address: (link.current_width, link.max_width) for link in links.links
              if degraded((link.current_width, link.max_width))}  # fmt: skip
    assert narrow == {"0000:00:02.1": (4, 8)}


@pytest.mark.parametrize("folder", sorted(CORPUS_FOLDERS))
def test_corpus_folders_not_on_the_bus_listing(folder):
    files = read_link_files(LiveHost(root=str(SYS_TREE)), folder)
    got = (files.current_gts, files.max_gts, files.current_width, files.max_width,
           files.aer_correctable, files.aer_nonfatal, files.aer_fatal)  # fmt: skip
    assert got == CORPUS_FOLDERS[folder]
    assert files.notes == ()  # absent files are None, not notes


def test_corpus_only_the_two_narrowed_ports_look_degraded():
    host = LiveHost(root=str(SYS_TREE))
    widths = {link.address: (link.current_width, link.max_width)
              for link in Facts(host).get(pcie_links).links}  # fmt: skip
    for folder in CORPUS_FOLDERS:
        files = read_link_files(host, folder)
        widths[folder.rsplit("/", 1)[-1]] = (files.current_width, files.max_width)
    assert {a: w for a, w in widths.items() if degraded(w)} == {
        "0000:00:02.1": (4, 8),
        "0000:00:03.0": (8, 16),
    }
    assert len(widths) == 7  # 3 through the fact, 4 folders (card0's is named "device")


# --- parsers --------------------------------------------------------------------------


@pytest.mark.parametrize("text, gts", [
    ("16.0 GT/s PCIe\n", 16.0),
    ("32.0 GT/s PCIe", 32.0),
    ("2.5 GT/s PCIe", 2.5),
    ("8 GT/s\n", 8.0),  # before Linux 4.19
    ("2.5 GT/s", 2.5),
    ("5 GT/s", 5.0),
    ("  64.0 GT/s PCIe  ", 64.0),
    ("Unknown\n", None),
    ("Unknown speed", None),
    ("", None),
    ("16.0", None),  # no unit: not guessed
    ("0 GT/s", None),
    ("GT/s", None),
    ("x16", None),
    ("9" * 5000 + " GT/s", None),
    ("\x00\xff", None),
])  # fmt: skip
def test_parse_link_speed(text, gts):
    assert parse_link_speed(text) == gts


@pytest.mark.parametrize("text, width", [
    ("16\n", 16), ("8", 8), ("x16", 16), ("X4", 4), (" 1 ", 1), ("0\n", 0), ("63", 63),
    ("", None), ("Unknown", None), ("x", None), ("-1", None), ("16 lanes", None),
    ("1" * 5000, None),
])  # fmt: skip
def test_parse_link_width(text, width):
    assert parse_link_width(text) == width


def corpus_text(path: str) -> str:
    return (SYS_TREE / path.lstrip("/")).read_text()


def test_parse_aer_counters_on_real_files():
    port = "sys/devices/pci0000:00/0000:00:03.0"
    counts = parse_aer_counters(corpus_text(f"{port}/aer_dev_correctable"))
    assert counts.total == 0 and counts.notes == ()
    assert list(counts.counters) == ["RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout",
                                     "NonFatalErr", "CorrIntErr", "HeaderOF"]  # fmt: skip
    assert len(parse_aer_counters(corpus_text(f"{port}/aer_dev_fatal")).counters) == 18
    # The hand-edited NIC: the TOTAL_ line wins over the sum of the kinds.
    nic = "sys/devices/pci0000:00/0000:00:1f.6"
    counts = parse_aer_counters(corpus_text(f"{nic}/aer_dev_correctable"))
    assert (counts.total, counts.counters["RxErr"], counts.counters["HeaderOF"]) == (9, 1, 8)
    assert parse_aer_counters(corpus_text(f"{nic}/aer_dev_nonfatal")).total == 48


@pytest.mark.parametrize("text, total, notes", [
    ("RxErr 2\nBadTLP 3\n", 5, ()),  # no TOTAL_ line: summed
    ("RxErr 2\nBadTLP 3\nTOTAL_ERR_COR 4\n", 4, ()),  # one report can set several kinds
    ("TOTAL_ERR_FATAL 18446744073709551615\n", 18446744073709551615, ()),
    ("", None, ()),
    ("\n\n", None, ()),
    ("RxErr two\nBadTLP 1\n", 1, ("1 line(s) not understood",)),
    ("RxErr -1\n", None, ("1 line(s) not understood",)),
    ("RxErr " + "9" * 5000, None, ("1 line(s) not understood",)),
    ("\x00\xff garbage", None, ("1 line(s) not understood",)),
])  # fmt: skip
def test_parse_aer_counters_odd_input(text, total, notes):
    counts = parse_aer_counters(text)
    assert isinstance(counts, AerCounters)
    assert (counts.total, counts.notes) == (total, notes)


@pytest.mark.parametrize("target, address, upstream", [
    ("../../../devices/pci0000:00/0000:00:03.1/0000:03:00.0/0000:04:10.0/0000:17:00.0",
     "0000:17:00.0", ("0000:04:10.0", "0000:03:00.0", "0000:00:03.1")),
    ("../../../devices/pci0000:a2/0000:a2:00.0", "0000:a2:00.0", ()),
    ("/sys/devices/pci0000:00/0000:00:02.1/0000:01:00.0", "0000:01:00.0", ("0000:00:02.1",)),
    # a VMD domain (5 hex digits) below an ordinary root port
    ("../../../devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0",
     "10000:e1:00.0", ("10000:e0:06.0", "0000:00:0e.0")),
    ("../../../devices/pci0000:00/0000:00:03.1/0000:17:00.0/../0000:17:00.0", "0000:17:00.0",
     ("0000:00:03.1",)),
    ("../../../devices/pci0000:00/0000:00:02.1/0000:01:00.0", "0000:01:00.1", None),
    ("../../../devices/platform/foo", "0000:01:00.0", None),
    ("", "0000:01:00.0", None),
])  # fmt: skip
def test_parse_upstream(target, address, upstream):
    assert parse_upstream(target, address) == upstream


def test_worth_a_link_check():
    def dev(vendor, klass):
        return PciDevice("0000:01:00.0", vendor, "0000", klass)

    chosen = [dev("10de", "030200"), dev("1002", "030000"), dev("15b3", "020700"),
              dev("8086", "020000"), dev("144d", "010802"), dev("10de", "068000"),
              dev("1da3", "120000")]  # fmt: skip
    left = [dev("8086", "060400"), dev("10de", "040300"), dev("8086", "010601"),
            dev("1000", "010700"), dev("8086", "068000"), dev("8086", "0c0330")]  # fmt: skip
    assert all(worth_a_link_check(d) for d in chosen)
    assert not any(worth_a_link_check(d) for d in left)


# --- the kernel's bandwidth lines -----------------------------------------------------

IMBUE_LIMITS = [
    BandwidthLimit("0000:9c:00.0", 252.056, 32.0, 8, "0000:97:01.0", 504.112, 32.0, 16),
    BandwidthLimit("0000:02:00.0", 4.0, 5.0, 1, "0000:00:0c.0", 8.0, 5.0, 2),
]


def without_raw(limits):
    return [BandwidthLimit(**{**limit.__dict__, "raw": ""}) for limit in limits]


def test_imbue_bandwidth_lines():
    text = IMBUE.read_text()
    limits = parse_bandwidth_limited(text)
    assert without_raw(limits) == IMBUE_LIMITS
    assert [limit.raw for limit in limits] == text.splitlines()


@pytest.mark.parametrize("line, expected", [
    # journal format, an old kernel's speed strings
    ("2024-05-01T08:00:18.617069+0000 gpu01 kernel: nvidia 0000:17:00.0: 63.012 Gb/s available "
     "PCIe bandwidth, limited by 8 GT/s x8 link at 0000:16:00.0 (capable of 126.024 Gb/s with "
     "8 GT/s x16 link)",
     BandwidthLimit("0000:17:00.0", 63.012, 8.0, 8, "0000:16:00.0", 126.024, 8.0, 16)),
    # a link the kernel could not read
    ("pci 0000:02:00.0: 0.000 Gb/s available PCIe bandwidth, limited by Unknown x0 link at "
     "0000:00:1C.0 (capable of 8.000 Gb/s with 5.0 GT/s PCIe x2 link)",
     BandwidthLimit("0000:02:00.0", 0.0, None, 0, "0000:00:1c.0", 8.0, 5.0, 2)),
])  # fmt: skip
def test_bandwidth_line_variants(line, expected):
    assert without_raw(parse_bandwidth_limited(line)) == [expected]


@pytest.mark.parametrize("text", [
    "",
    # full bandwidth: no limit
    "mlx5_core 0000:9c:00.0: 504.112 Gb/s available PCIe bandwidth (32.0 GT/s PCIe x16 link)",
    "available PCIe bandwidth, limited by",
    "0000:9c:00.0: 1 Gb/s available PCIe bandwidth, limited by x8 link at nowhere",
    "0000:9c:00.0: " + "9" * 5000 + " Gb/s available PCIe bandwidth, limited by 8 GT/s x8 link at 0000:00:01.0 (capable of",
    bytes(range(256)).decode("latin-1") * 20 + "available PCIe bandwidth, limited by",
])  # fmt: skip
def test_bandwidth_garbage_never_raises(text):
    assert parse_bandwidth_limited(text) == []


# --- kernel.log, kernel.xid and pcie.bandwidth_limits through bundles ---------------------

IMBUE_LINES = IMBUE.read_text().splitlines()
JOURNAL_OUT = (
    "-- Journal begins at Mon 2024-04-01 00:00:00 UTC, ends at Wed 2024-05-01 10:05:00 UTC. --\n"
    "2024-05-01T08:00:00.000000+0000 gpu01 kernel: Linux version 5.15.0-105-generic\n"
    f"2024-05-01T08:00:18.617069+0000 gpu01 kernel: {IMBUE_LINES[0].split('] ', 1)[1]}\n"
    "2024-05-01T08:00:19.000000+0000 gpu01 kernel: mlx5_core 0000:9d:00.0: 504.112 Gb/s available PCIe bandwidth (32.0 GT/s PCIe x16 link)\n"
    "2024-05-01T09:00:00.000000+0000 gpu01 kernel: pcieport 0000:97:01.0: AER: Corrected error received: 0000:9c:00.0\n"
    "2024-05-01T09:00:00.000001+0000 gpu01 kernel: mlx5_core 0000:9c:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n"
    "2024-05-01T09:58:20.250000+0000 gpu01 kernel: NVRM: Xid (PCI:0000:3b:00): 94, pid=2503421, name=python3, Ch 00000008\n"
    f"2024-05-01T09:59:00.000000+0000 gpu01 kernel: {IMBUE_LINES[0].split('] ', 1)[1]}\n"  # driver reloaded
)


class CountingHost(ObservingHost):
    def __init__(self, inner):
        super().__init__(inner)
        self.runs: list[str] = []

    def seen(self, answer, argv):
        if argv is not None:
            self.runs.append(answer.key)


def test_kernel_log_is_read_once_and_feeds_both_facts(tmp_path):
    BundleBuilder(tmp_path).command(JOURNAL, JOURNAL_OUT).command(["date", "+%s"], f"{int(T0)}\n")
    host = CountingHost(ReplayHost(str(tmp_path)))
    facts = Facts(host)
    log = facts.get(kernel_log)
    kept = [line for line in JOURNAL_OUT.splitlines() if "NVRM" in line or "PCIe bandwidth" in line
            or "AER:" in line]  # fmt: skip
    assert log == KernelLogText("journalctl -k -b --no-pager -o short-iso-precise",
                                "\n".join(kept), True, now_epoch=T0)  # fmt: skip
    assert len(kept) == 5  # not "Linux version", not the "PCIe Bus Error" detail line

    limits = facts.get(bandwidth_limits)
    assert limits.readable and limits.source == log.source
    assert without_raw(limits.limits) == IMBUE_LIMITS[:1]  # the repeat after a reload: once
    assert limits.notes == ()
    xid = facts.get(xid_events)
    assert [(e.xid, e.pci, e.age_s) for e in xid.events] == [(94, "0000:3b:00", 99.75)]
    assert host.runs == ["journalctl -k -b --no-pager -o short-iso-precise", "date +%s"]
    assert [e.key for e in facts.evidence(bandwidth_limits)] == host.runs


def test_bandwidth_limits_from_dmesg_with_the_imbue_capture(tmp_path):
    BundleBuilder(tmp_path).command(JOURNAL, status="not_installed").command(
        ["dmesg"], IMBUE.read_text()
    ).file("/proc/uptime", "20.5 40.0\n")
    facts = Facts(ReplayHost(str(tmp_path)))
    log = facts.get(kernel_log)
    assert (log.source, log.now_monotonic, log.now_epoch) == ("dmesg", 20.5, None)
    limits = facts.get(bandwidth_limits)
    assert without_raw(limits.limits) == IMBUE_LIMITS
    assert len(limits.notes) == 1 and limits.notes[0].startswith("journal not used: ")
    assert facts.get(xid_events).events == ()


def test_bandwidth_limits_note_lines_not_understood(tmp_path):
    out = (
        "2024-05-01T08:00:00.000000+0000 gpu01 kernel: pci 0000:02:00.0: lots of Gb/s available PCIe bandwidth, limited by magic\n"
        f"2024-05-01T08:00:01.000000+0000 gpu01 kernel: {IMBUE_LINES[1].split('] ', 1)[1]}\n"
    )
    BundleBuilder(tmp_path).command(JOURNAL, out).command(["date", "+%s"], f"{int(T0)}\n")
    limits = Facts(ReplayHost(str(tmp_path))).get(bandwidth_limits)
    assert without_raw(limits.limits) == IMBUE_LIMITS[1:]
    assert limits.notes == ("1 bandwidth line(s) not understood",)


def test_unreadable_kernel_log(tmp_path):
    BundleBuilder(tmp_path).command(JOURNAL, status="not_installed").command(
        ["dmesg"],
        stderr="dmesg: read kernel buffer failed: Operation not permitted\n",
        returncode=1,
    )
    facts = Facts(ReplayHost(str(tmp_path)))
    limits = facts.get(bandwidth_limits)
    assert (limits.readable, limits.source, limits.limits) == (False, "", ())
    assert limits.notes == facts.get(kernel_log).notes == facts.get(xid_events).notes
    assert "kernel.dmesg_restrict=1" in limits.notes[-1]


def test_kernel_log_timeout_fails_every_consumer(tmp_path):
    BundleBuilder(tmp_path).command(JOURNAL, status="timeout", timeout_s=10)
    facts = Facts(ReplayHost(str(tmp_path)))
    for consumer in (kernel_log, xid_events, bandwidth_limits):
        with pytest.raises(ProbeFailed, match="did not answer within 10 s"):
            facts.get(consumer)


def test_kept_lines():
    data = (b"a NVRM: x\nnothing\npcieport 0000:00:01.0: AER: y\n"
            b"\xff\xfe 1 Gb/s available PCIe bandwidth (z)\nAER without colon\n")  # fmt: skip
    assert kept_lines(data).split("\n") == [
        "a NVRM: x",
        "pcieport 0000:00:01.0: AER: y",
        "\ufffd\ufffd 1 Gb/s available PCIe bandwidth (z)",
    ]
    assert kept_lines(b"") == "" and len(KEPT_MARKERS) == 4


# --- the topology walk on a hand-built bundle --------------------------------------------

ROOT = "/sys/devices/pci0000:00"
# A GPU and an InfiniBand HCA behind one PCIe switch (upstream port 03:00.0, downstream
# ports 04:10.0 and 04:14.0) on root port 00:03.1; an NVSwitch on its own root port; an
# audio function and the switch's management endpoint that are not worth a check; a
# virtual function without link files. Values are invented, in the kernel's formats.
TOPOLOGY = {
    # address: (real path below ROOT, vendor, device, class, link files or None)
    "0000:00:03.1": ("0000:00:03.1", "8086", "347a", "060400",
                     ("16.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16")),
    "0000:03:00.0": ("0000:00:03.1/0000:03:00.0", "1000", "c030", "060400",
                     ("16.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16")),
    "0000:04:10.0": ("0000:00:03.1/0000:03:00.0/0000:04:10.0", "1000", "c030", "060400",
                     ("32.0 GT/s PCIe", "32.0 GT/s PCIe", "8", "16")),
    "0000:04:14.0": ("0000:00:03.1/0000:03:00.0/0000:04:14.0", "1000", "c030", "060400",
                     ("32.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16")),
    "0000:17:00.0": ("0000:00:03.1/0000:03:00.0/0000:04:10.0/0000:17:00.0", "10de", "2330",
                     "030200", ("32.0 GT/s PCIe", "32.0 GT/s PCIe", "8", "16")),
    "0000:17:00.1": ("0000:00:03.1/0000:03:00.0/0000:04:10.0/0000:17:00.1", "10de", "22ba",
                     "040300", ("32.0 GT/s PCIe", "32.0 GT/s PCIe", "8", "16")),
    "0000:18:00.0": ("0000:00:03.1/0000:03:00.0/0000:04:14.0/0000:18:00.0", "15b3", "1021",
                     "020700", ("32.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16")),
    "0000:18:00.2": ("0000:00:03.1/0000:03:00.0/0000:04:14.0/0000:18:00.2", "15b3", "101e",
                     "020700", None),
    "0000:00:01.0": ("0000:00:01.0", "8086", "347a", "060400",
                     ("Unknown", "8.0 GT/s PCIe", "63", "4")),
    "0000:05:00.0": ("0000:00:01.0/0000:05:00.0", "10de", "22a3", "068000",
                     ("Unknown", "8.0 GT/s PCIe", "63", "4")),
    "0000:06:00.0": ("0000:00:03.1/0000:03:00.0/0000:06:00.0", "1000", "00b2", "058000",
                     ("16.0 GT/s PCIe", "16.0 GT/s PCIe", "1", "1")),
}  # fmt: skip
AER_COR = "RxErr 3\nBadTLP 0\nBadDLLP 1\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 4\n"
AER_ZERO = "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nTOTAL_ERR_{} 0\n"
DRIVERS = {"0000:17:00.0": "nvidia", "0000:18:00.0": "mlx5_core", "0000:18:00.2": "mlx5_core",
           "0000:05:00.0": "nvidia", "0000:00:03.1": "pcieport"}  # fmt: skip


LINK_NAMES = ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width")


def topology_bundle(tmp_path):
    b = BundleBuilder(tmp_path)
    for address, (path, vendor, device, klass, link) in TOPOLOGY.items():
        real = f"{ROOT}/{path}"
        b.link(f"/sys/bus/pci/devices/{address}", f"../../..{real.removeprefix('/sys')}")
        b.file(f"{real}/vendor", f"0x{vendor}\n").file(f"{real}/device", f"0x{device}\n")
        b.file(f"{real}/class", f"0x{klass}\n").file(f"{real}/numa_node", "1\n")
        b.file(f"{real}/local_cpulist", "56-111,168-223\n")
        for name, value in zip(LINK_NAMES, link or (), strict=False):  # None: no link files
            b.file(f"{real}/{name}", f"{value}\n")
        if link is not None and not klass.startswith("0604"):
            b.file(f"{real}/aer_dev_correctable", AER_COR)
            b.file(f"{real}/aer_dev_nonfatal", AER_ZERO.format("NONFATAL"))
            b.file(f"{real}/aer_dev_fatal", AER_ZERO.format("FATAL"))
        if address in DRIVERS:
            b.link(f"{real}/driver", f"../../../../bus/pci/drivers/{DRIVERS[address]}")
    return b


def test_topology(tmp_path):
    topology_bundle(tmp_path)
    facts = Facts(ReplayHost(str(tmp_path)))
    links = facts.get(pcie_links)
    assert links.notes == ()
    rows = {link.address: (link.driver, link.current_gts, link.max_gts, link.current_width,
                           link.max_width, link.upstream, link.aer_correctable, link.aer_fatal,
                           link.numa_node, link.local_cpulist)
            for link in links.links}  # fmt: skip
    switch = ("0000:03:00.0", "0000:00:03.1")
    assert rows == {
        "0000:00:01.0": ("", None, 8.0, 63, 4, (), None, None, None, ""),
        "0000:00:03.1": ("", 16.0, 16.0, 16, 16, (), None, None, None, ""),
        "0000:03:00.0": ("", 16.0, 32.0, 16, 16, ("0000:00:03.1",), None, None, None, ""),
        "0000:04:10.0": ("", 32.0, 32.0, 8, 16, switch, None, None, None, ""),
        "0000:04:14.0": ("", 32.0, 32.0, 16, 16, switch, None, None, None, ""),
        "0000:05:00.0": ("nvidia", None, 8.0, 63, 4, ("0000:00:01.0",), 4, 0, 1, "56-111,168-223"),
        "0000:17:00.0": ("nvidia", 32.0, 32.0, 8, 16, ("0000:04:10.0", *switch), 4, 0, 1,
                         "56-111,168-223"),
        "0000:18:00.0": ("mlx5_core", 32.0, 32.0, 16, 16, ("0000:04:14.0", *switch), 4, 0, 1,
                         "56-111,168-223"),
        # a virtual function: no link or AER files, and that is not worth a note
        "0000:18:00.2": ("mlx5_core", None, None, None, None, ("0000:04:14.0", *switch), None,
                         None, 1, "56-111,168-223"),
    }  # fmt: skip
    assert links.get("0000:18:00.2").notes == ()
    gpu = links.get("0000:17:00.0")
    assert (gpu.vendor, gpu.device, gpu.class_code) == ("10de", "2330", "030200")
    assert [link.address for link in links.chain(gpu)] == ["0000:17:00.0", "0000:04:10.0",
                                                          "0000:03:00.0", "0000:00:03.1"]  # fmt: skip
    # The GPU and its switch port both trained at x8; the upstream port at half its rate.
    assert {a for a, r in rows.items() if degraded((r[3], r[4]))} == {
        "0000:04:10.0",
        "0000:17:00.0",
    }
    # A device that stopped answering reads all-ones: noted, not fatal.
    assert links.get("0000:05:00.0").notes == (
        "current_link_speed reads 'Unknown'",
        "current_link_width reads '63': not a PCIe link width",
    )
    # Neither the audio function nor the switch's own endpoint was read beyond vendor,
    # class and device; the ports' drivers, nodes and CPUs were not read either.
    read = {e.key for e in facts.evidence(pcie_links)}
    for address in ("0000:17:00.1", "0000:06:00.0"):
        assert not any(k.startswith(f"/sys/bus/pci/devices/{address}/") and k.rsplit("/", 1)[1]
                       not in ("vendor", "class", "device") for k in read)  # fmt: skip
        assert f"/sys/bus/pci/devices/{address}" not in read
    assert "/sys/bus/pci/devices/0000:00:03.1/driver" not in read
    assert "/sys/bus/pci/devices/0000:04:10.0/numa_node" not in read
    assert "/sys/bus/pci/devices/0000:04:10.0" not in read  # its chain comes from the GPU's


def test_topology_unreadable_file_is_a_note_but_a_timeout_fails(tmp_path):
    topology_bundle(tmp_path).answer(
        "read",
        "/sys/bus/pci/devices/0000:17:00.0/max_link_width",
        status="error",
        error="Invalid argument",
    )
    links = Facts(ReplayHost(str(tmp_path))).get(pcie_links)
    gpu = links.get("0000:17:00.0")
    assert (gpu.current_width, gpu.max_width) == (8, None)
    assert gpu.notes == ("read /sys/bus/pci/devices/0000:17:00.0/max_link_width: Invalid argument",)

    tmp = tmp_path / "timeout"
    topology_bundle(tmp).answer(
        "read",
        "/sys/bus/pci/devices/0000:04:10.0/current_link_width",
        status="timeout",
        timeout_s=5,
    )
    with pytest.raises(ProbeFailed, match="did not answer within 5 s"):
        Facts(ReplayHost(str(tmp))).get(pcie_links)


def test_topology_odd_links(tmp_path):
    # A bus entry that does not point at a folder named after the device: its ports are
    # unknown. A port missing from the bus listing: noted and left out.
    topology_bundle(tmp_path).answer(
        "link", "/sys/bus/pci/devices/0000:18:00.0", target="../../../devices/platform/hca0"
    )
    (tmp_path / "files/sys/bus/pci/devices/0000:00:01.0").unlink()
    links = Facts(ReplayHost(str(tmp_path))).get(pcie_links)
    assert links.get("0000:18:00.0").upstream == ()
    assert links.get("0000:18:00.2").upstream == ("0000:04:14.0", "0000:03:00.0", "0000:00:03.1")
    assert links.get("0000:04:14.0") is not None  # still reached through the VF
    assert links.get("0000:05:00.0").upstream == ("0000:00:01.0",)
    assert links.get("0000:00:01.0") is None
    assert links.notes == (
        "0000:18:00.0: ports above unknown "
        "(/sys/bus/pci/devices/0000:18:00.0 -> ../../../devices/platform/hca0)",
        "0000:00:01.0: a port above a device, but not in /sys/bus/pci/devices",
    )


def test_no_bus(tmp_path):
    BundleBuilder(tmp_path)
    links = Facts(ReplayHost(str(tmp_path))).get(pcie_links)
    assert (links.readable, links.links) == (False, ())
    assert links.notes == ("/sys/bus/pci/devices: missing",)
