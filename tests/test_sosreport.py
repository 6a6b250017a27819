"""`dldoctor --from` a sos report (docs/foreign-inputs.md).

The committed report (a real `sos report` of this project's machine, `sos clean`ed,
tests/fixtures/SOURCES.md) replays with its known verdicts; what sos did not collect is a
`skip` naming it, never a verdict; hostile archives are refused as dldoctor's own bundles
are; and where root and sos are here, a real `sos report` gives the live verdicts.
"""

from __future__ import annotations

import contextlib
import fnmatch
import gzip
import io
import json
import lzma
import os
import shutil
import struct
import subprocess
import tarfile
import zlib
from pathlib import Path

import pytest

from dldoctor.host.sosreport import SosReportHost, mangle, mdadm_section
from dldoctor.snapshots.archive import MAX_FOREIGN_MEMBERS, XZ, open_archive
from dldoctor.snapshots.bundle import BundleError
from tests.support.archives import member
from tests.support.bundlebuilder import BundleBuilder
from tests.support.cli import findings_of, report_of, run_dldoctor
from tests.support.make_sos_fixture import TRIM
from tests.support.paths import FIXTURES, TESTS

FIXTURE = FIXTURES / "foreign" / "sos" / "sosreport-host0-2026-12-01-hsxafrq.tar.xz"
GOLDEN = TESTS / "golden" / "foreign" / "sosreport-host0-2026-12-01-hsxafrq.json"
MDADM = FIXTURES / "corpus" / "mdadm-detail"
UNCAPTURED = "not in this sos report ("
JOURNAL = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise"]
JOURNAL_KEY = " ".join(JOURNAL)


def findings(proc: subprocess.CompletedProcess) -> dict[str, tuple[str, str]]:
    return {f["id"]: (f["status"], f["summary"]) for f in report_of(proc)["findings"]}


def check(*args: str) -> subprocess.CompletedProcess:
    proc = run_dldoctor("--check", "--json", *args)
    assert proc.stderr == "", proc.stderr
    return proc


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory) -> Path:
    """The committed report as the folder `sos report` leaves before it compresses."""
    dest = tmp_path_factory.mktemp("sos")
    with open_archive(str(FIXTURE), XZ, host_root="", max_members=MAX_FOREIGN_MEMBERS) as root:
        shutil.copytree(root, dest / os.path.basename(root), symlinks=True)
        return dest / os.path.basename(root)


@pytest.fixture
def tree(unpacked, tmp_path) -> Path:
    """A copy of the report for one test to change."""
    return Path(shutil.copytree(unpacked, tmp_path / unpacked.name, symlinks=True))


def edit_manifest(tree: Path, change) -> None:
    path = tree / "sos_reports" / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest["components"]["report"]["plugins"])
    path.write_text(json.dumps(manifest))


# --- the committed report -------------------------------------------------------------


