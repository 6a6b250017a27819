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
    # What the protocol answers when dldoctor could not run at all (bad arguments, an
    # unreadable bundle, a crash): "module:function", (message) -> (stdout bytes, exit code).
    failure: str = ""

    def render(self, report: Report) -> bytes:
        return _load(self.renderer)(report)

    def exit_code(self, report: Report) -> int | None:
        return _load(self.exit_codes)(report) if self.exit_codes else None

    def failed(self, message: str) -> tuple[bytes, int] | None:
        return _load(self.failure)(message) if self.failure else None


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
            "nagios",
            "dldoctor.render.nagios:render_nagios",
            "a Nagios/Icinga plugin's status line and exit code (docs/monitoring.md)",
            exit_codes="dldoctor.render.nagios:nagios_state",
            failure="dldoctor.render.nagios:nagios_failure",
        ),
        Format(
            "npd",
            "dldoctor.render.npd:render_npd",
            "a node-problem-detector custom plugin's message and exit code",
            exit_codes="dldoctor.render.npd:npd_exit_code",
            failure="dldoctor.render.npd:npd_failure",
        ),
        Format(
            "md",
            "dldoctor.render.markdown:render_markdown_summary",
            "a Markdown summary for a CI job's page",
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


def asked(argv: list[str]) -> Format | None:
    """The format `--format NAME` (or `--format=NAME`) names in a command line not parsed
    yet: the plugin protocols answer for dldoctor's own failures too, argparse's included."""
    found = None
    for i, arg in enumerate(argv):
        name = argv[i + 1] if arg == "--format" and i + 1 < len(argv) else ""
        name = arg.partition("=")[2] if arg.startswith("--format=") else name
        found = FORMATS.get(name, found)  # the last one counts, as for argparse
    return found
