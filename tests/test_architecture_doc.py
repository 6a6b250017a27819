"""docs/architecture.md's dependency table says what pyproject.toml says, and every runtime
dependency it lists is imported by the package (a dependency nothing imports is a defect)."""

from __future__ import annotations

import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
IMPORT_NAMES = {"nvidia-ml-py": "pynvml", "prometheus-client": "prometheus_client"}


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)


def _documented() -> dict[str, str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Dependencies\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            for name in re.findall(r"`([^`]+)`", cells[0]):
                rows[name] = cells[1]
    return rows


def test_the_dependency_table_is_pyprojects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_name(r) for r in project["dependencies"]}
    test = {_name(r) for r in project["optional-dependencies"]["test"]}
    documented = _documented()
    assert {n for n, extra in documented.items() if extra.startswith("runtime")} == runtime
    assert {n for n, extra in documented.items() if extra == "test"} == test


def test_every_runtime_dependency_is_imported_by_the_package():
    sources = "\n".join(
        p.read_text()
        for folder in ("doctor", "checks", "fixes", "snapshots")
        for p in (ROOT / folder).rglob("*.py")
    )
    for name, extra in _documented().items():
        if extra.startswith("runtime"):
            module = IMPORT_NAMES.get(name, name)
            assert re.search(rf"^\s*(import|from) {re.escape(module)}\b", sources, re.M), name
