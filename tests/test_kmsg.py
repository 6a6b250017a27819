"""Xid events from the kernel log: the parser on real captures (fixtures/corpus/dmesg-xid,
see fixtures/SOURCES.md) and on hand-written lines for each timestamp format, and the
`kernel.xid` fact through replayed bundles."""

from __future__ import annotations

import pytest

from dldoctor.facts import Facts
from dldoctor.facts.xid import XID_CATALOG, XidEvent, parse_kernel_log, xid_events, xid_info
from dldoctor.host.base import ProbeFailed
from dldoctor.host.replay import ReplayHost
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "corpus" / "dmesg-xid"
JOURNAL = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise"]
T0 = 1714557600.0  # 2024-05-01T10:00:00Z


def summary(events: list[XidEvent]) -> list[tuple]:
    return [(e.xid, e.pci, None if e.age_s is None else round(e.age_s, 6)) for e in events]


# --- real captures --------------------------------------------------------------------


def test_dcgm_corpus_bare_lines():
    text = (CORPUS / "dcgm-kmsg-xid119-gsp-timeout-xid43-xid79-fallen-off-bus.txt").read_text()
    events, notes = parse_kernel_log(text, now_monotonic=1000.0, now_epoch=T0)
    # No timestamps in these lines: no age, whatever "now" is.
    assert summary(events) == [
        (119, "0000:00:16", None),
        (43, "0000:01:00", None),
        (79, "0000:2a:00", None),
    ]
    assert events[0].message == (
        "Timeout after 6s of waiting for RPC response from GPU0 GSP! "
        "Expected function 76 (GSP_RM_CONTROL) (0x90cc0301 0xc)."
    )
    assert events[1].message == "Ch 00000018"
    assert events[2].message == "GPU has fallen off the bus"  # pid='<unknown>' left out
    assert events[2].raw == text.splitlines()[2]
    assert [e.kind for e in events] == ["hardware", "application", "hardware"]
    assert events[2].pci_bus_id == "0000:2a:00.0"
    assert notes == []


def test_imbue_corpus_monotonic_stamps():
    text = (CORPUS / "imbue-dmesg-xid94-xid64-row-remapper.txt").read_text()
    events, notes = parse_kernel_log(text, now_monotonic=2397200.0)
    # The two PCIe bandwidth lines are not NVRM lines; the stamps are out of order upstream.
    assert summary(events) == [(94, "0000:0f:00", 33.016907), (64, "0000:0f:00", 33.076051)]
    assert events[0].message == "Ch 00000008"
    assert events[1].message == (
        "Row Remapper Error: (0x00000002eebc4100) - All reserved rows for bank are remapped"
    )
    assert notes == []
    # Without the uptime the stamps give no age.
    assert [e.age_s for e in parse_kernel_log(text)[0]] == [None, None]


# --- timestamp formats (hand-written lines in each tool's documented format) -------------

XID_TAIL = "NVRM: Xid (PCI:0000:3b:00): 48, pid=4242, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU"


