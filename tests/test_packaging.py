"""The wheel holds every module of the four folders, under dldoctor/ and nowhere else."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"doctor": "dldoctor", "checks": "dldoctor/checks", "fixes": "dldoctor/fixes",
           "snapshots": "dldoctor/snapshots"}  # fmt: skip


def test_wheel_contents(tmp_path):
    # Build from a clean copy: a stale build/ folder in the checkout could hide a module
    # that setuptools no longer picks up.
    src = tmp_path / "src"
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path), str(src)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("dldoctor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for folder, package in FOLDERS.items():
        for py in (ROOT / folder).rglob("*.py"):
            expected.add(f"{package}/{py.relative_to(ROOT / folder).as_posix()}")
    assert expected - names == set(), "modules missing from the wheel"
    top = {n.split("/", 1)[0] for n in names}
    assert not top & {"checks", "fixes", "snapshots", "doctor", "tests"}
    assert {t for t in top if not t.endswith(".dist-info")} == {"dldoctor"}
