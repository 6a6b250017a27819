"""Memory and time stay bounded in every mode, with every tool misbehaving at once.

Live (`--check`, `snapshot`): every tool a fact or a snapshot extra runs prints without
end, prints binary garbage without end, or hangs (tests/support/faults.misbehaving_tools), all in
the same run. Replay (`--from`) and `diff`: a bundle whose commands answered with a 1 GiB
sparse stdout, 20 MiB of binary garbage, or a timeout, and whose `osrelease` is 1 GiB
(tests/support/faults.misbehaving_bundle). Each run must peak at most 100 MiB of resident memory
(dldoctor's VmHWM, polled while it runs; its children are `yes`, `cat` and `sleep`), end
within its deadline and a margin, leave no process behind and write its report.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from dldoctor.cli import SNAPSHOT_WRITE_SHARE
from dldoctor.facts import Facts
from dldoctor.facts.reading import SMALL
from dldoctor.facts.system import kernel
from dldoctor.host.base import MAX_READ_BYTES, OutputBudget
from dldoctor.host.live import LiveHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import DETAIL_CHARS, MAX_DETAILS, SUMMARY_CHARS, Outcome, Status
from dldoctor.policy import Policy
from dldoctor.registry import CheckSpec
from dldoctor.runner import run_check
from dldoctor.snapshots.take import EXTRAS
from tests.support.bugreports import SEPARATOR, constructed_sections
from tests.support.commands import fake_command
from tests.support.faults import SPARSE_BYTES, misbehaving_bundle
from tests.support.marks import DEADLINES
from tests.support.measuring import measured
from tests.support.paths import HOSTS
from tests.support.processes import MARK, TOOLS, left_behind

pytestmark = DEADLINES

SOURCE = HOSTS / "hgx-h100x8-raid-degraded"
PEAK_MIB = 100
DEADLINE = 8
# Redacting and packing a bundle takes seconds on a loaded machine (the third of the
# deadline snapshot keeps for it: cli.SNAPSHOT_WRITE_SHARE).
SNAPSHOT_DEADLINE = 20


def bounded(elapsed: float, peak_mib: float, err: bytes) -> None:
    """Memory stayed under its cap, and the run ended by itself: neither the watchdog nor the
    backstop had to end it past its deadline (each says so on stderr, "... past the
    deadline"). The time is printed, not asserted: a loaded machine makes it longer."""
    print(f"took {elapsed:.1f} s, peak {peak_mib:.0f} MiB")  # the figures, with pytest -s
    assert peak_mib <= PEAK_MIB, f"peak RSS {peak_mib:.0f} MiB"
    assert b"past the deadline" not in err, err


def report_of(out: bytes) -> dict[str, dict]:
    return {f["id"]: f for f in json.loads(out)["findings"]}


def sparse_root(tmp_path: Path) -> Path:
    """The fixture host's files, with a 1 GiB sparse `osrelease`: a live read has a cap too."""
    root = tmp_path / "root"
    shutil.copytree(SOURCE / "files", root, symlinks=True)
    with open(root / "proc" / "sys" / "kernel" / "osrelease", "wb") as f:
        f.truncate(SPARSE_BYTES)
    return root


def test_check_with_every_tool_misbehaving(tmp_path):
    code, elapsed, peak, out, err = measured(
        tmp_path, "--check", "--json", "--timeout", "2", "--deadline", str(DEADLINE),
        "--root", str(sparse_root(tmp_path)),
    )  # fmt: skip
    bounded(elapsed, peak, err)
    assert code in (1, 3), err
    assert report_of(out)["storage.raid"]["status"] == "fail"  # sysfs still answered


def test_snapshot_with_every_tool_misbehaving(tmp_path):
    bundle = tmp_path / "bundle.tar.gz"
    code, elapsed, peak, out, err = measured(
        tmp_path, "snapshot", "--timeout", "2", "--deadline", str(SNAPSHOT_DEADLINE),
        "--root", str(sparse_root(tmp_path)), "-o", str(bundle),
    )  # fmt: skip
    bounded(elapsed, peak, err)
    assert code == 0, err
    assert out.decode().strip() == str(bundle) and bundle.is_file()


def test_replay_of_a_bundle_of_misbehaving_tools(tmp_path):
    bundle = misbehaving_bundle(SOURCE, tmp_path / "bundle")
    code, elapsed, peak, out, err = measured(
        tmp_path, "--check", "--json", "--deadline", str(DEADLINE), "--from", str(bundle)
    )
    bounded(elapsed, peak, err)
    assert code in (1, 3), err
    assert len(out) < 4 << 20, f"a report of {len(out)} bytes"
    assert report_of(out)["storage.raid"]["status"] == "fail"


def test_diff_of_bundles_of_misbehaving_tools(tmp_path):
    a = misbehaving_bundle(SOURCE, tmp_path / "a")
    b = misbehaving_bundle(HOSTS / "hgx-h100x8-healthy", tmp_path / "b")
    code, elapsed, peak, out, err = measured(tmp_path, "diff", "--json", str(a), str(b))
    bounded(elapsed, peak, err)
    assert code == 1, err  # the degraded array is one of the differences
    assert "storage.raid" in out.decode()


def test_snapshot_extras_end_with_the_checks_and_leave_time_to_write(tmp_path):
    # Every tool hung, and a command timeout longer than the deadline: the extras that no
    # check needs (journalctl, dmidecode, ...) must end with the checks, so that the bundle
    # is written before the deadline instead of the watchdog ending the run without one.
    deadline = 15
    bindir = tmp_path / "hung"
    bindir.mkdir()
    for tool in sorted({*TOOLS, *(argv[0] for argv in EXTRAS)}):
        fake_command(bindir, tool, "exec sleep 600")
    mark = uuid.uuid4().hex
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "DLDOCTOR_NO_PLUGINS": "1",
           "XDG_CONFIG_HOME": str(tmp_path / "config"), MARK: mark}  # fmt: skip
    bundle = tmp_path / "bundle"
    proc = subprocess.run(
        [sys.executable, "-m", "dldoctor", "snapshot", "--dir", "--no-redact", "--timeout",
         "300", "--deadline", str(deadline), "--root", str(SOURCE / "files"), "-o", str(bundle)],
        capture_output=True, env=env, timeout=deadline + 60,
    )  # fmt: skip
    assert not left_behind(mark)
    # Written by the run itself (exit 0), not cut off by the watchdog (exit 3, no bundle).
    assert proc.returncode == 0, proc.stderr
    extra = json.loads((bundle / "commands" / "dmidecode_-t_system_-t_bios" / "command.json")
                       .read_text())  # fmt: skip
    assert extra["status"] == "timeout"
    assert extra["timeout_s"] <= deadline * (1 - SNAPSHOT_WRITE_SHARE), extra


