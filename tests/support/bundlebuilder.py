"""Builds bundle directories for tests, in the documented format (docs/bundle-format.md).

Hand-written scenarios live in fixtures/hosts/; this builder makes the small and the
synthetic ones (odd answers, broken bundles) without a file per case.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dldoctor.snapshots.bundle import command_folders, probe_relpath


class BundleBuilder:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._answers: dict[str, dict] = {}

    def file(self, path: str, content: str | bytes) -> BundleBuilder:
        target = self.root / "files" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
        return self

    def link(self, path: str, target: str) -> BundleBuilder:
        where = self.root / "files" / path.lstrip("/")
        where.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, where)
        return self

    def command(self, argv: list[str], stdout: str = "", *, stderr: str = "", returncode: int = 0,
                status: str = "ok", **meta) -> BundleBuilder:  # fmt: skip
        folder = self.root / "commands" / command_folders(argv)[0]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "stdout").write_text(stdout)
        (folder / "stderr").write_text(stderr)
        info = {"argv": argv, "status": status, "returncode": returncode, **meta}
        (folder / "command.json").write_text(json.dumps(info))
        return self

    def probe(self, name: str, value, status: str = "ok") -> BundleBuilder:
        target = self.root / probe_relpath(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"status": status, "value": value}))
        return self

    def answer(self, op: str, key: str, **meta) -> BundleBuilder:
        self._answers.setdefault(op, {})[key] = meta
        (self.root / "answers.json").write_text(json.dumps(self._answers))
        return self
