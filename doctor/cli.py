"""`dldoctor` on the command line. Exit codes: dldoctor.exitcodes (and the README).

This module is on the `--check` fast path: it imports neither Textual nor py-cpuinfo.
"""

from __future__ import annotations

import argparse
import contextlib
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


class BadCommandLine(SystemExit):
    """argparse's refusal (exit 2), its message kept for a plugin protocol's answer."""

    def __init__(self, message: str):
        super().__init__(ExitCode.USAGE)
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        # One line, as for every other refusal (argparse prints its whole usage block).
        line = f"{message} (see {self.prog} --help)"
        sys.stderr.write(f"{self.prog}: {line}\n")
        raise BadCommandLine(line)

    def _print_message(self, message: str, file=None) -> None:
        # argparse drops a write that fails: `--help > /dev/full` would exit 0 having said
        # nothing. --help and --version are outputs like any other (exit 6).
        if message and file in (None, sys.stdout):
            _write_output(lambda: sys.stdout.write(message))
        else:
            super()._print_message(message, file)


def build_parser(*, snapshot: bool = False) -> argparse.ArgumentParser:
    p = _Parser(
        prog="dldoctor snapshot" if snapshot else "dldoctor",
        description="A doctor for deep-learning hosts: finds what is misconfigured, "
        "explains it, and says how to fix it.",
        epilog="A redacted support bundle: dldoctor snapshot (dldoctor snapshot --help). "
        "Guided fixes, previewed before anything changes: dldoctor fix [ID] [--apply]. "
        "Compare two hosts or two moments: dldoctor diff [--json] A B (bundles or report "
        "JSON files; dldoctor diff --help). "
        "Pin a fleet to a healthy host: dldoctor genconf > policy.toml (dldoctor genconf "
        "--help). "
        "Many nodes: dldoctor fleet run -w NODESET, dldoctor fleet report DIR (dldoctor "
        "fleet --help). "
        "Exit codes: 0 ok, 1 problems found, 2 usage error, 3 some checks could not "
        "finish, 4 unreadable bundle or policy, 5 internal error, 6 the report could not be "
        "written.",
    )
    if not snapshot:  # a snapshot's only output is its bundle: it offers no report options
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
        help="diagnose a recorded bundle (a directory or a .tar.gz), a sos report (a "
        "directory, .tar.xz or .tar.gz) or an nvidia-bug-report log, instead of this host",
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
    if not snapshot:
        _output_arguments(p)
    p.add_argument("--list-checks", action="store_true", help="list the checks and exit")
    p.add_argument(
        "--schema",
        action="store_true",
        help="print the JSON Schema of the --json report (draft 2020-12) and exit",
    )
    if not snapshot:
        p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--version", action="version", version=f"dldoctor {__version__}")
    if snapshot:
        g = p.add_argument_group("snapshot")
        g.add_argument(
            "-o",
            "--output",
            metavar="PATH",
            help="where to write the bundle (default: dldoctor-snapshot-<UTC time>.tar.gz here)",
        )
        g.add_argument("--dir", action="store_true", help="write a directory, not a .tar.gz")
        g.add_argument(
            "--no-redact",
            action="store_true",
            help="keep host names, addresses, serials and secrets as they are",
        )
        g.add_argument(
            "--redact-map",
            metavar="FILE",
            help="the private map of pseudonyms to continue and update (default: "
            "~/.config/dldoctor/redact-map.json), so a fleet's bundles stay comparable",
        )
    p.set_defaults(argv=[])
    if snapshot:
        p.set_defaults(check=False, json=False, verbose=False, color="never")
    return p


def _output_arguments(p: argparse.ArgumentParser) -> None:
    from dldoctor.render.formats import FORMATS

    g = p.add_argument_group(
        "outputs",
        "Files are replaced atomically: a reader never sees half. A device, a FIFO or "
        "/dev/stdout is written into, a symbolic link followed (docs/outputs.md).",
    )
    g.add_argument(
        "--format",
        choices=list(FORMATS),
        help="the report's format: "
        + "; ".join(f"{f.name}, {f.help}" for f in FORMATS.values())
        + " (--json: --format json)",
    )
    g.add_argument(
        "--output",
        metavar="FILE",
        help="write the report (in --format) to FILE instead of standard output",
    )
    for f in FORMATS.values():
        if f.file_flag:
            g.add_argument(
                f"--{f.name}",
                metavar="FILE",
                dest=f"file_{f.name}",
                help=f"also write the report to FILE as {f.name}: {f.help}",
            )


