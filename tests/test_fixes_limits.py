"""fix.limits.memlock and fix.limits.nofile under a temporary root copied from a fixture
host: previewed, applied, re-checked, undone byte for byte, on an Ubuntu and a RHEL
os-release.

The re-check runs the checks through LiveHost, whose commands are real: `systemctl show`
would ask this machine's systemd. A fake `systemctl` first on PATH stands in for the
fixture's: `show` prints what the fixture host recorded, with the Limit* settings of the
drop-ins under the root loaded at the last `daemon-reload`, as systemd reports a unit's
configuration (not its running process's) once reloaded. The fix's own commands go
through the same fake, so its daemon-reload and undo's reload are what the re-check sees.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from dldoctor.facts import Facts
from dldoctor.fixes import builder
from dldoctor.fixes.limits import drop_in, limits_file
from dldoctor.fixes.plan import (
    CommandOutcome,
    FixError,
    Journal,
    RunCommand,
    Target,
    WriteFile,
    apply,
    undo,
)
from dldoctor.fixes.verify import BOOT_ID, after_boot, recheck, verdict
from dldoctor.host.live import LiveHost
from dldoctor.policy import LimitsPolicy, Policy
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS
from tests.support.recording import Recorder
from tests.support.trees import tree

DEFAULTS = HOSTS / "hgx-h100x8-default-limits"  # containerd at 8 MiB memlock, logins 1024 files
MEMLOCK_64K = HOSTS / "hgx-h100x8-memlock-64k"  # limits.conf: `* hard memlock 64`
FAMILIES = ["hgx-h100x8-default-limits", "rhel72-legacy"]  # Ubuntu 22.04, RHEL 7.2

FAKE_SYSTEMCTL = """\
import json, os, sys
bundle, root, state, log = {bundle!r}, {root!r}, {state!r}, {log!r}
args = sys.argv[1:]
with open(log, "a") as f:
    f.write(json.dumps(args) + "\\n")
if args == ["daemon-reload"]:
    loaded, units = {{}}, os.path.join(root, "etc/systemd/system")
    for folder in sorted(os.listdir(units)) if os.path.isdir(units) else ():
        for name in sorted(os.listdir(os.path.join(units, folder))):
            if folder.endswith(".d") and name.endswith(".conf"):
                for line in open(os.path.join(units, folder, name)):
                    key, _, value = line.strip().partition("=")
                    if key.startswith("Limit"):
                        loaded.setdefault(folder[:-2], {{}})[key] = value
    json.dump(loaded, open(state, "w"))
    sys.exit(0)
loaded = json.load(open(state)) if os.path.exists(state) else {{}}
for name in os.listdir(os.path.join(bundle, "commands")):
    folder = os.path.join(bundle, "commands", name)
    info = json.load(open(os.path.join(folder, "command.json")))
    if info["argv"] == ["systemctl", *args]:
        unit = None
        for line in open(os.path.join(folder, "stdout")).read().splitlines():
            key, sep, value = line.partition("=")
            unit = value if key == "Id" else unit
            print(f"{{key}}={{loaded.get(unit, {{}}).get(key, value)}}" if sep else line)
        sys.exit(info["returncode"])
sys.exit(f"fake systemctl: {{args}} was not recorded")
"""


def fake_systemctl(tmp_path, bundle, root):
    """A bin folder holding the fake systemctl; its log of calls."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "systemctl.log"
    script = FAKE_SYSTEMCTL.format(
        bundle=str(bundle), root=str(root), state=str(tmp_path / "loaded.json"), log=str(log)
    )
    (bindir / "systemctl").write_text(f"#!{sys.executable}\n{script}")
    (bindir / "systemctl").chmod(0o755)
    return bindir, log


def calls(log) -> list[list[str]]:
    """The fake's calls other than `show` (the checks' questions)."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [a for a in map(json.loads, lines) if a[:1] != ["show"]]


class ThroughFakes(Recorder):
    """Records each command the fix runs and runs it from the fakes' bin folder."""

    def __init__(self, bindir):
        super().__init__()
        self.bindir = bindir

    def __call__(self, argv):
        self.ran.append(list(argv))
        proc = subprocess.run([str(self.bindir / argv[0]), *argv[1:]], capture_output=True)
        return CommandOutcome(proc.returncode, (proc.stdout + proc.stderr).decode())


