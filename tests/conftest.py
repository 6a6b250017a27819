from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"
HOSTS = FIXTURES / "hosts"


# Tests of what a user without root gets: .ci/run runs them (`-m nonroot`) as an
# unprivileged user; under root, which reads everything, they cannot show it.
NONROOT = (
    pytest.mark.nonroot,
    pytest.mark.skipif(
        os.geteuid() == 0, reason="root reads everything: .ci/run runs these as nobody"
    ),
)


def nonroot(test):
    for mark in NONROOT:
        test = mark(test)
    return test


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


def verdicts(report: dict) -> dict[str, str]:
    return {f["id"]: f["status"] for f in report["findings"]}


@pytest.fixture(autouse=True, scope="session")
def _private_config(tmp_path_factory):
    """Every dldoctor a test starts keeps its redaction map in a temporary folder, never
    in the account's ~/.config."""
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("config"))


@pytest.fixture
def hosts() -> Path:
    return HOSTS


@pytest.fixture(scope="session")
def incomplete_host(tmp_path_factory) -> Path:
    """hgx-h100x8-healthy whose `getconf GNU_LIBC_VERSION` timed out, recorded as a
    RecordingHost records a command that did not answer (as docker-ubuntu2004-lowmem's):
    nothing wrong found, one check that could not finish (exit 3)."""
    bundle = tmp_path_factory.mktemp("incomplete") / "hgx-h100x8-libc-timeout"
    shutil.copytree(HOSTS / "hgx-h100x8-healthy", bundle, symlinks=True)
    folder = bundle / "commands" / "getconf_GNU_LIBC_VERSION"
    for name in ("stdout", "stderr"):
        (folder / name).unlink()
    argv = ["getconf", "GNU_LIBC_VERSION"]
    info = {"argv": argv, "status": "timeout", "timeout_s": 10.0, "duration_s": 10.0}
    (folder / "command.json").write_text(json.dumps(info))
    return bundle


# Hypothesis: a bounded run in the normal suite; DLDOCTOR_DEEP=1 for a long, random one.
# The normal suite is derandomized and keeps no example database: CI and every checkout
# run the same examples, so a red CI is a defect anyone can reproduce, never a dice roll
# (new inputs are found by the deep runs, and kept as regression tests).
settings.register_profile(
    "default",
    max_examples=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "deep",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("deep" if os.environ.get("DLDOCTOR_DEEP") == "1" else "default")


def watch_opens(monkeypatch) -> list[str]:
    """Every path os.open is asked for from now on, for a test to show what was never
    opened (a FIFO, a device, a file behind a link)."""
    opened: list[str] = []
    real_open = os.open

    def watched_open(path, *args, **kwargs):
        opened.append(os.fsdecode(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", watched_open)
    return opened
