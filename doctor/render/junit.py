"""The report as JUnit XML, for the CI systems that show test results (GitLab, Jenkins,
GitHub's test reporters): one testcase per finding, one testsuite per category. fail is a
failure, error an error, skip skipped; warn passes with its summary in system-out, unless
the run is strict, where it fails as the exit code does."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dldoctor.model import Finding, Report, Status


def render_junit(report: Report) -> bytes:
    suites = ET.Element("testsuites", name="dldoctor")
    by_category: dict[str, list[Finding]] = {}
    for f in report.findings:
        by_category.setdefault(f.category, []).append(f)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for category, findings in by_category.items():
        suite = ET.SubElement(suites, "testsuite", name=category)
        tally = {"tests": len(findings), "failures": 0, "errors": 0, "skipped": 0}
        for f in findings:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"dldoctor.{category}",
                name=f.id,
                time=f"{f.duration_s:.6f}",
            )
            if f.figures:  # what pytest's record_property writes: first in the testcase
                props = ET.SubElement(case, "properties")
                for g in f.figures:
                    ET.SubElement(props, "property", name=f"{g.subject} {g.what} {g.unit}",
                                  value=f"{g.value:.3f}".rstrip("0").rstrip("."))  # fmt: skip
            body = "\n".join(
                [*f.details, *([f"What to do: {f.remediation}"] if f.remediation else [])]
            )
            if f.status == Status.FAIL or (f.status == Status.WARN and report.strict):
                tally["failures"] += 1
                element = ET.SubElement(case, "failure", message=f.summary, type=f.status.value)
                element.text = body
            elif f.status == Status.ERROR:
                tally["errors"] += 1
                ET.SubElement(case, "error", message=f.summary, type="error").text = body
            elif f.status == Status.SKIP:
                tally["skipped"] += 1
                ET.SubElement(case, "skipped", message=f.summary)
            elif f.status == Status.WARN:
                ET.SubElement(case, "system-out").text = f"warning: {f.summary}\n{body}".rstrip()
        for key, value in tally.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        suites.set(key, str(value))
    suites.set("time", f"{report.duration_s:.6f}")
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"
