"""The installed CLI run as a user runs it, and what its JSON report says."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run_dldoctor(
    *args: str, env: dict | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    """The installed CLI in a child process, exactly as a user or CI job runs it."""
    full_env = {**os.environ, "DLDOCTOR_NO_PLUGINS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "dldoctor", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def report_of(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout)


def findings_of(report: dict) -> list[dict]:
    """The report's findings with their evidence by value, read as the model reads it."""
    from dldoctor.model import Report

    return [f.to_dict() for f in Report.from_dict(report).findings]


def verdicts(report: dict) -> dict[str, str]:
    return {f["id"]: f["status"] for f in report["findings"]}