class Terminated(BaseException):
    """SIGINT, SIGTERM or SIGHUP: the run ends, children killed on the way out (atexit)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, _frame: object) -> None:
    raise Terminated(signum)


SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _catch_signals() -> dict[int, object]:
    """Our handlers for SIGINT/SIGTERM/SIGHUP; the ones they replace (to restore)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}  # signal handlers can only be set there (a library caller's thread)
    return {sig: signal.signal(sig, _on_signal) for sig in (getattr(signal, n) for n in SIGNALS)}


def _release_signals(previous: dict[int, object], *, program: bool) -> None:
    import signal

    for sig, handler in previous.items():
        # The program ignores them from here on: a second Ctrl-C or SIGTERM during the exit,
        # while the children are being killed, must not cut that short.
        signal.signal(sig, signal.SIG_IGN if program else handler)


def _watchdog(at: float, code: list[int]) -> None:
    """The last resort: at `at` (monotonic), whatever is stuck (a write to a pipe nobody
    reads, a plugin's import), kill the children and end the process."""
    import threading
    import time

    def fire() -> None:
        time.sleep(max(0.0, at - time.monotonic()))
        from dldoctor.host.live import kill_children

        kill_children()
        try:
            os.write(2, b"dldoctor: still running past the deadline: exiting\n")
        finally:
            os._exit(code[0])

    threading.Thread(target=fire, name="dldoctor-watchdog", daemon=True).start()


def _backstop(at: float) -> None:
    """The watchdog thread needs the interpreter lock; native code that holds it (a regex
    gone quadratic, a C extension stuck in a call) stops every thread. A forked process
    watches from outside: dldoctor still alive at `at` is frozen, its commands' groups are
    killed, then dldoctor (exit 137). It ends with dldoctor: the pipe's write end closes."""
    import signal

    read_end, write_end = os.pipe()
    parent = os.getpid()
    if os.fork():
        os.close(read_end)
        _BACKSTOP.append(write_end)  # held open for the life of the process
        return
    try:  # the watcher: no Python handler, no atexit, no stdout held open
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        os.closerange(0, 2)
        os.closerange(3, read_end)
        os.closerange(read_end + 1, 1 << 16)
        if not _ended_by(read_end, at):
            _kill_stuck(parent)
    finally:
        os._exit(0)


_BACKSTOP: list[int] = []


def _ended_by(fd: int, at: float) -> bool:
    import select
    import time

    while (left := at - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            return True  # EOF (or a stray byte): dldoctor is gone
    return False


def _kill_stuck(parent: int) -> None:
    import signal

    os.write(2, b"dldoctor: stuck in native code past the deadline: killed\n")
    os.kill(parent, signal.SIGSTOP)  # frozen: it starts no command while they are killed
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        mine = entry.isdigit() and int(fields[1]) == parent and int(entry) != os.getpid()
        for kill in (os.killpg, os.kill) if mine else ():  # its commands lead their groups
            try:
                kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
    os.kill(parent, signal.SIGKILL)


# After the deadline the report is written and the process exits; this much later the
# watchdog ends it regardless, and this much later still the backstop kills it.
WATCHDOG_SLACK_S = 0.9
BACKSTOP_SLACK_S = 2.0
# The share of the deadline `snapshot` keeps for writing, redacting and packing the bundle
# after the checks (and the extras) end: measured 2-6 s on a loaded 2-core machine.
SNAPSHOT_WRITE_SHARE = 1 / 3


def main(argv: Sequence[str] | None = None) -> int:
    """The command line. `argv` None: the program itself (signals are ignored once it is
    done, a watchdog enforces the deadline); a list: a caller in-process (tests)."""
    program = argv is None
    if program:  # descendants that leave their command's group are reparented to us
        from dldoctor.reaper import become_subreaper

        become_subreaper()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="dldoctor: %(message)s")
    previous = _catch_signals()
    code = [int(ExitCode.INCOMPLETE)]
    try:
        code[0] = _run(argv, code if program else None)
        return code[0]
    finally:
        _release_signals(previous, program=program)


