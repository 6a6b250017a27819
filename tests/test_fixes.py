"""Fix ids in findings: only fixes that exist are offered (a check may plan a fix id that
is not registered, like fix.x.planned below)."""

from __future__ import annotations

from dldoctor import fixes
from dldoctor.checks import driver
from dldoctor.facts import Facts
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Finding, Status
from dldoctor.policy import Policy
from dldoctor.runner import run_check
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS

NOUVEAU = str(HOSTS / "workstation-rtx4090-nouveau")


def test_known_keeps_registered_ids_in_order(monkeypatch):
    assert fixes.known(["fix.gpu.not_yet", "fix.gpu.blacklist_nouveau"]) == (
        "fix.gpu.blacklist_nouveau",
    )
    monkeypatch.setitem(fixes.REGISTRY, "fix.b", object())
    monkeypatch.setitem(fixes.REGISTRY, "fix.a", object())
    assert fixes.known(["fix.a", "fix.planned", "fix.b"]) == ("fix.a", "fix.b")


def test_a_finding_lists_only_registered_fixes(monkeypatch):
    planned = Finding("x.y", "X", "x", Status.FAIL, "broken", fixes=("fix.x.planned",))
    assert planned.fixes == ()
    monkeypatch.setitem(fixes.REGISTRY, "fix.x.real", object())
    both = Finding("x.y", "X", "x", Status.FAIL, "broken", fixes=("fix.x.planned", "fix.x.real"))
    assert both.fixes == ("fix.x.real",)
    assert Finding.from_dict(both.to_dict()) == both


def test_a_check_keeps_its_planned_fix_and_the_runner_offers_it_only_registered(monkeypatch):
    spec = driver.nouveau.__dldoctor_check__
    assert spec.fixes == ("fix.gpu.blacklist_nouveau",)  # planned, in the check's code
    facts = Facts(ReplayHost(NOUVEAU))
    offered = run_check(spec, facts, Policy())
    assert offered.status == Status.FAIL and offered.fixes == ("fix.gpu.blacklist_nouveau",)
    monkeypatch.delitem(fixes.REGISTRY, "fix.gpu.blacklist_nouveau")
    again = run_check(spec, Facts(facts.host), Policy())
    assert again.status == Status.FAIL and again.fixes == ()


def test_the_nouveau_finding_offers_its_fix_in_the_report():
    report = report_of(run_dldoctor("--check", "--json", "--from", NOUVEAU))
    nouveau = next(f for f in report["findings"] if f["id"] == "gpu.nouveau")
    assert nouveau["status"] == "fail" and nouveau["fixes"] == ["fix.gpu.blacklist_nouveau"]
    ids = {i for f in report["findings"] for i in f["fixes"]}
    assert ids <= set(fixes.REGISTRY)  # no report offers a fix that does not exist


def test_every_registered_fix_has_a_builder_and_check_runs_do_not_load_them():
    import subprocess
    import sys

    for fix_id in fixes.REGISTRY:
        assert callable(fixes.builder(fix_id)), fix_id
    assert fixes.builder("fix.no.such") is None
    code = ("import sys, dldoctor.fixes as f; from dldoctor.model import Finding, Status; "
            "Finding('a.b', 'A', 'a', Status.FAIL, 'x', fixes=('fix.gpu.blacklist_nouveau',)); "
            "print(sorted(m for m in sys.modules if m.startswith('dldoctor.fixes.')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
