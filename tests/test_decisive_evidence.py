"""Decisive evidence wins over a missing side source (issue 23, item 7;
docs/foreign-inputs.md, "What a verdict rests on").

A sos report taken without its pci plugin, or an nvidia-bug-report log whose lspci section
was skipped, still holds the kernel log: a fatal SXid, a GPU fallen off the bus or a link
the kernel saw come up at half its width is a verdict there, not a skip "lspci not
captured". The kernel lines are real captures (tests/fixtures/SOURCES.md, corpus/).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from dldoctor.snapshots.archive import MAX_FOREIGN_MEMBERS, XZ, open_archive
from tests.support.bugreports import CORPUS, PROLOGUE, SEPARATOR
from tests.support.bundlebuilder import BundleBuilder
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import FIXTURES, HOSTS

SOS = FIXTURES / "foreign" / "sos" / "sosreport-host0-2026-12-01-hsxafrq.tar.xz"
SXID = CORPUS / "dmesg-sxid" / "gpud-redhat-dmesg-sxid20034-fatal-ltssm-fault-up.txt"
XID = CORPUS / "dmesg-xid" / "dcgm-kmsg-xid119-gsp-timeout-xid43-xid79-fallen-off-bus.txt"
PCIE = CORPUS / "pci" / "imbue-dmesg-pcie-bandwidth-limited-x8-of-x16.txt"
DECIDED = ("gpu.nvswitch.sxid", "gpu.xid", "pci.bandwidth_limited")


def kernel_lines() -> str:
    return "".join(p.read_text().rstrip("\n") + "\n" for p in (SXID, XID, PCIE))


def verdicts(source: Path) -> dict[str, dict]:
    only = [word for check_id in DECIDED for word in ("--only", check_id)]
    proc = run_dldoctor("--check", "--json", "--from", str(source), *only)
    return {f["id"]: f for f in report_of(proc)["findings"]}


def sos_without_pci(tmp_path: Path) -> Path:
    """The committed sos report as if taken with `-n pci`, its dmesg holding the lines."""
    with open_archive(str(SOS), XZ, host_root="", max_members=MAX_FOREIGN_MEMBERS) as root:
        tree = Path(shutil.copytree(root, tmp_path / os.path.basename(root), symlinks=True))
    manifest = tree / "sos_reports" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["components"]["report"]["plugins"].pop("pci")
    manifest.write_text(json.dumps(data))
    shutil.rmtree(tree / "sos_commands" / "pci")
    dmesg = tree / "sos_commands" / "kernel" / "dmesg"
    dmesg.write_text(dmesg.read_text() + kernel_lines())
    return tree


def bug_report_without_lspci(tmp_path: Path, *, nvidia_smi: bool) -> Path:
    """A log in the layout of nvidia-bug-report.sh whose lspci section was skipped (as the
    script writes it when lspci is absent); with or without `nvidia-smi -q` (a report cut
    short by an nvidia-smi that hung on the lost GPU has none)."""
    sections = [PROLOGUE, f"{SEPARATOR}\n\nSkipping: lspci output\nlspci or hexdump not found\n\n"]
    sections.append(f"{SEPARATOR}\n\ndmesg:\n\n{kernel_lines()}\n")
    if nvidia_smi:
        smi = (
            CORPUS
            / "nvidia-smi-q"
            / ("utkuozdemir-linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01-q-idle.txt")
        ).read_text()
        sections.append(f"{SEPARATOR}\n\n/usr/bin/nvidia-smi --query\n\n{smi}\n")
    sections.append(f"{SEPARATOR}\n\nEnd of NVIDIA bug report log file.\n")
    path = tmp_path / "nvidia-bug-report.log.gz"
    path.write_bytes(b"".join(gzip.compress(s.encode(), mtime=0) for s in sections))
    return path


INPUTS = {
    "sos-no-pci-plugin": sos_without_pci,
    "bugreport-no-lspci": lambda tmp: bug_report_without_lspci(tmp, nvidia_smi=True),
    "bugreport-no-lspci-no-nvidia-smi": lambda tmp: bug_report_without_lspci(tmp, nvidia_smi=False),
}


@pytest.fixture(params=sorted(INPUTS))
def foreign(request, tmp_path) -> Path:
    return INPUTS[request.param](tmp_path)


def test_a_fatal_sxid_in_the_kernel_log_fails_without_the_device_list(foreign):
    found = verdicts(foreign)["gpu.nvswitch.sxid"]
    assert found["status"] == "fail", found
    assert "20034 on 0000:a9:00.0" in found["summary"]
    assert (
        "the PCI device list was not captured: the switches are named by the log"
        in found["details"]
    )


def test_a_gpu_fallen_off_the_bus_fails_without_the_device_list(foreign):
    found = verdicts(foreign)["gpu.xid"]
    assert found["status"] == "fail", found
    assert "79" in found["summary"]


def test_a_link_the_kernel_saw_limited_warns_without_the_links(foreign):
    found = verdicts(foreign)["pci.bandwidth_limited"]
    assert found["status"] == "warn", found
    assert "0000:9c:00.0: 252.056 of 504.112 Gb/s" in " ".join(found["details"])
    assert "the PCIe links were not captured" in " ".join(found["details"])


def test_a_quiet_log_without_the_device_list_is_still_no_verdict(tmp_path):
    # The device list decides whether a log without SXid lines means anything: without
    # it, no verdict (a pass here would claim switches that were never seen were healthy).
    tree = sos_without_pci(tmp_path)
    dmesg = tree / "sos_commands" / "kernel" / "dmesg"
    dmesg.write_text(dmesg.read_text().replace(SXID.read_text().rstrip("\n") + "\n", ""))
    found = verdicts(tree)["gpu.nvswitch.sxid"]
    assert found["status"] == "skip"
    assert "not in this sos report" in found["summary"]


def test_events_in_a_journal_without_the_host_s_clock_fail_with_their_age_unknown(tmp_path):
    # A bundle converted from a capture that kept the journal but not `date +%s`: the
    # events are the verdict; only their ages (and so the window) are unknown.
    journal = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise"]
    lines = (HOSTS / "a100x8-remap-pending-xid79" / "commands").glob("journalctl*/stdout")
    BundleBuilder(tmp_path).command(journal, next(lines).read_text()).command(
        ["date", "+%s"], status="not_captured", error="not in this capture (`date +%s`)"
    )
    found = verdicts(tmp_path)["gpu.xid"]
    assert found["status"] == "fail", found
    assert any(line.endswith("time unknown") for line in found["details"])
    assert any("event ages are unknown" in line for line in found["details"])
