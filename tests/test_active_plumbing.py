"""The active tier's plumbing (docs/active.md): Host.measure for real (placeholders, the
scratch folder removed however the command ends), the measuring budget end to end, a
measurement recorded and replayed under its template argv, who uses the GPUs read through
the Host from a real process, and the command line: --active, --force, --list-checks,
bundles taken with --active, foreign inputs, the progress lines on a terminal.

The measuring checks here are stand-ins (tests/support/standin_perf.py) that run a real
script put first on PATH; the real perf checks are tested beside them."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import pty
import subprocess
import sys
import time

import pytest

from dldoctor.active.gpus import idle_gpus
from dldoctor.diagnose import diagnose
from dldoctor.facts import Facts
from dldoctor.facts.gpu import Gpu, NvidiaStack
from dldoctor.facts.gpuusers import WATCHERS, gpu_users
from dldoctor.facts.nvidia import nvidia
from dldoctor.host.base import AnswerStatus, command_key
from dldoctor.host.live import MEASURING_SCRIPTS, LiveHost
from dldoctor.host.recording import RecordingHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Outcome, Status
from dldoctor.policy import Policy, Timeouts
from dldoctor.probes import gpu_users as gpu_users_probe
from dldoctor.registry import checks_in
from dldoctor.request import forced
from dldoctor.snapshots.bundle import write_bundle
from tests.support.cli import report_of, run_dldoctor, verdicts
from tests.support.commands import fake_command
from tests.support.paths import FIXTURES
from tests.support.plugins import install_fake_distribution
from tests.support.processes import gone

STANDIN = os.path.join(os.path.dirname(__file__), "support", "standin_perf.py")
# The stand-in's tool: it notes the scratch folder it got, checks it exists, leaves a file
# in it, and prints its figure (GB/s).
GOOD = (
    'echo "$2" >> "$STANDIN_LOG"; [ -d "$2" ] || exit 9; echo x > "$2/data"; '
    'case "$1" in first) echo 1.9;; *) echo 2.5;; esac'
)
HANGS = 'echo "$2" >> "$STANDIN_LOG"; echo $$ > "$2/../pid-$1"; echo x > "$2/data"; exec sleep 30'
FAILS = 'echo "$2" >> "$STANDIN_LOG"; echo x > "$2/data"; exit 3'


def _standin():
    spec = importlib.util.spec_from_file_location("standin_perf_checks", STANDIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {s.id: s for s in checks_in(module)}


def _tool(tmp_path, script: str):
    """(a PATH whose first folder holds `standin-measure`, its log, a scratch volume)."""
    bindir, scratch = tmp_path / "bin", tmp_path / "volume"
    bindir.mkdir(exist_ok=True)
    scratch.mkdir(exist_ok=True)
    fake_command(bindir, "standin-measure", script)
    return f"{bindir}:{os.environ['PATH']}", tmp_path / "measured.log", scratch


def _live(tmp_path, script: str, **kwargs) -> tuple[LiveHost, object, object]:
    path, log, scratch = _tool(tmp_path, script)
    env = {**os.environ, "PATH": path, "STANDIN_LOG": str(log)}
    return LiveHost(env=env, **kwargs), log, scratch


def _scratches(log) -> list[str]:
    return log.read_text().split() if log.exists() else []


# --- Host.measure, for real ------------------------------------------------------------


def test_measure_fills_the_placeholders_and_removes_the_scratch_folder(tmp_path):
    host, _, scratch = _live(tmp_path, GOOD)
    argv = ["sh", "-c", 'echo "$0|$1|$2"; [ -d "$2" ] && echo x > "$2/f"', "{python}",
            "{scripts}", "{scratch}"]  # fmt: skip
    answer = host.measure(argv, timeout=10, scratch_in=str(scratch))
    assert answer.ok and answer.value.returncode == 0, answer.describe()
    python, scripts, folder = answer.text.strip().split("|")
    assert (python, scripts) == (sys.executable, MEASURING_SCRIPTS)
    assert os.path.dirname(folder) == str(scratch)
    assert os.path.basename(folder).startswith(".dldoctor-measure-")
    assert not os.path.exists(folder) and os.listdir(scratch) == []
    assert answer.key == command_key(argv)  # the template, as a bundle records it


@pytest.mark.parametrize("script, timeout", [(FAILS, 10.0), (HANGS, 0.5)], ids=["fails", "hangs"])
def test_the_scratch_folder_is_gone_after_a_failure_and_after_a_kill(tmp_path, script, timeout):
    host, log, scratch = _live(tmp_path, script)
    started = time.monotonic()
    answer = host.measure(["standin-measure", "first", "{scratch}"], timeout=timeout,
                          scratch_in=str(scratch))  # fmt: skip
    (folder,) = _scratches(log)
    assert not os.path.exists(folder)
    assert [p for p in os.listdir(scratch) if p.startswith(".dldoctor")] == []
    if script is FAILS:
        assert answer.ok and answer.value.returncode == 3
        return
    assert answer.status == AnswerStatus.TIMEOUT and time.monotonic() - started < 5
    pid = int((scratch / "pid-first").read_text())
    assert gone(pid, 3), "the measuring command outlived its kill"


def test_a_scratch_placeholder_without_a_folder_is_an_error_answer_not_a_crash(tmp_path):
    host, log, _ = _live(tmp_path, GOOD)
    answer = host.measure(["standin-measure", "first", "{scratch}"], timeout=5)
    assert answer.status == AnswerStatus.ERROR and "scratch_in" in answer.error
    assert not log.exists()


def test_a_measurement_asked_after_the_budget_is_spent_is_not_started(tmp_path):
    host, log, scratch = _live(tmp_path, GOOD)
    now = time.monotonic()
    host.bound(commands_until=now + 10, until=now + 10, measures_until=now - 0.1)
    answer = host.measure(["standin-measure", "first", "{scratch}"], timeout=5,
                          scratch_in=str(scratch))  # fmt: skip
    assert answer.status == AnswerStatus.TIMEOUT
    assert answer.describe().endswith("was not run: the run's measuring time was used up")
    assert not log.exists() and os.listdir(scratch) == []


# --- the budget, end to end ------------------------------------------------------------


def test_a_hung_measurement_ends_within_the_budget_and_the_next_is_not_started(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("DLDOCTOR_STANDIN_COST_S", "20")
    host, log, scratch = _live(tmp_path, HANGS)
    monkeypatch.setenv("DLDOCTOR_STANDIN_SCRATCH", str(scratch))
    specs = _standin()
    t = Timeouts(command_s=0.5, filesystem_s=0.5, nvml_s=0.5, deadline_s=5, active_s=1.5)
    policy = Policy(timeouts=t)
    started = time.monotonic()
    report = diagnose(host, policy, [specs["perf.standin.first"], specs["perf.standin.second"]],
                      deadline_at=started + t.deadline_s + t.active_s)  # fmt: skip
    took = time.monotonic() - started
    # The budget: the measuring window (active_s and the probes' window) ends at 2 s.
    assert took < 4.5, took
    summaries = sorted(f.summary for f in report.findings)
    assert all(f.status is Status.ERROR for f in report.findings), summaries
    hung, refused = (
        (summaries[0], summaries[1]) if "did not answer" in summaries[0] else summaries[::-1]
    )
    assert hung.startswith("`standin-measure ") and "'{scratch}'` did not answer within" in hung
    assert refused.endswith("was not run: the run's measuring time was used up")
    assert len(_scratches(log)) == 1  # the second measurement never started
    assert [p for p in os.listdir(scratch) if p.startswith(".dldoctor")] == []


# --- recorded, written, replayed -------------------------------------------------------


def test_a_recorded_measurement_replays_from_the_bundle_under_its_template_argv(
    tmp_path, monkeypatch
):
    live, log, scratch = _live(tmp_path, GOOD)
    monkeypatch.setenv("DLDOCTOR_STANDIN_SCRATCH", str(scratch))
    specs = [_standin()["perf.standin.first"]]
    recorder = RecordingHost(live)
    measured = diagnose(recorder, Policy(), specs).findings[0]
    assert measured.status is Status.PASS, measured.summary
    assert [(f.value, f.unit) for f in measured.figures] == [(1.9, "GB/s")]
    bundle = recorder.write_bundle(str(tmp_path / "bundle"), active=True)
    folders = list((tmp_path / "bundle" / "commands").iterdir())
    (meta,) = (json.loads((f / "command.json").read_text()) for f in folders)
    assert meta["argv"] == ["standin-measure", "first", "{scratch}"]
    assert json.loads((tmp_path / "bundle" / "manifest.json").read_text())["active"] is True
    log.unlink()
    replay = ReplayHost(bundle)
    assert replay.holds_measurements
    again = diagnose(replay, Policy(), specs).findings[0]
    assert (again.status, again.summary, again.figures) == (
        measured.status, measured.summary, measured.figures
    )  # fmt: skip
    assert not log.exists()  # nothing ran: the answer is the bundle's


def test_a_bundle_taken_without_active_skips_the_measuring_checks_with_the_reason(tmp_path):
    bundle = write_bundle(str(tmp_path / "passive"), [])
    replay = ReplayHost(bundle)
    assert not replay.holds_measurements
    finding = diagnose(replay, Policy(), [_standin()["perf.standin.first"]]).findings[0]
    assert finding.status is Status.SKIP
    assert finding.summary == "the bundle was taken without --active: it holds no measurements"


# --- who uses the GPUs -----------------------------------------------------------------

# /proc/driver/nvidia/gpus/<bus id>/information as the driver writes it (its "Device Minor"
# line is what ties /dev/nvidia<minor> to a GPU; NVIDIA's open kernel modules,
# nv-procfs.c). Here the minor is not the index: GPU 0 (bus 18) is /dev/nvidia1.
INFORMATION = (
    "Model: \t\t NVIDIA H100 80GB HBM3\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n"
)
GPUS = NvidiaStack(
    source="nvml",
    gpus=(Gpu(index=0, pci_bus_id="0000:18:00.0"), Gpu(index=1, pci_bus_id="0000:2a:00.0")),
)


def _gpu_root(tmp_path):
    root = tmp_path / "root"
    for bus, minor in (("0000:18:00.0", 1), ("0000:2a:00.0", 0)):
        folder = root / "proc/driver/nvidia/gpus" / bus
        folder.mkdir(parents=True)
        (folder / "information").write_text(INFORMATION.format(bus=bus, minor=minor))
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl"):
        (dev / name).write_text("")
    return root, dev


@pytest.fixture
def holders(tmp_path):
    """A real process (a grandchild) holding the stand-in /dev/nvidia1 open, and one of
    this process's own children holding /dev/nvidia0 (a run's own commands are no users)."""
    root, dev = _gpu_root(tmp_path)
    grandchild = subprocess.Popen(
        ["sh", "-c", '(exec 3<"$1"; exec sleep 30) & echo $!; wait', "sh", str(dev / "nvidia1")],
        stdout=subprocess.PIPE,
        text=True,
    )
    with open(dev / "nvidiactl") as ctl, open(dev / "nvidia0") as gpu0:
        child = subprocess.Popen(["sleep", "30"], stdin=gpu0, stdout=ctl)
    pid = int(grandchild.stdout.readline())
    try:
        yield root, dev, pid
    finally:
        os.kill(pid, 9)
        for proc in (grandchild, child):
            proc.kill()
            proc.wait()
        grandchild.stdout.close()


def _host(root, dev) -> LiveHost:
    probe = functools.partial(gpu_users_probe, prefix=str(dev / "nvidia"))
    return LiveHost(str(root), probes={"gpu_users": probe})


def test_who_uses_a_gpu_is_read_from_a_real_process_and_refuses_the_measurement(holders):
    root, dev, pid = holders
    users = Facts(_host(root, dev)).get(gpu_users)
    assert [(u.pid, u.name, u.devices) for u in users.users] == [(pid, "sleep", ("/dev/nvidia1",))]
    assert [u.pid for u in users.of(GPUS.gpus[0])] == [pid]  # minor 1 is GPU 0
    assert users.of(GPUS.gpus[1]) == []
    facts = Facts.given({nvidia: GPUS, gpu_users: users})
    refused = idle_gpus(facts, Policy())
    assert isinstance(refused, Outcome) and refused.status is Status.SKIP
    user = users.users[0].user
    assert refused.summary == (
        f"GPU 0 is used by pid {pid} (sleep, user {user}): not measured; --force to measure anyway"
    )
    assert refused.details == (f"GPU 0: pid {pid} (sleep, user {user}): sleep 30",)
    assert idle_gpus(facts, forced(Policy(), True)) == list(GPUS.gpus)


def test_who_uses_the_gpus_replays_from_the_bundle(holders, tmp_path):
    root, dev, pid = holders
    recorder = RecordingHost(_host(root, dev))
    live = Facts(recorder).get(gpu_users)
    bundle = write_bundle(str(tmp_path / "bundle"), recorder.answers)
    assert Facts(ReplayHost(bundle)).get(gpu_users) == live
    assert (tmp_path / "bundle" / "probes" / "gpu_users.json").is_file()


def test_watching_daemons_are_no_users_and_idle_gpus_are_measured(tmp_path):
    # A bundle written by hand, as support engineers do: persistenced and DCGM hold every
    # GPU open on a healthy idle node.
    probes = tmp_path / "bundle" / "probes"
    probes.mkdir(parents=True)
    users = [
        {"pid": 1800, "user": "root", "uid": 0, "name": name, "command": name,
         "devices": ["/dev/nvidia0", "/dev/nvidia1"]}
        for name in ("nvidia-persistenced"[:15], "nv-hostengine")
    ]  # fmt: skip
    answer = {"status": "ok", "value": {"users": users, "unseen": 0}}
    (probes / "gpu_users.json").write_text(json.dumps(answer))
    assert {"nvidia-persiste", "nv-hostengine"} <= set(WATCHERS)
    found = Facts(ReplayHost(str(tmp_path / "bundle"))).get(gpu_users)
    assert found.recorded and found.users == ()
    assert idle_gpus(Facts.given({nvidia: GPUS, gpu_users: found}), Policy()) == list(GPUS.gpus)


def test_a_bundle_that_did_not_record_the_gpu_users_measures_no_gpu(tmp_path):
    found = Facts(ReplayHost(write_bundle(str(tmp_path / "b"), []))).get(gpu_users)
    refused = idle_gpus(Facts.given({nvidia: GPUS, gpu_users: found}), Policy())
    assert refused.status is Status.SKIP and "was not recorded" in refused.summary


# --- the command line ------------------------------------------------------------------


@pytest.fixture
def cli(tmp_path):
    """Run dldoctor with the stand-ins installed as a plugin and their tool on PATH."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    with open(STANDIN) as f:
        install_fake_distribution(plugins, "dldoctor-standin", f.read(), "dldoctor_standin")
    path, log, scratch = _tool(tmp_path, GOOD)
    base = {
        "PYTHONPATH": os.pathsep.join([str(plugins), os.environ.get("PYTHONPATH", "")]),
        "DLDOCTOR_NO_PLUGINS": "",
        "STANDIN_LOG": str(log),
        "DLDOCTOR_STANDIN_SCRATCH": str(scratch),
    }

    def run(*args, tool: bool = True, **env):
        return run_dldoctor(*args, env={**base, "PATH": path if tool else os.environ["PATH"],
                                        **env})  # fmt: skip

    run.log = log
    return run


