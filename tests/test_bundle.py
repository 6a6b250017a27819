"""Bundles: what a RecordingHost writes, a ReplayHost answers identically; bad bundles
get one-line errors; nothing inside a bundle can reach outside it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

from dldoctor.host import AnswerStatus, LiveHost, RecordingHost
from dldoctor.host.base import Answer
from dldoctor.host.replay import ReplayHost
from dldoctor.snapshots import bundle as bundle_mod
from dldoctor.snapshots.bundle import (
    CONTENTS,
    BundleError,
    BundleReader,
    command_folders,
    write_bundle,
)
from tests.support.bundlebuilder import BundleBuilder
from tests.support.commands import fake_command
from tests.support.cpu import children_cpu_s


def record_sample(tmp_path):
    tree = tmp_path / "tree"
    (tree / "proc").mkdir(parents=True)
    (tree / "proc/mdstat").write_bytes(b"Personalities : [raid1]\n\x00\xff binary ok\n")
    (tree / "sys/class/net/eth0").mkdir(parents=True)
    (tree / "sys/class/net/eth0/mtu").write_text("1500\n")
    os.symlink("../../devices/virtual/net/lo", tree / "sys/class/net/lo")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_command(bindir, "nvidia-smi", 'echo "<xml/>"; echo warn >&2; exit 9')
    fake_command(bindir, "hang", "sleep 60")
    host = RecordingHost(
        LiveHost(
            root=str(tree),
            env={"PATH": f"{bindir}:/usr/bin:/bin"},
            command_timeout=0.3,
            probes={"python": lambda: {"v": "3.12"}},
        )
    )
    calls = [
        lambda h: h.read("/proc/mdstat"),
        lambda h: h.read("/etc/absent"),
        lambda h: h.listdir("/sys/class/net"),
        lambda h: h.listdir("/sys/nothing"),
        lambda h: h.readlink("/sys/class/net/lo"),
        lambda h: h.read("/sys/class/net/eth0/mtu"),
        lambda h: h.run(["nvidia-smi", "-q", "-x"]),
        lambda h: h.run(["hang"]),
        lambda h: h.run(["not-installed-tool"]),
        lambda h: h.probe("python"),
        lambda h: h.probe("nvml"),
    ]
    answers = [call(host) for call in calls]
    return host, calls, answers


def comparable(answer: Answer):
    return (answer.op, answer.key, answer.status, answer.value, answer.timeout_s)


def test_record_write_replay_gives_the_same_answers(tmp_path):
    host, calls, live = record_sample(tmp_path)
    assert [a.status for a in live] == [AnswerStatus.OK, AnswerStatus.MISSING, AnswerStatus.OK, AnswerStatus.MISSING, AnswerStatus.OK, AnswerStatus.OK, AnswerStatus.OK, AnswerStatus.TIMEOUT,
                                        "not_installed", AnswerStatus.OK, "error"]  # fmt: skip
    bundle = host.write_bundle(str(tmp_path / "bundle"), argv=["test"])
    replay = ReplayHost(bundle)
    assert [comparable(call(replay)) for call in calls] == [comparable(a) for a in live]
    # The layout is the documented one: raw files and command outputs a person can read.
    assert (tmp_path / "bundle/files/proc/mdstat").read_bytes().startswith(b"Personalities")
    folder = tmp_path / "bundle/commands/nvidia-smi_-q_-x"
    assert (folder / "stdout").read_text() == "<xml/>\n"
    assert json.loads((folder / "command.json").read_text())["returncode"] == 9
    manifest = json.loads((tmp_path / "bundle/manifest.json").read_text())
    assert manifest["format"] == "dldoctor-bundle" and "files/proc/mdstat" in manifest["files"]
    assert BundleReader(bundle).verify() == []


def test_write_refuses_an_existing_path_and_leaves_nothing_half_written(tmp_path):
    host, _, _ = record_sample(tmp_path)
    (tmp_path / "taken").mkdir()
    with pytest.raises(BundleError):
        host.write_bundle(str(tmp_path / "taken"))

    class Boom(Exception):
        pass

    def exploding():
        yield (Answer("read", "/a", AnswerStatus.OK, b"a"), None)
        raise Boom

    with pytest.raises(Boom):
        write_bundle(str(tmp_path / "partial"), exploding())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "taken", "tree"]


def test_a_file_that_is_also_a_folder_survives(tmp_path):
    answers = [(Answer("read", "/sys/a", AnswerStatus.OK, b"file"), None),
               (Answer("read", "/sys/a/b", AnswerStatus.OK, b"below"), None)]  # fmt: skip
    replay = ReplayHost(write_bundle(str(tmp_path / "b"), answers))
    assert replay.read("/sys/a").value == b"file"
    assert replay.read("/sys/a/b").value == b"below"


def test_colliding_command_names_keep_both(tmp_path):
    a, b = ["tool", "a b"], ["tool", "a_b"]
    assert command_folders(a)[0] == command_folders(b)[0]
    answers = [
        (Answer("run", "x", AnswerStatus.OK, _result(b"A")), a),
        (Answer("run", "y", AnswerStatus.OK, _result(b"B")), b),
    ]
    replay = ReplayHost(write_bundle(str(tmp_path / "b"), answers))
    assert replay.run(a).value.stdout == b"A"
    assert replay.run(b).value.stdout == b"B"


def _result(out: bytes):
    from dldoctor.host import CommandResult

    return CommandResult(0, out, b"")


def test_hand_written_bundle_needs_no_metadata(tmp_path):
    b = BundleBuilder(tmp_path / "hand").file("/proc/meminfo", "MemTotal: 1 kB\n")
    (b.root / "commands/nvidia-smi_-q_-x").mkdir(parents=True)
    (b.root / "commands/nvidia-smi_-q_-x/stdout").write_text("<nvidia_smi_log/>")
    replay = ReplayHost(str(b.root))
    assert replay.read("/proc/meminfo").text == "MemTotal: 1 kB\n"
    answer = replay.run(["nvidia-smi", "-q", "-x"])
    assert (answer.status, answer.value.returncode, answer.text) == (
        AnswerStatus.OK,
        0,
        "<nvidia_smi_log/>",
    )
    assert replay.run(["lspci"]).status == AnswerStatus.MISSING
    assert replay.statvfs("/").status == AnswerStatus.MISSING
    assert replay.probe("nvml").status == AnswerStatus.MISSING


def test_recorded_non_ok_answers_replay(tmp_path):
    b = (BundleBuilder(tmp_path / "b")
         .answer("read", "/proc/1/environ", status=AnswerStatus.PERMISSION_DENIED)
         .answer("statvfs", "/mnt/lustre", status=AnswerStatus.TIMEOUT, timeout_s=5.0)
         .command(["nvidia-smi"], status=AnswerStatus.TIMEOUT, timeout_s=10.0))  # fmt: skip
    replay = ReplayHost(str(b.root))
    assert replay.read("/proc/1/environ").status == AnswerStatus.PERMISSION_DENIED
    hung = replay.statvfs("/mnt/lustre")
    assert (hung.status, hung.timeout_s) == (AnswerStatus.TIMEOUT, 5.0)
    assert replay.run(["nvidia-smi"]).status == AnswerStatus.TIMEOUT


def test_links_in_a_bundle_never_leave_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    b = BundleBuilder(tmp_path / "b")
    b.link("/etc/passwd", str(outside))  # absolute: means files/<that path>, not this machine
    b.link("/etc/up", "../../../../../../../../" + str(outside))
    (b.root / "commands/cat").mkdir(parents=True)
    os.symlink(str(outside), b.root / "commands/cat/stdout")
    replay = ReplayHost(str(b.root))
    assert replay.read("/etc/passwd").status == AnswerStatus.MISSING
    assert replay.read("/etc/up").status == AnswerStatus.MISSING
    assert replay.run(["cat"]).value.stdout == b""
    assert replay.readlink("/etc/passwd").value == str(outside)  # the link text, not its target


@pytest.mark.parametrize("setup, message", [
    (lambda p: None, "bundle not found"),
    (lambda p: p.write_text("x"), "not a bundle directory"),
    (lambda p: (p.mkdir(), (p / "answers.json").write_text("{truncated")), "not valid JSON"),
    (lambda p: (p.mkdir(), (p / "answers.json").write_text("[1]")), "must map"),
    (lambda p: (p.mkdir(), (p / "manifest.json").write_text('{"format": "zip"}')), "does not describe"),
    (lambda p: (p.mkdir(), (p / "manifest.json").write_text(
        '{"format": "dldoctor-bundle", "format_version": 99}')), "newer"),
])  # fmt: skip
def test_bad_bundles_get_one_line_errors(tmp_path, setup, message):
    path = tmp_path / "bundle"
    setup(path)
    with pytest.raises(BundleError) as info:
        BundleReader(str(path))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_entries_become_error_answers(tmp_path):
    b = BundleBuilder(tmp_path / "b").answer("read", "/x", status="ok", content_b64="%%%")
    (b.root / "probes").mkdir()
    (b.root / "probes/python.json").write_text("[]")
    replay = ReplayHost(str(b.root))
    assert replay.read("/x").status == AnswerStatus.ERROR
    assert replay.probe("python").status == AnswerStatus.ERROR


def test_edited_files_are_detected(tmp_path):
    host, _, _ = record_sample(tmp_path)
    bundle = host.write_bundle(str(tmp_path / "bundle"))
    (tmp_path / "bundle/files/proc/mdstat").write_text("edited by hand\n")
    assert BundleReader(bundle).verify() == ["files/proc/mdstat"]


def test_a_files_link_to_root_does_not_expose_this_machine(tmp_path):
    bundle = tmp_path / "b"
    bundle.mkdir()
    os.symlink("/", bundle / "files")
    replay = ReplayHost(str(bundle))
    assert replay.read("/etc/os-release").status == AnswerStatus.MISSING
    assert replay.read("/proc/meminfo").status == AnswerStatus.MISSING


def test_keys_that_climb_stay_inside_when_written(tmp_path):
    answers = [(Answer("read", "/../../escaped.txt", AnswerStatus.OK, b"hi"), None)]
    bundle = write_bundle(str(tmp_path / "out" / "b"), answers)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "out/escaped.txt").exists()
    assert (tmp_path / "out/b/files/escaped.txt").read_bytes() == b"hi"
    assert ReplayHost(bundle).read("/escaped.txt").value == b"hi"


def test_unknown_statuses_and_bad_manifest_types(tmp_path):
    b = BundleBuilder(tmp_path / "b").command(["x"], status="weird")
    assert ReplayHost(str(b.root)).run(["x"]).status == AnswerStatus.ERROR
    (b.root / "manifest.json").write_text('{"format": "dldoctor-bundle", "files": []}')
    with pytest.raises(BundleError, match="'files' must map"):
        BundleReader(str(b.root))
    (b.root / "manifest.json").unlink()
    (b.root / "answers.json").write_text("[" * 100000)
    with pytest.raises(BundleError, match="not valid JSON"):
        BundleReader(str(b.root))


def test_recording_keeps_the_fuller_read(tmp_path):
    (tmp_path / "f").write_bytes(b"0123456789")
    rec = RecordingHost(LiveHost(root=str(tmp_path)))
    rec.read("/f")
    rec.read("/f", max_bytes=3)
    replay = ReplayHost(rec.write_bundle(str(tmp_path / "b")))
    assert replay.read("/f").value == b"0123456789"
    assert replay.read("/f", max_bytes=3).value == b"012"


@pytest.mark.parametrize("part, folder", CONTENTS)
def test_any_one_part_makes_a_directory_a_bundle(tmp_path, part, folder):
    (tmp_path / part).mkdir() if folder else (tmp_path / part).write_text("{}")
    BundleReader(str(tmp_path)).require_contents()
    # The same name with the wrong kind (a file named files, a folder named nvml.json) is not.
    other = tmp_path / "other"
    other.mkdir()
    (other / part).write_text("{}") if folder else (other / part).mkdir()
    with pytest.raises(BundleError, match="is not a dldoctor bundle"):
        BundleReader(str(other)).require_contents()


def test_remembered_folders_resolve_as_one_pass_does(tmp_path):
    # files_path resolves each folder once; every path must land where resolve_in_root's
    # single pass lands, whichever folder was asked first and whatever the last part is.
    from dldoctor.host.paths import resolve_in_root

    b = BundleBuilder(tmp_path / "b")
    b.file("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor", "0x10de\n")
    b.file("/sys/devices/pci0000:00/0000:00:01.0/max_link_width", "16\n")
    b.link(
        "/sys/bus/pci/devices/0000:01:00.0", "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    )
    b.link(
        "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/driver", "/sys/bus/pci/drivers/nvidia"
    )
    b.link("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/up", "../max_link_width")
    b.file("/sys/bus/pci/drivers/nvidia/bind", "")
    reader = BundleReader(str(tmp_path / "b"))
    dev = "/sys/bus/pci/devices/0000:01:00.0"
    paths = [f"{dev}/vendor", f"{dev}/driver", f"{dev}/driver/bind", f"{dev}/up", f"{dev}/..",
             f"{dev}/../max_link_width", f"{dev}/absent", f"{dev}/", "/sys", "/", f"{dev}/./vendor"]  # fmt: skip
    for follow_last in (True, False):
        for path in [*paths, *reversed(paths)]:  # asked again: now from remembered folders
            expected = resolve_in_root(reader.files_root, path, follow_last=follow_last)
            assert reader.files_path(path, follow_last=follow_last) == expected, path
    assert ReplayHost(reader).read(f"{dev}/up").value == b"16\n"


def test_a_fifo_or_a_folder_in_files_is_an_error_answer_not_a_hang(tmp_path):
    b = BundleBuilder(tmp_path).file("/proc/mdstat", "Personalities : \n")
    os.mkfifo(tmp_path / "files" / "proc" / "fifo")  # an open() of it would block forever
    host = ReplayHost(str(tmp_path))
    assert (host.read("/proc/fifo").status, host.read("/proc/fifo").error) == (
        "error",
        "not a regular file",
    )
    assert host.read("/proc").error == "is a directory"
    assert host.read("/proc/absent").status == "missing"
    assert host.read("/proc/mdstat").value == b"Personalities : \n"
    assert b.root == tmp_path


# --- the manifest: normalised names, each real file hashed once, bounded work -------------


def _manifest_bundle(root, files: dict[str, str], **fields) -> str:
    root.mkdir(exist_ok=True)
    manifest = {"format": "dldoctor-bundle", "format_version": 1, "files": files, **fields}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return str(root)


def _sparse(path, size: int) -> int:
    """A file of `size` zero bytes that costs no disk; a smaller size where refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for tried in (size, size // 10, size // 100):
        try:
            with open(path, "wb") as f:
                f.truncate(tried)
            return tried
        except OSError:
            continue
    pytest.skip("this filesystem refuses large sparse files")


def test_200_spellings_of_a_10_gb_file_are_read_in_under_2_s(tmp_path):
    # Each spelling used to be hashed up to 256 MiB: 65 s before any check ran.
    size = _sparse(tmp_path / "b/files/big", 10 * 1024**3)
    spellings = {"files/" + "./" * i + "big": "0" * 64 for i in range(200)}
    bundle = _manifest_bundle(tmp_path / "b", spellings)
    cpu_before = children_cpu_s()
    proc = subprocess.run([sys.executable, "-m", "dldoctor", "--from", bundle, "--check", "--json"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    cpu_s = children_cpu_s() - cpu_before  # hashing is CPU work: the machine's load is not
    assert cpu_s <= 2.0 * max(1.0, size / 10 / 1024**3), cpu_s
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "verification stopped at files/big" in lines[0], proc.stderr
    assert "1 of 1 files not checked" in lines[0]
    assert proc.returncode != 4 and json.loads(proc.stdout)["findings"]  # still replayed


def test_each_real_file_is_hashed_once_whatever_its_spellings(tmp_path, monkeypatch, caplog):
    data = os.urandom(1024 * 1024)
    (tmp_path / "b/files/proc").mkdir(parents=True)
    (tmp_path / "b/files/proc/big").write_bytes(data)
    os.link(tmp_path / "b/files/proc/big", tmp_path / "b/files/hard")
    os.symlink("proc/big", tmp_path / "b/files/soft")
    digest = hashlib.sha256(data).hexdigest()
    names = ["files/" + "./" * i + "proc/big" for i in range(200)]
    names += ["files/hard", "files/soft", "files/proc/../proc/big", "files//proc/big"]
    bundle = _manifest_bundle(tmp_path / "b", {n: digest for n in names})
    # Room for the file twice: without the deduplication the 200 spellings pass the cap.
    monkeypatch.setattr(bundle_mod, "MAX_VERIFY_BYTES", 2 * len(data))
    assert BundleReader(bundle).verify() == []
    assert not caplog.records
    manifest = json.loads((tmp_path / "b/manifest.json").read_text())
    manifest["files"]["files/./proc/./big"] = "0" * 64  # one spelling disagrees
    (tmp_path / "b/manifest.json").write_text(json.dumps(manifest))
    assert BundleReader(bundle).verify() == ["files/proc/big"]


def test_verification_stops_past_its_byte_or_time_cap_with_one_warning(
    tmp_path, monkeypatch, caplog
):
    a, b = b"a" * 300_000, b"b" * 300_000
    (tmp_path / "b/files").mkdir(parents=True)
    (tmp_path / "b/files/a").write_bytes(a)
    (tmp_path / "b/files/b").write_bytes(b)
    bundle = _manifest_bundle(tmp_path / "b", {"files/a": "0" * 64,
                                               "files/b": hashlib.sha256(b).hexdigest()})  # fmt: skip
    monkeypatch.setattr(bundle_mod, "MAX_VERIFY_BYTES", 400_000)
    assert BundleReader(bundle).verify() == ["files/a"]  # b was not reached
    [record] = caplog.records
    assert "stopped at files/b" in record.getMessage() and "1 of 2 files" in record.getMessage()
    caplog.clear()
    monkeypatch.setattr(bundle_mod, "MAX_VERIFY_BYTES", 10**9)
    monkeypatch.setattr(bundle_mod, "MAX_VERIFY_S", 0.0)
    assert BundleReader(bundle).verify() == []
    [record] = caplog.records
    assert "stopped at files/a" in record.getMessage() and "2 of 2 files" in record.getMessage()


@pytest.mark.parametrize("name", ["../outside", "files/../../outside", "/etc/passwd", "", ".",
                                  "files/.."])  # fmt: skip
def test_manifest_names_that_leave_the_bundle_are_refused(tmp_path, name):
    (tmp_path / "outside").write_text("x")
    bundle = _manifest_bundle(tmp_path / "b", {name: "0" * 64})
    with pytest.raises(BundleError, match="not a valid manifest") as info:
        BundleReader(bundle).verify()
    assert "\n" not in str(info.value)


def test_odd_members_are_changed_without_a_hang_or_a_long_walk(tmp_path, monkeypatch, caplog):
    (tmp_path / "b/files").mkdir(parents=True)
    os.mkfifo(tmp_path / "b/files/fifo")
    (tmp_path / "b/files/dir").mkdir()
    os.symlink("loop", tmp_path / "b/files/loop")
    deep = "files/" + "a/" * 500_000 + "x"  # resolving it part by part was quadratic
    names = ["files/fifo", "files/dir", "files/loop", "files/absent", deep]
    bundle = _manifest_bundle(tmp_path / "b", {n: "0" * 64 for n in names})
    started = time.thread_time()  # CPU time: resolving names is CPU work
    assert sorted(BundleReader(bundle).verify()) == sorted(n.rstrip("/") for n in names)
    assert time.thread_time() - started < 1.0
    monkeypatch.setattr(bundle_mod, "MAX_VERIFY_FILES", 4)
    assert BundleReader(bundle).verify() == []
    [record] = caplog.records
    assert "not verified" in record.getMessage() and "5 files" in record.getMessage()


@pytest.mark.parametrize("version", ['"1"', "[1]", "1.5", "true", "null", "0", "-1"])
def test_a_format_version_of_the_wrong_type_is_not_a_valid_manifest(tmp_path, version):
    (tmp_path / "b").mkdir()
    (tmp_path / "b/manifest.json").write_text(
        f'{{"format": "dldoctor-bundle", "format_version": {version}}}'
    )
    with pytest.raises(BundleError, match="not a valid manifest") as info:
        BundleReader(str(tmp_path / "b"))
    assert "newer" not in str(info.value) and "\n" not in str(info.value)


def test_a_wrong_format_version_exits_4_with_one_line_and_a_larger_one_is_newer(tmp_path):
    def run(version):
        bundle = _manifest_bundle(tmp_path / f"b{len(list(tmp_path.iterdir()))}", {},
                                  format_version=version)  # fmt: skip
        return subprocess.run([sys.executable, "-m", "dldoctor", "--from", bundle, "--check"],
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    wrong, newer = run("1"), run(2)
    assert wrong.returncode == newer.returncode == 4
    assert len(wrong.stderr.splitlines()) == 1 and "not a valid manifest" in wrong.stderr
    assert len(newer.stderr.splitlines()) == 1 and "newer than this dldoctor reads" in newer.stderr


def test_a_json_document_of_too_many_values_is_refused_before_parsing(tmp_path):
    # 64 MiB of `{},` parsed into 1.6 GB of dicts in 4.5 s.
    (tmp_path / "b").mkdir()
    count = bundle_mod.MAX_JSON_VALUES + 1
    (tmp_path / "b/answers.json").write_text('{"read": {}, "x": [' + "{}," * count + "{}]}")
    started = time.thread_time()  # CPU time: parsing is CPU work
    with pytest.raises(BundleError, match="more than 2000000 values"):
        BundleReader(str(tmp_path / "b"))
    assert time.thread_time() - started < 1.0
    (tmp_path / "b/answers.json").unlink()
    (tmp_path / "b/nvml.json").write_text("[" + "0," * count + "0]")
    assert ReplayHost(str(tmp_path / "b")).probe("nvml").status == AnswerStatus.ERROR
