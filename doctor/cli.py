"""`dldoctor` on the command line. Exit codes: dldoctor.exitcodes (and the README).

This module is on the `--check` fast path: it imports neither Textual nor py-cpuinfo.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Sequence

from dldoctor import __version__
from dldoctor.exitcodes import ExitCode, exit_code_for
from dldoctor.model import Finding, Status

log = logging.getLogger("dldoctor")
DEBUG_ENV = "DLDOCTOR_DEBUG"


class UsageError(Exception):
    pass


class InputError(Exception):
    pass


class OutputError(Exception):
    """The report could not be written (stdout closed, full, or failing)."""


def _id_list(text: str) -> list[str]:
    ids = [t.strip() for t in text.split(",") if t.strip()]
    if not ids:  # `--only ''` must not mean "everything"
        raise argparse.ArgumentTypeError("expected check ids, id prefixes or categories")
    return ids


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dldoctor",
        description="A doctor for deep-learning hosts: finds what is misconfigured, "
        "explains it, and says how to fix it.",
        epilog="Exit codes: 0 ok, 1 problems found, 2 usage error, 3 some checks could not "
        "finish, 4 unreadable bundle or policy, 5 internal error, 6 the report could not be "
        "written.",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="print the checklist and exit (no interactive interface)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show details, evidence and timings of every check",
    )
    p.add_argument(
        "--from",
        dest="bundle",
        metavar="BUNDLE",
        help="diagnose a recorded bundle directory instead of this host",
    )
    p.add_argument("--policy", metavar="FILE", help="TOML policy file (default: built-in)")
    p.add_argument(
        "--only",
        type=_id_list,
        action="extend",
        default=[],
        metavar="IDS",
        help="run only these checks: ids, id prefixes or categories, comma-separated",
    )
    p.add_argument(
        "--skip",
        type=_id_list,
        action="extend",
        default=[],
        metavar="IDS",
        help="skip these checks (same forms as --only)",
    )
    p.add_argument("--strict", action="store_true", help="warnings also fail the run (exit 1)")
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="time limit of each command and filesystem probe (more than 0, at most 3600)",
    )
    p.add_argument(
        "--deadline",
        type=float,
        metavar="SECONDS",
        help="the whole run ends by then, whatever hangs (default 20; policy timeouts.deadline_s)",
    )
    p.add_argument(
        "--root",
        metavar="DIR",
        help="read files under DIR instead of / (a mounted image, or a test tree); "
        "commands still run on this host",
    )
    p.add_argument(
        "--no-plugins",
        action="store_true",
        help="do not load third-party checks (also: DLDOCTOR_NO_PLUGINS=1)",
    )
    p.add_argument("--list-checks", action="store_true", help="list the checks and exit")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--version", action="version", version=f"dldoctor {__version__}")
    return p


class Terminated(BaseException):
    """SIGINT, SIGTERM or SIGHUP: the run ends, children killed on the way out (atexit)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def _catch_signals() -> None:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set there (a library caller's thread)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="dldoctor: %(message)s")
    _catch_signals()
    try:
        return int(_main(argv))
    except Terminated as exc:
        import signal

        print(
            "dldoctor: interrupted" if exc.signum == signal.SIGINT else "dldoctor: terminated",
            file=sys.stderr,
        )
        return 128 + exc.signum
    except UsageError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except InputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except OutputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.OUTPUT
    except KeyboardInterrupt:
        print("dldoctor: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        print(
            f"dldoctor: internal error: {type(exc).__name__}: {exc} "
            f"(set {DEBUG_ENV}=1 for the traceback)",
            file=sys.stderr,
        )
        return ExitCode.INTERNAL


def _main(argv: Sequence[str] | None) -> ExitCode:
    from dldoctor.diagnose import EARLY_PROBES, EARLY_RUNS, diagnose
    from dldoctor.host.base import Host

    args = build_parser().parse_args(argv)
    policy, policy_source = _policy(args)
    host: Host | None = None if args.list_checks else _host(args, policy)
    if host is not None and not args.only:
        host.prefetch(runs=EARLY_RUNS, probes=EARLY_PROBES)  # while the checks load
    specs, plugin_findings = _specs(args.no_plugins)
    if args.list_checks:
        for spec in specs:
            origin = "" if spec.source == "builtin" else f"  [{spec.source}]"
            print(f"{spec.id:32} {spec.title}{origin}")
        return ExitCode.OK
    from dldoctor.registry import select

    try:
        specs = select(specs, args.only, args.skip)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    assert host is not None
    report = diagnose(
        host,
        policy,
        specs,
        extra_findings=plugin_findings,
        strict=args.strict,
        policy_source=policy_source,
    )
    _write_report(args, report)
    return exit_code_for(report.findings, strict=args.strict)


def _write_report(args: argparse.Namespace, report) -> None:
    if sys.stdout is None:  # started with stdout closed (`>&-`)
        raise OutputError("cannot write the report: standard output is closed")
    try:
        if args.json:
            from dldoctor.render.jsondoc import render_json

            render_json(report)
        else:
            # Until the TUI exists, plain `dldoctor` prints the checklist too.
            from dldoctor.render.text import render_text

            render_text(report, verbose=args.verbose, color=args.color)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`dldoctor --check | head`): the verdict still stands.
        _discard_stdout()
    except OSError as exc:  # a full disk (`> /dev/full`), an I/O error
        _discard_stdout()
        raise OutputError(f"cannot write the report: {exc.strerror or exc}") from None


