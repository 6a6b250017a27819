"""One diagnosis: Host -> Facts -> checks -> Report. The CLI, JSON mode and TUI all call this."""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Iterable, Sequence

from dldoctor import __version__
from dldoctor.facts import Facts
from dldoctor.facts import system as sysfacts
from dldoctor.host.base import Host, start_daemon
from dldoctor.inventory import Inventory
from dldoctor.model import Finding, Report
from dldoctor.policy import Policy
from dldoctor.registry import CheckSpec
from dldoctor.runner import Listener, Runner

# Kept after the deadline for the host summary and the report itself, so that the
# process ends within the deadline.
REPORT_RESERVE_S = 0.5
# The window of probes opens this much late: the time checks take to start and ask, so a
# probe asked at once still gets its whole limit.
WINDOW_SLACK_S = 0.25


def check_timeout(policy: Policy) -> float:
    # A backstop per check: it must leave a command its own timeout to expire first.
    t = policy.timeouts
    return max(t.check_s, max(t.command_s, t.nvml_s) + t.filesystem_s + 5.0)


def bound_host(host: Host, policy: Policy, deadline_at: float | None) -> float:
    """Bound every operation `host` starts from now by the run's window and deadline; the
    time the checks must end by (the deadline less the report's reserve)."""
    t0 = time.monotonic()
    t = policy.timeouts
    # The deadline counts from the start of the process when the CLI gives it (start-up and
    # loading the checks are part of what a scheduler waits for).
    deadline = (deadline_at if deadline_at is not None else t0 + t.deadline_s) - REPORT_RESERVE_S
    host.bound(
        commands_until=min(t0 + t.probe_window_s + WINDOW_SLACK_S, deadline),
        until=deadline,
        measures_until=min(t0 + t.active_s + t.probe_window_s, deadline),
    )
    return deadline


def diagnose(
    host: Host,
    policy: Policy,
    specs: Sequence[CheckSpec],
    *,
    deadline_at: float | None = None,
    extra_findings: Iterable[Finding] = (),
    strict: bool = False,
    listeners: Iterable[Listener] = (),
    policy_source: str = "built-in",
    facts: Facts | None = None,
) -> Report:
    started = _dt.datetime.now(_dt.timezone.utc)
    t0 = time.monotonic()
    deadline = bound_host(host, policy, deadline_at)
    # A caller that reads more facts afterwards (`dldoctor diff`) passes its own store.
    facts = facts if facts is not None else Facts(host)
    # Asked at once, beside the checks: a report cut off by the deadline still names its
    # host (asked only at the end, after the probe window, they would go unanswered).
    start_daemon(lambda: _ask_summary_facts(facts))
    runner = Runner(
        specs,
        facts,
        policy,
        check_timeout=check_timeout(policy),
        deadline=deadline,
        listeners=listeners,
    )
    findings = [*extra_findings, *runner.run()]
    return Report(
        findings=findings,
        host=host_summary(facts, host, policy_source, until=deadline + REPORT_RESERVE_S / 2),
        tool={"name": "dldoctor", "version": __version__},
        started_at=started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        duration_s=time.monotonic() - t0,
        timings={"facts": facts.timings()},
        strict=strict,
        inventory=Inventory.from_facts(facts).to_dict(),
    )


# The DMI fact is the inventory's, asked here: no check needs it.
SUMMARY_FACTS = (sysfacts.hostname, sysfacts.os_release, sysfacts.kernel, sysfacts.dmi)


def _ask_summary_facts(facts: Facts) -> None:
    for f in SUMMARY_FACTS:
        try:
            facts.get(f)
        except Exception:  # noqa: BLE001 - the summary says null; the checks say why
            pass


def host_summary(
    facts: Facts, host: Host, policy_source: str, *, until: float | None = None
) -> dict[str, object]:
    """Who was examined. Every field may be null: a summary never fails a run, nor waits
    past `until` on a fact that a hung probe holds."""

    def safe(f, attr=None):
        left = None if until is None else max(0.0, until - time.monotonic())
        try:
            value = facts.get(f, timeout=left)
            return getattr(value, attr) if attr else value
        except Exception:
            return None

    return {
        "hostname": safe(sysfacts.hostname) or None,
        "os": safe(sysfacts.os_release, "display") or None,
        "kernel": safe(sysfacts.kernel, "release") or None,
        "source": host.describe(),
        "policy": policy_source,
    }