@pytest.mark.parametrize("line, now, age", [
    # dmesg (plain): monotonic stamp, age from the uptime
    (f"[ 1234.567890] {XID_TAIL}", {"now_monotonic": 1300.0}, 65.43211),
    (f"[2397166.983093] {XID_TAIL}", {"now_monotonic": 2397167.0}, 0.016907),
    # dmesg --time-format=iso
    (f"2024-05-01T10:00:00,123456+00:00 {XID_TAIL}", {"now_epoch": T0 + 60}, 59.876544),
    # journalctl -o short-iso (older systemd: +0000; newer: +00:00), other zones
    (f"2024-05-01T10:00:00+0000 gpu01 kernel: {XID_TAIL}", {"now_epoch": T0 + 100}, 100.0),
    (f"2024-05-01T10:00:00+00:00 gpu01 kernel: {XID_TAIL}", {"now_epoch": T0 + 100}, 100.0),
    (f"2024-05-01T12:00:00+0200 gpu01 kernel: {XID_TAIL}", {"now_epoch": T0 + 100}, 100.0),
    (f"2024-05-01T05:30:00-0430 gpu01 kernel: {XID_TAIL}", {"now_epoch": T0 + 100}, 100.0),
    (f"2024-05-01T10:00:00Z gpu01 kernel: {XID_TAIL}", {"now_epoch": T0 + 100}, 100.0),
    # journalctl -o short-iso-precise
    (f"2024-05-01T10:00:00.500000+0000 gpu01 kernel: {XID_TAIL}", {"now_epoch": T0 + 100}, 99.5),
    # journalctl -o short-monotonic
    (f"[ 1234.567890] gpu01 kernel: {XID_TAIL}", {"now_monotonic": 1300.0}, 65.43211),
    # syslog file (kern.log): no year, but the printk stamp inside is monotonic
    (f"May  1 10:00:00 gpu01 kernel: [ 1234.567890] {XID_TAIL}", {"now_monotonic": 1300.0}, 65.43211),
    # a bare line has no age
    (XID_TAIL, {"now_monotonic": 1300.0, "now_epoch": T0}, None),
    # a stamp of the other kind than the "now" given: no age
    (f"[ 1234.567890] {XID_TAIL}", {"now_epoch": T0}, None),
    (f"2024-05-01T10:00:00+0000 gpu01 kernel: {XID_TAIL}", {"now_monotonic": 1300.0}, None),
    # date +%s has whole seconds: a line a fraction of a second "ahead" is age 0
    (f"2024-05-01T10:00:00.700000+0000 gpu01 kernel: {XID_TAIL}", {"now_epoch": T0}, 0.0),
])  # fmt: skip
def test_timestamp_formats(line, now, age):
    events, notes = parse_kernel_log(line, **now)
    assert len(events) == 1
    event = events[0]
    assert (event.xid, event.pci, event.raw) == (48, "0000:3b:00", line)
    assert event.message.startswith("An uncorrectable double bit error")
    assert event.age_s == (None if age is None else pytest.approx(age, abs=1e-6))
    assert notes == []


def test_stamp_without_zone_or_valid_date_gives_no_age_and_a_note():
    text = (
        f"2024-05-01T10:00:00 gpu01 kernel: {XID_TAIL}\n"
        f"2024-13-45T99:00:00+0000 gpu01 kernel: {XID_TAIL}\n"
    )
    events, notes = parse_kernel_log(text, now_epoch=T0)
    assert [e.age_s for e in events] == [None, None]
    assert notes == ["2 line(s) have a timestamp without a usable date or zone"]


def test_stamp_later_than_now_gives_no_age_and_a_note():
    events, notes = parse_kernel_log(f"[ 5000.0] {XID_TAIL}", now_monotonic=100.0)
    assert events[0].age_s is None
    assert len(notes) == 1 and "later than the log was read" in notes[0]


@pytest.mark.parametrize("line, xid, pci, message", [
    # old drivers: no "PCI:" (format as on public forum posts; hand-written here)
    ("[ 4909.922970] NVRM: Xid (0000:01:00): 13, 0005 00000000 0000502d 00000104 00000000 00000100",
     13, "0000:01:00", "0005 00000000 0000502d 00000104 00000000 00000100"),
    # pid without name (row remapper, format as in NVIDIA's documentation)
    ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
     63, "0000:10:1c", "Row Remapper: New row marked for remapping, reset gpu to activate."),
    # MIG: a GPU instance inside the parentheses (hand-written; the exact form may vary)
    ("NVRM: Xid (PCI:0000:07:00 GPU-I:05): 43, pid=77, name=train, Ch 00000008",
     43, "0000:07:00", "Ch 00000008"),
    # Xid 154 says what the GPU needs
    ("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
     154, "0000:3b:00", "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"),
    # just the number
    ("NVRM: Xid (PCI:0000:b3:00.0): 79", 79, "0000:b3:00.0", ""),
])  # fmt: skip
def test_xid_line_variants(line, xid, pci, message):
    events, notes = parse_kernel_log(line)
    assert [(e.xid, e.pci, e.message) for e in events] == [(xid, pci, message)]
    assert notes == []


# --- the Xid-less "has fallen off the bus" message ------------------------------------

# The driver prints it as three lines (nv_printf with embedded newlines); the text here is
# hand-written after that format string.
FALLEN_3 = (
    "[ 1843.308145] NVRM: The NVIDIA GPU 0000:3b:00.0\n"
    "[ 1843.308145] NVRM: (PCI ID: 10de:20b0) installed in this system has\n"
    "[ 1843.308145] NVRM: fallen off the bus and is not responding to commands.\n"
)
FALLEN_MESSAGE = (
    "The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:20b0) installed in this system has "
    "fallen off the bus and is not responding to commands."
)


