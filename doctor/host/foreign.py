"""`--from` of a report another tool wrote: each reader recognises its own layout
(docs/foreign-inputs.md). A path none recognises is left to the dldoctor bundle reader;
`open_input` is the one opener of all of them, for `--from` and `diff` alike."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable

from dldoctor.host.base import Host
from dldoctor.snapshots.archive import (
    MAX_FOREIGN_MEMBERS,
    XZ,
    compression,
    first_names,
    open_archive,
)
from dldoctor.snapshots.bundle import BundleError

log = logging.getLogger("dldoctor")

# Enough of an archive's first names to see whose layout it is.
PEEK_MEMBERS = 64


def _is_sos(path: str) -> bool:
    from dldoctor.host.sosreport import is_sos_tree, looks_like_sos

    if os.path.isdir(path):
        return is_sos_tree(path)
    kind = compression(path)
    if not kind:
        return False
    # dldoctor writes gzip only: an xz archive is a foreign one, and the sos reader (the one
    # foreign reader of archives so far) says what it lacks.
    return kind == XZ or looks_like_sos(first_names(path, kind, PEEK_MEMBERS))


def _open_sos(path: str, cleanup: contextlib.ExitStack) -> tuple[Host, str]:
    from dldoctor.host.sosreport import SosReportHost, is_sos_tree

    root = path
    if not os.path.isdir(path):
        root = cleanup.enter_context(
            open_archive(path, compression(path), host_root="", max_members=MAX_FOREIGN_MEMBERS)
        )
    if not is_sos_tree(root):
        raise BundleError(f"{path}: not a sos report: no sos_commands/ and sos_reports/ folders")
    return SosReportHost(root, label=path), root


def _is_bug_report(path: str) -> bool:
    from dldoctor.host.bugreport import recognise

    return recognise(path)


def _open_bug_report(path: str, cleanup: contextlib.ExitStack) -> tuple[Host, str]:
    """A log is read whole into memory (capped): no folder to keep."""
    from dldoctor.host.bugreport import BadLog, open_bug_report

    try:
        host = open_bug_report(path)
    except BadLog as exc:
        raise BundleError(str(exc)) from None
    if not host.report.complete:
        log.warning("%s: %s", path, host.report.notes[-1])
    return host, ""


# (does `path` look like this kind of report, open it: (its Host, the folder it reads)):
# the first that recognises a path reads it. A bug report first: it is one file, and its
# recogniser reads a few bytes; the sos one looks into archives.
READERS = [(_is_bug_report, _open_bug_report), (_is_sos, _open_sos)]


def open_foreign(path: str, cleanup: contextlib.ExitStack) -> tuple[Host, str] | None:
    """(the Host of the foreign report at `path`, the folder it reads: an archive is
    extracted for the life of `cleanup`), or None when no reader recognises the path.
    Defects are BundleError."""
    for recognise, open_ in READERS:
        if recognise(path):
            return open_(path, cleanup)
    return None


def open_input(path: str, cleanup: contextlib.ExitStack) -> tuple[Callable[[], Host], str]:
    """What `--from PATH` reads, whatever its kind: (a function making its Host, the folder
    it reads, extracted for the life of `cleanup` from an archive). Defects are BundleError,
    naming `path`."""
    from dldoctor.host.replay import ReplayHost
    from dldoctor.snapshots.archive import read_bundle

    foreign = open_foreign(path, cleanup)
    if foreign is not None:
        return (lambda: foreign[0]), foreign[1]
    reader, changed = read_bundle(path, cleanup)
    if changed:  # worth knowing, not a reason to refuse (an archive's differences are)
        log.warning(
            "%s: bundle files differ from its manifest (edited by hand?): %s",
            path,
            ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else ""),
        )
    return (lambda: ReplayHost(reader, label=path)), reader.path
