"""NVSwitch SXid events: the parser on real captures (fixtures/corpus/dmesg-sxid, see
fixtures/SOURCES.md) and the `gpu.nvswitch.sxid` check on the facts they give."""

from __future__ import annotations

import pytest

from dldoctor.checks import nvswitch
from dldoctor.facts import Facts
from dldoctor.facts.pci import PciBus, PciDevice, pci_devices
from dldoctor.facts.sxid import SxidLog, parse_sxid, sxid_events
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "corpus" / "dmesg-sxid"
REDHAT = (CORPUS / "gpud-redhat-dmesg-sxid20034-fatal-ltssm-fault-up.txt").read_text()
NVSENTINEL = (CORPUS / "nvsentinel-sxid24007-fatal-28006-20009-nonfatal-soe.txt").read_text()
SWITCH = PciDevice("0000:a9:00.0", "10de", "22a3", "068000", "nvidia", 1)
JOURNAL = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise"]


def test_one_event_is_its_header_with_its_severity_and_data_lines():
    events, notes = parse_sxid(REDHAT, now_monotonic=131453.740743 + 3600)
    assert notes == [] and len(events) == 1
    e = events[0]
    assert (e.sxid, e.pci, e.switch, e.severity, e.link, e.message) == (
        20034, "0000:a9:00.0", "nvidia-nvswitch0", "fatal", 30, "LTSSM Fault Up",
    )  # fmt: skip
    assert round(e.age_s, 6) == 3600.0
    assert e.raw == REDHAT.rstrip("\n")  # the Severity and Data lines belong to it
    assert e.verdict == "fatal" and "link went down" in e.description


def test_nvsentinel_lines_severity_from_the_line_soe_lines_say_none():
    events, notes = parse_sxid(NVSENTINEL)
    assert notes == []
    assert [(e.sxid, e.severity, e.link, e.age_s) for e in events] == [
        (28006, "non-fatal", 46, None), (20009, "non-fatal", 4, None), (24007, "fatal", 28, None),
        (26008, "", None, None), (26006, "", None, None), (26007, "", None, None),
        (26006, "", None, None), (20009, "non-fatal", None, None),
        (12033, "", None, None),  # a Severity line whose header was cut off
        (20009, "non-fatal", None, None),
    ]  # fmt: skip
    assert events[4].message == "SOE HALTED" and events[4].verdict == ""
    assert events[2].description == "sourcetrack timeout error"
    assert events[1].description == "RX Short Error Rate"  # not catalogued: the line's words


def test_the_line_decides_and_nvidias_ignorable_sxid_is_ignored():
    text = (
        "[   25.948274] nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Non-fatal, Link 00 "
        "Minion Link DLREQ interrupt\n"
        "[   26.000000] nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 12028, Fatal, Link 32 egress "
        "non-posted PRIV error (First)\n"
    )
    ignorable, fatal = parse_sxid(text)[0]
    assert ignorable.verdict == "ignore"
    assert fatal.verdict == "fatal"  # the catalogue expects 12028 non-fatal; the line says


def test_follow_up_lines_of_interleaved_switches_go_to_their_own_event():
    head = "nvidia-nvswitch{n}: SXid (PCI:0000:00:0{n}.0): 11004, "
    text = "\n".join(
        [head.format(n=1) + "Non-fatal, Link 36 ingress invalid ACL (First)",
         head.format(n=2) + "Non-fatal, Link 42 ingress invalid ACL (First)",
         head.format(n=2) + "Severity 0 Engine instance 42 Sub-engine instance 00",
         head.format(n=1) + "Data {0x00000008}"]
    )  # fmt: skip
    one, two = parse_sxid(text)[0]
    assert one.raw.count("\n") == 1 and "Data" in one.raw
    assert two.raw.count("\n") == 1 and "Severity 0" in two.raw


