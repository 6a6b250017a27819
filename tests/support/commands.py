"""Fake commands: small shell scripts put first on PATH in place of real tools."""

from __future__ import annotations

import stat


def fake_command(bindir, name: str, script: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
