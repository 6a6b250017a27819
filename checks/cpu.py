"""CPU checks: the processor against the policy, and the frequency governor."""

from __future__ import annotations

from dldoctor.facts import Facts
from dldoctor.facts.cpu import cpu_frequency, cpu_info
from dldoctor.model import Outcome, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check


@check(
    "cpu.inventory",
    "CPU",
    remediation="This host's CPU does not match the fleet's policy ([cpu] min_cores, model).",
)
def inventory(facts: Facts, policy: Policy) -> Outcome:
    info = facts.get(cpu_info)
    freq = facts.get(cpu_frequency)
    if not info.threads:
        return skipped("/proc/cpuinfo names no CPU", info.notes)
    summary = (
        f"{info.model or 'unknown model'}: {info.sockets} socket(s), {info.cores} cores, "
        f"{info.threads} threads"
    )
    details = list(info.notes)
    if freq.smt:
        details.append(f"SMT (hyper-threading): {freq.smt}")
    want = policy.cpu
    if want.min_cores and info.cores < want.min_cores:
        return failed(f"{summary}: fewer than the policy's {want.min_cores} cores", details)
    if want.model and want.model.lower() not in info.model.lower():
        return failed(f"{summary}: not the policy's {want.model!r}", details)
    return passed(summary, details)


@check(
    "cpu.governor",
    "CPU frequency governor",
    remediation="Set the performance governor (`cpupower frequency-set -g performance`, or the "
    "tuned profile `throughput-performance`) and the BIOS power profile to performance: "
    "data loading and kernel launches are CPU-bound.",
    fixes=["fix.cpu.governor"],
)
def governor(facts: Facts, policy: Policy) -> Outcome:
    freq = facts.get(cpu_frequency)
    if not freq.governors:
        return skipped("no CPU frequency scaling exposed (VMs and some BIOS settings)", freq.notes)
    want = policy.cpu.governor
    used = ", ".join(f"{g} on {n} CPU(s)" for g, n in sorted(freq.governors.items()))
    details = [f"driver {freq.driver}"] if freq.driver else []
    if set(freq.governors) == {want}:
        return passed(f"{want} on all {freq.governors[want]} CPUs", details)
    return warned(f"not {want}: {used}", details + list(freq.notes))
