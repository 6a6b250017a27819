"""Loose version numbers as the systems write them: `5.15.0-91-generic`, `22.04`, `535.154.02`."""

from __future__ import annotations

import re

MAX_PART_DIGITS = 4300  # int()'s limit for a string; no release number comes near it
_LEADING = re.compile(r"\d+(?:\.\d+)*")


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """The leading dotted number of `text` as ints, or None if it has none.

    `22.04` is (22, 4): release numbers compare numerically, so 22.10 > 22.04.
    A part longer than int() reads makes the whole text unparseable.
    """
    if not text:
        return None
    m = _LEADING.search(text.strip())
    if m is None:
        return None
    parts = m.group(0).split(".")
    if any(len(p) > MAX_PART_DIGITS for p in parts):
        return None
    return tuple(int(p) for p in parts)


def at_least(found: str | None, minimum: str) -> bool | None:
    """found >= minimum, comparing as many parts as `minimum` has; None if unparseable."""
    have, want = version_tuple(found), version_tuple(minimum)
    if have is None or want is None:
        return None
    width = max(len(have), len(want))
    return have + (0,) * (width - len(have)) >= want + (0,) * (width - len(want))


def matches(found: str | None, pin: str) -> bool | None:
    """found is the pinned version or a release of it ("550.54.15" matches "550" and
    "550.54.15", not "550.54.14"; "12.4" matches "12.4.0"); None if unparseable."""
    have, want = version_tuple(found), version_tuple(pin)
    if have is None or want is None:
        return None
    return (have + (0,) * len(want))[: len(want)] == want
