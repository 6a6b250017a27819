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
    from dldoctor.cli.shared import Parser, add_active_arguments, add_request_arguments

    p = Parser(
        prog="dldoctor fix",
        description="Without ID: the fixes for this host's findings. With ID: its preview "
        "(nothing changes) or, with --apply, the change itself.",
        epilog="--from previews the fixes of a bundle; with --apply or --undo it is refused "
        "(exit 2): a fix is applied to a machine, never to a bundle.",
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
    add_request_arguments(
        p,
        helps={
            "--from": "list and preview the fixes of a bundle (never applied to one)",
            "--deadline": "the diagnosis of the listing and the re-check after --apply "
            "end by then (default 20; policy timeouts.deadline_s)",
        },
    )
    # `fix --force` is its own (apply while GPU work runs): only --active is refused here.
    add_active_arguments(
        p,
        refused={
            "--active": "a fix re-checks what it resolves; measure with dldoctor --check "
            "--active"
        },
        only=(),
    )
    p.add_argument("--root", help=argparse.SUPPRESS)  # tests: a temporary root
    return p


def _say(text: str) -> None:
    """A line on stdout: a full or failing stdout is the output error (exit 6), as in every
    mode; the preview is on it before anything is applied."""
    from dldoctor.cli.shared import write_output

    write_output(lambda: print(text))


def _host(request, folder: str):
    """This machine (under --root), or the bundle extracted at `folder`."""
    from dldoctor.host.live import LiveHost

    if not folder:
        t = request.policy.timeouts
        return LiveHost(
            request.host_root,
            command_timeout=t.command_s,
            fs_timeout=t.filesystem_s,
            probe_timeout=t.nvml_s,
        )
    from dldoctor.host.replay import ReplayHost

    return ReplayHost(folder)


def main(argv: list[str]) -> int:
    """Called by dldoctor.cli.main, whose handlers say a usage error or an unreadable
    policy in one line with its exit code."""
    from dldoctor.cli.shared import UsageError
    from dldoctor.request import request_from

    args = parser().parse_args(argv)
    request = request_from(args)
    if request.bundle and (args.apply or args.undo):
        # Before any work: the preview of a bundle is all a bundle can have.
        raise UsageError("a replayed bundle can preview a fix, never apply it")
    with contextlib.ExitStack() as cleanup:  # an archive, extracted for the preview
        folder = ""
        if request.bundle:
            from dldoctor.snapshots.archive import read_bundle
            from dldoctor.snapshots.bundle import BundleError

            try:
                folder = read_bundle(request.bundle, cleanup)[0].path
            except BundleError as exc:
                print(f"dldoctor: {exc}", file=sys.stderr)
                return ExitCode.BAD_INPUT
        return _main(args, request, folder)


def _main(args, request, folder: str) -> int:
    target = target_for(request.host_root, folder or None)
    try:
        if args.history:
            return _history(target, request.policy)
        if args.undo:
            need_root(request.host_root, f"dldoctor fix --undo {args.undo}")
            record = undo(args.undo, target, on_recovered=said_recovered)
            _say(f"{record['fix']}: {record['state']} ({record['id']})")
            return ExitCode.OK
        if not args.id:
            return _listing(request, folder)
        return _one(args, request, folder, target)
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


def _listing(request, folder: str) -> int:
    from dldoctor.diagnose import diagnose
    from dldoctor.registry import builtin_checks, ordered

    report = diagnose(_host(request, folder), request.policy, ordered(builtin_checks()))
    offered = [(f, i) for f in report.findings for i in f.fixes]
    if request.policy_source != "built-in":  # the thresholds in the summaries are the site's
        _say(f"judged by the policy {request.policy_source}")
    if not offered:
        _say("no finding here has a fix dldoctor can apply")
    for finding, fix_id in offered:
        _say(f"{fix_id:32} resolves {finding.id} ({finding.status.value}: {finding.summary})")
    return ExitCode.OK


def _one(args, request, folder: str, target: Target) -> int:
    plan = plan_for(args.id, _host(request, folder), request.policy)
    _say(plan.preview(target))
    if not args.apply:
        _say("(a preview: nothing was changed; --apply to make the change)")
        return ExitCode.OK
    need_root(request.host_root, f"dldoctor fix {args.id} --apply")
    if not args.yes and not _confirmed():
        raise FixError("not applied: no confirmation (answer y, or pass --yes)")
    record, statuses = apply_and_verify(
        plan,
        target,
        _host(request, folder),
        request.policy,
        force=args.force,
        on_recovered=said_recovered,
    )
    checks = ", ".join(f"{k} {v}" for k, v in statuses.items())
    if request.policy_source != "built-in":
        checks += f"; under the policy {request.policy_source}"
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
