"""Xid events: the errors the NVIDIA kernel module writes to the kernel log."""

from __future__ import annotations

from dldoctor.checks.needs import WHY, kernel_log_readable, needs
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.pci import NVIDIA, pci_devices
from dldoctor.facts.xid import KernelLog, xid_events
from dldoctor.model import Outcome, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check

# Hardware Xids whose recorded action is "watch", not "drain": 63 records a row remap
# (gpu.memory.remapped_rows judges it), 92 is a high corrected-error rate, 94 a contained
# ECC error (only the application died), 121 a C2C link error NVIDIA says to ignore first.
XID_WATCH = frozenset({63, 92, 94, 121})


def nvidia_module_may_log(facts: Facts) -> Outcome | None:
    """Requirement: NVRM lines come from the NVIDIA kernel module: without a driver there
    are none, unless the log holds some already or an NVIDIA GPU is on the bus."""
    # Events are a verdict whatever the driver says now: a bug report cut short by an
    # nvidia-smi that hung on a lost GPU has its dmesg, not its nvidia-smi section.
    if not facts.get(xid_events).events and not facts.get(pci_devices).gpus(NVIDIA):
        stack = facts.get(nvidia)
        if stack.error in (g.NO_DRIVER, g.NO_SOURCE):
            return skipped(WHY[stack.error])
    return None


@check(
    "gpu.xid",
    "Xid errors",
    remediation="Hardware Xids (48, 63/64, 74, 79, 92, 94/95, 119/120, ...): drain the node; "
    "reset the GPU or reboot; check power, cooling and seating; RMA if they recur. "
    "Application Xids (13, 31, 43, ...) point at the program that ran.",
    requires=nvidia_module_may_log,
)
@needs(kernel_log_readable(xid_events))
def xid_errors(facts: Facts, policy: Policy, log: KernelLog) -> Outcome:
    window_s = policy.gpu.xid_window_hours * 3600
    recent = [e for e in log.events if e.age_s is None or e.age_s <= window_s]
    older = len(log.events) - len(recent)
    hours = f"{policy.gpu.xid_window_hours:g} h"
    old_note = [f"{older} older Xid event(s) outside the {hours} window"] if older else []

    def line(e) -> str:
        when = "time unknown" if e.age_s is None else f"{e.age_s / 3600:.1f} h ago"
        what = f"Xid {e.xid}" if e.xid is not None else "fallen off the bus"
        return f"{e.pci_bus_id}: {what} ({e.description}), {when}"

    hardware = [
        e for e in recent if (e.kind == "hardware" and e.xid not in XID_WATCH) or e.xid is None
    ]
    if hardware:
        codes = sorted({str(e.xid) if e.xid is not None else "bus" for e in hardware})
        return failed(
            f"{len(hardware)} hardware Xid event(s) in the last {hours}: {', '.join(codes)}",
            [line(e) for e in recent] + old_note + list(log.notes),
        )
    if recent:
        return warned(
            f"{len(recent)} Xid event(s) in the last {hours} that do not call for a drain",
            [line(e) for e in recent] + old_note + list(log.notes),
            remediation="Usually the program's fault (illegal memory access, timeout): check "
            "the job that ran then; repeated driver Xids warrant a driver update.",
        )
    return passed(
        f"no Xid events in the last {hours} ({log.source.split()[0]})", old_note + list(log.notes)
    )