def test_list_checks_marks_the_measuring_checks(cli):
    lines = cli("--list-checks").stdout.splitlines()
    standin = [line for line in lines if line.startswith("perf.standin.first")]
    assert standin and standin[0].split()[-2:] == ["(--active)", "[dldoctor-standin]"]
    assert not any("(--active)" in line for line in lines if line.startswith("gpu."))


def test_the_measuring_checks_run_only_with_active(cli):
    ids = ("--only", "perf.standin.first,system.kernel")
    refused = cli("--check", "--json", *ids)
    assert refused.returncode == 2
    assert "measuring checks (category perf) run only with --active" in refused.stderr
    passive = report_of(cli("--check", "--json", "--only", "system.kernel"))
    assert "perf.standin.first" not in verdicts(passive) and not cli.log.exists()
    report = report_of(cli("--check", "--json", "--active", *ids))
    first = {f["id"]: f for f in report["findings"]}["perf.standin.first"]
    assert first["status"] == "pass"
    assert [(f["value"], f["unit"]) for f in first["figures"]] == [(1.9, "GB/s")]


def test_force_without_active_is_a_usage_error_in_one_line(cli):
    proc = cli("--check", "--force")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert "--force: only with --active" in proc.stderr


@pytest.mark.parametrize(
    "argv",
    [["diff", "--active", "a", "b"], ["fix", "--active"], ["fleet", "report", "--active", "x"],
     ["fleet", "report", "--force", "x"], ["diff", "--force", "a", "b"]],
)  # fmt: skip
def test_commands_without_a_measurement_refuse_active_in_one_line(argv):
    proc = run_dldoctor(*argv)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    flag = next(a for a in argv if a.startswith("--"))
    assert proc.stderr.startswith(f"dldoctor {argv[0]}") and f": {flag}: " in proc.stderr


