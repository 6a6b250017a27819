"""fix.cpu.governor under a temporary root copied from a fixture host whose CPUs are set
to powersave: each CPU's scaling_governor written in place, a tmpfiles.d line for the boot
(or tuned's profile where tuned runs), re-checked, undone byte for byte."""

from __future__ import annotations

import os
import shutil

import pytest

from dldoctor.facts import Facts
from dldoctor.facts.cpu import CPU_ROOT
from dldoctor.fixes import builder
from dldoctor.fixes.cpu import TMPFILES_CONF, TUNED_PROFILE
from dldoctor.fixes.plan import Target, apply, undo
from dldoctor.fixes.verify import recheck, verdict
from dldoctor.host.live import LiveHost
from dldoctor.policy import CpuPolicy, Policy
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS
from tests.support.recording import Recorder
from tests.support.trees import tree

FIX = "fix.cpu.governor"


def _root(tmp_path, release_from: str):
    root = tmp_path / "root"
    shutil.copytree(HOSTS / "hgx-h100x8-healthy/files", root, symlinks=True)
    shutil.copy(HOSTS / release_from / "files/etc/os-release", root / "etc/os-release")
    cpus = root / CPU_ROOT.lstrip("/")
    for governor in cpus.glob("cpu*/cpufreq/scaling_governor"):
        governor.write_text("powersave\n")
        (governor.parent / "scaling_available_governors").write_text("performance powersave\n")
    return root


def _governors(root) -> set[str]:
    return {
        p.read_text() for p in (root / CPU_ROOT.lstrip("/")).glob("cpu*/cpufreq/scaling_governor")
    }


@pytest.mark.parametrize(
    "release_from, tuned, persistent, commands",
    [
        ("hgx-h100x8-healthy", None, TMPFILES_CONF, []),
        ("rhel72-legacy", None, TMPFILES_CONF, []),
        # RHEL's default: tuned sets its profile's governor at boot, so the profile changes.
        ("rhel72-legacy", "balanced\n", None,
         [["tuned-adm", "profile", "throughput-performance"]]),
    ],
)  # fmt: skip
def test_governor_previewed_applied_fixed_and_undone(tmp_path, release_from, tuned, persistent,
                                                     commands):  # fmt: skip
    root = _root(tmp_path, release_from)
    if tuned:
        (root / TUNED_PROFILE.lstrip("/")).parent.mkdir(parents=True)
        (root / TUNED_PROFILE.lstrip("/")).write_text(tuned)
    assert recheck(("cpu.governor",), LiveHost(str(root)), Policy()) == {"cpu.governor": "warn"}
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    runner = Recorder()
    target = Target(str(root), runner)
    before = tree(root)
    text = plan.preview(target)
    assert tree(root) == before and runner.ran == []
    assert (
        "1-64. set /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor = performance "
        "in 64 files (now powersave on 64)" in text
    )

    record = apply(plan, target)
    assert runner.ran == commands
    assert _governors(root) == {"performance\n"}
    if persistent:
        assert (root / persistent.lstrip("/")).read_text().splitlines()[1] == (
            "w /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor - - - - performance"
        )
    else:
        assert not (root / TMPFILES_CONF.lstrip("/")).exists()
    statuses = recheck(plan.resolves, LiveHost(str(root)), Policy())
    assert (
        statuses == {"cpu.governor": "pass"} and verdict(plan, statuses, rebooted=False) == "fixed"
    )

    undo(record["id"], target)
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before
    if tuned:
        assert runner.ran[-1] == ["tuned-adm", "profile", "balanced"]


def test_cpus_without_the_governor_and_daemons_that_override_it_are_named(tmp_path):
    root = _root(tmp_path, "hgx-h100x8-healthy")
    cpu7 = root / CPU_ROOT.lstrip("/") / "cpu7/cpufreq"
    (cpu7 / "scaling_available_governors").write_text("powersave\n")
    wants = root / "etc/systemd/system/graphical.target.wants"
    wants.mkdir(parents=True)
    os.symlink("/usr/lib/systemd/system/power-profiles-daemon.service",
               wants / "power-profiles-daemon.service")  # fmt: skip
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    written = [s.path for s in plan.steps if hasattr(s, "value")]
    assert len(written) == 63 and f"{CPU_ROOT}/cpu7/cpufreq/scaling_governor" not in written
    assert any(n.startswith("1 CPU(s) offer no performance governor") for n in plan.notes)
    assert any("powerprofilesctl set performance" in n for n in plan.notes)


def test_the_finding_offers_the_fix_and_the_cli_applies_it(tmp_path):
    root = _root(tmp_path, "hgx-h100x8-healthy")
    report = report_of(run_dldoctor("--check", "--json", "--only", "cpu.governor",
                                    "--root", str(root)))  # fmt: skip
    (finding,) = report["findings"]
    assert finding["status"] == "warn" and finding["fixes"] == [FIX]
    applied = run_dldoctor("fix", FIX, "--apply", "--yes", "--root", str(root))
    assert applied.returncode == 0, applied.stderr
    assert "fixed (cpu.governor pass)" in applied.stdout


def test_the_governor_is_the_policys(tmp_path):
    root = _root(tmp_path, "hgx-h100x8-healthy")
    for offered in (root / CPU_ROOT.lstrip("/")).glob("cpu*/cpufreq/scaling_available_governors"):
        offered.write_text("performance schedutil powersave\n")
    site = Policy(cpu=CpuPolicy(governor="schedutil"))
    assert recheck(("cpu.governor",), LiveHost(str(root)), site) == {"cpu.governor": "warn"}
    plan = builder(FIX)(Facts(LiveHost(str(root))), site)
    assert {s.value for s in plan.steps if hasattr(s, "value")} == {"schedutil"}
    assert plan.steps[-1].content.endswith(b"scaling_governor - - - - schedutil\n")
    target = Target(str(root), Recorder())
    record = apply(plan, target)
    assert _governors(root) == {"schedutil\n"}
    # Verified by the site's governor: under the built-in one, schedutil is still a warning.
    assert recheck(plan.resolves, LiveHost(str(root)), site) == {"cpu.governor": "pass"}
    assert recheck(plan.resolves, LiveHost(str(root)), Policy()) == {"cpu.governor": "warn"}
    undo(record["id"], target)
    assert _governors(root) == {"powersave\n"}
