"""Guided fixes: a Plan of typed, undoable Steps per fix family. The transaction machinery
(preview, journal and backups first, rollback, undo) is `plan.py`, the re-checks after it
`verify.py`.

`REGISTRY` holds the fixes that exist, by id. Checks keep the ids of the fixes they plan
(`fix.gpu.blacklist_nouveau`), but a Finding lists only the ids `known()` here, so no report
offers a fix that cannot be previewed or applied. Nothing is registered yet.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _registry() -> dict[str, Any]:
    from dldoctor.fixes import gpu, network

    return {
        "fix.gpu.blacklist_nouveau": gpu.blacklist_nouveau,
        "fix.network.load_peermem": network.load_peermem,
    }


REGISTRY: dict[str, Any] = _registry()  # fix id -> its Plan builder, from the facts


def known(ids: Iterable[str]) -> tuple[str, ...]:
    """The ids among `ids` that name a registered fix, in their order."""
    return tuple(i for i in ids if i in REGISTRY)