def test_a_snapshot_taken_with_active_replays_its_measurements(cli, tmp_path):
    dest = tmp_path / "active-bundle"
    only = ("--only", "perf.standin.first")
    snap = cli("snapshot", "--active", "--dir", "--no-redact", "-o", str(dest), *only)
    assert snap.returncode == 0, snap.stderr
    assert json.loads((dest / "manifest.json").read_text())["active"] is True
    cli.log.unlink()
    # No --active and no tool on PATH: the bundle's measurements are judged again.
    report = report_of(cli("--check", "--json", "--from", str(dest), *only, tool=False))
    first = {f["id"]: f for f in report["findings"]}["perf.standin.first"]
    assert first["status"] == "pass" and first["figures"][0]["value"] == 1.9
    assert not cli.log.exists()


def test_active_on_a_passive_bundle_and_on_foreign_inputs_skips_with_the_reason(cli, tmp_path):
    dest = tmp_path / "passive-bundle"
    assert (
        cli("snapshot", "--dir", "--no-redact", "-o", str(dest), "--only", "system").returncode == 0
    )
    assert "active" not in json.loads((dest / "manifest.json").read_text())
    inputs = {
        str(dest): "the bundle was taken without --active: it holds no measurements",
        str(FIXTURES / "foreign/sos/sosreport-host0-2026-12-01-hsxafrq.tar.xz"):
            "a sos report holds no measurements: the active tier measures on the host itself",
        str(FIXTURES / "bugreports/maz906-caffe-gtx-titan-x-352.63.log.gz"):
            "an nvidia-bug-report log holds no measurements: the active tier measures on the "
            "host itself",
    }  # fmt: skip
    for path, why in inputs.items():
        proc = cli("--check", "--json", "--active", "--from", path, "--only", "perf.standin")
        found = {f["id"]: f for f in report_of(proc)["findings"]}
        assert (found["perf.standin.first"]["status"], found["perf.standin.first"]["summary"]) == (
            "skip", why
        ), path  # fmt: skip
    assert not cli.log.exists()