def test_committed_report_replays_with_its_known_verdicts():
    proc = run_dldoctor("--check", "--json", "--from", str(FIXTURE))
    assert proc.stderr == "", proc.stderr
    report = report_of(proc)
    found = {
        "exit_code": proc.returncode,
        "host": {k: report["host"][k] for k in ("hostname", "os", "kernel", "source")},
        "verdicts": {f["id"]: [f["status"], f["summary"]] for f in report["findings"]},
    }
    if os.environ.get("DLDOCTOR_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(found, indent=2, ensure_ascii=False) + "\n")
    assert found == json.loads(GOLDEN.read_text())
    # The header names the source; `sos clean`'s pseudonym is kept, never undone.
    assert found["host"]["source"] == "sos report 4.0 of host0, collected 2026-12-01 17:39"
    assert found["host"]["hostname"] == "host0"


def test_judged_checks_rest_on_what_sos_collected():
    report = report_of(check("--from", str(FIXTURE)))
    judged = {f["id"]: f for f in findings_of(report) if not f["summary"].startswith(UNCAPTURED)}
    assert {"system.os.release", "system.kernel.version", "system.memory", "cpu.inventory",
            "numa.topology", "numa.balancing", "pci.bandwidth_limited"} <= set(judged)  # fmt: skip
    assert all(f["status"] == "pass" for i, f in judged.items() if i.startswith("system."))
    # The kernel version comes from sysctl -a (sos copies no /proc/sys/kernel/osrelease).
    assert judged["system.kernel.version"]["summary"].startswith("6.18.44-fc-v857 ")
    # journalctl's absence is excused: dmesg, its fallback, was captured.
    for f in judged.values():
        gaps = {e["key"] for e in f["evidence"] if e["status"] == "not_captured"}
        assert gaps <= {JOURNAL_KEY}, f["id"]


def test_every_uncaptured_skip_names_an_answer_sos_did_not_collect():
    report = report_of(check("--from", str(FIXTURE)))
    skipped = [f for f in findings_of(report) if f["summary"].startswith(UNCAPTURED)]
    assert len(skipped) > 30
    for f in skipped:
        assert f["status"] == "skip", f["id"]
        gaps = [e["key"] for e in f["evidence"] if e["status"] == "not_captured"]
        assert any(key.lower() in f["summary"].lower() for key in gaps), (f["id"], gaps)
    by_id = {f["id"]: f["summary"] for f in skipped}
    assert by_id["storage.nvme"] == (
        "not in this sos report (/sys/class/nvme, not captured by any sos plugin)"
    )
    # NVML, then `nvidia-smi -q -x`, then the `-q` text: the last source tried is the reason.
    assert by_id["gpu.driver.loaded"] == (
        "not in this sos report (plugin nvidia, command `nvidia-smi -q`, not captured)"
    )
    assert by_id["system.libc"] == (
        "not in this sos report (command `getconf GNU_LIBC_VERSION`, not captured by any sos plugin)"
    )


def test_folder_tar_xz_and_tar_gz_give_the_same_verdicts(unpacked, tmp_path):
    from_xz = findings(check("--from", str(FIXTURE)))
    gz = tmp_path / "sosreport-host0-2026-12-01-hsxafrq.tar.gz"  # sos report -z gzip
    with tarfile.open(gz, "w:gz") as tar:
        tar.add(unpacked, unpacked.name)
    assert findings(check("--from", str(gz))) == from_xz
    assert findings(check("--from", str(unpacked))) == from_xz


def test_host_answers_by_what_sos_collected(unpacked):
    host = SosReportHost(str(unpacked))
    assert host.plugins == {"filesys", "host", "kernel", "md", "memory", "numa", "pci",
                            "processor", "release"}  # fmt: skip
    assert host.read("/proc/meminfo").value == (unpacked / "proc/meminfo").read_bytes()
    uname = (unpacked / "sos_commands/kernel/uname_-a").read_text().split()
    assert host.read("/proc/sys/kernel/osrelease").value == f"{uname[2]}\n".encode()
    assert host.read("/proc/sys/kernel/hostname").value == b"host0\n"
    expected = {
        ("read", "/proc/mdstat"): "missing",  # the md plugin ran: this host has no md driver
        ("read", "/proc/sys/kernel/no_such_key"): "missing",  # sysctl -a lists every key
        ("read", "/proc/self/limits"): "not_captured",
        ("read", "/sos_commands/kernel/dmesg"): "not_captured",  # sos's own, no host path
        ("list", "/sys/devices/system/node"): "ok",
        ("list", "/sys/class/net"): "not_captured",  # the networking plugin did not run
        ("list", "/sys/bus/pci/devices"): "not_captured",
        ("link", "/proc/self"): "ok",
        ("run", "dmesg"): "ok",
        ("run", JOURNAL_KEY): "not_captured",
        ("run", "mdadm --detail /dev/md0"): "not_installed",  # `mdadm -D /dev/md*`: exit 127
        ("run", "numactl --show"): "not_installed",
        ("run", "nvcc --version"): "not_captured",
        ("statvfs", "/"): "not_captured",
        ("probe", "nvml"): "not_captured",
    }
    asked = {
        "read": host.read,
        "list": host.listdir,
        "link": host.readlink,
        "run": lambda key: host.run(key.split()),
        "statvfs": host.statvfs,
        "probe": host.probe,
    }
    assert {(op, key): asked[op](key).status for op, key in expected} == expected
    assert host.run(["dmesg"]).value.stdout == (unpacked / "sos_commands/kernel/dmesg").read_bytes()
    assert host.listdir("/sys/class/net").error == (
        "not in this sos report (plugin networking, /sys/class/net, not captured)"
    )
    assert host.run(JOURNAL).error == (
        f"not in this sos report (plugin logs, command `{JOURNAL_KEY}`, not captured)"
    )


def test_a_plugin_that_did_not_run_leaves_its_paths_uncaptured(tree):
    edit_manifest(tree, lambda plugins: plugins.pop("md"))
    raid = findings(check("--from", str(tree)))["storage.raid"]
    assert raid == ("skip", "not in this sos report (plugin md, /proc/mdstat, not captured)")


def test_cpu_folders_sos_did_not_copy_are_not_read_as_absent(tree):
    # sos >= 4.12 copies 64 cpuN folders by default; the host's `present` says how many
    # it had (here: a report of 2 CPUs holding one).
    shutil.rmtree(tree / "sys/devices/system/cpu/cpu1")
    host = SosReportHost(str(tree))
    why = ("not in this sos report (plugin processor, 1 of the 2 /sys/devices/system/cpu/cpuN "
           "folders: its max_cpu_dirs option, not captured)")  # fmt: skip
    assert host.listdir("/sys/devices/system/cpu").error == why
    assert host.read("/sys/devices/system/cpu/cpu1/online").error == why
    assert host.read("/sys/devices/system/cpu/cpu0/online").status == "missing"  # x86's cpu0
    assert host.read("/sys/devices/system/cpu/cpu0/topology/core_id").text == "0\n"
    assert findings(check("--from", str(tree)))["cpu.inventory"] == ("skip", why)


def test_a_report_without_manifest_is_read_by_its_file_names(tree):
    (tree / "sos_reports" / "manifest.json").unlink()  # sos < 4.0
    host = SosReportHost(str(tree))
    assert host.version == "4.0" and "md" in host.plugins  # from version.txt
    assert host.run(["dmesg"]).value.stdout == (tree / "sos_commands/kernel/dmesg").read_bytes()
    assert host.read("/proc/mdstat").status == "missing"


def test_sos_file_names_are_mangled_command_lines(unpacked):
    """The outputs the report's manifest lists are named as `mangle` names them, but for
    a name a plugin suggests; where sos clean rewrote the manifest's path, the file kept
    the mangled name."""
    manifest = json.loads((unpacked / "sos_reports/manifest.json").read_text())

    def named(c: dict) -> str:
        return f"{os.path.dirname(c['filepath'])}/{mangle(c['exec'])}"

    outputs = [
        c
        for p in manifest["components"]["report"]["plugins"].values()
        for c in p["commands"]
        if c["filepath"]
        and not any(fnmatch.fnmatch(n, t) for t in TRIM for n in (named(c), c["filepath"]))
    ]
    assert len(outputs) > 20
    suggested, rewritten = [], []
    for c in outputs:
        if named(c) != c["filepath"]:
            (suggested if (unpacked / c["filepath"]).is_file() else rewritten).append(c["exec"])
        assert (unpacked / c["filepath"]).is_file() or (unpacked / named(c)).is_file()
    assert (suggested, rewritten) == (["lsb_release -d"], ["dumpe2fs -h /dev/vda"])
    assert SosReportHost(str(unpacked)).run(["dumpe2fs", "-h", "/dev/vda"]).status == "ok"


def test_mdadm_details_are_cut_from_sos_mdadm_D(tree):
    md0 = (MDADM / "insights-mdadm-d-content-md0.txt").read_text()
    md2 = (MDADM / "insights-mdadm-d-content-md2.txt").read_text()
    out = tree / "sos_commands/md/mdadm_-D_.dev.md"
    out.parent.mkdir()
    out.write_text(md0.rstrip("\n") + "\n" + md2)

    def listed(plugins):
        (record,) = plugins["md"]["commands"]
        record.update(filepath="sos_commands/md/mdadm_-D_.dev.md", return_code=1)

    edit_manifest(tree, listed)
    host = SosReportHost(str(tree))
    answer = host.run(["mdadm", "--detail", "/dev/md2"])
    assert (answer.status, answer.value.returncode, answer.text) == ("ok", 0, md2)
    assert host.run(["mdadm", "--detail", "/dev/md0"]).text.strip() == md0.strip()
    missing = host.run(["mdadm", "--detail", "/dev/md9"])
    assert missing.status == "not_captured" and "no section for /dev/md9" in missing.error
    assert mdadm_section(md2, "/dev/md2") == md2


def test_snapshot_turns_a_sos_report_into_a_bundle_with_the_same_verdicts(tmp_path):
    bundle = tmp_path / "case.tar.gz"
    proc = run_dldoctor("snapshot", "--from", str(FIXTURE), "-o", str(bundle))
    assert proc.returncode == 0, proc.stderr
    from_sos = findings(check("--from", str(FIXTURE)))
    from_bundle = findings(check("--from", str(bundle)))
    assert {i: s for i, (s, _) in from_bundle.items()} == {i: s for i, (s, _) in from_sos.items()}
    assert {i: f for i, f in from_bundle.items() if f[1].startswith(UNCAPTURED)} == {
        i: f for i, f in from_sos.items() if f[1].startswith(UNCAPTURED)
    }
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        answers = json.load(tar.extractfile(next(n for n in names if n.endswith("answers.json"))))
    assert answers["read"]["/proc/self/limits"]["status"] == "not_captured"


# --- a dldoctor bundle that holds not_captured answers (a converted sos report) -------


def test_a_declared_fallback_that_was_captured_keeps_the_verdict(tmp_path):
    why = f"not in this sos report (plugin logs, command `{JOURNAL_KEY}`, not captured)"
    BundleBuilder(tmp_path).command(JOURNAL, status="not_captured", error=why).command(
        ["dmesg"], "[    1.000000] Linux version 6.1\n"
    )
    verdicts = findings(check("--from", str(tmp_path), "--only", "pci.bandwidth_limited"))
    assert verdicts == {
        "pci.bandwidth_limited": ("pass", "the kernel reported no PCIe bandwidth limits this boot")
    }


def test_a_fallback_not_captured_either_skips_with_both_reasons(tmp_path):
    why = f"not in this sos report (plugin logs, command `{JOURNAL_KEY}`, not captured)"
    dmesg_why = "not in this sos report (plugin kernel, command `dmesg`, not captured)"
    BundleBuilder(tmp_path).command(JOURNAL, status="not_captured", error=why).command(
        ["dmesg"], status="not_captured", error=dmesg_why
    )
    report = report_of(check("--from", str(tmp_path), "--only", "pci.bandwidth_limited"))
    (finding,) = report["findings"]
    # The journal was replaced by dmesg (the fact's fallback); dmesg, not there either, is why.
    assert (finding["status"], finding["summary"]) == ("skip", dmesg_why)
    assert why not in finding["details"]


# --- hostile archives, refused as bundles are (tests/test_archive.py) ----------------

TOP = "sosreport-evil-2026-01-01-abcdefg"
BASE = [
    member(TOP, tarfile.DIRTYPE),
    member(f"{TOP}/sos_commands", tarfile.DIRTYPE),
    member(f"{TOP}/version.txt", data=b"sosreport: 4.5\n"),
]


def tar_xz(path: Path, members) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    path.write_bytes(lzma.compress(buf.getvalue(), format=lzma.FORMAT_XZ))
    return path


@pytest.mark.parametrize(
    "hostile, message",
    [
        (member("../../escaped.txt", data=b"x"), "member '../../escaped.txt' leaves the archive"),
        (member(f"{TOP}/etc/../../../x", data=b"x"), "leaves the archive (a '..' in its name)"),
        (member(f"{TOP}/etc/shadow", tarfile.SYMTYPE, linkname="../../../../etc/shadow"),
         f"symbolic link '{TOP}/etc/shadow' points outside the bundle"),
        (member(f"{TOP}/etc/passwd", tarfile.LNKTYPE, linkname="/etc/passwd"), "is a hard link"),
        (member(f"{TOP}/dev/mem", tarfile.CHRTYPE, devmajor=1, devminor=1), "is a device file"),
        (member(f"{TOP}/proc/meminfo", tarfile.FIFOTYPE), "is a FIFO"),
    ],
)  # fmt: skip
def test_hostile_members_are_refused(tmp_path, refused, hostile, message):  # noqa: F811
    refused(tar_xz(tmp_path / "evil.tar.xz", [*BASE, hostile]), message)
    assert not (tmp_path / "escaped.txt").exists()


def test_a_member_under_a_link_is_refused_never_written_through_it(tmp_path, refused):  # noqa: F811
    # proc/self -> / is a host path inside the report; writing through it would land here.
    through = tmp_path / "through.txt"
    archive = tar_xz(tmp_path / "evil.tar.xz", [
        *BASE, member(f"{TOP}/proc/self", tarfile.SYMTYPE, linkname="/"),
        member(f"{TOP}/proc/self{through}", data=b"x"),
    ])  # fmt: skip
    refused(archive, "lies under a symbolic link")
    assert not through.exists()


def test_an_absolute_link_in_a_report_stays_inside_it(tmp_path):
    # sos mirrors the host: /etc/mtab -> /proc/self/mounts means the report's own file.
    archive = tar_xz(tmp_path / "sos.tar.xz", [
        *BASE, member(f"{TOP}/sos_commands/kernel/dmesg", tarfile.SYMTYPE, linkname="/etc/hostname"),
        member(f"{TOP}/etc/hostname", data=b"inside\n"),
    ])  # fmt: skip
    with contextlib.ExitStack() as stack:
        root = stack.enter_context(open_archive(str(archive), XZ, host_root=""))
        assert SosReportHost(root).run(["dmesg"]).value.stdout == b"inside\n"


def test_an_xz_bomb_is_refused_at_its_header(tmp_path, refused):  # noqa: F811
    """1 GiB and 1 MiB of zeros declared, in concatenated xz streams (one compressed MiB
    repeated: xz readers accept that) of a few hundred KB."""
    from dldoctor.snapshots.archive import MAX_BYTES

    size = MAX_BYTES + (1 << 20)
    header = tarfile.TarInfo(f"{TOP}/zeros")
    header.size = size
    mib = lzma.compress(bytes(1 << 20), format=lzma.FORMAT_XZ)
    archive = tmp_path / "bomb.tar.xz"
    with open(archive, "wb") as f:
        f.write(lzma.compress(tarfile.TarInfo(TOP).tobuf() + header.tobuf(), format=lzma.FORMAT_XZ))
        for _ in range(size >> 20):
            f.write(mib)
        f.write(lzma.compress(bytes(1024 + (-size) % 512), format=lzma.FORMAT_XZ))
    assert archive.stat().st_size < 1 << 20
    refused(archive, f"archive refused: its members hold more than {MAX_BYTES} bytes uncompressed")


def test_an_xz_dictionary_past_the_memory_limit_is_refused(tmp_path, refused):  # noqa: F811
    # The LZMA2 filter's dictionary byte, patched to 1 GiB (its header CRC updated): the
    # decoder would allocate that before the first byte.
    data = bytearray(tar_xz(tmp_path / "small.tar.xz", BASE).read_bytes())
    size = (data[12] + 1) * 4
    at = data.index(b"\x21\x01", 12) + 2
    data[at] = 36
    data[12 + size - 4 : 12 + size] = struct.pack("<I", zlib.crc32(bytes(data[12 : 12 + size - 4])))
    (tmp_path / "dict.tar.xz").write_bytes(bytes(data))
    refused(tmp_path / "dict.tar.xz", "corrupted xz: Memory usage limit exceeded")


def test_a_truncated_xz_is_refused(tmp_path, refused):  # noqa: F811
    data = tar_xz(tmp_path / "full.tar.xz", [*BASE, member(f"{TOP}/x", data=os.urandom(4096))])
    (tmp_path / "cut.tar.xz").write_bytes(data.read_bytes()[:-200])
    refused(tmp_path / "cut.tar.xz", "truncated archive: the xz stream ends early")


def test_the_member_cap_applies(tmp_path):
    archive = tar_xz(tmp_path / "many.tar.xz", [*BASE, member(f"{TOP}/a"), member(f"{TOP}/b")])
    with pytest.raises(BundleError, match="archive refused: more than 4 members"):
        with open_archive(str(archive), XZ, host_root="", max_members=4):
            pass


def test_an_xz_archive_that_is_not_a_sos_report_is_refused(tmp_path, refused):  # noqa: F811
    archive = tar_xz(tmp_path / "other.tar.xz", [member("b", tarfile.DIRTYPE),
                                                 member("b/files/x", data=b"x")])  # fmt: skip
    refused(archive, "not a sos report: no sos_commands/ and sos_reports/ folders")


def test_a_fifo_in_a_report_folder_answers_an_error_without_blocking(tree):
    fifo = tree / "sos_commands/kernel/dmesg"
    fifo.unlink()
    os.mkfifo(fifo)
    host = SosReportHost(str(tree))
    answer = host.run(["dmesg"])
    assert answer.status == "error" and "not a file" in answer.error


def test_link_loops_in_a_report_folder_are_answers_not_crashes(tree):
    shutil.rmtree(tree / "sos_reports")
    os.symlink("sos_reports", tree / "sos_reports")  # the manifest behind a loop
    shutil.rmtree(tree / "sos_commands/host")
    os.symlink("host", tree / "sos_commands/host")  # the host name behind another
    os.symlink("loop", tree / "proc/loop")
    host = SosReportHost(str(tree))
    assert host.describe() == "sos report 4.0 of host0"  # from the folder's name
    assert host.read("/proc/loop/x").status == "error"
    proc = run_dldoctor("--check", "--json", "--from", str(tree))
    assert proc.returncode in (0, 1) and proc.stderr == "", proc.stderr
    assert report_of(proc)["host"]["source"] == "sos report 4.0 of host0"


# --- a real sos report of this machine -----------------------------------------------

LIVE_PLUGINS = "kernel,pci,hardware,processor,memory,block,md,filesys,networking,process"


def _sos_unavailable() -> str:
    if os.geteuid() != 0:
        return "sos report needs root (CI runs the suite as root)"
    if shutil.which("sos") is None:
        return "sos is not installed (apt-get install sosreport)"
    return ""


@pytest.mark.sos
@pytest.mark.skipif(bool(_sos_unavailable()), reason=_sos_unavailable() or "-")
def test_a_real_sos_report_gives_the_live_verdicts_where_it_holds_the_evidence(tmp_path):
    subprocess.run(["sos", "report", "--batch", "--only-plugins", LIVE_PLUGINS,
                    "--tmp-dir", str(tmp_path)], check=True, capture_output=True, timeout=300)  # fmt: skip
    (archive,) = tmp_path.glob("sosreport-*.tar.xz")
    live = report_of(check())
    sos = report_of(check("--from", str(archive)))
    assert sos["host"]["source"].startswith("sos report ")
    live_status = {f["id"]: f["status"] for f in live["findings"]}
    judged = []
    for f in findings_of(sos):
        gaps = [e for e in f["evidence"] if e["status"] == "not_captured"]
        if f["summary"].startswith(UNCAPTURED):
            assert f["status"] == "skip" and gaps, f["id"]
            continue
        assert f["status"] == live_status[f["id"]], (f["id"], f["summary"])
        judged.append(f["id"])
    assert {"system.kernel.version", "system.memory", "cpu.inventory",
            "pci.bandwidth_limited"} <= set(judged)  # fmt: skip
    # sos clean changes names, never a verdict.
    subprocess.run(["sos", "clean", "--batch", "--no-update", "--tmp-dir", str(tmp_path),
                    str(archive)], check=True, capture_output=True, timeout=300)  # fmt: skip
    (cleaned,) = tmp_path.glob("sosreport-*-obfuscated.tar.xz")
    clean = report_of(check("--from", str(cleaned)))
    assert {f["id"]: f["status"] for f in clean["findings"]} == {
        f["id"]: f["status"] for f in sos["findings"]
    }


def test_gzip_is_still_refused_as_gzip(tmp_path, refused):  # noqa: F811
    # A .tar.gz that is neither a sos report nor a bundle goes to the bundle reader.
    (tmp_path / "bad.tar.gz").write_bytes(gzip.compress(b"not a tar"))
    refused(tmp_path / "bad.tar.gz", "damaged tar archive")
