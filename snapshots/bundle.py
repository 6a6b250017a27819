"""The bundle directory: writing what a RecordingHost kept, and reading it back safely.

The layout is documented for humans in docs/bundle-format.md; keep the two in step.
A bundle is untrusted input: every path read from it stays inside it, links included,
sizes are capped, and any defect becomes a one-line BundleError.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import logging
import os
import posixpath
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Sequence
from typing import Any

from dldoctor import __version__
from dldoctor.host.base import STATUSES, Answer, AnswerStatus, Op, command_key
from dldoctor.host.paths import resolve_in_root

FORMAT = "dldoctor-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
REPORT = "report.json"
ANSWERS = "answers.json"
FILES = "files"
COMMANDS = "commands"
PROBES = "probes"
NVML = "nvml.json"
MAX_JSON_BYTES = 64 * 1024 * 1024
# A parsed value costs 50-100 bytes of memory: 64 MiB of `{},` became 1.6 GB and 4.5 s of
# parsing. Values are counted (commas and brackets, inside strings too) before parsing; a
# 64-GPU nvml.json has about 20,000.
MAX_JSON_VALUES = 2_000_000
# Verifying the manifest is a courtesy, not the job: all of it shares this budget, and past
# it the replay goes on unverified. A real bundle is a few MiB.
MAX_VERIFY_BYTES = 256 * 1024 * 1024
MAX_VERIFY_S = 1.0
MAX_VERIFY_FILES = 100_000
_PATH_MAX = 4096  # a longer member name cannot name a file, and costs a quadratic walk
_CHUNK = 1024 * 1024
# What makes a directory a bundle: one of these (True: a folder). Anything else (an empty
# folder, /etc, a checkout) would replay as a host where everything is missing.
CONTENTS = ((MANIFEST, False), (FILES, True), (COMMANDS, True), (PROBES, True),
            (ANSWERS, False), (NVML, False))  # fmt: skip
_SLUG_MAX = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=,@-]")
log = logging.getLogger(__name__)


class BundleError(Exception):
    """A bundle that cannot be read; the message is one line for the user."""


class _OverBudget(Exception):
    pass


def command_folders(argv: Sequence[str]) -> tuple[str, str]:
    """Folder names a command may have under commands/, the plain one first.

    `nvidia-smi -q -x` -> `nvidia-smi_-q_-x`. When two command lines mangle to the same
    name (or the name is long) the second form, with a hash of the exact argv, is used.
    """
    digest = hashlib.sha1(command_key(argv).encode()).hexdigest()[:10]
    slug = _UNSAFE.sub("_", "_".join(argv)).lstrip(".") or "_"
    if len(slug) > _SLUG_MAX:
        slug = slug[:_SLUG_MAX]
        return f"{slug}-{digest}", f"{slug}-{digest}"
    return slug, f"{slug}-{digest}"


def probe_relpath(name: str) -> str:
    # The design fixes nvml.json at the top; every other probe lives under probes/.
    return NVML if name == "nvml" else f"{PROBES}/{name}.json"


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _answer_meta(answer: Answer) -> dict[str, Any]:
    meta: dict[str, Any] = {"status": answer.status}
    if answer.error:
        meta["error"] = answer.error
    if answer.timeout_s is not None:
        meta["timeout_s"] = answer.timeout_s
    meta["duration_s"] = round(answer.duration_s, 6)
    return meta


def work_beside(dest: str, prefix: str) -> tuple[str, str]:
    """(`dest` made absolute, a private folder beside it to build in, so that the result
    can be renamed into place whole); BundleError when `dest` already exists."""
    dest = os.path.abspath(dest)
    if os.path.lexists(dest):
        raise BundleError(f"{dest} already exists; choose a new path")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    return dest, tempfile.mkdtemp(prefix=prefix, dir=os.path.dirname(dest))


def write_bundle(
    dest: str,
    answers: Iterable[tuple[Answer, Sequence[str] | None]],
    *,
    report: dict | None = None,
    argv: Sequence[str] = (),
    extra_files: dict[str, bytes] | None = None,
    absent: str = AnswerStatus.MISSING,
    active: bool = False,
) -> str:
    """Write a bundle directory at `dest` (which must not exist) and return its path.
    `active`: the run measured (--active); the manifest says so, and `--from` runs the
    measuring checks on the recorded measurements.

    Everything is written into a sibling temporary directory first and renamed at the end,
    so an interrupted write leaves no half-written bundle behind.
    """
    dest, tmp = work_beside(dest, ".dldoctor-bundle-")
    try:
        _write_tree(tmp, answers, report, argv, extra_files or {}, absent, active)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _write_tree(root, answers, report, argv, extra_files, absent=AnswerStatus.MISSING,
                active=False) -> None:  # fmt: skip
    index: dict[str, dict[str, Any]] = {Op.READ: {}, Op.LIST: {}, Op.LINK: {}, Op.STATVFS: {}}
    written: dict[str, bytes] = {}
    folder_argv: dict[str, list[str]] = {}

    def put(rel: str, data: bytes) -> bool:
        path = os.path.join(root, rel)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "xb") as f:
                f.write(data)
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            return False  # a path that is both a file and a folder's parent: see below
        written[rel] = data
        return True

    for answer, cmd_argv in answers:
        meta = _answer_meta(answer)
        if answer.op == Op.READ:
            # A key like "/a/../../x" (from an unnormalised PATH entry) must not climb out.
            rel = f"{FILES}/{posixpath.normpath('/' + answer.key).lstrip('/')}"
            if answer.ok and put(rel, answer.value):
                continue
            if answer.ok:  # cannot live in files/: keep the bytes in the index instead
                meta["content_b64"] = base64.b64encode(answer.value).decode()
            index[Op.READ][answer.key] = meta
        elif answer.op == Op.LIST:
            if answer.ok:
                meta["entries"] = list(answer.value)
            index[Op.LIST][answer.key] = meta
        elif answer.op == Op.LINK:
            if answer.ok:
                meta["target"] = answer.value
            index[Op.LINK][answer.key] = meta
        elif answer.op == Op.STATVFS:
            if answer.ok:
                meta["value"] = answer.value
            index[Op.STATVFS][answer.key] = meta
        elif answer.op == Op.RUN:
            plain, hashed = command_folders(cmd_argv)
            meta["argv"] = list(cmd_argv)
            name = plain if folder_argv.setdefault(plain, meta["argv"]) == meta["argv"] else hashed
            folder = f"{COMMANDS}/{name}"
            if answer.ok:
                meta["returncode"] = answer.value.returncode
                put(f"{folder}/stdout", answer.value.stdout)
                put(f"{folder}/stderr", answer.value.stderr)
            put(f"{folder}/command.json", json_bytes(meta))
        elif answer.op == Op.PROBE:
            if answer.ok:
                meta["value"] = answer.value
            put(probe_relpath(answer.key), json_bytes(meta))

    put(ANSWERS, json_bytes({k: v for k, v in index.items() if v}))
    if report is not None:
        put(REPORT, json_bytes(report))
    for rel, data in extra_files.items():
        put(rel, data)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "tool": {"name": "dldoctor", "version": __version__},
        "created": _utc_now(),
        "argv": list(argv),
        "files": file_digests(written),
    }
    if (
        absent != AnswerStatus.MISSING
    ):  # converted from a capture: what it lacks was never looked at
        manifest["absent"] = absent
    if active:  # taken with --active: its replay runs the measuring checks
        manifest["active"] = True
    put(MANIFEST, json_bytes(manifest))


def file_digests(members: dict[str, bytes]) -> dict[str, str]:
    """The manifest's `files`: bundle-relative name -> sha256 of its bytes."""
    return {rel: hashlib.sha256(data).hexdigest() for rel, data in sorted(members.items())}


