"""Watching what a test makes dldoctor open."""

from __future__ import annotations

import os


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
