"""The output formats of a `--check` run, by name: `--format NAME` (stdout, or `--output
FILE`) and, for the ones a collector reads from a file, `--NAME FILE` beside it.

Each renderer is named as "module:function" and imported only when used: `--check --json`
loads no XML or Prometheus code. A renderer takes the report and returns the bytes to
write. A format that is a monitoring system's plugin protocol (Nagios, node-problem-
detector) also owns the exit code, which that protocol defines.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from dldoctor.model import Report


@dataclass(frozen=True)
class Format:
    name: str
    renderer: str  # "module:function", (report) -> bytes
    help: str
    file_flag: bool = False  # also offered as `--NAME FILE`, an output beside stdout's
    exit_codes: str = ""  # "module:function", (report) -> int, where the protocol says

    def render(self, report: Report) -> bytes:
        return _load(self.renderer)(report)

    def exit_code(self, report: Report) -> int | None:
        return _load(self.exit_codes)(report) if self.exit_codes else None


def _load(name: str) -> Callable:
    module, function = name.split(":")
    return getattr(importlib.import_module(module), function)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("text", "dldoctor.render.text:text_bytes", "the checklist (the default)"),
        Format("json", "dldoctor.render.jsondoc:json_bytes", "the report (docs/report-schema.md)"),
        Format(
            "junit",
            "dldoctor.render.junit:render_junit",
            "JUnit XML, a testcase per finding",
            file_flag=True,
        ),
        Format(
            "prometheus",
            "dldoctor.render.prometheus:render_prometheus",
            "a textfile for node_exporter (docs/prometheus.md)",
            file_flag=True,
        ),
    )
}
