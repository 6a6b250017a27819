"""Checks: declared with @check, discovered from dldoctor.checks and from plugins.

The decorator only attaches a descriptor to the function (no global list fills up at
import time), so a check stays a plain function that tests can call with hand-built facts.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType

from dldoctor.model import Outcome

ENTRY_POINT_GROUP = "dldoctor.checks"
NO_PLUGINS_ENV = "DLDOCTOR_NO_PLUGINS"
_MARK = "__dldoctor_check__"

# What a check needs before it can judge: a function of the facts answering None (go on)
# or the Outcome that stands instead of the check's (usually a skip that says why).
Requirement = Callable[..., Outcome | None]

# Display order of categories; unknown (plugin) categories follow, alphabetically.
CATEGORY_ORDER = (
    "system",
    "gpu",
    "cuda",
    "nccl",
    "pci",
    "numa",
    "cpu",
    "memory",
    "limits",
    "container",
    "storage",
    "network",
    "kubernetes",
    "thermal",
    "perf",  # the active tier's measurements (docs/active.md)
    "plugins",
)
# Within a category, the built-in modules that share it, in display order (the gpu checks
# are split by subject); a module not named here follows them, by name.
MODULE_ORDER = tuple(
    f"dldoctor.checks.{name}"
    for name in (
        "driver",
        "nvlink",
        "gpu_memory",
        "gpu_processes",
        "precision",
        "xid",
        "amd",
        "nvswitch",
    )
)


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    category: str
    fn: Callable[..., Outcome]
    remediation: str = ""
    fixes: tuple[str, ...] = ()
    source: str = "builtin"
    order: int = 0  # line of definition: checks keep their module's reading order
    requires: tuple[Requirement, ...] = ()
    # A measuring check (the active tier): run only when asked (`--active`, or replaying a
    # bundle that holds measurements), under the active budget, not the per-check limit.
    active: bool = False


def check(
    id: str,
    title: str,
    *,
    category: str | None = None,
    remediation: str = "",
    fixes: Iterable[str] = (),
    requires: Requirement | Iterable[Requirement] = (),
    active: bool = False,
) -> Callable[[Callable[..., Outcome]], Callable[..., Outcome]]:
    """Declare `fn(facts, policy) -> Outcome` as a check with a stable dotted id.

    `requires`: one requirement or several, each a named function `need(facts)` returning
    None to go on or an Outcome (usually a skip with the reason) that becomes the finding
    instead of the check's. The runner asks them in order before `fn`, through the same
    facts view, so their facts are the finding's evidence too; a fact of theirs that fails
    is an `error`, as in the check. A direct call of `fn` (a test) does not ask them.
    """
    needs = (requires,) if callable(requires) else tuple(requires)
    for need in needs:
        if not callable(need):
            raise TypeError(f"check {id!r}: requires= takes functions, not {need!r}")

    def declare(fn: Callable[..., Outcome]) -> Callable[..., Outcome]:
        spec = CheckSpec(
            id=id,
            title=title,
            category=category or id.split(".", 1)[0],
            fn=fn,
            remediation=remediation,
            fixes=tuple(fixes),
            # The function as written: a wrapper's (functools.wraps) line is not its place.
            order=inspect.unwrap(fn).__code__.co_firstlineno,
            requires=needs,
            active=active,
        )
        setattr(fn, _MARK, spec)
        return fn

    return declare


def checks_in(module: ModuleType, source: str = "builtin") -> list[CheckSpec]:
    specs = []
    for _, obj in inspect.getmembers(module, inspect.isfunction):
        spec = getattr(obj, _MARK, None)
        if isinstance(spec, CheckSpec) and obj.__module__ == module.__name__:
            specs.append(spec if source == "builtin" else _with_source(spec, source))
    return specs


def _with_source(spec: CheckSpec, source: str) -> CheckSpec:
    return CheckSpec(**{**spec.__dict__, "source": source})


# The active tier's checks live in these modules and nowhere else (a test holds both
# ways): a passive run does not import them, nor the measuring code they import, which
# was a tenth of `--check`'s start-up.
MEASURING_MODULES = "perf_"


def builtin_checks(*, active: bool = False) -> list[CheckSpec]:
    """The built-in checks; the measuring ones (the active tier) too only when `active`."""
    import dldoctor.checks as package

    specs: list[CheckSpec] = []
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if active or not info.name.rpartition(".")[2].startswith(MEASURING_MODULES):
            specs.extend(checks_in(importlib.import_module(info.name)))
    return [s for s in specs if active or not s.active]


@dataclass
class PluginLoad:
    specs: list[CheckSpec] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (entry point, reason)


def plugins_disabled(flag: bool) -> bool:
    return flag or os.environ.get(NO_PLUGINS_ENV, "").strip() not in ("", "0")


_GROUP_HEADER = re.compile(rf"^\s*\[\s*{re.escape(ENTRY_POINT_GROUP)}\s*\]", re.MULTILINE)


def may_have_plugins() -> bool:
    """False only when no distribution on sys.path can declare the entry-point group.

    importlib.metadata costs about 20 ms of imports and metadata parsing per run, and
    almost no host has a plugin. This looks where it looks (each sys.path folder's
    *.dist-info / *.egg-info/entry_points.txt) and answers True for anything it cannot
    rule out (a zip or egg on sys.path, another distribution finder), so a plugin is
    never missed.
    """
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) and finder is not PathFinder:
            return True
    for entry in sys.path:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except NotADirectoryError:
            return True  # a zip archive can hold distributions
        except OSError:
            continue  # absent or unreadable: importlib.metadata finds nothing there either
        for name in names:
            if name.endswith(".egg"):
                return True
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), "rb") as f:
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue  # no entry points (or a single-file .egg-info)
            if _GROUP_HEADER.search(text):
                return True
    return False


def plugin_checks() -> PluginLoad:
    """Checks from the `dldoctor.checks` entry-point group: each names a module."""
    result = PluginLoad()
    if not may_have_plugins():
        return result
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else ep.name
        try:
            module = ep.load()
        except Exception as exc:  # a broken plugin is reported, never fatal
            result.errors.append((f"{ep.name} ({dist})", f"{type(exc).__name__}: {exc}"))
            continue
        if not isinstance(module, ModuleType):
            result.errors.append((f"{ep.name} ({dist})", "entry point must name a module"))
            continue
        result.specs.extend(checks_in(module, source=dist))
    return result


def ordered(specs: Iterable[CheckSpec]) -> list[CheckSpec]:
    def key(s: CheckSpec):
        rank = (
            CATEGORY_ORDER.index(s.category)
            if s.category in CATEGORY_ORDER
            else len(CATEGORY_ORDER)
        )
        module = s.fn.__module__
        place = MODULE_ORDER.index(module) if module in MODULE_ORDER else len(MODULE_ORDER)
        return (rank, s.category, s.source != "builtin", place, module, s.order)

    return sorted(specs, key=key)


def select(specs: list[CheckSpec], only: list[str], skip: list[str]) -> list[CheckSpec]:
    """Keep checks matching `only` (all if empty), minus `skip`.

    A token matches a check by exact id, by id prefix at a dot (`gpu` or `gpu.ecc`), or by
    category. A token that matches nothing is a usage error (ValueError), so a typo in a
    CI job's --skip does not silently run everything; so is a selection left empty.
    """

    def matches(token: str, spec: CheckSpec) -> bool:
        return spec.id == token or spec.id.startswith(token + ".") or spec.category == token

    for token in [*only, *skip]:
        if not any(matches(token, s) for s in specs):
            raise ValueError(f"no check matches {token!r} (see --list-checks)")
    chosen = [s for s in specs if not only or any(matches(t, s) for t in only)]
    chosen = [s for s in chosen if not any(matches(t, s) for t in skip)]
    if not chosen:  # "No issues found!" after running nothing would be a lie
        raise ValueError("--only and --skip leave no check to run")
    return chosen