def _with_tty_stderr(cli_env_run, *args):
    """Run with stderr on a pseudo-terminal (stdout a pipe): what it wrote to each."""
    leader, follower = pty.openpty()
    env = {**os.environ, **cli_env_run}
    proc = subprocess.Popen([sys.executable, "-m", "dldoctor", *args], stdout=subprocess.PIPE,
                            stderr=follower, env=env, text=True)  # fmt: skip
    os.close(follower)
    out = proc.communicate(timeout=60)[0]
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end is closed: all read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return out, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def test_progress_on_a_terminal_and_nothing_on_a_pipe_or_in_the_json(cli, tmp_path):
    env = {
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "plugins"), os.environ.get("PYTHONPATH", "")]),
        "DLDOCTOR_NO_PLUGINS": "",
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "STANDIN_LOG": str(cli.log),
        "DLDOCTOR_STANDIN_SCRATCH": str(tmp_path / "volume"),
    }  # fmt: skip
    args = ("--check", "--json", "--active", "--only", "perf.standin.first")
    out, err = _with_tty_stderr(env, *args)
    scratch = tmp_path / "volume"
    assert f"dldoctor: measuring the stand-in's first rate of {scratch} (≤ 5 s)…" in err
    assert "dldoctor: … 1.90 GB/s in " in err and "(perf.standin.first: pass)" in err
    assert json.loads(out)["findings"]  # stdout is the report alone
    piped = cli(*args)
    assert "measuring" not in piped.stderr and json.loads(piped.stdout)["findings"]


