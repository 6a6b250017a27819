"""Reading helpers shared by the facts: links followed through the Host (so a bundle
replays them), and the one rule for an answer that is neither ok nor missing."""

from __future__ import annotations

import posixpath

from dldoctor.facts import FactContext
from dldoctor.host.base import MISSING, Answer

LINK_HOPS = 8


def follow(ctx: FactContext, path: str) -> str:
    """Follow symbolic links at the last component of `path` (alternatives chains too)."""
    path = posixpath.normpath(path)
    for _ in range(LINK_HOPS):
        answer = ctx.host.readlink(path)
        if not answer.ok or not isinstance(answer.value, str) or not answer.value:
            break
        path = posixpath.normpath(posixpath.join(posixpath.dirname(path), answer.value))
    return path


def realpath(ctx: FactContext, path: str, cache: dict[str, str], depth: int = 0) -> str:
    """Every component's links resolved (`venv/lib64 -> lib`), via the Host's readlink.
    A relative path is returned as it is: it names nothing on the host."""
    if not path.startswith("/"):
        return path
    path = posixpath.normpath(path)
    if path in ("/", "//"):
        return "/"
    if path in cache:
        return cache[path]
    parent = realpath(ctx, posixpath.dirname(path), cache, depth)
    here = posixpath.join(parent, posixpath.basename(path))
    result = here
    if depth < 4 * LINK_HOPS:
        answer = ctx.host.readlink(here)
        if answer.ok and isinstance(answer.value, str) and answer.value:
            result = realpath(ctx, posixpath.join(parent, answer.value), cache, depth + 1)
    cache[path] = result
    return result


def note_unless_missing(notes: list[str], answer: Answer) -> None:
    """An answer that is neither ok nor missing becomes a note of the item it concerns."""
    if answer.status != MISSING and not answer.ok:
        notes.append(answer.describe())
