"""LiveHost against this machine and against small trees made by the tests."""

from __future__ import annotations

import os
import threading

import pytest

from dldoctor.host import AnswerStatus, LiveHost  # fmt: skip
from dldoctor.host.live import KEPT_OF_CUT_BYTES, os_error_answer
from dldoctor.host.paths import resolve_in_root
from tests.support.commands import fake_command
from tests.support.guards import ended, returns, wait_until
from tests.support.marks import nonroot


def test_read_ok_missing_and_directory(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hostname").write_text("node7\n")
    host = LiveHost(root=str(tmp_path))
    assert host.read("/etc/hostname").value == b"node7\n"
    assert host.read("/etc/nothing").status == AnswerStatus.MISSING
    assert (
        host.read("/etc/hostname/below").status == AnswerStatus.MISSING
    )  # ENOTDIR is "missing" too
    answer = host.read("/etc")
    assert answer.status == AnswerStatus.ERROR and "directory" in answer.error.lower()


def test_read_of_proc_sys_is_chunked():
    # One read(16 MiB) of a /proc/sys file fails with ENOMEM; the host must not ask that.
    answer = LiveHost().read("/proc/sys/kernel/osrelease")
    assert answer.status == AnswerStatus.OK
    assert answer.text.strip() == os.uname().release


def test_read_respects_max_bytes(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 200_000)
    assert len(LiveHost(root=str(tmp_path)).read("/big", max_bytes=70_000).value) == 70_000


@nonroot
def test_permission_denied(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("x")
    secret.chmod(0)
    assert LiveHost(root=str(tmp_path)).read("/secret").status == AnswerStatus.PERMISSION_DENIED


def test_os_errors_map_to_statuses():
    assert (
        os_error_answer("read", "/x", PermissionError(13, "denied"), 0).status
        == AnswerStatus.PERMISSION_DENIED
    )
    assert (
        os_error_answer("read", "/x", FileNotFoundError(2, "no"), 0).status == AnswerStatus.MISSING
    )
    eio = os_error_answer("read", "/x", OSError(5, "Input/output error"), 0)
    assert (eio.status, eio.error) == (AnswerStatus.ERROR, "Input/output error")


def test_links_resolve_inside_the_root(tmp_path):
    (tmp_path / "sys/devices/pci0000:00/0000:00:02.0").mkdir(parents=True)
    (tmp_path / "sys/devices/pci0000:00/0000:00:02.0/vendor").write_text("0x10de\n")
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    # sysfs style: relative links climbing with .., and an absolute one.
    os.symlink(
        "../../../devices/pci0000:00/0000:00:02.0", tmp_path / "sys/bus/pci/devices/0000:00:02.0"
    )
    os.symlink("/sys/devices/pci0000:00/0000:00:02.0", tmp_path / "abs")
    os.symlink("../../../../../../etc", tmp_path / "sys/escape")
    host = LiveHost(root=str(tmp_path))
    assert host.read("/sys/bus/pci/devices/0000:00:02.0/vendor").text == "0x10de\n"
    assert host.read("/abs/vendor").text == "0x10de\n"
    assert host.readlink("/sys/bus/pci/devices/0000:00:02.0").value.endswith("0000:00:02.0")
    assert host.listdir("/sys/bus/pci/devices").value == ("0000:00:02.0",)
    # Climbing above the root stops at the root: /etc of the tree, not of this machine.
    assert resolve_in_root(str(tmp_path), "/sys/escape/passwd") == str(tmp_path / "etc/passwd")
    assert host.read("/sys/escape/passwd").status == AnswerStatus.MISSING


def test_link_loop_is_an_error_not_a_hang(tmp_path):
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    assert LiveHost(root=str(tmp_path)).read("/a").status == AnswerStatus.ERROR


def test_statvfs_answers_the_fields():
    answer = LiveHost().statvfs("/")
    assert answer.status == AnswerStatus.OK
    assert answer.value["f_blocks"] > 0 and answer.value["f_bsize"] > 0


def test_run_ok_not_installed_and_exit_status(tmp_path):
    fake_command(tmp_path, "say", 'echo "out $1"; echo err >&2; exit 3')
    host = LiveHost(env={"PATH": str(tmp_path)})
    answer = host.run(["say", "hi"])
    assert answer.status == AnswerStatus.OK
    assert (answer.value.returncode, answer.value.stdout, answer.value.stderr) == (
        3,
        b"out hi\n",
        b"err\n",
    )
    assert host.run(["no-such-tool-dldoctor"]).status == AnswerStatus.NOT_INSTALLED


def test_run_uses_the_c_locale(tmp_path):
    fake_command(tmp_path, "showlocale", 'echo "$LC_ALL"')
    assert (
        LiveHost(env={"PATH": str(tmp_path), "LC_ALL": "de_DE.UTF-8"}).run(["showlocale"]).text
        == "C\n"
    )


def test_run_timeout_kills_the_whole_process_group(tmp_path):
    # The shell's child `sleep` holds the output pipe: killing only the shell would hang.
    fake_command(tmp_path, "hang", f"echo $$ > {tmp_path}/shell; sleep 300 & "
                                   f"echo $! > {tmp_path}/child; wait; echo never")  # fmt: skip
    host = LiveHost(env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, command_timeout=0.5)
    answer = returns(host.run, ["hang"])
    assert answer.status == AnswerStatus.TIMEOUT and answer.timeout_s == 0.5
    assert "did not answer within 0.5 s" in answer.describe()
    for name in ("shell", "child"):
        assert ended(int((tmp_path / name).read_text())), f"the {name} was not killed"


def test_probe_timeout_and_import_error():
    started, released = threading.Event(), threading.Event()

    def slow():
        started.set()
        released.wait(60)

    def absent():
        import dldoctor_no_such_module  # noqa: F401

    host = LiveHost(probes={"slow": slow, "absent": absent, "fine": lambda: {"a": 1}},
                    command_timeout=0.2)  # fmt: skip
    # The probe answers while `slow` still blocks: the timeout fired, nothing waited it out.
    assert returns(host.probe, "slow").status == AnswerStatus.TIMEOUT
    assert started.is_set() and not released.is_set()
    released.set()
    assert host.probe("absent").status == AnswerStatus.NOT_INSTALLED
    assert host.probe("fine").value == {"a": 1}
    assert host.probe("unknown").status == AnswerStatus.ERROR


def test_a_prefetched_command_runs_once_early_and_answers_its_first_asker(tmp_path):
    counter = tmp_path / "runs"
    fake_command(tmp_path, "slow", f"echo run >> {counter}; sleep 0.2; echo done")
    host = LiveHost(env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    host.prefetch(runs=[["slow"]])
    assert wait_until(counter.exists)  # it runs early, before anyone asks
    # Changed under it (a new file: the running shell still reads the old one), the first
    # asker is answered by the run that started early.
    (tmp_path / "next").mkdir()
    fake_command(tmp_path / "next", "slow", f"echo run >> {counter}; echo changed")
    os.replace(tmp_path / "next/slow", tmp_path / "slow")
    first = host.run(["slow"])
    assert first.ok and first.text == "done\n"
    assert counter.read_text() == "run\n"
    second = host.run(["slow"])  # a second asker runs it anew
    assert second.ok and second.text == "changed\n"
    assert counter.read_text() == "run\nrun\n"


@pytest.mark.parametrize(("stream", "redirect"), [("stdout", ""), ("stderr", " >&2")])
def test_endless_output_is_cut_at_the_cap_while_it_streams(tmp_path, stream, redirect):
    # `yes` never ends: buffering all it printed until the timeout took 22 GB in 80 s.
    fake_command(tmp_path, "chatty", f"echo started >&2; yes{redirect}")
    host = LiveHost(env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, command_timeout=5,
                    max_stdout=100_000, max_stderr=30_000)  # fmt: skip
    answer = host.run(["chatty"])
    assert answer.status == AnswerStatus.ERROR  # stopped at the cap: at the 5 s timeout it would be AnswerStatus.TIMEOUT
    cap = 100_000 if stream == "stdout" else 30_000
    assert answer.error == f"output truncated at {cap} bytes of {stream} ({cap / 1024:g} KiB): " \
                           "the command was stopped"  # fmt: skip
    assert f"`chatty`: output truncated at {cap} bytes of {stream}" in answer.describe()
    kept = getattr(answer.value, stream)
    assert len(kept) == min(cap, KEPT_OF_CUT_BYTES)  # the head, for the finding and the bundle
    assert set(kept.split(b"\n")[:-1]) == ({b"y"} if stream == "stdout" else {b"started", b"y"})


def test_commands_at_once_share_one_output_budget(tmp_path):
    # The host's budget is below one command's cap: memory is bounded by the budget, not
    # by the number of tools printing at once.
    fake_command(tmp_path, "chatty", "yes")
    host = LiveHost(env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, command_timeout=5,
                    max_stdout=1_000_000, output_budget=600_000)  # fmt: skip
    answers: list = []
    threads = [threading.Thread(target=lambda i=i: answers.append(host.run(["chatty", str(i)])))
               for i in range(4)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [a.status for a in answers] == [AnswerStatus.ERROR] * 4
    assert all("printed 585.938 KiB between them" in a.error for a in answers), answers
    # Once stopped, each keeps its head only, and gives the rest back.
    assert all(len(a.value.stdout) <= KEPT_OF_CUT_BYTES for a in answers)
    assert host.output_budget.left == 600_000 - sum(len(a.value.stdout) for a in answers)


def test_output_up_to_the_cap_is_whole_and_ok(tmp_path):
    fake_command(tmp_path, "exact", "head -c 100000 /dev/zero; head -c 30000 /dev/zero >&2")
    host = LiveHost(env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, max_stdout=100_000,
                    max_stderr=30_000)  # fmt: skip
    answer = host.run(["exact"])
    assert answer.status == AnswerStatus.OK and answer.value.returncode == 0
    assert (len(answer.value.stdout), len(answer.value.stderr)) == (100_000, 30_000)


def test_a_command_that_closes_its_output_and_runs_on_times_out(tmp_path):
    fake_command(tmp_path, "detach", f"echo hi; echo $$ > {tmp_path}/pid; exec >&- 2>&-; "
                                     "exec sleep 300")  # fmt: skip
    host = LiveHost(env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, command_timeout=0.5)
    assert returns(host.run, ["detach"]).status == AnswerStatus.TIMEOUT
    assert ended(int((tmp_path / "pid").read_text()))  # killed, not waited for


def test_a_truncated_run_replays_as_the_same_error(tmp_path):
    from dldoctor.host import RecordingHost
    from dldoctor.host.replay import ReplayHost

    fake_command(tmp_path, "chatty", "yes")
    live = LiveHost(env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, max_stdout=10_000)
    recorder = RecordingHost(live)
    said = recorder.run(["chatty", "-v"])
    replayed = ReplayHost(recorder.write_bundle(str(tmp_path / "bundle"))).run(["chatty", "-v"])
    assert (replayed.status, replayed.describe()) == (AnswerStatus.ERROR, said.describe())
    assert "output truncated at 10000 bytes of stdout" in replayed.describe()
