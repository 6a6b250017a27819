from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.cli import run_dldoctor
from tests.support.paths import HOSTS


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


@pytest.fixture
def refused(tmp_path):
    """Run `--from ARCHIVE` with a private TMPDIR; check the refusal and that nothing was
    left anywhere under tmp_path but the archive itself."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()

    def check(archive: Path, message: str) -> str:
        before = sorted(tmp_path.rglob("*"))
        proc = run_dldoctor("--from", str(archive), "--json", env={"TMPDIR": str(tmpdir)})
        assert proc.returncode == 4, proc.stderr
        assert proc.stdout == ""
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and message in lines[0], proc.stderr
        assert lines[0].startswith(f"dldoctor: {archive}: ")
        assert list(tmpdir.iterdir()) == []
        assert sorted(tmp_path.rglob("*")) == before
        return lines[0]

    return check