@pytest.mark.parametrize(
    "text", ["SXid", "SXid (PCI:zz): x", "nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 9" * 50,
             "SXid (PCI:0000:00:00.0): " + "9" * 5000 + ", Fatal", "\x00SXid\xff"],
)  # fmt: skip
def test_garbage_never_raises(text):
    events, notes = parse_sxid(text)
    assert isinstance(events, list) and isinstance(notes, list)


def test_unparsed_sxid_lines_are_noted():
    events, notes = parse_sxid("nvidia-nvswitch0: SXid (PCI:bad): 1, Fatal\n")
    assert events == [] and notes[0].startswith("unrecognised SXid line")


# --- the check ------------------------------------------------------------------------


def outcome(switches=(SWITCH,), text="", now_monotonic=None, readable=True):
    events, notes = parse_sxid(text, now_monotonic=now_monotonic)
    log = SxidLog("dmesg", tuple(events), readable, tuple(notes))
    facts = Facts.given({pci_devices: PciBus(tuple(switches)), sxid_events: log})
    return nvswitch.sxid_errors(facts, Policy())


def test_no_nvswitch_and_no_sxid_lines_skips():
    got = outcome(switches=())
    assert (got.status, got.summary) == (Status.SKIP, "no NVSwitch on the PCI bus")


def test_nvswitches_without_sxid_lines_pass():
    got = outcome()
    assert (got.status, got.summary) == (
        Status.PASS,
        "no SXid errors in the last 72 h on 1 NVSwitch(es) (dmesg)",
    )
    assert outcome(readable=False).summary == "the kernel log is not readable"


def test_a_fatal_sxid_fails_naming_switch_number_meaning_count_and_time():
    got = outcome(text=REDHAT, now_monotonic=131453.740743 + 2 * 3600)
    assert (got.status, got.summary) == (
        Status.FAIL,
        "1 fatal SXid event(s) in the last 72 h: 20034 on 0000:a9:00.0",
    )
    assert got.details == (
        "0000:a9:00.0 (nvidia-nvswitch0): SXid 20034 fatal: LTSSM fault up: the link went "
        "down from active, link 30; 1x, last 2.0 h ago",
    )
    assert got.remediation.startswith("SXid 20034: drain; reset all GPUs and NVSwitches")


def test_non_fatal_and_unclassified_sxids_warn_and_repeats_are_counted():
    text = "\n".join(NVSENTINEL.splitlines()[:2] + NVSENTINEL.splitlines()[3:7])
    got = outcome(text=text)
    assert got.status == Status.WARN
    assert got.summary == (
        "6 SXid event(s) in the last 72 h, none fatal: 28006 on 0000:c1:00.0, 20009 on "
        "0000:06:00.0, 26008 on 0004:00:00.0 and 2 more"
    )
    assert any(
        "SXid 26006 severity not printed: SOE HALTED" in d and "2x" in d for d in got.details
    )


def test_sxids_older_than_the_window_pass_with_a_note():
    got = outcome(text=REDHAT, now_monotonic=131453.740743 + 100 * 3600)
    assert got.status == Status.PASS
    assert got.details == ("1 older SXid event(s) outside the 72 h window",)


def test_sxid_lines_without_a_switch_on_the_bus_are_still_judged():
    got = outcome(switches=(), text=REDHAT)
    assert got.status == Status.FAIL
    assert "no NVSwitch on the PCI bus as read here" in got.details[-1]


def test_fact_reads_sxid_lines_from_the_journal(tmp_path):
    line = ("2024-05-01T09:00:00.000000+0000 hgx kernel: nvidia-nvswitch2: SXid "
            "(PCI:0000:c7:00.0): 24007, Fatal, Link 28 sourcetrack timeout error (First)\n")  # fmt: skip
    b = (
        BundleBuilder(tmp_path / "b")
        .command(JOURNAL, line)
        .command(["date", "+%s"], "1714557600\n")
    )
    log = Facts(ReplayHost(str(b.root))).get(sxid_events)
    assert log.readable and log.source.startswith("journalctl")
    assert [(e.sxid, e.pci, e.age_s) for e in log.events] == [(24007, "0000:c7:00.0", 3600.0)]
