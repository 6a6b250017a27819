"""GPU memory health: ECC mode and errors, retired pages (before Ampere), remapped rows."""

from __future__ import annotations

from dldoctor.checks.driver import is_datacenter
from dldoctor.checks.needs import label, needs, nvidia_gpus, reporting_gpus
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.model import Outcome, failed, passed, warned
from dldoctor.policy import Policy
from dldoctor.registry import check


@check(
    "gpu.ecc.mode",
    "ECC mode",
    remediation="Enable ECC (`nvidia-smi -e 1`, then reboot); a pending change also waits for "
    "a reboot.",
    requires=nvidia_gpus,
)
@needs(
    reporting_gpus(
        "ecc_current",
        nobody="no GPU reports an ECC mode (consumer cards have no ECC)",
        what="the ECC mode",
    )
)
def ecc_mode(facts: Facts, policy: Policy, capable: list[g.Gpu]) -> Outcome:
    pending = [
        label(x) for x in capable if x.ecc_pending is not None and x.ecc_pending != x.ecc_current
    ]
    off = [label(x) for x in capable if not x.ecc_current and is_datacenter(x)]
    if pending:
        return warned(f"an ECC mode change waits for a reboot on {len(pending)} GPU(s)", pending)
    if off:
        return warned(f"ECC is off on {len(off)} datacenter GPU(s)", off)
    on = sum(1 for x in capable if x.ecc_current)
    return passed(f"ECC on for {on} of {len(capable)} capable GPU(s)")


@check(
    "gpu.ecc.errors",
    "ECC errors",
    remediation="Uncorrectable ECC errors since boot: drain the node, reset the GPU "
    "(`nvidia-smi -r`) or reboot, and RMA the GPU if they come back.",
    requires=nvidia_gpus,
)
@needs(
    reporting_gpus(
        "ecc_volatile_uncorrected",
        "ecc_aggregate_uncorrected",
        nobody="no ECC error counters (ECC off or not supported)",
        what="the ECC error counters",
    )
)
def ecc_errors(facts: Facts, policy: Policy, counted: list[g.Gpu]) -> Outcome:
    volatile = [
        f"{label(x)}: {x.ecc_volatile_uncorrected} uncorrectable since boot"
        for x in counted
        if (x.ecc_volatile_uncorrected or 0) > 0
    ]
    if volatile:
        return failed(f"uncorrectable ECC errors on {len(volatile)} GPU(s)", volatile)
    lifetime = [
        f"{label(x)}: {x.ecc_aggregate_uncorrected} uncorrectable in its lifetime"
        for x in counted
        if (x.ecc_aggregate_uncorrected or 0) > 0
    ]
    if lifetime:
        return warned(
            f"past uncorrectable ECC errors on {len(lifetime)} GPU(s)",
            lifetime,
            remediation="Past errors only: watch this GPU; RMA if they recur.",
        )
    return passed(f"no uncorrectable ECC errors on {len(counted)} GPU(s)")


@check(
    "gpu.memory.retired_pages",
    "Retired pages",
    remediation="A page retirement is pending until the GPU is reset: drain the node and "
    "reboot. 60 or more retired pages (or any recurring double-bit errors) call for an RMA.",
    requires=nvidia_gpus,
)
@needs(
    reporting_gpus(
        "retired_pages_pending",
        "retired_pages_dbe",
        nobody="no GPU reports page retirement (Ampere and newer remap rows instead)",
        what="retired pages",
    )
)
def retired_pages(facts: Facts, policy: Policy, gpus: list[g.Gpu]) -> Outcome:
    # Page retirement is the pre-Ampere mechanism; Ampere and newer remap rows instead.
    pending = [label(x) for x in gpus if x.retired_pages_pending]
    if pending:
        return failed(f"page retirement pending a reset on {len(pending)} GPU(s)", pending)
    many = [
        f"{label(x)}: {(x.retired_pages_sbe or 0) + (x.retired_pages_dbe or 0)} pages"
        for x in gpus
        if (x.retired_pages_sbe or 0) + (x.retired_pages_dbe or 0) >= 60
    ]
    if many:
        return failed(f"{len(many)} GPU(s) at the RMA threshold of retired pages", many)
    some = [
        f"{label(x)}: {x.retired_pages_sbe or 0} single-bit, {x.retired_pages_dbe or 0} double-bit"
        for x in gpus
        if (x.retired_pages_sbe or 0) + (x.retired_pages_dbe or 0)
    ]
    if some:
        return warned(f"retired pages on {len(some)} GPU(s)", some)
    return passed(f"no retired pages on {len(gpus)} GPU(s)")


@check(
    "gpu.memory.remapped_rows",
    "Row remapping",
    remediation="Pending remaps take effect at the next GPU reset: drain, then "
    "`nvidia-smi -r -i <index>` or reboot. A remapping failure means the GPU is out of spare "
    "rows: RMA it.",
    requires=nvidia_gpus,
)
@needs(
    reporting_gpus(
        "remap_pending",
        nobody="no GPU reports row remapping (it exists from Ampere on)",
        what="row remapping",
    )
)
def remapped_rows(facts: Facts, policy: Policy, gpus: list[g.Gpu]) -> Outcome:
    failure = [label(x) for x in gpus if x.remap_failure]
    if failure:
        return failed(f"row remapping failed on {len(failure)} GPU(s): RMA", failure)
    pending = [label(x) for x in gpus if x.remap_pending]
    if pending:
        return failed(f"row remapping pending a GPU reset on {len(pending)} GPU(s)", pending)
    remapped = [
        f"{label(x)}: {x.remap_uncorrected} uncorrectable, {x.remap_corrected} correctable"
        for x in gpus
        if x.remap_uncorrected or x.remap_corrected
    ]
    if remapped:
        return passed(f"remapped rows on {len(remapped)} GPU(s), none pending", remapped)
    return passed(f"no remapped rows on {len(gpus)} GPU(s)")
