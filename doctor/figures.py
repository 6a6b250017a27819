"""The active tier's figures as every output says them (docs/active.md, "Comparing and
folding figures"): a renderer's line, the label a monitoring system files a figure under,
and the few numbers diff, fleet report and genconf share."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from dldoctor.active.judge import amount, percent
from dldoctor.model import Figure, Finding

# Units of which less is better (a latency): the judge holds every figure to a floor, so
# a fleet's straggler in these is the part above the median, and genconf pins none.
LOWER_IS_BETTER = frozenset({"ns", "us", "ms", "s"})


def measured(findings: Iterable[Finding]) -> Iterator[tuple[Finding, Figure]]:
    """(finding, figure) for every figure of the findings, in the report's order."""
    for f in findings:
        for figure in f.figures:
            yield f, figure


def value_text(figure: Figure) -> str:
    return amount(figure.value, figure.unit)


def reference_text(figure: Figure) -> str:
    """ "42 % of 3350 GB/s", or "no reference" """
    if figure.fraction is None or figure.reference is None:
        return "no reference"
    return f"{percent(figure.fraction)} of {amount(figure.reference, figure.unit)}"


def said(figure: Figure) -> str:
    """ "GPU 3 hbm_copy 1409 GB/s, 42 % of 3350 GB/s": the stable name, as a policy's
    `perf.references` and `diff` write it."""
    return f"{figure.subject} {figure.what} {value_text(figure)}, {reference_text(figure)}"


def change(a: float, b: float) -> float | None:
    """b against a, as a signed fraction (-0.33: a third less); None from nothing."""
    return (b - a) / a if a else None


def signed_percent(fraction: float) -> str:
    return f"{'+' if fraction >= 0 else '-'}{abs(fraction) * 100:.0f} %"
