"""Bundles: what a RecordingHost writes, a ReplayHost answers identically; bad bundles
get one-line errors; nothing inside a bundle can reach outside it."""

from __future__ import annotations

import json
import os

import pytest

from dldoctor.host import MISSING, OK, TIMEOUT, LiveHost, RecordingHost
from dldoctor.host.base import ERROR, PERMISSION_DENIED, Answer
from dldoctor.host.replay import ReplayHost
from dldoctor.snapshots.bundle import (
    CONTENTS,
    BundleError,
    BundleReader,
    command_folders,
    write_bundle,
)
from tests.bundlebuilder import BundleBuilder
from tests.test_host_live import fake_command


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
    assert [a.status for a in live] == [OK, MISSING, OK, MISSING, OK, OK, OK, TIMEOUT,
                                        "not_installed", OK, "error"]  # fmt: skip
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
        yield (Answer("read", "/a", OK, b"a"), None)
        raise Boom

    with pytest.raises(Boom):
        write_bundle(str(tmp_path / "partial"), exploding())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "taken", "tree"]


def test_a_file_that_is_also_a_folder_survives(tmp_path):
    answers = [(Answer("read", "/sys/a", OK, b"file"), None),
               (Answer("read", "/sys/a/b", OK, b"below"), None)]  # fmt: skip
    replay = ReplayHost(write_bundle(str(tmp_path / "b"), answers))
    assert replay.read("/sys/a").value == b"file"
    assert replay.read("/sys/a/b").value == b"below"


def test_colliding_command_names_keep_both(tmp_path):
    a, b = ["tool", "a b"], ["tool", "a_b"]
    assert command_folders(a)[0] == command_folders(b)[0]
    answers = [
        (Answer("run", "x", OK, _result(b"A")), a),
        (Answer("run", "y", OK, _result(b"B")), b),
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
    assert (answer.status, answer.value.returncode, answer.text) == (OK, 0, "<nvidia_smi_log/>")
    assert replay.run(["lspci"]).status == MISSING
    assert replay.statvfs("/").status == MISSING
    assert replay.probe("nvml").status == MISSING


def test_recorded_non_ok_answers_replay(tmp_path):
    b = (BundleBuilder(tmp_path / "b")
         .answer("read", "/proc/1/environ", status=PERMISSION_DENIED)
         .answer("statvfs", "/mnt/lustre", status=TIMEOUT, timeout_s=5.0)
         .command(["nvidia-smi"], status=TIMEOUT, timeout_s=10.0))  # fmt: skip
    replay = ReplayHost(str(b.root))
    assert replay.read("/proc/1/environ").status == PERMISSION_DENIED
    hung = replay.statvfs("/mnt/lustre")
    assert (hung.status, hung.timeout_s) == (TIMEOUT, 5.0)
    assert replay.run(["nvidia-smi"]).status == TIMEOUT


def test_links_in_a_bundle_never_leave_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    b = BundleBuilder(tmp_path / "b")
    b.link("/etc/passwd", str(outside))  # absolute: means files/<that path>, not this machine
    b.link("/etc/up", "../../../../../../../../" + str(outside))
    (b.root / "commands/cat").mkdir(parents=True)
    os.symlink(str(outside), b.root / "commands/cat/stdout")
    replay = ReplayHost(str(b.root))
    assert replay.read("/etc/passwd").status == MISSING
    assert replay.read("/etc/up").status == MISSING
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
    assert replay.read("/x").status == ERROR
    assert replay.probe("python").status == ERROR


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
    assert replay.read("/etc/os-release").status == MISSING
    assert replay.read("/proc/meminfo").status == MISSING


def test_keys_that_climb_stay_inside_when_written(tmp_path):
    answers = [(Answer("read", "/../../escaped.txt", OK, b"hi"), None)]
    bundle = write_bundle(str(tmp_path / "out" / "b"), answers)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "out/escaped.txt").exists()
    assert (tmp_path / "out/b/files/escaped.txt").read_bytes() == b"hi"
    assert ReplayHost(bundle).read("/escaped.txt").value == b"hi"


def test_unknown_statuses_and_bad_manifest_types(tmp_path):
    b = BundleBuilder(tmp_path / "b").command(["x"], status="weird")
    assert ReplayHost(str(b.root)).run(["x"]).status == ERROR
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