# --- slurm-healthcheck --active, fleet run --active --------------------------------------


def test_slurm_healthcheck_measures_within_slurms_limits(cli):
    args = ("slurm-healthcheck", "--active", "--only", "perf.standin.first")
    prolog = cli(*args, SLURM_JOB_ID="4242", SLURM_SCRIPT_CONTEXT="")
    assert prolog.returncode == 0, prolog.stderr
    assert prolog.stdout.startswith("dldoctor: healthy in ") and "cut" not in prolog.stderr
    assert len(_scratches(cli.log)) == 1  # measured
    health = cli(*args, SLURM_JOB_ID="", SLURM_SCRIPT_CONTEXT="")
    assert health.returncode == 0, health.stderr
    assert "timeouts.active_s (120 s) is cut to 20 s: in a health check the deadline and " \
        "the measuring budget together are at most 40 s" in health.stderr  # fmt: skip
    full = cli(*args, "--deadline", "40", SLURM_JOB_ID="", SLURM_SCRIPT_CONTEXT="")
    assert full.returncode == 2 and len(full.stderr.splitlines()) == 1
    assert "leaves no time to measure in a health check (40 s in all)" in full.stderr


def test_in_a_prolog_the_budget_is_cut_to_fit_the_batch_start_timeout():
    from dldoctor.slurm import MAX_PROLOG_S, _measuring_within, in_prolog

    assert in_prolog({"SLURM_JOB_ID": "7"}) and in_prolog({"SLURM_SCRIPT_CONTEXT": "prolog_slurmd"})
    assert not in_prolog({"SLURMD_NODENAME": "gpu01"})  # the HealthCheckProgram's whole env
    policy = Policy(timeouts=Timeouts(deadline_s=40, active_s=600))
    cut = _measuring_within(policy, prolog=True).timeouts
    assert cut.deadline_s + cut.active_s == MAX_PROLOG_S == 165
    assert _measuring_within(Policy(), prolog=True) == Policy()  # 20 + 120 fit


