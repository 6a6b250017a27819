"""fix.gpu.blacklist_nouveau under a temporary root copied from a fixture host: previewed,
applied with the distribution's initramfs tool (recorded, not run), re-checked on the
changed root, verified after a simulated boot, undone byte for byte."""

from __future__ import annotations

import shutil

import pytest

from dldoctor.facts import Facts
from dldoctor.fixes import builder
from dldoctor.fixes.gpu import NOUVEAU_CONF
from dldoctor.fixes.plan import Journal, Target, apply, undo
from dldoctor.fixes.verify import BOOT_ID, after_boot, recheck, verdict
from dldoctor.host.live import LiveHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Report
from dldoctor.policy import Policy
from tests.support.fixroots import boot_without_nouveau
from tests.support.paths import HOSTS
from tests.support.recording import Recorder
from tests.support.trees import tree

NOUVEAU_HOST = HOSTS / "workstation-rtx4090-nouveau"


def _root(tmp_path, release_from: str):
    root = tmp_path / "root"
    shutil.copytree(NOUVEAU_HOST / "files", root, symlinks=True)
    shutil.copy(HOSTS / release_from / "files/etc/os-release", root / "etc/os-release")
    (root / BOOT_ID.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    (root / BOOT_ID.lstrip("/")).write_text("11111111-boot-one\n")
    return root


@pytest.mark.parametrize(
    "release_from, rebuild",
    [("workstation-rtx4090-nouveau", ["update-initramfs", "-u"]),
     ("rhel72-legacy", ["dracut", "-f"])],
)  # fmt: skip
def test_blacklist_nouveau_previewed_applied_verified_undone(tmp_path, release_from, rebuild):
    root = _root(tmp_path, release_from)
    host = LiveHost(str(root))
    plan = builder("fix.gpu.blacklist_nouveau")(Facts(host), Policy())
    runner = Recorder()
    target = Target(str(root), runner)
    before = tree(root)
    text = plan.preview(target)
    assert tree(root) == before and runner.ran == []
    assert f"+++ b{NOUVEAU_CONF}" in text and "+blacklist nouveau" in text
    assert f"run {' '.join(rebuild)}" in text

    record = apply(plan, target)
    assert runner.ran == [rebuild]
    assert (
        (root / NOUVEAU_CONF.lstrip("/"))
        .read_text()
        .endswith("blacklist nouveau\noptions nouveau modeset=0\n")
    )
    # Still loaded until the boot: the check fails, now naming the blacklist.
    statuses = recheck(plan.resolves, LiveHost(str(root)), Policy())
    assert statuses == {"gpu.nouveau": "fail"}
    assert verdict(plan, statuses, rebooted=False) == "pending a reboot"
    record["verdict"] = "pending a reboot"
    Journal(target).save(record)
    assert (
        after_boot(target, LiveHost(str(root)), Policy()) == []
    )  # same boot: nothing to judge yet

    boot_without_nouveau(root)
    (judged,) = after_boot(target, LiveHost(str(root)), Policy())
    assert judged["verdict"] == "verified after reboot"

    undo(record["id"], target)
    assert not (root / NOUVEAU_CONF.lstrip("/")).exists()
    assert runner.ran[-1] == rebuild  # the initramfs rebuilt after the file was removed


def test_an_unknown_distribution_gets_no_guessed_tool(tmp_path):
    root = _root(tmp_path, "workstation-rtx4090-nouveau")
    (root / "etc/os-release").write_text('ID=plan9\nNAME="Plan 9"\n')
    plan = builder("fix.gpu.blacklist_nouveau")(Facts(LiveHost(str(root))), Policy())
    assert [type(s).__name__ for s in plan.steps] == ["WriteFile"]
    assert any("rebuild the initramfs yourself" in n for n in plan.notes)


def test_the_nouveau_finding_offers_the_fix():
    from dldoctor.diagnose import diagnose
    from dldoctor.policy import Policy
    from dldoctor.registry import builtin_checks

    specs = [s for s in builtin_checks() if s.id == "gpu.nouveau"]
    report: Report = diagnose(ReplayHost(str(NOUVEAU_HOST)), Policy(), specs)
    (finding,) = report.findings
    assert finding.status.value == "fail" and finding.fixes == ("fix.gpu.blacklist_nouveau",)


@pytest.mark.parametrize(
    "statuses, reboot, rebooted, expected",
    [
        ({"a": "pass"}, False, False, "fixed"),
        ({"a": "pass"}, True, True, "verified after reboot"),
        (
            {"a": "pass"},
            True,
            False,
            "pending a reboot (its checks already pass on the configuration)",
        ),
        ({"a": "fail"}, True, False, "pending a reboot"),
        ({"a": "fail"}, False, False, "still failing"),
        ({"a": "warn"}, True, True, "did not take"),
        ({"a": "pass", "b": "skip"}, False, False, "not verified: the checks could not judge it"),
        ({"a": "error"}, True, False, "not verified: the checks could not judge it"),
        ({}, False, False, "not verified: the checks could not judge it"),
    ],
)
def test_verdict_is_fixed_only_when_every_resolved_check_passes(
    statuses, reboot, rebooted, expected
):
    assert verdict({"reboot": reboot}, statuses, rebooted=rebooted) == expected


def test_a_fix_undone_before_its_reboot_is_not_judged_after_it(tmp_path):
    root = _root(tmp_path, "workstation-rtx4090-nouveau")
    target = Target(str(root), Recorder())
    plan = builder("fix.gpu.blacklist_nouveau")(Facts(LiveHost(str(root))), Policy())
    record = apply(plan, target)
    record["verdict"] = "pending a reboot"
    Journal(target).save(record)
    undo(record["id"], target)
    (root / BOOT_ID.lstrip("/")).write_text("22222222-boot-two\n")
    assert after_boot(target, LiveHost(str(root)), Policy()) == []
    assert Journal(target).load(record["id"])["state"] == "undone"
