"""One diagnosis: Host -> Facts -> checks -> Report. The CLI, JSON mode and TUI all call this."""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Iterable, Sequence

from dldoctor import __version__
from dldoctor.facts import Facts
from dldoctor.facts import system as sysfacts
from dldoctor.host.base import Host
from dldoctor.model import Finding, Report
from dldoctor.policy import Policy
from dldoctor.registry import CheckSpec
from dldoctor.runner import Listener, Runner


def check_timeout(policy: Policy) -> float:
    # The deadline is a backstop: it must leave a command its own timeout to expire first.
    t = policy.timeouts
    return max(t.check_s, max(t.command_s, t.nvml_s) + t.filesystem_s + 5.0)


def diagnose(
    host: Host,
    policy: Policy,
    specs: Sequence[CheckSpec],
    *,
    extra_findings: Iterable[Finding] = (),
    strict: bool = False,
    listeners: Iterable[Listener] = (),
    policy_source: str = "built-in",
) -> Report:
    started = _dt.datetime.now(_dt.timezone.utc)
    t0 = time.monotonic()
    facts = Facts(host)
    runner = Runner(specs, facts, policy, check_timeout=check_timeout(policy), listeners=listeners)
    findings = [*extra_findings, *runner.run()]
    return Report(
        findings=findings,
        host=host_summary(facts, host, policy_source),
        tool={"name": "dldoctor", "version": __version__},
        started_at=started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        duration_s=time.monotonic() - t0,
        timings={"facts": facts.timings()},
        strict=strict,
    )


def host_summary(facts: Facts, host: Host, policy_source: str) -> dict[str, object]:
    """Who was examined. Every field may be null: a summary never fails a run."""

    def safe(fn):
        try:
            return fn()
        except Exception:
            return None

    return {
        "hostname": safe(lambda: facts.get(sysfacts.hostname)) or None,
        "os": safe(lambda: facts.get(sysfacts.os_release).display) or None,
        "kernel": safe(lambda: facts.get(sysfacts.kernel).release) or None,
        "source": host.describe(),
        "policy": policy_source,
    }