def _discard_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered must not fail again at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _policy(args: argparse.Namespace):
    from dataclasses import replace

    from dldoctor.policy import MAX_TIMEOUT_S, TIMEOUT_RANGE, PolicyError, load_policy

    try:
        policy, source = load_policy(args.policy)
    except PolicyError as exc:
        raise InputError(str(exc)) from None
    timeouts = policy.timeouts
    for flag, value in (("--timeout", args.timeout), ("--deadline", args.deadline)):
        if value is not None and not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
            raise UsageError(f"{flag} {TIMEOUT_RANGE}")
    if args.timeout is not None:
        t = args.timeout
        timeouts = replace(timeouts, command_s=t, filesystem_s=t, nvml_s=t)
    if args.deadline is not None:
        timeouts = replace(timeouts, deadline_s=args.deadline)
    return replace(policy, timeouts=timeouts), source


def _specs(no_plugins: bool):
    from dldoctor.registry import builtin_checks, ordered, plugin_checks, plugins_disabled

    specs = builtin_checks()
    findings: list[Finding] = []
    if not plugins_disabled(no_plugins):
        loaded = plugin_checks()
        known = {s.id for s in specs}
        for spec in loaded.specs:
            if spec.id in known:
                loaded.errors.append((spec.source, f"check id {spec.id!r} is already taken"))
                continue
            known.add(spec.id)
            specs.append(spec)
        for name, reason in loaded.errors:
            findings.append(
                Finding(
                    id="plugins.load",
                    title="Plugin",
                    category="plugins",
                    status=Status.ERROR,
                    summary=f"plugin {name} not loaded: {reason}",
                    remediation="Fix or uninstall the plugin, or run with --no-plugins.",
                    source=name,
                )
            )
    return ordered(specs), findings


def _host(args: argparse.Namespace, policy):
    if args.bundle and args.root:
        raise UsageError("--from and --root cannot be used together")
    if args.bundle:
        from dldoctor.host.replay import ReplayHost
        from dldoctor.snapshots.bundle import BundleError, BundleReader

        try:
            reader = BundleReader(args.bundle)
            reader.require_contents()
            changed = reader.verify()
        except (BundleError, OSError) as exc:
            raise InputError(
                str(exc)
                if isinstance(exc, BundleError)
                else f"cannot read bundle {args.bundle}: {exc}"
            ) from None
        if changed:
            log.warning(
                "bundle files differ from its manifest (edited by hand?): %s",
                ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else ""),
            )
        return ReplayHost(reader)
    from dldoctor.host.live import LiveHost

    t = policy.timeouts
    root = args.root or "/"
    if not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a directory")
    return LiveHost(
        root, command_timeout=t.command_s, fs_timeout=t.filesystem_s, probe_timeout=t.nvml_s
    )
