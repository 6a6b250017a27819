"""NCCL environment: variables that name interfaces or HCAs must name ones that exist."""

from __future__ import annotations

from dldoctor.facts import Facts
from dldoctor.facts.net import interfaces
from dldoctor.facts.system import environ
from dldoctor.model import Outcome, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check


def nccl_selection(value: str) -> tuple[bool, bool, list[str]]:
    """NCCL's list syntax: `^` excludes, `=` matches exactly, else prefixes; `:port` ignored."""
    exclude = value.startswith("^")
    value = value[1:] if exclude else value
    exact = value.startswith("=")
    value = value[1:] if exact else value
    names = [item.split(":", 1)[0].strip() for item in value.split(",") if item.strip()]
    return exclude, exact, names


def unmatched(value: str, present: list[str]) -> list[str]:
    exclude, exact, names = nccl_selection(value)
    if exclude:
        return []  # an exclusion list cannot name something wrongly in a harmful way
    return [n for n in names if not any(p == n if exact else p.startswith(n) for p in present)]


@check(
    "nccl.env",
    "NCCL environment",
    remediation="Set NCCL_SOCKET_IFNAME to an interface that exists (`ip -br link`) and "
    "NCCL_IB_HCA to HCAs that exist (`ls /sys/class/infiniband`), or unset them and let "
    "NCCL choose.",
)
def nccl_env(facts: Facts, policy: Policy) -> Outcome:
    env = facts.get(environ)
    names = {"NCCL_SOCKET_IFNAME": "net", "NCCL_IB_HCA": "infiniband"}
    wanted = {var: env[var] for var in names if env.get(var)}
    if not wanted:
        return skipped("NCCL_SOCKET_IFNAME and NCCL_IB_HCA are not set (NCCL chooses itself)")
    found = facts.get(interfaces)
    none_match, some_missing = [], []
    details = ["as set in dldoctor's environment; a job may set its own"]
    for var, value in wanted.items():
        present = list(found.net if names[var] == "net" else found.infiniband)
        missing = unmatched(value, present)
        details.append(f"{var}={value}; present: {', '.join(present) or 'none'}")
        listed = nccl_selection(value)[2]
        if missing and len(missing) == len(listed):
            none_match.append(f"{var}={value} matches no device: NCCL will not find one")
        elif missing:
            some_missing.append(f"{var} names {', '.join(missing)}, not present here")
    if none_match:
        return failed("; ".join(none_match + some_missing), details)
    if some_missing:
        return warned("; ".join(some_missing), details)
    return passed(
        ", ".join(f"{k}={v}" for k, v in wanted.items()) + " match existing devices", details
    )