def test_a_finding_quotes_at_most_a_line_of_what_a_check_echoes():
    release = "6." + "9" * (16 << 20)  # a 16 MiB osrelease, as a check would quote it

    line = "9" * 3 * DETAIL_CHARS

    def echo(facts, policy):
        return Outcome(Status.FAIL, f"kernel {release} is too old", (line,) * 1000)

    spec = CheckSpec("site.echo", "Echo", "system", echo, remediation=release)
    finding = run_check(spec, Facts(ReplayHost(str(SOURCE))), Policy())
    # Each measured before anything is serialised: uncut, 1000 lines are 6 MB, and the
    # 16 MiB remediation and summary are in every rendering.
    assert len(finding.summary) < SUMMARY_CHARS + 100
    assert finding.summary.startswith("kernel 6.999")
    assert finding.summary.endswith(f"({len(release) + 18 - SUMMARY_CHARS} more characters)")
    assert len(finding.remediation) < DETAIL_CHARS + 100
    assert len(finding.details) == MAX_DETAILS + 1
    assert all(len(text) < DETAIL_CHARS + 100 for text in finding.details)
    assert finding.details[-1] == f"... ({1000 - MAX_DETAILS} more lines)"
    assert len(json.dumps(finding.to_dict())) < (MAX_DETAILS + 3) * (DETAIL_CHARS + 100)


