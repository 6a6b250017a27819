"""Report schema 2 keeps each answer a finding rests on once per report, and schema 1 reports
(tests/fixtures/reports/*-schema1.json, written by dldoctor before the bump) are still read
by the model, `dldoctor diff` and `dldoctor fleet report` (docs/report-schema.md,
"Migration")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dldoctor.diagnose import diagnose
from dldoctor.fleet.nodes import parse
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Report
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS

REPORTS = Path(__file__).parent / "fixtures" / "reports"
SCHEMA1 = {p.name.removesuffix("-schema1.json"): p for p in REPORTS.glob("*-schema1.json")}


def schema1(host: str) -> dict:
    return json.loads(SCHEMA1[host].read_text())


def as_schema2(doc: dict) -> dict:
    return json.loads(json.dumps(Report.from_dict(doc).to_dict()))


def resolved(doc: dict) -> list[list[dict]]:
    """Each finding's evidence by value, resolved here by hand from the document."""
    if doc["schema_version"] == 1:
        return [f["evidence"] for f in doc["findings"]]
    return [[doc["evidence"][i] for i in f["evidence"]] for f in doc["findings"]]


def test_the_schema1_fixtures_are_schema1_reports_with_evidence_by_value():
    assert set(SCHEMA1) == {"hgx-h100x8-healthy", "workstation-rtx4090-nouveau"}
    for host in SCHEMA1:
        doc = schema1(host)
        assert doc["schema_version"] == 1 and "evidence" not in doc
        assert any(f["evidence"] and isinstance(f["evidence"][0], dict) for f in doc["findings"])


def test_the_8_gpu_healthy_report_is_at_most_150_kb_and_lists_each_answer_once():
    proc = run_dldoctor("--check", "--json", "--from", str(HOSTS / "hgx-h100x8-healthy"))
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.encode()) <= 150_000  # 366 kB in schema 1
    doc = report_of(proc)
    table = [json.dumps(e, sort_keys=True) for e in doc["evidence"]]
    assert len(set(table)) == len(table)
    used = {i for f in doc["findings"] for i in f["evidence"]}
    assert used == set(range(len(table)))  # none unused, none missing
    by_id = {f["id"]: f["evidence"] for f in doc["findings"]}
    assert set(by_id["pci.link.width"]) == set(by_id["pci.link.speed"])  # shared, not copied


@pytest.mark.parametrize("host", sorted(SCHEMA1))
def test_schema1_and_schema2_give_each_finding_the_same_evidence(host):
    old = schema1(host)
    new = as_schema2(old)
    assert new["schema_version"] == 2
    assert resolved(new) == resolved(old)
    assert Report.from_dict(new).findings == Report.from_dict(old).findings
    for key in ("host", "summary", "inventory", "timings", "started_at", "tool"):
        assert new[key] == old[key], key


def test_a_report_written_and_read_again_keeps_every_findings_evidence():
    report = diagnose(ReplayHost(str(HOSTS / "hgx-h100x8-healthy")), Policy(),
                      ordered(builtin_checks()))  # fmt: skip
    again = Report.from_dict(json.loads(json.dumps(report.to_dict())))
    assert [f.evidence for f in again.findings] == [f.evidence for f in report.findings]
    assert sum(len(f.evidence) for f in again.findings) > 1000


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: d["findings"][0]["evidence"].append(len(d["evidence"])),
        lambda d: d["findings"][0]["evidence"].append(-1),
        lambda d: d["findings"][0]["evidence"].append(True),
        lambda d: d["findings"][0]["evidence"].append({"op": "read", "key": "/x", "status": "ok"}),
        lambda d: d.update(schema_version=3),
    ],
)
def test_an_evidence_reference_that_is_not_an_index_is_refused(spoil):
    doc = as_schema2(schema1("workstation-rtx4090-nouveau"))
    spoil(doc)
    with pytest.raises(ValueError):
        Report.from_dict(doc)


def test_diff_reads_schema1_and_schema2_reports_alike(tmp_path):
    old = SCHEMA1["hgx-h100x8-healthy"]
    new = tmp_path / "healthy-schema2.json"
    new.write_text(json.dumps(as_schema2(schema1("hgx-h100x8-healthy"))))
    same = run_dldoctor("diff", str(old), str(new))
    assert same.returncode == 0, same.stderr
    assert same.stdout == f"{old} and {new} are equivalent\n"
    other_old = SCHEMA1["workstation-rtx4090-nouveau"]
    other_new = tmp_path / "nouveau-schema2.json"
    other_new.write_text(json.dumps(as_schema2(schema1("workstation-rtx4090-nouveau"))))
    by_old = run_dldoctor("diff", "--json", str(old), str(other_old))
    by_new = run_dldoctor("diff", "--json", str(new), str(other_new))
    assert by_old.returncode == by_new.returncode == 1, by_old.stderr + by_new.stderr
    found_old, found_new = json.loads(by_old.stdout), json.loads(by_new.stdout)
    for doc in (found_old, found_new):
        doc.pop("a"), doc.pop("b")  # the paths
    assert found_old == found_new and found_old["findings"]["changed"]


def test_fleet_report_reads_schema1_and_schema2_reports_alike(tmp_path):
    healthy = schema1("hgx-h100x8-healthy")
    one, two = parse(json.dumps(healthy).encode()), parse(json.dumps(as_schema2(healthy)).encode())
    assert (one.host, one.findings, one.inventory) == (two.host, two.findings, two.inventory)
    assert len(one.findings) > 50
    found = []
    shutil.copy(SCHEMA1["workstation-rtx4090-nouveau"], tmp_path / "node2.json")
    for doc in (healthy, as_schema2(healthy)):  # the same path read in each schema
        (tmp_path / "node1.json").write_text(json.dumps(doc, separators=(",", ":")))
        proc = run_dldoctor("fleet", "report", "--json", str(tmp_path))
        assert proc.returncode == 1, proc.stderr  # node2 fails a check
        found.append(json.loads(proc.stdout))
    assert found[0] == found[1]
    assert found[0]["summary"]["nodes"]["reported"] == 2
    assert found[0]["summary"]["failing"]["nodes"] == "node2"


def test_fleet_reads_a_schema2_report_in_any_layout_as_a_full_parse_does():
    from dldoctor.fleet.nodes import _report

    doc = as_schema2(schema1("hgx-h100x8-healthy"))
    compact = json.dumps(doc, separators=(",", ":"), ensure_ascii=True).encode()
    whole = parse(json.dumps(doc, indent=1).encode())  # another layout
    assert parse(compact) == whole == _report(json.loads(compact))
    assert len(whole.findings) == len(doc["findings"])


def test_figures_are_read_and_written_again_as_they_were_and_old_reports_hold_none():
    from tests.support.perffigures import measured_report

    report = measured_report(slow={("gemm_bf16", 5): 0.8})
    doc = json.loads(json.dumps(report.to_dict()))
    again = Report.from_dict(doc)
    assert [f.figures for f in again.findings] == [f.figures for f in report.findings]
    assert json.loads(json.dumps(again.to_dict())) == doc
    assert [f.figures[5].value for f in again.findings if f.id == "perf.gpu.gemm"] == [
        557.1
    ]  # 0.8 of 696.4
    for host in SCHEMA1:  # written before figures existed: read, with none
        old = Report.from_dict(schema1(host))
        assert old.findings and all(f.figures == () for f in old.findings)
        assert all("figures" not in f for f in as_schema2(schema1(host))["findings"])