def test_fallen_off_the_bus_multi_line_is_one_event():
    events, notes = parse_kernel_log(FALLEN_3, now_monotonic=1900.0)
    assert len(events) == 1
    event = events[0]
    assert (event.xid, event.pci, event.pci_bus_id) == (None, "0000:3b:00.0", "0000:3b:00.0")
    assert event.message == FALLEN_MESSAGE
    assert event.age_s == pytest.approx(56.691855)
    assert event.raw == FALLEN_3.rstrip("\n")
    assert event.kind == "hardware" and "fallen off the bus" in event.description
    assert notes == []


def test_fallen_off_the_bus_journal_continuation_lines_take_the_first_stamp():
    # journalctl indents the later lines of a multi-line message.
    text = (
        "2024-05-01T10:00:00.000000+0000 gpu01 kernel: NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "                                              NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "                                              NVRM: fallen off the bus and is not responding to commands.\n"
    )
    events, _ = parse_kernel_log(text, now_epoch=T0 + 30)
    assert summary(events) == [(None, "0000:b3:00.0", 30.0)]


def test_fallen_off_the_bus_single_line_and_without_pci_id():
    text = (
        "NVRM: The NVIDIA GPU 0000:05:00.0 installed in this system has fallen off the bus and is not responding to commands.\n"
        "NVRM: The NVIDIA GPU 0000:06:00.0\n"
        "NVRM: installed in this system has\n"
        "NVRM: fallen off the bus and is not responding to commands.\n"
    )
    events, _ = parse_kernel_log(text)
    assert summary(events) == [(None, "0000:05:00.0", None), (None, "0000:06:00.0", None)]


def test_fallen_off_the_bus_next_to_xid_79_for_the_same_gpu_is_the_same_event():
    # The block newer drivers print (hand-written after its format).
    text = (
        "[ 100.0] NVRM: GPU at PCI:0000:3b:00: GPU-8a2b3c4d-0000-1111-2222-333344445555\n"
        "[ 100.0] NVRM: GPU Board Serial Number: 1650123456789\n"
        "[ 100.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=2210, name=python3, GPU has fallen off the bus.\n"
        "[ 100.0] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
        "[ 100.0] NVRM: GPU 0000:3b:00.0: GPU serial number is 1650123456789.\n"
        "[ 100.1] NVRM: A GPU crash dump has been created. If possible, please run\n"
        "[ 100.1] NVRM: nvidia-bug-report.sh as root to collect this data before\n"
        "[ 100.1] NVRM: the NVIDIA kernel module is unloaded.\n"
    ) + FALLEN_3.replace("1843.308145", "101.0")
    events, notes = parse_kernel_log(text, now_monotonic=200.0)
    assert summary(events) == [(79, "0000:3b:00", 100.0)]
    assert events[0].message == "GPU has fallen off the bus."
    assert notes == []


def test_fallen_off_the_bus_of_another_gpu_or_far_away_is_its_own_event():
    other = FALLEN_3.replace("0000:3b:00.0", "0000:5e:00.0")
    xid79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
    events, _ = parse_kernel_log(xid79 + other)
    assert [(e.xid, e.pci) for e in events] == [(79, "0000:3b:00"), (None, "0000:5e:00.0")]
    filler = "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n" * 12
    events, _ = parse_kernel_log(xid79 + filler + FALLEN_3)
    assert [(e.xid, e.pci) for e in events] == [(79, "0000:3b:00"), (None, "0000:3b:00.0")]


def test_other_messages_about_a_gpu_are_not_events():
    text = (
        "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1c03)\n"
        "NVRM: installed in this system is not supported by the\n"
        "NVRM: NVIDIA 470.xx driver release.\n"
        "NVRM: GPU at PCI:0000:3b:00: GPU-8a2b3c4d-0000-1111-2222-333344445555\n"
        "NVRM: GPU Board Serial Number: 1650123456789\n"
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
        "pcieport 0000:00:01.0: AER: fallen off the bus (not an NVRM line)\n"
    )
    assert parse_kernel_log(text) == ([], [])


