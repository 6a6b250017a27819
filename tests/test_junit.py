"""`--junit FILE`: the report as JUnit XML, parsed back by an independent library
(junitparser): one testcase per finding in a testsuite per category, fail a failure,
error an error, skip skipped, warn passing with its summary in system-out unless
--strict. The file is replaced atomically, and an unwritable one is exit 6 in one line."""

from __future__ import annotations

import os

import junitparser

from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS


def _cases(path) -> dict[str, junitparser.TestCase]:
    xml = junitparser.JUnitXml.fromfile(str(path))
    return {case.name: case for suite in xml for case in suite}


def test_every_finding_is_a_testcase_with_its_status(tmp_path):
    out = tmp_path / "dldoctor.xml"
    proc = run_dldoctor(
        "--check", "--json", "--from", str(HOSTS / "hgx-h100x8-numa-balancing"), "--junit", str(out)
    )
    report = report_of(proc)
    cases = _cases(out)
    assert set(cases) == {f["id"] for f in report["findings"]}
    for f in report["findings"]:
        case = cases[f["id"]]
        assert case.classname == f"dldoctor.{f['category']}"
        kinds = {type(r).__name__ for r in case.result}
        expected = {"fail": {"Failure"}, "error": {"Error"}, "skip": {"Skipped"}}.get(
            f["status"], set()
        )
        assert kinds == expected, (f["id"], f["status"], kinds)
        if f["status"] == "warn":
            assert f["summary"] in (case.system_out or "")
    xml = junitparser.JUnitXml.fromfile(str(out))
    counts = report["summary"]["counts"]
    assert xml.tests == len(report["findings"]) and xml.skipped == counts["skip"]
    assert xml.failures == counts["fail"] and xml.errors == counts["error"]
    assert {s.name for s in xml} == {f["category"] for f in report["findings"]}


def test_strict_makes_a_warning_a_failure(tmp_path):
    out = tmp_path / "strict.xml"
    run_dldoctor(
        "--check",
        "--strict",
        "--from",
        str(HOSTS / "hgx-h100x8-numa-balancing"),
        "--junit",
        str(out),
    )
    (failure,) = _cases(out)["numa.balancing"].result
    assert isinstance(failure, junitparser.Failure) and failure.type == "warn"


def test_the_file_is_replaced_whole_and_an_unwritable_one_is_exit_6(tmp_path):
    out = tmp_path / "dldoctor.xml"
    out.write_text("an old report a collector may be reading\n")
    inode = out.stat().st_ino
    proc = run_dldoctor("--check", "--from", str(HOSTS / "hgx-h100x8-healthy"), "--junit", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_ino != inode  # a new file renamed over the old, never rewritten
    assert junitparser.JUnitXml.fromfile(str(out)).tests > 0
    assert os.listdir(tmp_path) == ["dldoctor.xml"]  # no temporary file left
    nowhere = tmp_path / "missing" / "x.xml"
    failed = run_dldoctor(
        "--check", "--from", str(HOSTS / "hgx-h100x8-healthy"), "--junit", str(nowhere)
    )
    assert failed.returncode == 6
    assert failed.stderr.strip().splitlines()[-1].startswith(f"dldoctor: cannot write {nowhere}")


def test_a_measuring_checks_figures_are_its_testcases_properties():
    import xml.etree.ElementTree as _ET

    from dldoctor.render.junit import render_junit as _render
    from tests.support.perffigures import measured_report

    root = _ET.fromstring(_render(measured_report(slow={("hbm_copy", 3): 0.54})))
    case = root.find(".//testcase[@name='perf.gpu.memory']")
    assert case is not None and case[0].tag == "properties" and case.find("failure") is not None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["GPU 3 hbm_copy GB/s"] == "1409.4" and len(props) == 8
    assert root.find(".//testcase[@name='system.os.release']/properties") is None
