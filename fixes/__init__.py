"""Guided fixes: a Plan of typed, undoable Steps per fix family. The transaction machinery
(preview, journal and backups first, rollback, undo) is `plan.py`, the re-checks after it
`verify.py`, `dldoctor fix` is `command.py`.

`REGISTRY` holds the fixes that exist, by id: where each Plan builder lives (a function of
the facts and the run's policy, as a check is: a fix aims at the threshold its check
judges by), imported only
when a fix is previewed or applied (every Finding asks `known()`, `--check` included, and
must not pay for the fix machinery). Checks keep the ids of the fixes they plan
(`fix.gpu.persistence`), but a Finding lists only the ids `known()` here, so no report
offers a fix that cannot be previewed or applied.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

REGISTRY: dict[str, str] = {  # fix id -> "module:function" of its Plan builder
    "fix.gpu.blacklist_nouveau": "dldoctor.fixes.gpu:blacklist_nouveau",
    "fix.gpu.persistence": "dldoctor.fixes.gpu:persistence",
    "fix.cpu.governor": "dldoctor.fixes.cpu:governor",
    "fix.limits.memlock": "dldoctor.fixes.limits:memlock",
    "fix.limits.nofile": "dldoctor.fixes.limits:nofile",
    "fix.network.load_peermem": "dldoctor.fixes.network:load_peermem",
    "fix.network.roce_mtu": "dldoctor.fixes.network:roce_mtu",
    "fix.memory.devshm": "dldoctor.fixes.memory:devshm",
    "fix.numa.balancing": "dldoctor.fixes.numa:numa_balancing",
    "fix.pci.iommu_passthrough": "dldoctor.fixes.boot:iommu_passthrough",
}


def known(ids: Iterable[str]) -> tuple[str, ...]:
    """The ids among `ids` that name a registered fix, in their order."""
    return tuple(i for i in ids if i in REGISTRY)


def builder(fix_id: str) -> Callable[[Any, Any], Any] | None:
    """The function from the facts and the policy to the fix's Plan; None for an unknown
    id."""
    where = REGISTRY.get(fix_id)
    if where is None:
        return None
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)
