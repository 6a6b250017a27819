"""No module imports a private `_name` from another: what two modules share is public."""

from __future__ import annotations

import ast

from tests.support.paths import TESTS

SOURCES = [
    p for d in ("doctor", "checks", "fixes", "snapshots") for p in (TESTS.parent / d).rglob("*.py")
]


def test_no_module_imports_a_private_name_of_another():
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dldoctor"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(
                            f"{path.relative_to(TESTS.parent)}: {node.module}.{alias.name}"
                        )
    assert SOURCES and not found, found
