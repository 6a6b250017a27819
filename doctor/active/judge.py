"""Judging a measured figure: against a site's own reference (policy `perf.references`,
pinned by genconf), else the per-SKU table's, and against its siblings (the one GPU of
eight that is slow). Every summary says the figure, its unit and what it was held to:
"HBM copy 2.61 TB/s, 78 % of 3.35 TB/s".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dldoctor.model import Figure, Outcome, failed, passed, warned
from dldoctor.policy import Policy

# A summary names at most this many parts; the details name them all.
NAMED = 3


@dataclass(frozen=True)
class Reference:
    """A figure to be held to, where it comes from, and the fraction of it below which a
    part fails (what a healthy part reaches: a GEMM ~60 % of the datasheet's peak, a
    copy ~75 % of the memory's bandwidth; a site's own figure, policy `perf.floor`)."""

    value: float
    source: str
    floor: float


@dataclass(frozen=True)
class Measured:
    subject: str  # "GPU 3", "/data", "NUMA node 1"
    what: str  # the figure's stable name: "hbm_copy"
    label: str  # how a person names it: "HBM copy"
    value: float
    unit: str
    reference: Reference | None = None  # the per-SKU table's; None: none known
    # Held to its siblings' median: parts built alike (the GPUs of one SKU, the NUMA nodes).
    # False where the host's layout, not health, spreads the figures: volumes on different
    # devices, PCIe peer pairs within a switch and across sockets.
    alike: bool = True


def amount(value: float, unit: str) -> str:
    """A figure as a person reads it: three significant digits and its unit."""
    if value >= 100:
        return f"{value:.0f} {unit}"
    if value >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def percent(fraction: float) -> str:
    return f"{fraction * 100:.0f} %"


def site_reference(policy: Policy, what: str, subject: str) -> Reference | None:
    """The site's own reference for `what` on `subject`: one naming the part first."""
    refs = [r for r in policy.perf.references if r.what == what]
    for ref in sorted(refs, key=lambda r: r.subject == ""):
        if ref.subject in ("", subject):
            where = f"{what}, {ref.subject}" if ref.subject else what
            return Reference(ref.value, f"policy perf.references ({where})", policy.perf.floor)
    return None


def judge(
    measured: Sequence[Measured],
    policy: Policy,
    *,
    details: Sequence[str] = (),
    no_reference: str = "no reference for this part",
) -> Outcome:
    """The outcome of one measuring check over its parts (at least one)."""
    parts = [(m, site_reference(policy, m.what, m.subject) or m.reference) for m in measured]
    figures = tuple(
        Figure(
            m.subject,
            m.what,
            m.value,
            m.unit,
            ref.value if ref else None,
            ref.source if ref else "",
        )  # fmt: skip
        for m, ref in parts
    )
    lines = [_line(m, ref) for m, ref in parts]
    sources = list(dict.fromkeys(f"reference: {ref.source}" for _, ref in parts if ref))
    lines += [*sources, *details]
    low = [(m, ref) for m, ref in parts if ref and m.value < ref.floor * ref.value]
    if low:
        said = [
            f"{m.subject} {m.label} {amount(m.value, m.unit)}, {percent(m.value / ref.value)} "
            f"of {amount(ref.value, m.unit)} (a healthy part reaches {percent(ref.floor)})"
            for m, ref in low
        ]
        return failed(_some(said), lines, figures=figures)
    slow = _stragglers(measured, policy.perf.straggler)
    if slow:
        said = [
            f"{m.subject} {m.label} {amount(m.value, m.unit)}, {percent(m.value / median)} of "
            f"its siblings' median {amount(median, m.unit)}"
            for m, median in slow
        ]
        return warned(_some(said), lines, figures=figures)
    # A check measuring two figures of each part (a volume's sequential and 4K random
    # reads) says each: one range of values in one unit per figure.
    kinds = dict.fromkeys((m.what, m.unit) for m, _ in parts)
    said = [_all_well([p for p in parts if (p[0].what, p[0].unit) == k], no_reference)
            for k in kinds]  # fmt: skip
    return passed("; ".join(said), lines, figures=figures)


def _line(m: Measured, ref: Reference | None) -> str:
    text = f"{m.subject}: {m.label} {amount(m.value, m.unit)}"
    if ref is None:
        return f"{text} (no reference)"
    return f"{text}, {percent(m.value / ref.value)} of {amount(ref.value, m.unit)}"


def _stragglers(measured: Sequence[Measured], fraction: float) -> list[tuple[Measured, float]]:
    """The parts below `fraction` of the median of their siblings: the parts alike,
    measured the same way and held to the same reference (a 100 Gb/s port is no sibling of
    a 400 Gb/s one, an L4 none of an H100 beside it)."""

    def kin(m: Measured) -> tuple:
        return m.what, m.unit, m.reference.value if m.reference else None

    slow = []
    alike = [m for m in measured if m.alike]
    for kind in dict.fromkeys(kin(m) for m in alike):
        same = [m for m in alike if kin(m) == kind]
        if len(same) < 2:
            continue
        median = statistics.median(m.value for m in same)
        slow += [(m, median) for m in same if m.value < fraction * median]
    return slow


def _some(said: list[str]) -> str:
    more = len(said) - NAMED
    return "; ".join(said[:NAMED]) + (f"; and {more} more" if more > 0 else "")


def _all_well(parts: list[tuple[Measured, Reference | None]], no_reference: str) -> str:
    first = parts[0][0]
    values = [m.value for m, _ in parts]
    if len(parts) == 1:
        figure = f"{first.label} {amount(first.value, first.unit)}"
    else:
        low, high = amount(min(values), ""), amount(max(values), first.unit)
        figure = f"{first.label} {low.strip()}–{high} on {len(parts)} {_plural(parts)}"
    refs = [ref for _, ref in parts if ref]
    if not refs:
        return f"{figure}: {no_reference}"
    fractions = [m.value / ref.value for m, ref in parts if ref]
    held = {ref.value for ref in refs}
    of = amount(refs[0].value, first.unit) if len(held) == 1 else "their references"
    if len(fractions) == 1:
        return f"{figure}, {percent(fractions[0])} of {of}"
    span = f"{min(fractions) * 100:.0f}–{percent(max(fractions))}"
    return f"{figure}, {span} of {of}"


def _plural(parts: list[tuple[Measured, Reference | None]]) -> str:
    """ "GPUs", "NUMA nodes", "volumes", "pairs": the parts' kind, from the first's subject."""
    subject = parts[0][0].subject
    if subject.startswith("/"):
        return "volumes"
    if "→" in subject:  # "GPU 0 → GPU 1": a pair measured one way
        return "pairs"
    return f"{subject.rstrip('0123456789 ') or 'part'}s"
