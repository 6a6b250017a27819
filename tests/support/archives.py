"""Tar archive members made up for a test."""

from __future__ import annotations

import tarfile


def member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", **attrs):
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, len(data) if kind == tarfile.REGTYPE else 0
    for key, value in attrs.items():
        setattr(info, key, value)
    return info, data