def _run(argv: Sequence[str] | None, watchdog: list[int] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    plugin = _plugin_format(args)
    try:
        if args[:1] == ["diff"]:
            from dldoctor.diffing import main as diff_main

            return diff_main(args[1:])
        if args[:1] == ["fix"]:
            from dldoctor.fixes.command import main as fix_main

            return fix_main(args[1:])
        if args[:1] == ["slurm-healthcheck"]:
            from dldoctor.slurm import main as slurm_main

            return slurm_main(args[1:], watchdog)
        if args[:1] == ["genconf"]:
            from dldoctor.genconf import main as genconf_main

            return genconf_main(args[1:])
        if args[:1] == ["fleet"]:
            from dldoctor.fleet.command import main as fleet_main

            return fleet_main(args[1:])
        with contextlib.ExitStack() as cleanup:  # an extracted --from archive, removed here
            return int(_main(argv, watchdog, cleanup))
    except BadCommandLine as exc:
        if plugin is None:
            raise
        return _failed(plugin, ExitCode.USAGE, exc.message)
    except Terminated as exc:
        import signal

        print(
            "dldoctor: interrupted" if exc.signum == signal.SIGINT else "dldoctor: terminated",
            file=sys.stderr,
        )
        return 128 + exc.signum
    except UsageError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return _failed(plugin, ExitCode.USAGE, str(exc))
    except InputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return _failed(plugin, ExitCode.BAD_INPUT, str(exc))
    except OutputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return _failed(plugin, ExitCode.OUTPUT, str(exc))
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
        return _failed(plugin, ExitCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")


def _plugin_format(args: list[str]):
    """The monitoring plugin protocol asked for (`--format nagios`, `npd`), whose exit codes
    answer for dldoctor's own failures too: a usage error's 2 is CRITICAL to Nagios."""
    if args[:1] in (["diff"], ["fix"], ["snapshot"]):
        return None
    from dldoctor.render.formats import asked

    fmt = asked(args)
    return fmt if fmt is not None and fmt.failure else None


def _failed(plugin, code: int, message: str) -> int:
    """`code`, or with a plugin protocol its answer: its line on stdout, its exit code."""
    if plugin is None:
        return code
    data, code = plugin.failed(message)
    with contextlib.suppress(OutputError):
        _write_output(lambda: (sys.stdout.buffer.write(data), sys.stdout.buffer.flush()))
    return code


def _main(
    argv: Sequence[str] | None, watchdog: list[int] | None, cleanup: contextlib.ExitStack
) -> ExitCode:
    import time

    from dldoctor.host.base import Host

    started = time.monotonic()
    argv = list(sys.argv[1:] if argv is None else argv)
    snapshot = argv[:1] == ["snapshot"]
    args = build_parser(snapshot=snapshot).parse_args(argv[snapshot:])
    args.argv = argv[snapshot:]
    if args.schema:
        from importlib.resources import files

        text = files("dldoctor").joinpath("schemas/report.schema.json").read_text("utf-8")
        _write_output(lambda: sys.stdout.write(text))
        return ExitCode.OK
    policy, policy_source = _policy(args)
    if not snapshot:
        _output_format(args)  # two formats asked for: a usage error before any work
    if _interactive(args, snapshot):
        return _app(args, policy, cleanup)
    if args.list_checks:
        lines = [
            f"{spec.id:32} {spec.title}"
            + ("" if spec.source == "builtin" else f"  [{spec.source}]")
            for spec in _specs(args.no_plugins)[0]
        ]
        _write_output(lambda: print("\n".join(lines)))
        return ExitCode.OK
    deadline_at = started + policy.timeouts.deadline_s
    if watchdog is not None:
        _backstop(deadline_at + BACKSTOP_SLACK_S)  # first: forked before any thread starts
        _watchdog(deadline_at + WATCHDOG_SLACK_S, watchdog)
    extras: list = []
    if snapshot:  # the bundle is written within the deadline too
        deadline_at -= policy.timeouts.deadline_s * SNAPSHOT_WRITE_SHARE

    def recording(host: Host) -> Host:
        from dldoctor.diagnose import bound_host
        from dldoctor.host.recording import RecordingHost
        from dldoctor.snapshots import take

        recorder = RecordingHost(host)
        bound_host(recorder, policy, deadline_at)  # the extras end with the checks
        extras.extend(take.start_extras(recorder))
        return recorder

    report, host = diagnose_for(
        args,
        policy,
        policy_source,
        cleanup,
        deadline_at=deadline_at,
        wrap=recording if snapshot else None,
    )
    if snapshot:
        return _write_snapshot(args, host, report, extras, deadline_at)
    code = _write_outputs(args, report)
    if not args.bundle:
        _fixes_after_boot(args.root or "/", host, policy, say=True)
    return code


def selected_checks(args: argparse.Namespace):
    """The checks `--only` and `--skip` select (UsageError when they name none), and the
    findings of plugins that failed to load."""
    from dldoctor.registry import select

    specs, plugin_findings = _specs(args.no_plugins)
    try:
        return select(specs, args.only, args.skip), plugin_findings
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def diagnose_for(args, policy, policy_source: str, cleanup, *, deadline_at=None, wrap=None):
    """(the report, the host) of the diagnosis `--check` makes: for it, snapshot (`wrap`:
    the host it records through), genconf and slurm-healthcheck."""
    from dldoctor.diagnose import EARLY_PROBES, EARLY_RUNS, diagnose

    host = _host(args, policy, cleanup)
    if not args.only:
        host.prefetch(runs=EARLY_RUNS, probes=EARLY_PROBES)  # while the checks load
    specs, plugin_findings = selected_checks(args)
    if wrap is not None:
        host = wrap(host)
    report = diagnose(
        host,
        policy,
        specs,
        deadline_at=deadline_at,
        extra_findings=plugin_findings,
        strict=getattr(args, "strict", False),
        policy_source=policy_source,
    )
    return report, host


def _interactive(args, snapshot: bool) -> bool:
    """The app, for a person at a terminal; a pipe, a file or a batch flag gets the
    checklist (the app's own terminal is both stdin and stdout)."""
    batch = args.check or args.json or args.list_checks or args.schema or snapshot
    outputs = [v for k, v in vars(args).items() if k in ("format", "output") or k[:5] == "file_"]
    batch = batch or any(outputs)
    tty = all(s is not None and s.isatty() for s in (sys.stdin, sys.stdout))
    return not batch and tty and os.environ.get("TERM") != "dumb"


def _app(args, policy, cleanup: contextlib.ExitStack) -> ExitCode:
    """The interactive doctor. No watchdog or backstop: the run's deadline still bounds
    the checks, but the app lives on after it."""

    make_host, bundle_dir = _host_maker(args, policy, cleanup)
    specs, plugin_findings = selected_checks(args)
    from dldoctor.tui.session import Session

    notices = [] if args.bundle else _fixes_after_boot(args.root or "/", make_host(), policy)
    session = Session(
        make_host,
        policy,
        specs,
        read_only=bool(args.bundle),
        root=args.root or "/",
        bundle=bundle_dir,
        label=args.bundle or "",
        extra=plugin_findings,
        notices=notices,
    )
    session.start()  # the checks run while Textual loads: results are there at first paint
    from dldoctor.tui import run_app

    ended = run_app(session, on_end=cleanup.close)
    if ended:
        print("dldoctor: terminated", file=sys.stderr)
        return ended
    report = session.run.report
    return exit_code_for(report.findings, strict=args.strict) if report else ExitCode.OK


def _fixes_after_boot(root: str, host, policy, *, say: bool = False) -> list[str]:
    """A fix that waited for a reboot is judged by the first run after it: one line per
    fix judged ("fix X: verified after reboot (ID)"), on stderr with `say`. A glance at the
    journal folder first: runs without one (most, and every non-root one: the folder is
    root's alone) import none of the fix machinery."""
    try:
        if not os.listdir(os.path.join(root, "var/lib/dldoctor/journal")):
            return []
    except OSError:
        return []
    from dldoctor.fixes.plan import FixError, Target
    from dldoctor.fixes.verify import after_boot

    try:
        judged = after_boot(Target(root), host, policy)
    except (FixError, OSError, ValueError) as exc:
        log.warning("could not judge the fixes waiting for this boot: %s", exc)
        return []
    lines = [f"fix {r['fix']}: {r['verdict']} ({r['id']})" for r in judged]
    for line in lines if say else ():
        print(line, file=sys.stderr)
    return lines


def _write_snapshot(args, recorder, report, extras, deadline_at: float) -> ExitCode:
    """The bundle's path on stdout; exit 0 once it is written (the verdict is inside)."""
    from dldoctor.snapshots import take
    from dldoctor.snapshots.bundle import BundleError

    progress = take.Progress()
    progress.say(f"waiting for {sum(t.is_alive() for t in extras)} extra(s)")
    late = take.wait_extras(extras, deadline_at)
    if late:
        log.warning("%d forensic extra(s) still running at the deadline: not in the bundle", late)
    progress.say("writing the bundle")
    redactor, map_path = _redactor(args)
    dest = args.output or take.default_dest(archive=not args.dir)
    try:
        path = take.write_snapshot(
            recorder,
            report,
            dest,
            ["dldoctor", "snapshot", *args.argv],
            archive=not args.dir,
            redactor=redactor,
            map_path=map_path,
            deadline=deadline_at,
        )
    except (BundleError, OSError) as exc:
        raise OutputError(f"cannot write the snapshot: {exc}") from None
    finally:
        progress.done()
    if redactor is not None:
        log.warning("redacted; the map back to the real names (keep it private): %s", map_path)
    from dldoctor.atomicfile import output_target

    if not output_target(path)[1]:  # a stream (`-o /dev/stdout`) gets the archive alone
        _write_output(lambda: print(path))
    return ExitCode.OK


def _redactor(args):
    """(the Redactor, where its map is kept), or (None, "") with --no-redact."""
    if args.no_redact:
        return None, ""
    from dldoctor.snapshots import take
    from dldoctor.snapshots.redact import Redactor

    path = os.path.abspath(args.redact_map or take.default_map_path())
    try:
        return Redactor.load(path), path
    except (OSError, ValueError) as exc:
        raise InputError(f"--redact-map {path}: {exc}") from None


def _output_format(args: argparse.Namespace) -> str:
    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json and --format {args.format} ask for two formats")
    return "json" if args.json else args.format or "text"


def _write_outputs(args: argparse.Namespace, report) -> ExitCode:
    """Each `--NAME FILE`, then the report in its format on stdout (or --output); the exit
    code is the verdict's, or the one the format's protocol defines (Nagios, npd). One
    output that cannot be written does not stop the others: OutputError once all are tried."""
    from dldoctor.render.formats import FORMATS

    fmt = FORMATS[_output_format(args)]
    failed: list[str] = []

    def attempt(write) -> None:
        try:
            write()
        except OutputError as exc:
            failed.append(str(exc))

    for name, f in FORMATS.items():
        path = getattr(args, f"file_{name}", None) if f.file_flag else None
        if path:
            attempt(lambda path=path, f=f: _write_file(path, f.render(report)))
    if args.output:
        attempt(lambda: _write_file(args.output, fmt.render(report)))
    else:
        attempt(lambda: _write_output(_stdout_writer(fmt, args, report)))
    if failed:
        raise OutputError("; ".join(failed))
    code = fmt.exit_code(report)
    return exit_code_for(report.findings, strict=args.strict) if code is None else code


def _stdout_writer(fmt, args: argparse.Namespace, report):
    """What prints the report in `fmt` on stdout: JSON and text stream as they render."""
    if fmt.name == "json":
        from dldoctor.render.jsondoc import render_json

        return lambda: render_json(report)
    if fmt.name == "text":
        from dldoctor.render.text import render_text

        return lambda: render_text(report, verbose=args.verbose, color=args.color)
    data = fmt.render(report)
    return lambda: (sys.stdout.buffer.write(data), sys.stdout.buffer.flush())


def _write_output(write) -> None:
    """Run `write` on stdout: a reader that went away is no error, a full or closed
    stdout is (OutputError, exit 6)."""
    if sys.stdout is None:  # started with stdout closed (`>&-`)
        raise OutputError("cannot write the report: standard output is closed")
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`dldoctor --check | head`): the verdict still stands.
        _discard_stdout()
    except OSError as exc:  # a full disk (`> /dev/full`), an I/O error
        _discard_stdout()
        raise OutputError(f"cannot write the report: {exc.strerror or exc}") from None


def _write_file(path: str, data: bytes) -> None:
    """An output beside stdout's, replaced atomically (a collector or a CI job reading it
    never sees half a file) or written into a device, FIFO or descriptor (docs/outputs.md);
    OutputError (exit 6) when it cannot be written."""
    from dldoctor.atomicfile import write_output

    try:
        write_output(path, data)
    except FileNotFoundError:
        folder = os.path.dirname(os.path.abspath(path))
        why = "no such file or directory" if os.path.isdir(folder) else f"no folder {folder}"
        raise OutputError(f"cannot write {path}: {why}") from None
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


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


def _host(args: argparse.Namespace, policy, cleanup: contextlib.ExitStack):
    return _host_maker(args, policy, cleanup)[0]()


def _host_maker(args: argparse.Namespace, policy, cleanup: contextlib.ExitStack):
    """(a function making a fresh Host for each run, the bundle's folder or "")."""
    if args.bundle and args.root:
        raise UsageError("--from and --root cannot be used together")
    if args.bundle:
        from dldoctor.host.foreign import open_input
        from dldoctor.snapshots.bundle import BundleError

        try:
            return open_input(args.bundle, cleanup)  # docs/foreign-inputs.md
        except BundleError as exc:
            raise InputError(str(exc)) from None
    from dldoctor.host.live import LiveHost

    t = policy.timeouts
    root = args.root or "/"
    if not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a directory")
    return (
        lambda: LiveHost(
            root, command_timeout=t.command_s, fs_timeout=t.filesystem_s, probe_timeout=t.nvml_s
        )
    ), ""
