"""`dldoctor snapshot`: the run of `--check`, recorded, plus the forensic extras support
asks for, written as a bundle (docs/bundle-format.md) with report.json, report.md and a
self-contained report.html beside the raw answers."""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence

from dldoctor.host.base import Host
from dldoctor.model import Report
from dldoctor.render.page import render_html, render_markdown
from dldoctor.runner import SIGNAL_SLICE_S

# What no check needs but support asks for first. Each runs under the command timeout,
# all at once and beside the checks; a tool that is absent is recorded as not installed.
EXTRAS: tuple[tuple[str, ...], ...] = (
    ("journalctl", "-k", "-b", "--no-pager", "-n", "2000"),  # the kernel log's tail
    ("nvidia-smi", "-q", "-x"),
    ("nvidia-smi", "topo", "-m"),
    ("nvidia-smi", "nvlink", "-s"),
    ("lspci", "-vvv"),  # capabilities and link state need root
    ("numactl", "-H"),
    ("ibv_devinfo", "-v"),
    ("mdadm", "--detail", "--scan"),
    ("dmidecode", "-t", "system", "-t", "bios"),  # root
)


PACK_RESERVE_S = 4.0


class Progress:
    """One line on a terminal's stderr, rewritten in place; nothing when not a TTY."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.on = bool(getattr(self.stream, "isatty", None) and self.stream.isatty())

    def say(self, text: str) -> None:
        if self.on:
            self.stream.write(f"\r\x1b[Kdldoctor snapshot: {text}")
            self.stream.flush()

    def done(self) -> None:
        if self.on:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def start_extras(host: Host) -> list[threading.Thread]:
    """Ask every extra through `host` (a RecordingHost keeps the answers), concurrently."""
    threads = [
        threading.Thread(target=host.run, args=(list(argv),), name="dldoctor-extra", daemon=True)
        for argv in EXTRAS
    ]
    for t in threads:
        t.start()
    return threads


def wait_extras(threads: Sequence[threading.Thread], until: float) -> int:
    """Wait for the extras until `until` (monotonic); the number still running then (their
    answers are not in the bundle: the run's deadline came first)."""
    for t in threads:
        # In slices, as the runner waits: a signal must not wait for a hung extra.
        while t.is_alive() and (left := until - time.monotonic()) > 0:
            t.join(min(left, SIGNAL_SLICE_S))
    return sum(t.is_alive() for t in threads)


def default_name(*, archive: bool = True, when: _dt.datetime | None = None) -> str:
    """dldoctor-snapshot-<UTC time>[.tar.gz]: sortable, safe as a file name, and free of the
    host's name, which would give the host away in the file name and the archive's top
    folder (named after it). The TUI's export suggests it too."""
    when = when or _dt.datetime.now(_dt.timezone.utc)
    name = f"dldoctor-snapshot-{when.astimezone(_dt.timezone.utc):%Y%m%dT%H%M%SZ}"
    return name + (".tar.gz" if archive else "")


def report_members(report: Report, *, picture: str | None = None) -> dict[str, bytes]:
    """The readable reports that travel in a bundle, beside report.json; `picture`, the
    topology SVG (dldoctor.topology) of the run's recorded facts, goes into report.html,
    and is redacted with it."""
    return {
        "report.md": render_markdown(report).encode(),
        "report.html": render_html(report, picture=picture).encode(),
    }


def default_map_path() -> str:
    """The redaction map every snapshot on this account continues, so that one host keeps
    its pseudonyms from one snapshot to the next: private, and never beside the bundle."""
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "dldoctor", "redact-map.json")


def write_snapshot(
    recorder,
    report: Report,
    dest: str,
    argv: Sequence[str],
    *,
    archive: bool,
    redactor=None,
    map_path: str = "",
    deadline: float | None = None,
    active: bool = False,
    picture: str | None = None,
) -> str:
    """The bundle at `dest` (which must not exist): a `.tar.gz` or, `archive=False`, a
    directory. Built in a private folder beside `dest` and moved there whole at the end:
    an interrupted snapshot leaves nothing at `dest`. With a `redactor`, its map (the
    pseudonyms so far) is saved at `map_path` once the bundle is written. Redaction ends
    by `deadline` (time.monotonic()): what it could not reach of a long text is left out.
    `active`: the run measured (--active): the manifest says so (docs/bundle-format.md)."""
    from dldoctor.atomicfile import output_target
    from dldoctor.snapshots.archive import write_archive
    from dldoctor.snapshots.bundle import BundleError, work_beside

    # The one rule of outputs (docs/outputs.md): a link is followed, a device, FIFO or
    # descriptor written into; a bundle never replaces a file.
    dest, stream = output_target(dest)
    if stream and not archive:
        raise BundleError(f"{dest}: a bundle folder cannot be written into a device or FIFO")
    if stream:
        work = tempfile.mkdtemp(prefix=".dldoctor-snapshot-")
        into, dest = dest, os.path.join(work, "bundle.tar.gz")
    else:
        dest, work = work_beside(dest, ".dldoctor-snapshot-")
    try:
        bundle = recorder.write_bundle(
            os.path.join(work, "bundle"),
            report=report.to_dict(),
            argv=list(argv),
            extra_files=report_members(report, picture=picture),
            active=active,
        )
        if redactor is not None:
            from dldoctor.snapshots.redact import redact_bundle

            # the run's deadline, less what packing takes (gzip -9: 2-4 s for 15 MB of log)
            until = None if deadline is None else deadline - PACK_RESERVE_S
            redact_bundle(bundle, redactor, until)
        if archive:
            write_archive(bundle, dest)
        else:
            os.rename(bundle, dest)
        if stream:
            _copy_into(dest, into)
            dest = into
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if redactor is not None and map_path:
        os.makedirs(os.path.dirname(map_path), mode=0o700, exist_ok=True)
        redactor.save(map_path)
    return dest


def _copy_into(archive: str, stream: str) -> None:
    from dldoctor.atomicfile import open_stream

    with open(archive, "rb") as src, open_stream(stream) as out:
        shutil.copyfileobj(src, out)


def default_dest(*, archive: bool) -> str:
    """`default_name` in the current folder."""
    return os.path.abspath(default_name(archive=archive))
