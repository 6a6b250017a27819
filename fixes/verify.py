"""After a fix: the checks it claims to resolve, run again on the changed machine. A fix
that needs a reboot is judged again by the first run after the boot (the boot id in the
journal tells the boots apart). Both judge under the run's policy: a fix is verified against
the thresholds the site checks by, not the built-in ones."""

from __future__ import annotations

from dldoctor.fixes.plan import Journal, Plan, Target

BOOT_ID = "/proc/sys/kernel/random/boot_id"
PENDING = "pending a reboot"


def recheck(check_ids, host, policy) -> dict[str, str]:
    """check id -> its status now under `policy`, read through `host`."""
    from dldoctor.diagnose import diagnose
    from dldoctor.registry import builtin_checks

    specs = [s for s in builtin_checks() if s.id in set(check_ids)]
    return {f.id: f.status.value for f in diagnose(host, policy, specs).findings}


def verdict(plan_or_record, statuses: dict[str, str], *, rebooted: bool) -> str:
    """Fixed only when every resolved check passes; a check that skipped or could not
    finish judged nothing, so neither did the re-check."""
    reboot = plan_or_record.reboot if isinstance(plan_or_record, Plan) else plan_or_record["reboot"]
    values = set(statuses.values())
    if values and values <= {"pass"}:
        if reboot and not rebooted:
            # The checks read the configuration (a unit's LimitMEMLOCK after the reload);
            # what already runs keeps the old value until the boot.
            return PENDING + " (its checks already pass on the configuration)"
        return "verified after reboot" if rebooted else "fixed"
    if not values or values & {"skip", "error"}:
        return "not verified: the checks could not judge it"
    if reboot and not rebooted:
        return PENDING
    return "did not take" if rebooted else "still failing"


def boot_id(target: Target) -> str:
    return (target.read(BOOT_ID) or b"").decode("ascii", "replace").strip()


def after_boot(target: Target, host, policy) -> list[dict]:
    """Journals of fixes pending a reboot whose boot has passed: judged now, and saved."""
    journal = Journal(target)
    now = boot_id(target)
    judged = []
    for record in journal.readable():  # an unreadable journal is --history's to report
        pending = str(record.get("verdict", "")).startswith(PENDING)
        # An undone fix waits for nothing, whatever its last verdict said.
        if record.get("state") != "applied" or not pending or record.get("boot_id") == now:
            continue
        record["verdict"] = verdict(
            record, recheck(record["resolves"], host, policy), rebooted=True
        )
        journal.save(record)
        judged.append(record)
    return judged
