"""NVSwitch checks: the SXid events the nvidia-nvswitch driver writes to the kernel log.

The ids are `gpu.nvswitch.*`: an NVSwitch fault is a GPU-fabric fault, shown beside the
GPUs' own Xid events (`gpu.xid`), with the same time window.
"""

from __future__ import annotations

from collections import defaultdict

from dldoctor.facts import FactFailed, Facts
from dldoctor.facts.pci import pci_devices
from dldoctor.facts.sxid import SXID_FATAL, SXID_IGNORE, SxidEvent, sxid_events
from dldoctor.host.base import NotCaptured, ProbeFailed
from dldoctor.model import Outcome, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check

NO_SWITCH = "no NVSwitch on the PCI bus"
_SHOWN = 3  # groups named in a summary


def _ago(age_s: float | None) -> str:
    return "time unknown" if age_s is None else f"last {age_s / 3600:.1f} h ago"


def _groups(events: list[SxidEvent]) -> list[list[SxidEvent]]:
    """Events of one switch, SXid and verdict together, in order of first appearance."""
    by: dict[tuple[str, int, str], list[SxidEvent]] = defaultdict(list)
    for e in events:
        by[(e.pci, e.sxid, e.verdict)].append(e)
    return list(by.values())


def _line(group: list[SxidEvent]) -> str:
    e = group[0]
    kind = {SXID_FATAL: "fatal", SXID_IGNORE: "ignorable"}.get(e.verdict, e.verdict)
    kind = kind or "severity not printed"
    links = sorted({x.link for x in group if x.link is not None})
    on = f", link {', '.join(map(str, links))}" if links else ""
    ages = [x.age_s for x in group if x.age_s is not None]
    switch = f" ({e.switch})" if e.switch else ""
    return (
        f"{e.pci}{switch}: SXid {e.sxid} {kind}: {e.description}{on}; "
        f"{len(group)}x, {_ago(min(ages) if ages else None)}"
    )


def _named(groups: list[list[SxidEvent]]) -> str:
    names = [f"{g[0].sxid} on {g[0].pci}" for g in groups[:_SHOWN]]
    more = f" and {len(groups) - _SHOWN} more" if len(groups) > _SHOWN else ""
    return ", ".join(names) + more


def _advice(groups: list[list[SxidEvent]]) -> str:
    seen: dict[str, list[str]] = {}
    for g in groups:
        seen.setdefault(g[0].action, []).append(str(g[0].sxid))
    return "; ".join(f"SXid {', '.join(sorted(set(n)))}: {a}" for a, n in seen.items()) + "."


def _switches(facts: Facts, *, told: bool) -> list | None:
    """The NVSwitches on the bus; None when the log already `told` of SXid events and the
    device list is not in the capture read (a bug report without lspci): the events are
    the verdict, the list only says whether a quiet log means anything."""
    try:
        return facts.get(pci_devices).nvswitches
    except NotCaptured:
        if told:
            return None
        raise


@check(
    "gpu.nvswitch.sxid",
    "NVSwitch SXid errors",
    remediation="A fatal SXid stops NVLink traffic through that switch: drain the node and "
    "reset all GPUs and NVSwitches (a reboot does both). Non-fatal SXids: look up the number "
    "in the Fabric Manager user guide's SXid list; repeated ones on one link point at it.",
)
def sxid_errors(facts: Facts, policy: Policy) -> Outcome:
    try:
        log = facts.get(sxid_events)
    except (ProbeFailed, FactFailed) as exc:
        if facts.get(pci_devices).nvswitches:
            raise
        # Without a switch the log is only looked at for lines sysfs cannot explain: a log
        # that could not be read is then no reason to fail to answer.
        return skipped(NO_SWITCH, (f"kernel log not read: {exc}",))
    switches = _switches(facts, told=log.readable and bool(log.events))
    if not log.readable:
        return skipped("the kernel log is not readable" if switches else NO_SWITCH, log.notes)
    if not switches and not log.events:
        return skipped(NO_SWITCH)
    hours = f"{policy.gpu.xid_window_hours:g} h"
    window_s = policy.gpu.xid_window_hours * 3600
    recent = [e for e in log.events if e.age_s is None or e.age_s <= window_s]
    older = len(log.events) - len(recent)
    notes = [f"{older} older SXid event(s) outside the {hours} window"] if older else []
    if switches is None:
        notes.append("the PCI device list was not captured: the switches are named by the log")
    elif not switches:  # lines from a switch sysfs does not show: a VM or container view
        notes.append(f"{NO_SWITCH} as read here, yet the kernel log has SXid lines")
    notes += log.notes
    groups = _groups(recent)
    lines = [_line(g) for g in groups] + notes
    fatal = [g for g in groups if g[0].verdict == SXID_FATAL]
    if fatal:
        count = sum(len(g) for g in fatal)
        return failed(
            f"{count} fatal SXid event(s) in the last {hours}: {_named(fatal)}",
            lines,
            remediation=_advice(fatal),
            rests_on=(sxid_events,),
        )
    other = [g for g in groups if g[0].verdict != SXID_IGNORE]
    if other:
        count = sum(len(g) for g in other)
        return warned(
            f"{count} SXid event(s) in the last {hours}, none fatal: {_named(other)}",
            lines,
            remediation=_advice(other),
            rests_on=(sxid_events,),
        )
    on = f" on {len(switches)} NVSwitch(es)" if switches else ""
    ignored = f", {len(recent)} ignorable" if recent else ""
    return passed(
        f"no SXid errors in the last {hours}{on}{ignored} ({log.source.split()[0]})", lines
    )
