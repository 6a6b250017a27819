"""Every fixture host under fixtures/hosts/ replayed through the CLI gives the verdicts in
golden/<scenario>.json. To accept a deliberate change, run with DLDOCTOR_UPDATE_GOLDEN=1
and review the diff of golden/ like code."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.cli import report_of, run_dldoctor, verdicts
from tests.support.paths import FIXTURES, HOSTS, TESTS

GOLDEN = TESTS / "golden" / "hosts"
SCENARIOS = sorted(p.name for p in HOSTS.iterdir() if p.is_dir())


def test_every_scenario_has_a_golden_file():
    assert SCENARIOS, "no fixture hosts found"
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_replayed_verdicts_match_the_golden_file(scenario):
    golden_path = GOLDEN / f"{scenario}.json"
    golden = json.loads(golden_path.read_text()) if golden_path.exists() else {"args": []}
    args = [a.replace("{fixtures}", str(FIXTURES)) for a in golden.get("args", [])]
    proc = run_dldoctor("--check", "--json", "--from", str(HOSTS / scenario), *args)
    assert proc.stderr == "", proc.stderr
    report = report_of(proc)
    found = {
        "args": golden.get("args", []),
        "exit_code": proc.returncode,
        "host": {k: report["host"][k] for k in ("hostname", "os", "kernel")},
        "verdicts": {f["id"]: [f["status"], f["summary"]] for f in report["findings"]},
    }
    if os.environ.get("DLDOCTOR_UPDATE_GOLDEN"):
        golden_path.write_text(json.dumps(found, indent=2, ensure_ascii=False) + "\n")
    assert found == golden
    assert report["summary"]["exit_code"] == proc.returncode
    assert set(verdicts(report).values()) <= {"pass", "warn", "fail", "skip", "error"}
