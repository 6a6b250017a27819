"""Redaction of a bundle directory in place: every member's bytes and name, its command
folders and its manifest."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile

from dldoctor.snapshots.bundle import (
    COMMANDS,
    FILES,
    MANIFEST,
    REPORT,
    command_folders,
    file_digests,
    json_bytes,
)
from dldoctor.snapshots.redact.discover import discover, host_path
from dldoctor.snapshots.redact.redactor import Redactor

# The members written from the others (snapshots/take.py): a report, never a source.
DERIVED = frozenset({REPORT, "report.md", "report.html"})


def _walk(root: str):
    """(bundle-relative name, lstat) of every entry, sorted, folders before their contents."""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel_folder = os.path.relpath(folder, root)
        for name in sorted(dirs) + sorted(files):
            rel = name if rel_folder == "." else f"{rel_folder}/{name}"
            yield rel, os.lstat(os.path.join(root, rel))


def _member_name(rel: str, redactor: Redactor) -> str:
    path = host_path(rel)
    return FILES + redactor.text(path) if path else redactor.text(rel)


def _command_folder(rel: str, folder_map: dict[str, str]) -> str:
    parts = rel.split("/")
    if len(parts) >= 2 and parts[0] == COMMANDS and parts[1] in folder_map:
        parts[1] = folder_map[parts[1]]
        return "/".join(parts)
    return ""


def _command_folders(root: str, redactor: Redactor) -> dict[str, str]:
    """commands/<name> -> the name its redacted argv gets (the name can hold a hash of it)."""
    found = {}
    top = os.path.join(root, COMMANDS)
    for name in sorted(os.listdir(top)) if os.path.isdir(top) else ():
        try:
            with open(os.path.join(top, name, "command.json"), "rb") as f:
                argv = json.loads(f.read()).get("argv")
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or not argv:
            continue
        old = command_folders(argv)
        if name not in old:
            continue
        new = command_folders([redactor.text(a) for a in argv])
        found[name] = new[old.index(name)]
    return found


def redact_bundle(bundle_dir: str, redactor: Redactor, deadline: float | None = None) -> None:
    """Rewrite the bundle directory in place: every member's bytes and name redacted, and
    the manifest's sha256 entries recomputed. The redacted tree is built beside the bundle
    and swapped in at the end, so an interrupted run leaves the original whole.

    Past `deadline` (time.monotonic()), what is left of a long text is left out (LEFT_OUT).
    Save `redactor` (its map) somewhere outside the bundle afterwards."""
    redactor.deadline = deadline
    root = os.path.abspath(bundle_dir)
    # The reports are derived from the other members: redacted last, with what those taught.
    entries = sorted(_walk(root), key=lambda entry: entry[0] in DERIVED)
    contents = {}
    for rel, st in entries:
        if stat.S_ISREG(st.st_mode):
            with open(os.path.join(root, rel), "rb") as f:
                contents[rel] = f.read()
    discover(contents, [rel for rel, _ in entries], redactor)
    folders = _command_folders(root, redactor)
    parent = os.path.dirname(root)
    new_root = tempfile.mkdtemp(prefix=".dldoctor-redact-", dir=parent)
    written: dict[str, bytes] = {}
    manifest = None
    try:
        for rel, st in entries:
            new_rel = _command_folder(rel, folders) or _member_name(rel, redactor)
            target = os.path.join(new_root, new_rel)
            source = os.path.join(root, rel)
            if stat.S_ISDIR(st.st_mode):
                os.makedirs(target, exist_ok=True)
            elif stat.S_ISLNK(st.st_mode):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.symlink(redactor.text(os.readlink(source)), target)
            elif stat.S_ISREG(st.st_mode):
                if rel == MANIFEST:
                    manifest = contents[rel]
                    continue
                redactor.known_addresses_only = rel in DERIVED
                data = _redact_member(rel, contents[rel], redactor)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as f:
                    f.write(data)
                os.chmod(target, stat.S_IMODE(st.st_mode))
                written[new_rel] = data
            # anything else (a FIFO, a device) is no member a reader accepts: left out
        redactor.known_addresses_only = False
        if manifest is not None:
            with open(os.path.join(new_root, MANIFEST), "wb") as f:
                f.write(_redact_manifest(manifest, written, redactor))
        os.chmod(new_root, stat.S_IMODE(os.stat(root).st_mode))
        old_root = tempfile.mkdtemp(prefix=".dldoctor-unredacted-", dir=parent)
        moved = os.path.join(old_root, "bundle")
        os.rename(root, moved)
        try:
            os.rename(new_root, root)
        except BaseException:
            os.rename(moved, root)
            raise
        shutil.rmtree(old_root)
    except BaseException:
        shutil.rmtree(new_root, ignore_errors=True)
        raise


def _redact_member(rel: str, data: bytes, redactor: Redactor) -> bytes:
    if rel.startswith(f"{FILES}/"):
        return redactor.member(rel, data)
    if rel.endswith(".json"):
        try:
            parsed = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return redactor.member(rel, data)
        try:
            # answers.json is keyed by host path: a content_b64 is redacted as that file
            return json_bytes(redactor.json_value(parsed))
        except RecursionError:  # nested deeper than Python recurses: redacted as text
            pass
    return redactor.member(rel, data)


def _redact_manifest(data: bytes, written: dict[str, bytes], redactor: Redactor) -> bytes:
    try:
        manifest = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        manifest = None
    if not isinstance(manifest, dict):
        return redactor.member(MANIFEST, data)
    manifest = {k: v if k == "files" else redactor.json_value(v) for k, v in manifest.items()}
    if isinstance(manifest.get("argv"), list):  # --from sosreport-<host>-….tar.xz
        manifest["argv"] = [redactor.file_name(a) if isinstance(a, str) else a
                            for a in manifest["argv"]]  # fmt: skip
    manifest["files"] = file_digests(written)
    return json_bytes(manifest)