def test_a_gzip_bomb_is_refused_before_it_is_held(tmp_path):
    # 300 MiB of zeros from 300 KiB: refused when the count passes the cap, not after
    # holding the 256 MiB it passed (peak 280 MiB).
    member = gzip.compress(b"\0" * (1 << 20), compresslevel=9, mtime=0)
    bomb = tmp_path / "nvidia-bug-report.log.gz"
    bomb.write_bytes(member * 300)
    code, elapsed, peak, out, err = measured(tmp_path, "--check", "--json", "--from", str(bomb))
    bounded(elapsed, peak, err)
    assert code == 4 and out == b""
    assert b"inflates past 256 MiB (the cap on a log)" in err and err.count(b"\n") == 1, err


def test_a_bug_report_with_a_1_mib_command_line_is_reported_within_the_deadline(tmp_path):
    sections = constructed_sections()
    sections.insert(-1, f"{SEPARATOR}\n\n/usr/bin/nvidia-smi {'x' * (1 << 20)}\n\noutput\n\n")
    log = tmp_path / "nvidia-bug-report.log"
    log.write_text("".join(sections))
    code, elapsed, peak, out, err = measured(
        tmp_path, "--check", "--json", "--deadline", str(DEADLINE), "--from", str(log)
    )
    bounded(elapsed, peak, err)
    assert code in (1, 3), err
    assert report_of(out)["gpu.driver.loaded"]["status"] != "error"  # its nvidia-smi -q


def test_a_bundle_folder_of_30000_entries_is_refused_by_its_size(tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(SOURCE, bundle, symlinks=True)
    devices = bundle / "files" / "sys" / "bus" / "pci" / "devices"
    for i in range(30_000 - len(os.listdir(devices))):
        (devices / f"{0x10 + i // 8192:04x}:{i // 32 % 256:02x}:{i % 32:02x}.0").mkdir()
    code, elapsed, peak, out, err = measured(
        tmp_path, "--check", "--json", "--deadline", str(DEADLINE), "--from", str(bundle)
    )
    bounded(elapsed, peak, err)
    assert code in (1, 3), err
    width = report_of(out)["pci.link.width"]
    assert width["status"] == "error"
    assert width["summary"] == (
        "list /sys/bus/pci/devices: 30000 entries, more than the 10000 read of a folder"
    )


def test_a_live_read_has_a_cap(tmp_path):
    root = sparse_root(tmp_path)
    host = LiveHost(str(root))
    assert len(host.read("/proc/sys/kernel/osrelease").value) == MAX_READ_BYTES
    assert len(Facts(host).get(kernel).release) <= SMALL  # the size its fact needs


def test_replayed_commands_share_one_output_budget(tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(SOURCE, bundle, symlinks=True)
    for folder in (bundle / "commands").iterdir():
        (folder / "stdout").write_bytes(b"x" * 1000)
    host = ReplayHost(str(bundle))
    host.output_budget = OutputBudget(2500)  # two outputs' worth, and half of a third
    said = [host.run(["getconf", "GNU_LIBC_VERSION"]), host.run(["numactl", "--show"]),
            host.run(["date", "+%s"]), host.run(["ldconfig", "-p"])]  # fmt: skip
    assert [a.status for a in said] == ["ok", "ok", "error", "error"]
    assert said[2].error == (
        "commands/date_+_s: the commands of this bundle hold more than 2500 bytes between "
        "them, the most kept"
    )
    assert host.output_budget.left == 500  # the refused ones took nothing


def test_a_tool_that_prints_15_mib_of_garbage_once_is_stopped_at_its_facts_cap(tmp_path):
    # Under the 16 MiB cap of any command, a parser made 151 MiB (getconf) and 216 MiB (the
    # Python probe) of it: each program's output is capped at what its fact reads.
    garbage = tmp_path / "garbage"
    garbage.write_bytes(os.urandom(15 << 20))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("python3", "getconf"):
        fake_command(bindir, tool, f"cat {garbage}")
    code, elapsed, peak, out, err = measured(
        tmp_path, "--check", "--json", "--only", "system.python,system.libc",
        "--deadline", str(DEADLINE), bindir=bindir,
    )  # fmt: skip
    bounded(elapsed, peak, err)
    assert code == 3, err  # a probe that failed says nothing of the host
    found = report_of(out)
    assert {found[c]["status"] for c in ("system.python", "system.libc")} == {"error"}
    assert "truncated at 4096 bytes" in json.dumps(found["system.libc"])