# --- odd input ------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "",
    "\n\n\r\n",
    "NVRM",
    "NVRM: Xid",
    "NVRM: Xid (PCI:zz:zz): 13, x",
    "NVRM: Xid (PCI:0000:3b:00): not-a-number",
    "[ 12.5 NVRM: Xid (PCI:0000:3b:00",
    "\x00\xff NVRM: Xid \ufffd\ufffd (",
    "NVRM: The NVIDIA GPU 0000:3b:00.0\n" + "NVRM: x\n" * 3,
    "[" * 10000 + " NVRM: Xid (" + ")" * 10000,
    bytes(range(256)).decode("latin-1") * 20,
    "NVRM: Xid (PCI:0000:3b:00): " + "9" * 5000 + ", past int()'s digit limit",
])  # fmt: skip
def test_garbage_never_raises(text):
    events, notes = parse_kernel_log(text, now_monotonic=10.0, now_epoch=T0)
    assert events == [] and isinstance(notes, list)


def test_unrecognised_xid_lines_are_noted_and_capped():
    text = "NVRM: Xid (garbage): 13, x\n" * 7 + "NVRM: Xid (PCI:0000:3b:00): 13, ok\n"
    events, notes = parse_kernel_log(text)
    assert [e.xid for e in events] == [13]
    assert len(notes) == 6 and notes[-1] == "... and 2 more unrecognised Xid lines"


def test_catalog_kinds():
    required = {13, 31, 32, 38, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95,
                109, 119, 120, 121, 140, 154}  # fmt: skip
    assert required <= set(XID_CATALOG)
    for xid in (48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 154):
        assert XID_CATALOG[xid][0] == "hardware", xid
    for xid in (13, 31, 43, 45, 68, 69):
        assert XID_CATALOG[xid][0] == "application", xid
    assert all(kind in ("hardware", "application", "driver") for kind, _, _ in XID_CATALOG.values())
    assert xid_info(99999)[0] == "unknown"


# --- the fact through replayed bundles ------------------------------------------------

# Hand-written journal and dmesg outputs in the formats of the commands the fact runs.
JOURNAL_OUT = (
    "-- Journal begins at Mon 2024-04-01 00:00:00 UTC, ends at Wed 2024-05-01 10:05:00 UTC. --\n"
    "2024-05-01T08:00:00.000000+0000 gpu01 kernel: Linux version 5.15.0-105-generic\n"
    "2024-05-01T09:58:20.250000+0000 gpu01 kernel: NVRM: Xid (PCI:0000:3b:00): 94, pid=2503421, name=python3, Ch 00000008\n"
    "2024-05-01T09:58:20.300000+0000 gpu01 kernel: NVRM: Xid (PCI:0000:3b:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x0000000000000042) marked for remapping, reset gpu to activate.\n"
    "2024-05-01T09:59:00.000000+0000 gpu01 kernel: NVRM: The NVIDIA GPU 0000:86:00.0\n"
    "                                              NVRM: (PCI ID: 10de:2330) installed in this system has\n"
    "                                              NVRM: fallen off the bus and is not responding to commands.\n"
)
DMESG_OUT = (
    "[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007)\n"
    "[   12.345678] nvidia: loading out-of-tree module taints kernel.\n"
    "[ 5000.500000] NVRM: Xid (PCI:0000:3b:00): 31, pid=991, name=python3, Ch 00000010, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f4c_8a000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n"
    "[ 5100.000000] NVRM: Xid (PCI:0000:5e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
)


def replay(path):
    facts = Facts(ReplayHost(str(path)))
    return facts, facts.get(xid_events)


def keys(facts):
    return [(e.op, e.key, e.status) for e in facts.evidence(xid_events)]


def test_fact_reads_the_journal_with_ages_from_the_hosts_clock(tmp_path):
    BundleBuilder(tmp_path).command(JOURNAL, JOURNAL_OUT).command(["date", "+%s"], f"{int(T0)}\n")
    facts, log = replay(tmp_path)
    assert log.readable and log.source == "journalctl -k -b --no-pager -o short-iso-precise"
    assert summary(list(log.events)) == [
        (94, "0000:3b:00", 99.75),
        (63, "0000:3b:00", 99.7),
        (None, "0000:86:00.0", 60.0),
    ]
    assert log.notes == ()
    assert keys(facts) == [
        ("run", "journalctl -k -b --no-pager -o short-iso-precise", "ok"),
        ("run", "date +%s", "ok"),
    ]


