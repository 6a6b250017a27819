"""`dldoctor` itself (`--check`, the app, `--list-checks`, `--schema`) and `dldoctor
snapshot`: the diagnosis of one host, and what genconf and slurm-healthcheck share of it.

On the `--check` fast path: it imports neither Textual nor py-cpuinfo.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence

from dldoctor import __version__
from dldoctor.cli.guard import guard_deadline
from dldoctor.cli.outputs import add_output_arguments, output_format, write_outputs
from dldoctor.cli.shared import (
    InputError,
    Parser,
    UsageError,
    add_active_arguments,
    add_request_arguments,
    add_selection_arguments,
    write_output,
)
from dldoctor.exitcodes import ExitCode, exit_code_for
from dldoctor.model import Finding, Status

log = logging.getLogger("dldoctor")


def build_parser(*, snapshot: bool = False) -> argparse.ArgumentParser:
    p = Parser(
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
            "--topology",
            action="store_true",
            help="print the host's topology instead of the checklist: NUMA nodes, PCIe "
            "root ports and switches, GPUs, NICs and NVMe drives with each link's trained/"
            "capable width and speed, NVLink, and the problems found marked on each part "
            "(docs/topology.md)",
        )
    add_request_arguments(p)
    add_active_arguments(p)
    add_selection_arguments(p)
    p.add_argument("--strict", action="store_true", help="warnings also fail the run (exit 1)")
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
        add_output_arguments(p)
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


def run_check(argv: Sequence[str], watchdog: list[int] | None = None) -> int:
    """`dldoctor [OPTIONS]`; `watchdog` as in dldoctor.cli.main (None: no watchdog)."""
    with contextlib.ExitStack() as cleanup:  # an extracted --from archive, removed here
        return int(_diagnosis(list(argv), watchdog, cleanup, snapshot=False))


def run_snapshot(argv: Sequence[str], watchdog: list[int] | None = None) -> int:
    """`dldoctor snapshot [OPTIONS]`."""
    with contextlib.ExitStack() as cleanup:
        return int(_diagnosis(list(argv), watchdog, cleanup, snapshot=True))


def _diagnosis(
    argv: list[str], watchdog: list[int] | None, cleanup: contextlib.ExitStack, *, snapshot: bool
) -> ExitCode:
    import time

    from dldoctor.host.base import Host
    from dldoctor.request import request_from

    started = time.monotonic()
    args = build_parser(snapshot=snapshot).parse_args(argv)
    args.argv = argv
    if args.schema:
        from importlib.resources import files

        text = files("dldoctor").joinpath("schemas/report.schema.json").read_text("utf-8")
        write_output(lambda: sys.stdout.write(text))
        return ExitCode.OK
    request = request_from(args, started=started)
    if not snapshot:
        output_format(args)  # two formats asked for: a usage error before any work
    if _interactive(args, snapshot):
        return _app(request, cleanup)
    if args.list_checks:
        lines = [list_line(spec) for spec in specs_of(request.no_plugins, active=True)[0]]
        write_output(lambda: print("\n".join(lines)))
        return ExitCode.OK
    deadline_at = request.deadline_at
    if watchdog is not None:
        guard_deadline(deadline_at, watchdog)
    extras: list = []
    if snapshot:  # the bundle is written within the deadline too
        from dldoctor.cli.snapshot import SNAPSHOT_WRITE_SHARE

        deadline_at -= request.policy.timeouts.deadline_s * SNAPSHOT_WRITE_SHARE

    def recording(host: Host) -> Host:
        from dldoctor.diagnose import bound_host
        from dldoctor.host.recording import RecordingHost
        from dldoctor.snapshots import take

        recorder = RecordingHost(host)
        bound_host(recorder, request.policy, deadline_at)  # the extras end with the checks
        extras.extend(take.start_extras(recorder))
        return recorder

    listeners = _measuring_progress(request, cleanup)
    topology = not snapshot and args.topology
    picture = snapshot or topology
    if topology and (args.json or args.format not in (None, "text")) and not args.output:
        raise UsageError(
            "--topology prints a text tree on standard output: --json and "
            "--format other than text need --output FILE beside it"
        )
    kept: list = []  # the run's facts, for the picture
    report, host = diagnose_for(
        request,
        cleanup,
        deadline_at=deadline_at,
        wrap=recording if snapshot else None,
        listeners=listeners,
        facts_out=kept if picture else None,
    )
    if snapshot:
        from dldoctor.cli.snapshot import write_snapshot

        return write_snapshot(args, host, report, extras, deadline_at, kept[0])
    code = write_outputs(args, report, stdout=not topology)
    if topology:
        from dldoctor.topology import render_tree, topology_of

        tree = render_tree(topology_of(kept[0]), report.findings, width=_columns())
        write_output(lambda: sys.stdout.write(tree))
    if not request.bundle:
        _fixes_after_boot(request, host, say=True)
    return code


def list_line(spec) -> str:
    """A line of `--list-checks`: id, title, a measuring check's mark, a plugin's source."""
    mark = "  (--active)" if spec.active else ""
    source = "" if spec.source == "builtin" else f"  [{spec.source}]"
    return f"{spec.id:32} {spec.title}{mark}{source}"


def measuring(request, host=None) -> bool:
    """Whether a run of `request` on `host` runs the measuring checks: asked (--active), or
    a replay of a bundle taken with --active (its measurements are in it)."""
    return request.active or bool(host is not None and host.holds_measurements)


def _measuring_progress(request, cleanup: contextlib.ExitStack) -> list:
    """The terminal's progress lines of the measurements (stderr a terminal, this host
    measured): the runner's listener, told each measurement's start and end too."""
    if not request.active or request.bundle:
        return []
    from dldoctor.active.progress import MeasuringProgress, wanted

    if not wanted(sys.stderr):
        return []
    from dldoctor.active import listening

    progress = MeasuringProgress(sys.stderr)
    cleanup.enter_context(listening(progress))
    return [progress]


def selected_checks(request, *, active: bool | None = None):
    """The checks `--only` and `--skip` select (UsageError when they name none), and the
    findings of plugins that failed to load. `active` (default: the request's): the
    measuring checks too."""
    from dldoctor.registry import select

    active = request.active if active is None else active
    specs, plugin_findings = specs_of(request.no_plugins, active=active)
    try:
        return select(specs, list(request.only), list(request.skip)), plugin_findings
    except ValueError as exc:
        raise UsageError(_without_active(request, str(exc)) if not active else str(exc)) from None


def _without_active(request, said: str) -> str:
    """`--only perf` without --active: say that those are measuring checks, not that no
    check matches."""
    from dldoctor.registry import select

    try:
        select(specs_of(request.no_plugins, active=True)[0], list(request.only), list(request.skip))
    except ValueError:
        return said
    return f"{said}: measuring checks (category perf) run only with --active"


def _columns() -> int:
    import shutil

    return shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100


def diagnose_for(
    request,
    cleanup: contextlib.ExitStack,
    *,
    deadline_at=None,
    wrap=None,
    listeners=(),
    facts_out: list | None = None,
):
    """(the report, the host) of the diagnosis `--check` makes of a Request: for it,
    snapshot (`wrap`: the host it records through), genconf and slurm-healthcheck. The
    measuring checks run when asked or when a replayed bundle holds measurements."""
    host = _start_early(request, host_maker(request, cleanup)[0]())
    from dldoctor.diagnose import diagnose

    specs, plugin_findings = selected_checks(request, active=measuring(request, host))
    if wrap is not None:
        host = wrap(host)
    facts = None
    if facts_out is not None:  # the caller reads more of them afterwards (--topology)
        from dldoctor.facts import Facts

        facts = Facts(host)
        facts_out.append(facts)
    report = diagnose(
        host,
        request.policy,
        specs,
        deadline_at=deadline_at,
        extra_findings=plugin_findings,
        strict=request.strict,
        policy_source=request.policy_source,
        listeners=listeners,
        facts=facts,
    )
    return report, host


def _interactive(args, snapshot: bool) -> bool:
    """The app, for a person at a terminal; a pipe, a file or a batch flag gets the
    checklist (the app's own terminal is both stdin and stdout)."""
    batch = args.check or args.json or args.list_checks or args.schema or snapshot
    batch = batch or getattr(args, "topology", False)
    outputs = [v for k, v in vars(args).items() if k in ("format", "output") or k[:5] == "file_"]
    batch = batch or any(outputs)
    tty = all(s is not None and s.isatty() for s in (sys.stdin, sys.stdout))
    return not batch and tty and os.environ.get("TERM") != "dumb"


def _app(request, cleanup: contextlib.ExitStack) -> ExitCode:
    """The interactive doctor. No watchdog or backstop: the run's deadline still bounds
    the checks, but the app lives on after it."""

    make_host, bundle_dir = host_maker(request, cleanup)
    first_run_host = _prefetching(request, make_host)
    active = measuring(request, make_host() if request.bundle else None)
    specs, plugin_findings = selected_checks(request, active=active)
    # What `m` runs: the measuring checks of the selection, after a confirmation.
    measuring_specs = [s for s in selected_checks(request, active=True)[0] if s.active]
    from dldoctor.tui.session import Session

    notices = [] if request.bundle else _fixes_after_boot(request, make_host())
    session = Session(
        first_run_host,
        request.policy,
        specs,
        read_only=bool(request.bundle),
        root=request.host_root,
        bundle=bundle_dir,
        label=request.bundle or "",
        extra=plugin_findings,
        notices=notices,
        measuring=measuring_specs,
    )
    session.start()  # the checks run while Textual loads: results are there at first paint
    from dldoctor.tui import run_app

    ended = run_app(session, on_end=cleanup.close)
    if ended:
        print("dldoctor: terminated", file=sys.stderr)
        return ended
    report = session.run.report
    return exit_code_for(report.findings, strict=request.strict) if report else ExitCode.OK


def _prefetching(request, make_host):
    """`make_host`, whose first host has started what --check starts early: the child
    interpreters start while the checks load, and the app's first findings come sooner."""
    if request.only:
        return make_host
    first = [_start_early(request, make_host())]
    return lambda: first.pop() if first else make_host()


def _start_early(request, host):
    """`host`, having started the child interpreters a whole run asks for, before the facts
    and the checks are imported: they start on the other core meanwhile."""
    from dldoctor.early import EARLY_PROBES, early_runs

    if not request.only:
        host.prefetch(runs=early_runs(), probes=EARLY_PROBES)
    return host


def _fixes_after_boot(request, host, *, say: bool = False) -> list[str]:
    """A fix that waited for a reboot is judged by the first run after it: one line per
    fix judged ("fix X: verified after reboot (ID)"), on stderr with `say`. A glance at the
    journal folder first: runs without one (most, and every non-root one: the folder is
    root's alone) import none of the fix machinery."""
    root = request.host_root
    try:
        if not os.listdir(os.path.join(root, "var/lib/dldoctor/journal")):
            return []
    except OSError:
        return []
    from dldoctor.fixes.plan import FixError, Target
    from dldoctor.fixes.verify import after_boot

    try:
        judged = after_boot(Target(root), host, request.policy)
    except (FixError, OSError, ValueError) as exc:
        log.warning("could not judge the fixes waiting for this boot: %s", exc)
        return []
    lines = [f"fix {r['fix']}: {r['verdict']} ({r['id']})" for r in judged]
    for line in lines if say else ():
        print(line, file=sys.stderr)
    return lines


def specs_of(no_plugins: bool, *, active: bool = False):
    """(the checks, built-in and plugins', in order; a finding per plugin not loaded). The
    measuring checks only when `active`."""
    from dldoctor.registry import (
        PluginLoad,
        builtin_checks,
        ordered,
        plugin_checks,
        plugins_disabled,
    )

    loaded = plugin_checks() if not plugins_disabled(no_plugins) else PluginLoad()
    # The measuring checks' ids are taken even in a passive run, so a plugin's are
    # compared with them; without a plugin a passive run need not import them.
    specs = builtin_checks(active=active or bool(loaded.specs))
    findings: list[Finding] = []
    if loaded.specs or loaded.errors:
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
    # A plugin's measuring check is opt-in too; ids are taken by every check all the same.
    return ordered([s for s in specs if active or not s.active]), findings


def host_maker(request, cleanup: contextlib.ExitStack):
    """(a function making a fresh Host for each run of `request`, the bundle's folder or
    "")."""
    if request.bundle:
        from dldoctor.host.foreign import open_input
        from dldoctor.snapshots.bundle import BundleError

        try:
            return open_input(request.bundle, cleanup)  # docs/foreign-inputs.md
        except BundleError as exc:
            raise InputError(str(exc)) from None
    from dldoctor.host.live import LiveHost

    t = request.policy.timeouts
    root = request.host_root
    if not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a directory")
    return (
        lambda: LiveHost(
            root, command_timeout=t.command_s, fs_timeout=t.filesystem_s, probe_timeout=t.nvml_s
        )
    ), ""