def setup(tmp_path, host, release_from):
    root = tmp_path / "root"
    shutil.copytree(host / "files", root, symlinks=True)
    shutil.copy(HOSTS / release_from / "files/etc/os-release", root / "etc/os-release")
    (root / BOOT_ID.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    (root / BOOT_ID.lstrip("/")).write_text("11111111-boot-one\n")
    bindir, log = fake_systemctl(tmp_path, host, root)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    return root, env, log, Target(str(root), ThroughFakes(bindir))


ROWS = {"memlock": "Max locked memory", "nofile": "Max open files"}


def new_session(root, item: str, value: str) -> None:
    """The next boot (or login): a new boot id, and pam_limits having set what the limits.d
    file asks on the session dldoctor then runs in (/proc/self/limits, soft and hard)."""
    (root / BOOT_ID.lstrip("/")).write_text("22222222-boot-two\n")
    limits = root / "proc/self/limits"
    row = re.compile(rf"^({ROWS[item]}\s+)\S+\s+\S+", re.M)
    text, n = row.subn(lambda m: f"{m.group(1)}{value:<20} {value:<20}", limits.read_text())
    assert n == 1
    limits.write_text(text)


def restored_but_the_session(root, before) -> bool:
    """Every file as it was before the apply, but the two new_session() changed."""
    session = {"proc/self/limits", BOOT_ID.lstrip("/")}
    after = {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k}
    return {k: v for k, v in after.items() if k not in session} == {
        k: v for k, v in before.items() if k not in session
    }


def plan_for(root, env, fix_id):
    return builder(fix_id)(Facts(LiveHost(str(root), env=env)), Policy())


@pytest.mark.parametrize(
    "host, check, fix_id",
    [
        (DEFAULTS, "limits.memlock", "fix.limits.memlock"),
        (DEFAULTS, "limits.nofile", "fix.limits.nofile"),
        (MEMLOCK_64K, "limits.memlock", "fix.limits.memlock"),
    ],
)
def test_the_finding_offers_the_fix(host, check, fix_id):
    report = report_of(run_dldoctor("--check", "--json", "--from", str(host)))
    (finding,) = [f for f in report["findings"] if f["id"] == check]
    assert finding["status"] == "warn" and finding["fixes"] == [fix_id]


@pytest.mark.parametrize("fix_id", ["fix.limits.memlock", "fix.limits.nofile"])
def test_both_families_get_the_same_plan(tmp_path, fix_id):
    item = fix_id.rsplit(".", 1)[1]
    plans = []
    for release_from in FAMILIES:
        root, env, log, _ = setup(tmp_path / release_from, DEFAULTS, release_from)
        plans.append(plan_for(root, env, fix_id))
    assert plans[0] == plans[1]
    plan = plans[0]
    value = {"memlock": ("unlimited", "infinity"), "nofile": ("1048576", "1048576")}[item]
    header = f"# written by dldoctor ({fix_id})\n"
    logins = "".join(
        f"{w} {k} {item} {value[0]}\n" for w in ("*", "root") for k in ("soft", "hard")
    )
    # docker.service and kubelet.service are limited too, but jobs do not inherit from them
    # here: containers are containerd's children, and kubelet starts none.
    assert plan.steps == (
        WriteFile(limits_file(item), (header + logins).encode()),
        WriteFile(
            drop_in("containerd.service", item),
            f"{header}[Service]\nLimit{item.upper()}={value[1]}\n".encode(),
        ),
        RunCommand(("systemctl", "daemon-reload"), regenerate=True),
    )
    assert plan.resolves == (f"limits.{item}",) and plan.reboot
    assert any("`systemctl restart containerd.service`" in n for n in plan.notes)
    assert any(n.startswith(f"new login sessions get {item} {value[0]}") for n in plan.notes)
    assert calls(log) == []  # building the plan only asked


@pytest.mark.parametrize("release_from", FAMILIES)
def test_memlock_on_a_containerd_node_passes_once_systemd_reloaded(tmp_path, release_from):
    root, env, log, target = setup(tmp_path, DEFAULTS, release_from)
    plan, runner, before = plan_for(root, env, "fix.limits.memlock"), target.runner, tree(root)
    text = plan.preview(target)
    assert tree(root) == before and runner.ran == [] and calls(log) == []
    assert "+LimitMEMLOCK=infinity" in text and "+root hard memlock unlimited" in text

    record = apply(plan, target)
    assert runner.ran == [["systemctl", "daemon-reload"]]
    unit_file = root / drop_in("containerd.service", "memlock").lstrip("/")
    assert unit_file.read_text().endswith("[Service]\nLimitMEMLOCK=infinity\n")
    # The check judges containerd by the unit's configuration, which systemd reports as
    # infinity right after the reload (containerd itself keeps 8 MiB until its restart),
    # and this process is already unlimited (90-rdma.conf): so it passes now, but what
    # runs keeps the old limit until the reboot the plan asks for.
    statuses = recheck(plan.resolves, LiveHost(str(root), env=env), Policy())
    assert statuses == {"limits.memlock": "pass"}
    assert verdict(plan, statuses, rebooted=False) == (
        "pending a reboot (its checks already pass on the configuration)"
    )

    undo(record["id"], target)
    assert runner.ran == [["systemctl", "daemon-reload"]] * 2  # reloaded after the restore
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before
    assert recheck(plan.resolves, LiveHost(str(root), env=env), Policy()) == {
        "limits.memlock": "warn"
    }


@pytest.mark.parametrize("release_from", FAMILIES)
def test_nofile_is_pending_until_a_new_session(tmp_path, release_from):
    root, env, log, target = setup(tmp_path, DEFAULTS, release_from)
    plan, runner, before = plan_for(root, env, "fix.limits.nofile"), target.runner, tree(root)
    assert "+* soft nofile 1048576" in plan.preview(target)
    assert tree(root) == before and runner.ran == []

    record = apply(plan, target)
    assert runner.ran == [["systemctl", "daemon-reload"]]
    # limits.nofile judges this process's soft limit, still 1024: only a new session (or
    # the reboot) gets the limits.d value.
    statuses = recheck(plan.resolves, LiveHost(str(root), env=env), Policy())
    assert statuses == {"limits.nofile": "warn"}
    record["verdict"] = verdict(plan, statuses, rebooted=False)
    assert record["verdict"] == "pending a reboot"
    Journal(target).save(record)
    assert after_boot(target, LiveHost(str(root), env=env), Policy()) == []  # same boot

    new_session(root, "nofile", "1048576")
    (judged,) = after_boot(target, LiveHost(str(root), env=env), Policy())
    assert judged["verdict"] == "verified after reboot"

    undo(record["id"], target)
    assert runner.ran == [["systemctl", "daemon-reload"]] * 2
    assert restored_but_the_session(root, before)


@pytest.mark.parametrize("release_from", FAMILIES)
def test_memlock_limited_by_limits_conf_waits_for_the_reboot(tmp_path, release_from):
    root, env, log, target = setup(tmp_path, MEMLOCK_64K, release_from)
    plan, runner, before = plan_for(root, env, "fix.limits.memlock"), target.runner, tree(root)
    # slurmd is already unlimited: nothing for systemd, only the limits.d file, which pam
    # reads after limits.conf and so wins over its `* hard memlock 64`.
    assert [s.path for s in plan.steps] == [limits_file("memlock")]
    assert not any("limits.conf" in n for n in plan.notes)
    assert any("PropagateResourceLimitsExcept=MEMLOCK" in n for n in plan.notes)
    record = apply(plan, target)
    assert runner.ran == []
    # This process is still at 64 KiB, and limits.conf still names a limit: warn.
    statuses = recheck(plan.resolves, LiveHost(str(root), env=env), Policy())
    assert statuses == {"limits.memlock": "warn"}
    record["verdict"] = verdict(plan, statuses, rebooted=False)
    assert record["verdict"] == "pending a reboot"
    Journal(target).save(record)

    new_session(root, "memlock", "unlimited")
    (judged,) = after_boot(target, LiveHost(str(root), env=env), Policy())
    assert judged["verdict"] == "verified after reboot"
    undo(record["id"], target)
    assert restored_but_the_session(root, before)


def test_lines_that_win_over_the_fix_are_named(tmp_path):
    root, env, _, _ = setup(tmp_path, DEFAULTS, "hgx-h100x8-default-limits")
    (root / "etc/security/limits.conf").write_text(
        "* soft nofile 1024\n@train hard nofile 8192\nroot soft nofile 2048\n"
    )
    (root / "etc/security/limits.d/95-site.conf").write_text("* soft nofile 4096\n")
    (root / "proc/sys/fs").mkdir(parents=True, exist_ok=True)
    (root / "proc/sys/fs/nr_open").write_text("524288\n")
    plan = plan_for(root, env, "fix.limits.nofile")
    named = [n.split(" still applies")[0] for n in plan.notes if "still applies" in n]
    # limits.conf's `*` and `root` lines come before ours and lose to it.
    assert named == [
        "/etc/security/limits.conf:2 (@train hard nofile 8192)",
        "/etc/security/limits.d/95-site.conf:1 (* soft nofile 4096)",
    ]
    # fs.nr_open is the most a login or a service may ask for: more fails them.
    assert b"* hard nofile 524288\n" in plan.steps[0].content
    # containerd's 524288 is that most already: no drop-in, no reload.
    assert [s.path for s in plan.steps] == [limits_file("nofile")]


def test_no_plan_without_the_units(tmp_path):
    root, env, _, _ = setup(tmp_path, DEFAULTS, "hgx-h100x8-default-limits")
    # systemctl there, but refused (its interpreter may not be executed): the units are
    # unknown, and a plan without their drop-ins would be a guess.
    (tmp_path / "not-executable").write_text("")
    (tmp_path / "bin/systemctl").write_text(f"#!{tmp_path}/not-executable\n")
    with pytest.raises(FixError, match="fix.limits.memlock: cannot plan .*permission denied"):
        plan_for(root, env, "fix.limits.memlock")


def test_applied_and_undone_through_the_cli(tmp_path):
    root, env, log, _ = setup(tmp_path, DEFAULTS, "hgx-h100x8-default-limits")
    env = {"PATH": env["PATH"]}
    before = tree(root)
    preview = run_dldoctor("fix", "fix.limits.memlock", "--root", str(root), env=env)
    assert preview.returncode == 0 and "systemctl restart containerd.service" in preview.stdout
    assert tree(root) == before and calls(log) == []
    applied = run_dldoctor(
        "fix", "fix.limits.memlock", "--apply", "--yes", "--root", str(root), env=env
    )
    assert applied.returncode == 0, applied.stderr
    assert "pending a reboot (its checks already pass on the configuration)" in applied.stdout
    assert calls(log) == [["daemon-reload"]]
    journal_id = run_dldoctor("fix", "--history", "--root", str(root), env=env).stdout.split()[0]
    undone = run_dldoctor("fix", "--undo", journal_id, "--root", str(root), env=env)
    assert undone.returncode == 0, undone.stderr
    assert calls(log) == [["daemon-reload"]] * 2
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before


def site_policy(tmp_path, nofile: int):
    path = tmp_path / "site.toml"
    path.write_text(f"[limits]\nmin_nofile = {nofile}\n")
    return path


def test_a_policy_asking_more_open_files_is_what_the_fix_aims_at(tmp_path):
    root, env, log, target = setup(tmp_path, DEFAULTS, "hgx-h100x8-default-limits")
    policy, before = site_policy(tmp_path, 2097152), tree(root)
    preview = run_dldoctor("fix", "fix.limits.nofile", "--root", str(root), "--policy",
                           str(policy), env={"PATH": env["PATH"]})  # fmt: skip
    assert preview.returncode == 0, preview.stderr
    assert "+* soft nofile 2097152" in preview.stdout and "1048576" not in preview.stdout
    assert "+LimitNOFILE=2097152" in preview.stdout  # containerd's 524288 is below it too
    assert tree(root) == before and calls(log) == []
    # fs.nr_open caps what a login may ask for: the fix stays within it and says why the
    # policy's floor cannot be met by limits alone.
    (root / "proc/sys/fs").mkdir(parents=True, exist_ok=True)
    (root / "proc/sys/fs/nr_open").write_text("1048576\n")
    plan = builder("fix.limits.nofile")(Facts(LiveHost(str(root), env=env)),
                                        Policy(limits=LimitsPolicy(min_nofile=2097152)))  # fmt: skip
    assert b"* soft nofile 1048576\n" in plan.steps[0].content
    assert plan.notes[0].startswith("the policy asks for 2097152 open files, more than fs.nr_open")


def test_a_fix_meeting_the_built_in_floor_but_not_the_sites_is_not_verified(tmp_path):
    root, env, log, _ = setup(tmp_path, DEFAULTS, "hgx-h100x8-default-limits")
    env = {"PATH": env["PATH"]}
    applied = run_dldoctor("fix", "fix.limits.nofile", "--apply", "--yes", "--root", str(root),
                           env=env)  # fmt: skip
    assert applied.returncode == 0 and "pending a reboot" in applied.stdout, applied.stderr
    new_session(root, "nofile", "1048576")  # what the built-in plan gave the next login
    # The site's checks want twice that: the first look after the boot judges under them.
    policy = site_policy(tmp_path, 2097152)
    history = run_dldoctor("fix", "--history", "--root", str(root), "--policy", str(policy),
                           env=env)  # fmt: skip
    assert history.returncode == 0, history.stderr
    assert "fix.limits.nofile" in history.stdout and "applied: did not take" in history.stdout


def test_the_run_after_the_boot_judges_a_pending_fix_under_its_policy(tmp_path):
    root, env, log, target = setup(tmp_path, DEFAULTS, "hgx-h100x8-default-limits")
    plan = plan_for(root, env, "fix.limits.nofile")
    record = apply(plan, target)
    record["verdict"] = "pending a reboot"
    Journal(target).save(record)
    new_session(root, "nofile", "1048576")
    host = LiveHost(str(root), env=env)
    assert recheck(plan.resolves, host, Policy()) == {"limits.nofile": "pass"}
    site = Policy(limits=LimitsPolicy(min_nofile=2097152))
    assert recheck(plan.resolves, host, site) == {"limits.nofile": "warn"}
    checked = run_dldoctor("--check", "--only", "limits", "--root", str(root), "--policy",
                           str(site_policy(tmp_path, 2097152)), env={"PATH": env["PATH"]})  # fmt: skip
    assert f"fix fix.limits.nofile: did not take ({record['id']})" in checked.stderr
