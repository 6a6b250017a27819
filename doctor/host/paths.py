"""Path resolution confined to a root directory (a fixture tree or a bundle's files/).

sysfs is made of links, many absolute or climbing with `..`. Inside a root they must
resolve as if the root were `/` (chroot semantics), and never lead out of it.
"""

from __future__ import annotations

import errno
import os

MAX_LINKS = 40


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p and p != "."]


def resolve_in_root(root: str, path: str, *, follow_last: bool = True) -> str:
    """Map absolute `path` to a real path under `root`, following links inside the root."""
    pending = _parts(path)
    done: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = os.path.join(root, *done, part)
        if (pending or follow_last) and os.path.islink(candidate):
            hops += 1
            if hops > MAX_LINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", path)
            target = os.readlink(candidate)
            if target.startswith("/"):
                done = []
            pending = _parts(target) + pending
            continue
        done.append(part)
    return os.path.join(root, *done)
