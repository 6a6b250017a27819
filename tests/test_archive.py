"""`.tar.gz` bundles: packed by write_archive, and read by `--from` as untrusted input.

Every hostile archive goes through the real CLI with TMPDIR pointed at a fresh folder:
refused with one line on stderr and exit 4, that folder empty afterwards, and the file the
archive aimed at (outside it) never created.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from dldoctor.snapshots.archive import MAX_BYTES, MAX_MEMBERS, open_bundle, write_archive
from dldoctor.snapshots.bundle import BundleError
from tests.support.archives import member
from tests.support.cli import report_of, run_dldoctor
from tests.support.cpu import children_cpu_s
from tests.support.paths import HOSTS

HEALTHY = HOSTS / "hgx-h100x8-healthy"


def findings(proc: subprocess.CompletedProcess) -> list[dict]:
    # Timings differ run to run; everything else must be identical.
    return [{k: v for k, v in f.items() if k != "duration_s"} for f in report_of(proc)["findings"]]


def tar_gz(path: Path, members) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    path.write_bytes(gzip.compress(buf.getvalue()))
    return path


# A real bundle to wrap the hostile member in: the refusal is about that member alone.
BASE = [member("b", tarfile.DIRTYPE), member("b/files/proc/mdstat", data=b"Personalities : \n")]


def test_path_traversal_is_refused_and_its_target_never_written(tmp_path, refused):
    # Extracted in tmp/dldoctor-bundle-XXXX/, ../../escaped.txt would land in tmp_path.
    archive = tar_gz(tmp_path / "a.tar.gz", [*BASE, member("../../escaped.txt", data=b"x")])
    refused(archive, "member '../../escaped.txt' leaves the archive")
    assert not (tmp_path / "escaped.txt").exists()


def test_a_dotdot_inside_a_name_is_refused(tmp_path, refused):
    archive = tar_gz(tmp_path / "a.tar.gz", [*BASE, member("b/files/../../../x", data=b"x")])
    refused(archive, "leaves the archive (a '..' in its name)")


def test_absolute_name_is_refused(tmp_path, refused):
    target = tmp_path / "absolute.txt"
    archive = tar_gz(tmp_path / "a.tar.gz", [*BASE, member(str(target), data=b"x")])
    refused(archive, f"member {str(target)!r} has an absolute name")
    assert not target.exists()


@pytest.mark.parametrize(
    "name, target",
    [
        ("b/files/etc", "../../../../etc"),  # relative, climbing above the top folder
        ("b/commands", "/etc"),  # absolute outside files/: means this machine's /etc
        ("b/files/x", "../.."),  # to the folder that holds the top folder
    ],
)
def test_symlink_out_is_refused(tmp_path, refused, name, target):
    archive = tar_gz(tmp_path / "a.tar.gz", [*BASE, member(name, tarfile.SYMTYPE, linkname=target)])
    refused(archive, f"symbolic link {name!r} points outside the bundle ({target!r})")


def test_a_member_under_a_link_is_refused_never_written_through_it(tmp_path, refused):
    # files/out -> / is legitimate (it means the bundle's own root); writing
    # files/out/<tmp_path>/through.txt through it would land on this machine.
    through = tmp_path / "through.txt"
    archive = tar_gz(
        tmp_path / "a.tar.gz",
        [*BASE, member("b/files/out", tarfile.SYMTYPE, linkname="/"),
         member(f"b/files/out{through}", data=b"x")],
    )  # fmt: skip
    refused(archive, "lies under a symbolic link")
    assert not through.exists()


def test_hard_link_is_refused(tmp_path, refused):
    link = member("b/files/etc/shadow", tarfile.LNKTYPE, linkname="/etc/shadow")
    refused(tar_gz(tmp_path / "a.tar.gz", [*BASE, link]), "'b/files/etc/shadow' is a hard link")


def test_device_file_is_refused(tmp_path, refused):
    dev = member("b/files/dev/mem", tarfile.CHRTYPE, devmajor=1, devminor=1)
    refused(tar_gz(tmp_path / "a.tar.gz", [*BASE, dev]), "'b/files/dev/mem' is a device file")


def test_fifo_member_is_refused(tmp_path, refused):
    fifo = member("b/files/proc/meminfo", tarfile.FIFOTYPE)
    refused(tar_gz(tmp_path / "a.tar.gz", [*BASE, fifo]), "'b/files/proc/meminfo' is a FIFO")


def test_decompression_bomb_is_stopped_at_its_header(tmp_path):
    """1 GiB and 1 MiB of zeros in a ~1 MiB file. Built as concatenated gzip members (one
    compressed MiB repeated: gzip readers must accept that), so the test is fast. Run
    with a 16 MiB limit on the size of any file it writes: a reader that extracted first
    and counted later would fail with 'File too large' instead of the cap."""
    size = MAX_BYTES + (1 << 20)
    header = tarfile.TarInfo("b/files/zeros")
    header.size = size
    mib = gzip.compress(bytes(1 << 20), compresslevel=9)
    head = gzip.compress(tarfile.TarInfo("b").tobuf() + header.tobuf(), compresslevel=9)
    tail = gzip.compress(bytes(1024 + (-size) % 512))
    archive = tmp_path / "bomb.tar.gz"
    with open(archive, "wb") as f:
        f.write(head)
        for _ in range(size >> 20):
            f.write(mib)
        f.write(tail)
    assert archive.stat().st_size < 2 * 1024 * 1024
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()

    def limit_writes():
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))

    cpu_before = children_cpu_s()
    proc = subprocess.run(
        [sys.executable, "-m", "dldoctor", "--from", str(archive), "--json"],
        capture_output=True, text=True, timeout=60, preexec_fn=limit_writes,
        env={**os.environ, "DLDOCTOR_NO_PLUGINS": "1", "TMPDIR": str(tmpdir)},
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr == (
        f"dldoctor: {archive}: archive refused: its members hold more than {MAX_BYTES} bytes "
        "uncompressed\n"
    )
    assert list(tmpdir.iterdir()) == []
    # Refused at the header: the gigabyte of zeros is never inflated (CPU work, so CPU time).
    assert children_cpu_s() - cpu_before < 15


def test_too_many_members_is_refused(tmp_path, refused):
    # tarfile takes seconds for 100,000 headers: one template, its name and checksum
    # patched (the checksum is the sum of the header's bytes, its own field as spaces).
    template = tarfile.TarInfo("b/000000").tobuf(tarfile.USTAR_FORMAT)
    blank = template[:148] + b" " * 8 + template[156:]
    blocks = [tarfile.TarInfo("b").tobuf(tarfile.USTAR_FORMAT)]
    for i in range(MAX_MEMBERS + 1):
        block = blank[:2] + b"%06d" % i + blank[8:]
        blocks.append(block[:148] + b"%06o\0 " % sum(block) + block[156:])
    archive = tmp_path / "many.tar.gz"
    archive.write_bytes(gzip.compress(b"".join(blocks) + bytes(1024), compresslevel=1))
    with tarfile.open(archive) as tar:  # the patched headers are valid ones
        assert [tar.next().name for _ in range(3)] == ["b", "b/000000", "b/000001"]
    refused(archive, f"archive refused: more than {MAX_MEMBERS} members")


@pytest.fixture(scope="module")
def healthy_archive(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("packed") / "healthy.tar.gz"
    write_archive(str(HEALTHY), str(path))
    return path.read_bytes()


def test_corrupted_gzip_is_refused(tmp_path, refused, healthy_archive):
    data = bytearray(healthy_archive)
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0x5A for b in data[middle : middle + 64])
    archive = tmp_path / "corrupt.tar.gz"
    archive.write_bytes(bytes(data))
    refused(archive, "corrupted gzip")


def test_a_bad_crc_is_refused(tmp_path, refused, healthy_archive):
    # The deflate data intact, only the CRC-32 in the trailer wrong: found at the end.
    data = bytearray(healthy_archive)
    data[-8] ^= 0xFF
    archive = tmp_path / "crc.tar.gz"
    archive.write_bytes(bytes(data))
    refused(archive, "corrupted gzip: CRC check failed")


def test_truncated_archive_is_refused(tmp_path, refused, healthy_archive):
    archive = tmp_path / "short.tar.gz"
    archive.write_bytes(healthy_archive[: len(healthy_archive) // 2])
    refused(archive, "truncated archive: the gzip stream ends early")


def test_a_tar_cut_at_a_member_boundary_is_refused(tmp_path, refused):
    # A whole gzip stream around a tar without its end blocks: tarfile alone ends quietly.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in BASE:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    archive = tmp_path / "cut.tar.gz"
    archive.write_bytes(gzip.compress(buf.getvalue()[: 3 * 512]))
    refused(archive, "truncated archive: no end-of-archive marker")


def test_not_gzip_behind_a_tar_gz_name_is_refused(tmp_path, refused):
    archive = tmp_path / "plain.tar.gz"
    archive.write_bytes(b"not an archive\n")
    refused(archive, "not a gzip file")


def with_manifest(dest: Path) -> Path:
    """A copy of the healthy host with the full manifest `dldoctor snapshot` writes."""
    shutil.copytree(HEALTHY, dest, symlinks=True)
    files = {
        p.relative_to(dest).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(dest.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
    manifest = {"format": "dldoctor-bundle", "format_version": 1, "created": "2026-11-30T04:21:46Z",
                "tool": {"name": "dldoctor", "version": "0"}, "argv": [], "files": files}  # fmt: skip
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return dest


def test_hash_mismatch_refuses_an_archive_but_only_warns_for_a_directory(tmp_path, refused):
    bundle = with_manifest(tmp_path / "bundle")
    (bundle / "files/proc/meminfo").write_text("MemTotal: 1 kB\n")  # damaged after hashing
    archive = tmp_path / "damaged.tar.gz"
    write_archive(str(bundle), str(archive))
    refused(archive, "archive damaged: 1 member(s) differ from its manifest: 'files/proc/meminfo'")
    # A directory is hand-editable: a warning, and the replay goes on (as before).
    proc = run_dldoctor("--from", str(bundle), "--json")
    assert proc.returncode in (0, 1, 3), proc.stderr
    assert "differ from its manifest (edited by hand?): files/proc/meminfo" in proc.stderr


def test_an_intact_manifest_passes_and_the_archive_replays_like_the_directory(tmp_path):
    bundle = with_manifest(tmp_path / "bundle")
    archive = tmp_path / "intact.tar.gz"
    write_archive(str(bundle), str(archive))
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    from_archive = run_dldoctor("--from", str(archive), "--json", env={"TMPDIR": str(tmpdir)})
    assert from_archive.stderr == ""
    assert findings(from_archive) == findings(run_dldoctor("--from", str(bundle), "--json"))
    assert list(tmpdir.iterdir()) == []  # the extracted copy is removed at exit


def test_the_healthy_fixture_packed_replays_to_the_same_findings(tmp_path, healthy_archive):
    archive = tmp_path / "x.tar.gz"
    archive.write_bytes(healthy_archive)
    packed = run_dldoctor("--from", str(archive), "--json")
    direct = run_dldoctor("--from", str(HEALTHY), "--json")
    assert packed.returncode == direct.returncode == 0, packed.stderr
    assert len(findings(packed)) > 40
    assert findings(packed) == findings(direct)


def test_a_gzip_bundle_is_known_by_its_bytes_not_its_name(tmp_path, healthy_archive):
    archive = tmp_path / "bundle.bin"
    archive.write_bytes(healthy_archive)
    proc = run_dldoctor("--from", str(archive), "--json")
    assert proc.returncode == 0, proc.stderr
    assert findings(proc) == findings(run_dldoctor("--from", str(HEALTHY), "--json"))


def test_write_archive_layout_is_fixed_and_reproducible(tmp_path):
    bundle = with_manifest(tmp_path / "bundle")
    os.symlink("/etc", bundle / "commands" / "out")  # would be refused: not packed
    os.mkfifo(bundle / "files" / "fifo")  # not a regular file: not packed
    first, second = tmp_path / "one" / "snap.tar.gz", tmp_path / "two" / "snap.tar.gz"
    for dest in (first, second):
        dest.parent.mkdir()
        write_archive(str(bundle), str(dest))
    assert first.read_bytes() == second.read_bytes()
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["snap.tar.gz"]
    with tarfile.open(first) as tar:
        infos = tar.getmembers()
    names = [i.name for i in infos]
    assert names[0] == "snap" and all(n.startswith("snap/") for n in names[1:])
    assert "snap/commands/out" not in names and "snap/files/fifo" not in names
    assert {(i.uid, i.gid, i.uname, i.gname) for i in infos} == {(0, 0, "", "")}
    created = datetime.datetime(2026, 11, 30, 4, 21, 46, tzinfo=datetime.timezone.utc)
    assert {i.mtime for i in infos} == {int(created.timestamp())}  # the manifest's time
    assert {(i.type, i.mode) for i in infos} <= {
        (tarfile.DIRTYPE, 0o755), (tarfile.REGTYPE, 0o644), (tarfile.SYMTYPE, 0o777)}  # fmt: skip
    # sysfs links are kept as links (853 entries in the fixture, all of them packed)
    assert sum(i.issym() for i in infos) > 10
    with pytest.raises(BundleError, match="already exists"):
        write_archive(str(bundle), str(first))


def test_write_archive_leaves_nothing_when_it_fails(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(FileNotFoundError):  # after the temporary file was made
        write_archive(str(tmp_path / "absent"), str(out / "x.tar.gz"))
    assert list(out.iterdir()) == []


def test_an_absolute_link_inside_files_is_kept(tmp_path):
    # The bundle rule: under files/ a link resolves as if files/ were the root.
    archive = tar_gz(
        tmp_path / "a.tar.gz",
        [*BASE, member("b/files/sys/devices/gpu/vendor", data=b"0x10de\n"),
         member("b/files/sys/class/drm/card0", tarfile.SYMTYPE, linkname="/sys/devices/gpu")],
    )  # fmt: skip
    with open_bundle(str(archive)) as root:
        link = Path(root) / "files/sys/class/drm/card0"
        assert os.readlink(link) == "/sys/devices/gpu"
        assert (Path(root) / "files/sys/devices/gpu/vendor").read_bytes() == b"0x10de\n"
        tmp = Path(root).parent  # root is tmp/b: the archive's top folder
        assert os.stat(tmp).st_mode & 0o777 == 0o700
    assert not tmp.exists()


def test_a_fifo_in_a_directory_bundle_does_not_hang_from(tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(HEALTHY, bundle, symlinks=True)
    for rel in ("files/proc/meminfo", "files/proc/mdstat", "commands/ldconfig_-p/stdout"):
        (bundle / rel).unlink(missing_ok=True)
        os.mkfifo(bundle / rel)  # nobody ever writes: an open() without O_NONBLOCK blocks
    proc = run_dldoctor("--from", str(bundle), "--json", timeout=30)
    assert proc.returncode in (0, 1, 3), proc.stderr
    memory = next(f for f in report_of(proc)["findings"] if f["id"] == "system.memory")
    assert memory["status"] in ("error", "skip")


def test_a_fifo_given_as_the_bundle_is_refused_without_blocking(tmp_path):
    plain, named = tmp_path / "pipe", tmp_path / "pipe.tar.gz"
    for fifo in (plain, named):
        os.mkfifo(fifo)
    proc = run_dldoctor("--from", str(plain), "--json", timeout=30)
    assert (proc.returncode, proc.stderr) == (4, f"dldoctor: not a bundle directory: {plain}\n")
    proc = run_dldoctor("--from", str(named), "--json", timeout=30)
    assert proc.returncode == 4
    assert proc.stderr == (
        f"dldoctor: {named}: not a gzip file (a .tar.gz bundle starts with 1f 8b)\n"
    )


def test_a_bad_bundle_inside_an_archive_is_named_by_the_archive(tmp_path, refused):
    bad = [member("b", tarfile.DIRTYPE), member("b/manifest.json", data=b"{not json")]
    line = refused(tar_gz(tmp_path / "a.tar.gz", bad), "manifest.json is not valid JSON")
    assert "dldoctor-bundle-" not in line  # the temporary directory, removed at exit