def json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


class BundleReader:
    """Read access to a bundle directory that never leaves it."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        if not os.path.exists(self.path):
            raise BundleError(f"bundle not found: {path}")
        if not os.path.isdir(self.path):
            raise BundleError(f"not a bundle directory: {path}")
        self.manifest = self.json(MANIFEST) or {}
        if not isinstance(self.manifest, dict):
            raise BundleError(f"{path}: {MANIFEST} is not a JSON object")
        if self.manifest and self.manifest.get("format") != FORMAT:
            raise BundleError(f"{path}: {MANIFEST} does not describe a {FORMAT}")
        if not isinstance(self.manifest.get("files", {}), dict):
            raise BundleError(f"{path}: {MANIFEST} 'files' must map paths to sha256 digests")
        version = self.manifest.get("format_version", FORMAT_VERSION)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise BundleError(
                f"{path}: {MANIFEST} is not a valid manifest: format_version {version!r} "
                "is not a positive integer"
            )
        if version > FORMAT_VERSION:
            raise BundleError(
                f"{path}: bundle format version {version!r} is newer than this dldoctor reads "
                f"({FORMAT_VERSION}); upgrade dldoctor"
            )
        index = self.json(ANSWERS) or {}
        if not isinstance(index, dict) or not all(isinstance(v, dict) for v in index.values()):
            raise BundleError(f"{path}: {ANSWERS} must map operations to objects")
        self.index: dict[str, dict[str, Any]] = index
        # Resolved like any bundle path: a `files` link to "/" must not expose this machine.
        self.files_root = self.inside(FILES)
        self._folders: dict[str, str] = {}  # host folder -> its real path under files/

    @classmethod
    def of_tree(cls, path: str) -> BundleReader:
        """A folder that mirrors a host from its top (a sos report: docs/foreign-inputs.md),
        read under the same rules: no manifest or index, and files/ is the folder itself."""
        reader = cls.__new__(cls)
        reader.path = os.path.abspath(path)
        reader.manifest, reader.index = {}, {}
        reader.files_root = reader.path
        reader._folders = {}
        return reader

    def require_contents(self) -> None:
        """Refuse a directory that holds none of a bundle's parts (BundleError)."""
        for rel, folder in CONTENTS:
            if (os.path.isdir if folder else os.path.isfile)(self.inside(rel)):
                return
        names = ", ".join(rel + "/" * folder for rel, folder in CONTENTS)
        raise BundleError(f"{self.path} is not a dldoctor bundle: it has none of {names}")

    def inside(self, rel: str) -> str:
        """Real path of bundle-relative `rel`, links resolved without leaving the bundle."""
        return resolve_in_root(self.path, rel)

    def files_path(self, path: str, *, follow_last: bool = True) -> str:
        """Real path of a host path under files/, resolved as if files/ were `/`.

        A device's ten sysfs files share one folder reached through a chain of links:
        the folder is resolved once per bundle (a bundle does not change while it is
        read), only the last part each time. Resolving the folder, then its last part, is
        what `resolve_in_root` does in one pass; a last part that is a link or `..` takes
        that pass.
        """
        folder, _, name = path.rpartition("/")
        if name in ("", ".", ".."):
            return resolve_in_root(self.files_root, path, follow_last=follow_last)
        real = self._folders.get(folder)
        if real is None:
            real = self._folders[folder] = resolve_in_root(self.files_root, folder)
        candidate = os.path.join(real, name)
        if follow_last and os.path.islink(candidate):
            return resolve_in_root(self.files_root, path)
        return candidate

    def size(self, rel: str) -> int:
        """The size of member `rel` (a sparse file's too), 0 when it is not a file."""
        real = self.inside(rel)
        return os.stat(real).st_size if os.path.isfile(real) else 0

    def read_bytes(self, rel: str, limit: int) -> bytes | None:
        real = self.inside(rel)
        if not os.path.isfile(real):
            return None
        with open(real, "rb") as f:
            return f.read(limit)

    def json(self, rel: str) -> Any:
        data = self.read_bytes(rel, MAX_JSON_BYTES + 1)
        if data is None:
            return None
        if len(data) > MAX_JSON_BYTES:
            raise BundleError(f"{self.path}: {rel} is larger than {MAX_JSON_BYTES} bytes")
        if sum(map(data.count, (b",", b"[", b"{"))) > MAX_JSON_VALUES:
            raise BundleError(f"{self.path}: {rel} holds more than {MAX_JSON_VALUES} values")
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise BundleError(f"{self.path}: {rel} is not valid JSON ({exc})") from None

    def entry(self, op: str, key: str) -> dict[str, Any] | None:
        value = self.index.get(op, {}).get(key)
        return value if isinstance(value, dict) else None

    def verify(self) -> list[str]:
        """Files whose sha256 differs from the manifest (edited by hand, or damaged).

        Names are normalised (`files/./x` is `files/x`), each real file is hashed once
        whatever its spellings or links, and all hashing shares one budget of bytes and
        time: past it, verification stops with one warning line and the rest is unchecked.
        A name that leaves the bundle is a BundleError.
        """
        files = self.manifest.get("files", {})
        if len(files) > MAX_VERIFY_FILES:
            log.warning("bundle not verified: its manifest names %d files, more than %d",
                        len(files), MAX_VERIFY_FILES)  # fmt: skip
            return []
        digests: dict[str, list[Any]] = {}
        for rel, digest in files.items():
            digests.setdefault(self._member(rel), []).append(digest)
        changed: list[str] = []
        hashed: dict[tuple[int, int], str | None] = {}  # (st_dev, st_ino) -> sha256
        budget = [MAX_VERIFY_BYTES, time.monotonic() + MAX_VERIFY_S]
        names = sorted(digests)
        for done, rel in enumerate(names):
            try:
                actual = self._sha256(rel, hashed, budget)
            except OSError:  # an I/O error while hashing: the file cannot be vouched for
                actual = None
            except _OverBudget:
                log.warning(
                    "bundle verification stopped at %s: hashing passed its cap of %d MiB or "
                    "%g s; %d of %d files not checked",
                    rel, MAX_VERIFY_BYTES >> 20, MAX_VERIFY_S, len(names) - done, len(names),
                )  # fmt: skip
                break
            if any(digest != actual for digest in digests[rel]):
                changed.append(rel)
        return changed

    def _member(self, rel: Any) -> str:
        name = posixpath.normpath(rel) if isinstance(rel, str) and rel else ""
        if name in ("", ".") or name.startswith("/") or name.split("/", 1)[0] == "..":
            shown = repr(rel) if len(repr(rel)) <= 80 else repr(rel)[:77] + "..."
            raise BundleError(
                f"{self.path}: {MANIFEST} is not a valid manifest: {shown} "
                "is not a file inside the bundle"
            )
        return name

    def _sha256(self, rel: str, hashed: dict, budget: list) -> str | None:
        """sha256 of member `rel`, once per real file; None where it is not a readable file."""
        if len(rel) > _PATH_MAX:
            return None
        try:
            fd = os.open(self.inside(rel), os.O_RDONLY | os.O_NONBLOCK)
        except (OSError, UnicodeEncodeError):  # "\ud800" names no file: it differs
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return None
        with open(fd, "rb") as f:
            key = (st.st_dev, st.st_ino)
            if key not in hashed:
                if st.st_size > budget[0]:
                    raise _OverBudget
                digest = hashlib.sha256()
                while chunk := f.read(min(_CHUNK, budget[0] + 1)):
                    budget[0] -= len(chunk)
                    if budget[0] < 0 or time.monotonic() > budget[1]:
                        raise _OverBudget
                    digest.update(chunk)
                hashed[key] = digest.hexdigest()
            return hashed[key]


def status_of(meta: dict[str, Any]) -> AnswerStatus:
    """The recorded status; anything that is not one of the Host's statuses is an error."""
    status = meta.get("status", AnswerStatus.OK)
    return AnswerStatus(status) if status in STATUSES else AnswerStatus.ERROR