def test_fleet_run_active_asks_every_node_to_measure():
    from dldoctor.fleet.run import remote_command

    assert remote_command(policy=True, snapshot=False, active=True, force=True) == (
        "dldoctor --check --json --policy /dev/stdin --active --force"
    )
    snap = remote_command(policy=False, snapshot=True, active=True)
    assert 'dldoctor snapshot --output "$d/node.tar.gz" --active >/dev/null' in snap


# --- redaction, the app ----------------------------------------------------------------


def test_a_persons_name_in_the_gpu_users_probe_is_redacted(tmp_path):
    from dldoctor.snapshots.redact import Redactor, redact_bundle

    probes = tmp_path / "b" / "probes"
    probes.mkdir(parents=True)
    users = [{"pid": 4242, "user": "alice", "uid": 1001, "name": "python",
              "command": "python train.py --user alice", "devices": ["/dev/nvidia0"]}]  # fmt: skip
    (probes / "gpu_users.json").write_text(json.dumps({"status": "ok", "value": {"users": users}}))
    redact_bundle(str(tmp_path / "b"), Redactor())
    text = (probes / "gpu_users.json").read_text()
    assert "alice" not in text and "user-0001" in text


def test_the_command_line_ends_a_hung_measurement_within_its_budget(cli, tmp_path):
    fake_command(tmp_path / "bin", "standin-measure", HANGS)
    policy = tmp_path / "short.toml"
    policy.write_text("[timeouts]\nactive_s = 1.5\n")
    proc = cli("--check", "--json", "--active", "--only", "perf.standin.first,perf.standin.second",
               "--policy", str(policy), "--timeout", "0.5", "--deadline", "4",
               DLDOCTOR_STANDIN_COST_S="30")  # fmt: skip
    assert proc.returncode == 3, proc.stderr  # could not finish: no verdict on the host
    # The run's own clock (the interpreter's start-up under load is not the budget's): the
    # measuring window is 1.5 s and the 0.5 s probe window, the deadline 4 s more.
    assert report_of(proc)["duration_s"] < 4 + 1.5
    assert len(_scratches(cli.log)) == 1  # the second measurement never started
    summaries = sorted(f["summary"] for f in report_of(proc)["findings"])
    assert any("did not answer within" in s for s in summaries), summaries
    assert any(s.endswith("the run's measuring time was used up") for s in summaries)
