"""`dldoctor snapshot`: the bundle of a `--check` run, written, redacted and packed within
the run's deadline (docs/bundle-format.md)."""

from __future__ import annotations

import logging
import os

from dldoctor.cli.shared import InputError, OutputError, write_output
from dldoctor.exitcodes import ExitCode

log = logging.getLogger("dldoctor")
# The share of the deadline `snapshot` keeps for writing, redacting and packing the bundle
# after the checks (and the extras) end: measured 2-6 s on a loaded 2-core machine.
SNAPSHOT_WRITE_SHARE = 1 / 3


def write_snapshot(args, recorder, report, extras, deadline_at: float, facts=None) -> ExitCode:
    """The bundle's path on stdout; exit 0 once it is written (the verdict is inside).
    `facts`: the run's, for report.html's topology picture."""
    from dldoctor.snapshots import take
    from dldoctor.snapshots.bundle import BundleError

    progress = take.Progress()
    progress.say(f"waiting for {sum(t.is_alive() for t in extras)} extra(s)")
    late = take.wait_extras(extras, deadline_at)
    if late:
        log.warning("%d forensic extra(s) still running at the deadline: not in the bundle", late)
    progress.say("writing the bundle")
    redactor, map_path = redactor_for(args)
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
            active=args.active,
            picture=_picture(facts, report),
        )
    except (BundleError, OSError) as exc:
        raise OutputError(f"cannot write the snapshot: {exc}") from None
    finally:
        progress.done()
    if redactor is not None:
        log.warning("redacted; the map back to the real names (keep it private): %s", map_path)
    from dldoctor.atomicfile import output_target

    if not output_target(path)[1]:  # a stream (`-o /dev/stdout`) gets the archive alone
        write_output(lambda: print(path))
    return ExitCode.OK


def redactor_for(args):
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


def _picture(facts, report) -> str | None:
    """The topology SVG of the run's own facts (memoised by its checks: no new probe in the
    common case), redacted with the rest of report.html; None without one."""
    if facts is None:
        return None
    from dldoctor.topology import picture_of

    return picture_of(facts, report.findings)
