"""`dldoctor fix`: the fixes for the current findings, a fix previewed, applied (root, an
explicit yes), undone, and the history of what was applied."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from dldoctor.exitcodes import ExitCode
from dldoctor.fixes import builder
from dldoctor.fixes.plan import FixError, Journal, JournalError, Target, apply, undo
from dldoctor.fixes.verify import after_boot, recheck, verdict


def parser() -> argparse.ArgumentParser:
    from dldoctor.cli import _Parser

    p = _Parser(
        prog="dldoctor fix",
        description="Without ID: the fixes for this host's findings. With ID: its preview "
        "(nothing changes) or, with --apply, the change itself.",
    )
    p.add_argument("id", nargs="?", help="a fix id (fix.gpu.blacklist_nouveau)")
    p.add_argument("--apply", action="store_true", help="make the change (root)")
    p.add_argument("--yes", action="store_true", help="do not ask before applying")
    p.add_argument(
        "--force",
        action="store_true",
        help="apply while GPU work runs, where the fix allows it (running jobs may fail)",
    )
    p.add_argument("--undo", metavar="JOURNAL_ID", help="undo an applied fix")
    p.add_argument("--history", action="store_true", help="the fixes applied here")
    p.add_argument("--from", dest="bundle", metavar="BUNDLE", help="preview for a bundle")
    p.add_argument(
        "--policy", metavar="FILE", help="the site's policy: which findings fail, what fixes aim at"
    )
    p.set_defaults(timeout=None, deadline=None)  # what the policy loader also reads
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)  # tests: a temporary root
    return p


def _say(text: str) -> None:
    """A line on stdout: a full or failing stdout is the output error (exit 6), as in every
    mode; the preview is on it before anything is applied."""
    from dldoctor.cli import _write_output

    _write_output(lambda: print(text))


def _host(args):
    from dldoctor.host.live import LiveHost

    if not args.bundle:
        return LiveHost(args.root)
    from dldoctor.host.replay import ReplayHost

    return ReplayHost(args.bundle)


def main(argv: list[str]) -> int:
    """Called by cli._run, whose handlers turn an unreadable policy into its one line and
    exit 4."""
    from dldoctor.cli import _policy

    args = parser().parse_args(argv)
    args.policy, args.policy_source = _policy(args)  # read once: listing, plan and re-check
    with contextlib.ExitStack() as cleanup:  # an archive, extracted for the preview
        if args.bundle:
            from dldoctor.snapshots.archive import read_bundle
            from dldoctor.snapshots.bundle import BundleError

            try:
                args.bundle = read_bundle(args.bundle, cleanup)[0].path
            except BundleError as exc:
                print(f"dldoctor: {exc}", file=sys.stderr)
                return ExitCode.BAD_INPUT
        return _main(args)


def _main(args) -> int:
    target = target_for(args.root, args.bundle)
    try:
        if args.history:
            return _history(target, args.policy)
        if args.undo:
            _need_root(args, f"dldoctor fix --undo {args.undo}")
            record = undo(args.undo, target, on_recovered=said_recovered)
            _say(f"{record['fix']}: {record['state']} ({record['id']})")
            return ExitCode.OK
        if not args.id:
            return _listing(args)
        return _one(args, target)
    except JournalError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except FixError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.PROBLEMS


def target_for(root: str, bundle: str | None) -> Target:
    # A bundle's preview diffs against the files it recorded (it is never applied).
    return Target(os.path.join(bundle, "files") if bundle else root)


def need_root(root: str, command: str) -> None:
    """FixError naming the sudo command when a change to this machine lacks root."""
    if root == "/" and os.geteuid() != 0:
        raise FixError(f"applying a fix needs root: sudo {command}")


def plan_for(fix_id: str, host, policy):
    """The fix's Plan for `host`, aimed at `policy`'s thresholds."""
    from dldoctor.facts import Facts

    build = builder(fix_id)
    if build is None:
        raise FixError(f"no fix {fix_id!r}; `dldoctor fix` lists the ones for this host")
    return build(Facts(host), policy)


# What --history and the TUI's history say of a journal left `applying`.
INTERRUPTED = "interrupted, unless it runs now: the next --apply or --undo rolls it back"


def said_recovered(record: dict) -> None:
    """One line on stderr for an interrupted apply that was rolled back first."""
    print(f"dldoctor: {record['fix']} ({record['id']}): {record['state']}", file=sys.stderr)


def apply_and_verify(
    plan, target: Target, host, policy, *, force: bool = False, on_step=None, on_recovered=None
):
    """Apply `plan`, re-run the checks it resolves through `host` (a fresh look at the
    changed machine) under `policy` and save the verdict in its journal: (record,
    statuses)."""
    record = apply(plan, target, force=force, on_step=on_step, on_recovered=on_recovered)
    statuses = recheck(plan.resolves, host, policy)
    record["verdict"] = verdict(plan, statuses, rebooted=False)
    Journal(target).save(record)
    return record, statuses


def _need_root(args, command: str) -> None:
    need_root(args.root, command)


def _listing(args) -> int:
    from dldoctor.diagnose import diagnose
    from dldoctor.registry import builtin_checks, ordered

    report = diagnose(_host(args), args.policy, ordered(builtin_checks()))
    offered = [(f, i) for f in report.findings for i in f.fixes]
    if args.policy_source != "built-in":  # the thresholds in the summaries are the site's
        _say(f"judged by the policy {args.policy_source}")
    if not offered:
        _say("no finding here has a fix dldoctor can apply")
    for finding, fix_id in offered:
        _say(f"{fix_id:32} resolves {finding.id} ({finding.status.value}: {finding.summary})")
    return ExitCode.OK


def _one(args, target: Target) -> int:
    plan = plan_for(args.id, _host(args), args.policy)
    _say(plan.preview(target))
    if not args.apply:
        _say("(a preview: nothing was changed; --apply to make the change)")
        return ExitCode.OK
    if args.bundle:
        raise FixError("a replayed bundle can preview a fix, never apply it")
    _need_root(args, f"dldoctor fix {args.id} --apply")
    if not args.yes and not _confirmed():
        raise FixError("not applied: no confirmation (answer y, or pass --yes)")
    record, statuses = apply_and_verify(
        plan, target, _host(args), args.policy, force=args.force, on_recovered=said_recovered
    )
    checks = ", ".join(f"{k} {v}" for k, v in statuses.items())
    if args.policy_source != "built-in":
        checks += f"; under the policy {args.policy_source}"
    _say(f"{plan.fix_id}: applied ({record['id']}); {record['verdict']} ({checks})")
    return ExitCode.OK


def _confirmed() -> bool:
    if not sys.stdin.isatty():
        return False
    return input("Apply this change? [y/N] ").strip().lower() in ("y", "yes")


def _history(target: Target, policy) -> int:
    from dldoctor.host.live import LiveHost

    after_boot(target, LiveHost(target.root), policy)  # a reboot since: judge what waited for it
    for record in Journal(target).history():
        state = record.get("verdict") if record["state"] == "applied" else record["state"]
        if record["state"] == "applying":  # or running now: --history takes no lock
            state = INTERRUPTED
        _say(f"{record['id']}  {record['fix']:32} {record['state']}: {state}")
    return ExitCode.OK
