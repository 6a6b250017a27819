"""Fix ids in findings: only fixes that exist are offered (fixes/ registers none yet)."""

from __future__ import annotations

from dldoctor import fixes
from dldoctor.checks import gpu
from dldoctor.facts import Facts
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Finding, Status
from dldoctor.policy import Policy
from dldoctor.runner import run_check
from tests.conftest import HOSTS, report_of, run_dldoctor

NOUVEAU = str(HOSTS / "workstation-rtx4090-nouveau")


def test_known_keeps_registered_ids_in_order(monkeypatch):
    assert fixes.known(["fix.gpu.blacklist_nouveau", "fix.gpu.persistence"]) == ()
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


def test_a_check_keeps_its_planned_fix_and_the_runner_offers_it_once_registered(monkeypatch):
    spec = gpu.nouveau.__dldoctor_check__
    assert spec.fixes == ("fix.gpu.blacklist_nouveau",)  # planned, in the check's code
    facts = Facts(ReplayHost(NOUVEAU))
    finding = run_check(spec, facts, Policy())
    assert finding.status == Status.FAIL and finding.fixes == ()
    monkeypatch.setitem(fixes.REGISTRY, "fix.gpu.blacklist_nouveau", object())
    again = run_check(spec, Facts(facts.host), Policy())
    assert again.fixes == ("fix.gpu.blacklist_nouveau",)


def test_no_report_offers_a_fix_that_does_not_exist():
    report = report_of(run_dldoctor("--check", "--json", "--from", NOUVEAU))
    nouveau = next(f for f in report["findings"] if f["id"] == "gpu.nouveau")
    assert nouveau["status"] == "fail" and nouveau["fixes"] == []
    text = run_dldoctor("--check", "--from", NOUVEAU, "--color", "never").stdout
    assert "[✗] Nouveau" in text and "fix:" not in text