def test_fact_without_nvrm_lines_asks_for_nothing_else(tmp_path):
    out = "2024-05-01T08:00:00.000000+0000 gpu01 kernel: Linux version 5.15.0\n"
    BundleBuilder(tmp_path).command(JOURNAL, out)
    facts, log = replay(tmp_path)
    assert (log.readable, log.events, log.notes) == (True, (), ())
    assert [k for _, k, _ in keys(facts)] == ["journalctl -k -b --no-pager -o short-iso-precise"]


def test_fact_journal_without_a_clock_gives_no_ages(tmp_path):
    BundleBuilder(tmp_path).command(JOURNAL, JOURNAL_OUT)  # `date` not recorded
    _, log = replay(tmp_path)
    assert [e.age_s for e in log.events] == [None, None, None]
    assert len(log.notes) == 1 and "clock could not be read" in log.notes[0]


def dmesg_bundle(tmp_path, **journal):
    builder = BundleBuilder(tmp_path)
    if journal:
        builder.command(JOURNAL, **journal)
    return builder.command(["dmesg"], DMESG_OUT).file("/proc/uptime", "5200.25 81234.50\n")


@pytest.mark.parametrize("journal, why", [
    ({"status": "not_installed"}, "command not installed"),
    ({}, "missing"),  # not in the bundle at all
    ({"stderr": "No journal files were found.\n", "returncode": 1},
     "exited with status 1: No journal files were found."),
    ({"stdout": "-- No entries --\n",
      "stderr": "Hint: You are currently not seeing messages from other users and the system.\n"},
     "no kernel messages for this boot (Hint: You are currently not seeing messages"),
    ({"stderr": "Failed to open journal: Permission denied\n", "returncode": 1},
     "Permission denied"),
])  # fmt: skip
def test_fact_falls_back_to_dmesg(tmp_path, journal, why):
    dmesg_bundle(tmp_path, **journal)
    facts, log = replay(tmp_path)
    assert log.readable and log.source == "dmesg"
    assert summary(list(log.events)) == [(31, "0000:3b:00", 199.75), (79, "0000:5e:00", 100.25)]
    assert log.events[0].message.startswith("Ch 00000010, intr 10000000. MMU Fault")
    assert len(log.notes) == 1 and log.notes[0].startswith("journal not used: ")
    assert why in log.notes[0]
    assert [k for _, k, _ in keys(facts)][1:] == ["dmesg", "/proc/uptime"]


def test_fact_dmesg_without_uptime_gives_no_ages(tmp_path):
    BundleBuilder(tmp_path).command(JOURNAL, status="not_installed").command(["dmesg"], DMESG_OUT)
    _, log = replay(tmp_path)
    assert [e.age_s for e in log.events] == [None, None]
    assert "uptime could not be read" in log.notes[-1]


def test_fact_dmesg_restricted_is_unreadable(tmp_path):
    BundleBuilder(tmp_path).command(JOURNAL, status="not_installed").command(
        ["dmesg"],
        stderr="dmesg: read kernel buffer failed: Operation not permitted\n",
        returncode=1,
    )
    _, log = replay(tmp_path)
    assert (log.readable, log.source, log.events) == (False, "", ())
    assert log.notes[-1] == (
        "dmesg not read: `dmesg` exited with status 1: dmesg: read kernel buffer failed: "
        "Operation not permitted (kernel.dmesg_restrict=1: run as root or with CAP_SYSLOG)"
    )


def test_fact_nothing_recorded_is_unreadable(tmp_path):
    BundleBuilder(tmp_path)
    _, log = replay(tmp_path)
    assert (log.readable, log.events) == (False, ())
    assert log.notes == ("journal not used: `journalctl -k -b --no-pager -o short-iso-precise`: missing",
                         "dmesg not read: `dmesg`: missing")  # fmt: skip


@pytest.mark.parametrize("build", [
    lambda b: b.command(JOURNAL, status="timeout", timeout_s=10),
    lambda b: b.command(JOURNAL, status="not_installed").command(["dmesg"], status="timeout", timeout_s=10),
    lambda b: b.command(JOURNAL, JOURNAL_OUT).command(["date", "+%s"], status="timeout", timeout_s=10),
])  # fmt: skip
def test_fact_timeouts_raise(tmp_path, build):
    build(BundleBuilder(tmp_path))
    with pytest.raises(ProbeFailed, match="did not answer within 10 s"):
        replay(tmp_path)
