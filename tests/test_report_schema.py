"""The report's JSON Schema (draft 2020-12): shipped in the package, printed by `dldoctor
--schema`, the same as docs/report.schema.json, and every report the project produces
validates against it — each fixture host's, a `--strict` one, this machine's live run, a
bundle's report.json — while reports with a wrong field do not."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from dldoctor.diagnose import diagnose
from dldoctor.host.replay import ReplayHost
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS

DOCS = Path(__file__).parent.parent / "docs" / "report.schema.json"


@pytest.fixture(scope="module")
def schema() -> dict:
    printed = run_dldoctor("--schema")
    assert printed.returncode == 0, printed.stderr
    found = json.loads(printed.stdout)
    jsonschema.Draft202012Validator.check_schema(found)
    return found


def validate(schema: dict, report: dict) -> None:
    jsonschema.Draft202012Validator(schema).validate(report)


def test_the_printed_schema_is_the_one_in_docs(schema):
    assert json.loads(DOCS.read_text(encoding="utf-8")) == schema


@pytest.mark.parametrize("host", sorted(p.name for p in HOSTS.iterdir() if p.is_dir()))
def test_every_fixture_hosts_report_validates(schema, host):
    report = diagnose(ReplayHost(str(HOSTS / host)), Policy(), ordered(builtin_checks()))
    validate(schema, json.loads(json.dumps(report.to_dict())))


def test_this_machines_live_report_and_a_strict_one_validate(schema):
    live = report_of(run_dldoctor("--check", "--json"))
    validate(schema, live)
    strict = report_of(run_dldoctor("--check", "--json", "--strict", "--from",
                                    str(HOSTS / "hgx-h100x8-numa-balancing")))  # fmt: skip
    assert strict["strict"] is True and strict["summary"]["exit_code"] == 1
    validate(schema, strict)


def test_a_snapshots_report_validates(schema, tmp_path):
    dest = tmp_path / "snap"
    made = run_dldoctor("snapshot", "--dir", "-o", str(dest), "--no-redact")
    assert made.returncode == 0, made.stderr
    validate(schema, json.loads((dest / "report.json").read_text()))


@pytest.mark.parametrize(
    "spoil",
    [
        lambda r: r.update(schema_version=1),  # schema 1 is read (test_report_versions.py)
        lambda r: r.update(schema_version=3),
        lambda r: r["summary"].update(status="maybe"),
        lambda r: r["findings"][0].update(status="ok"),
        lambda r: r["findings"][0].pop("summary"),
        lambda r: r["evidence"].append({"op": "guess", "key": "x", "status": "ok"}),
        lambda r: r["findings"][0]["evidence"].append(dict(r["evidence"][0])),  # by value
        lambda r: r["findings"][0]["evidence"].append(-1),
        lambda r: r.pop("evidence"),
        lambda r: r["findings"][0].update(fixes=["blacklist"]),
        lambda r: r.update(extra=True),
        lambda r: r.update(started_at="yesterday"),
    ],
)
def test_a_report_with_a_wrong_field_does_not_validate(schema, spoil):
    report = diagnose(ReplayHost(str(HOSTS / "workstation-rtx4090-nouveau")), Policy(),
                      ordered(builtin_checks())).to_dict()  # fmt: skip
    report = json.loads(json.dumps(report))
    validate(schema, report)
    broken = copy.deepcopy(report)
    spoil(broken)
    with pytest.raises(jsonschema.ValidationError):
        validate(schema, broken)


# --- the active tier's figures (docs/report-schema.md, `figures`) ---------------------


def _measured_doc() -> dict:
    from tests.support.perffigures import measured_report

    return json.loads(json.dumps(measured_report(slow={("hbm_copy", 3): 0.54}).to_dict()))


def test_a_report_with_figures_validates_and_keeps_them(schema):
    doc = _measured_doc()
    validate(schema, doc)
    perf = {f["id"]: f for f in doc["findings"] if f["category"] == "perf"}
    assert perf["perf.gpu.memory"]["status"] == "fail"
    gpu3 = perf["perf.gpu.memory"]["figures"][3]
    assert gpu3["subject"] == "GPU 3" and gpu3["unit"] == "GB/s" and gpu3["reference"] == 3350
    assert "reference" not in perf["perf.disk.read"]["figures"][0]  # none known: left out
    # Only a measuring check's finding holds the key: a passive report is as it was.
    assert all("figures" not in f for f in doc["findings"] if f["category"] != "perf")


@pytest.mark.parametrize(
    "spoil",
    [
        lambda f: f.update(figures=[]),  # left out when empty, never []
        lambda f: f["figures"][0].pop("unit"),
        lambda f: f["figures"][0].update(value="2610"),
        lambda f: f["figures"][0].update(what="HBM copy"),
        lambda f: f["figures"][0].update(reference=0),
        lambda f: f["figures"][0].pop("source"),  # a reference says where it comes from
        lambda f: f["figures"][0].update(floor=0.75),
    ],
)
def test_a_figure_with_a_wrong_field_does_not_validate(schema, spoil):
    doc = _measured_doc()
    broken = copy.deepcopy(doc)
    spoil(next(f for f in broken["findings"] if f["id"] == "perf.gpu.memory"))
    with pytest.raises(jsonschema.ValidationError):
        validate(schema, broken)
