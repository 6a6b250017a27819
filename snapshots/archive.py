"""The `.tar.gz` form of a bundle: packing a bundle directory, and opening one safely.

An archive is untrusted input. `open_bundle` reads it twice: first every header is
checked (names, member types, links, caps) with nothing written, the compressed stream
read to its end (its CRC checked) and tar's end-of-archive marker required; then the same
members, compared one by one with what was checked, are written into a private temporary
directory, never through a link. The rules and caps are documented in
docs/bundle-format.md; keep the two in step. Foreign archives (a sos report's `.tar.xz`,
docs/foreign-inputs.md) go through the same two passes (`open_archive`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gzip
import io
import lzma
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from dldoctor.snapshots.bundle import (
    COMMANDS,
    FILES,
    PROBES,
    BundleError,
    BundleReader,
)

# A recorded 8-GPU HGX host holds about 900 members; 50,000 leave room for 64 GPUs and their
# NICs, and cost tarfile about 3 s of header parsing on a small VM before the refusal.
MAX_MEMBERS = 50_000
MAX_BYTES = 1 << 30  # the members' contents together, uncompressed
# A long name or a pax header is read into memory whole, before any check sees it.
MAX_HEADER_BYTES = 64 * 1024
# Everything gzip may inflate: the contents plus each member's header blocks and padding.
MAX_STREAM_BYTES = MAX_BYTES + MAX_MEMBERS * 4 * tarfile.BLOCKSIZE + (1 << 20)
# A sos report of a large host holds tens of thousands of sysfs and /proc files.
MAX_FOREIGN_MEMBERS = 150_000
# xz's decoder allocates its dictionary up front, as large as the header asks (up to 4 GiB):
# xz -9 uses 64 MiB, sos the default preset (8 MiB).
XZ_MEMLIMIT = 256 << 20
GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
SUFFIXES = (".tar.gz", ".tgz")
GZIP, XZ = "gzip", "xz"
_CHUNK = 1024 * 1024
_TYPES = {
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a device file",
    tarfile.BLKTYPE: "a device file",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.GNUTYPE_SPARSE: "a sparse file",
}


class _TooLarge(Exception):
    pass


class _SafeTarInfo(tarfile.TarInfo):
    """Refuses a long-name or pax header larger than MAX_HEADER_BYTES before tarfile reads
    it into memory (it would, whole: a 1 GiB pax header is 1 GiB of memory)."""

    def _proc_member(self, tarfile_):
        extended = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE,
                    tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)  # fmt: skip
        if self.type in extended and self.size > MAX_HEADER_BYTES:
            raise _TooLarge(f"a tar extended header of {self.size} bytes (cap {MAX_HEADER_BYTES})")
        if self.type == tarfile.GNUTYPE_SPARSE:  # its extension headers are read unbounded
            raise _TooLarge("a sparse file (not in a bundle)")
        return super()._proc_member(tarfile_)


class _Capped:
    """The inflated stream, refused once it passes MAX_STREAM_BYTES: a decompression bomb
    stops here, whatever tarfile was reading (a header, padding, a member)."""

    def __init__(self, raw: gzip.GzipFile | _XzStream):
        self.raw = raw
        self.last = b""  # what the last read returned: the block that ended the archive

    def read(self, n: int = -1) -> bytes:
        room = MAX_STREAM_BYTES + 1 - self.raw.tell()
        self.last = self.raw.read(room if n is None or n < 0 else min(n, room))
        if self.raw.tell() > MAX_STREAM_BYTES:
            raise _TooLarge(f"it inflates past {MAX_STREAM_BYTES} bytes")
        return self.last

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == 0 and pos > MAX_STREAM_BYTES:
            raise _TooLarge(f"it inflates past {MAX_STREAM_BYTES} bytes")
        return self.raw.seek(pos, whence)

    def tell(self) -> int:
        return self.raw.tell()


def compression(path: str) -> str:
    """GZIP or XZ for a regular file that starts like one (the name alone proves
    nothing); "" otherwise."""
    if not os.path.isfile(path):  # a FIFO given to --from must not block its open
        return ""
    try:
        with open(path, "rb") as f:
            head = f.read(len(XZ_MAGIC))
    except OSError:
        return ""
    return GZIP if head.startswith(GZIP_MAGIC) else XZ if head == XZ_MAGIC else ""


def is_archive(path: str) -> bool:
    """A regular file that starts like gzip: the one compression of a dldoctor bundle."""
    return compression(path) == GZIP


@contextlib.contextmanager
def open_bundle(path: str) -> Iterator[str]:
    """The bundle directory of `path`: the directory itself, or a `.tar.gz` extracted into
    a private temporary directory that is removed on exit. Defects are BundleError."""
    if os.path.isdir(path) or not os.path.exists(path):
        yield path  # BundleReader says what is wrong with a missing path
        return
    if not is_archive(path):
        if path.endswith(SUFFIXES):
            raise BundleError(f"{path}: not a gzip file (a .tar.gz bundle starts with 1f 8b)")
        yield path
        return
    with open_archive(path, GZIP) as root:
        yield root


@dataclass(frozen=True)
class _Rules:
    kind: str  # GZIP or XZ
    host_root: str  # the folder under the top one whose links resolve as on the host
    max_members: int


@contextlib.contextmanager
def open_archive(
    path: str, kind: str, *, host_root: str = FILES, max_members: int = MAX_MEMBERS
) -> Iterator[str]:
    """The folder of archive `path` (compressed as `kind`), extracted under the rules of
    this module into a private temporary directory removed on exit. Absolute link targets
    are allowed under `<top>/<host_root>` only ("" for the top folder itself: a sos report
    mirrors the host from its top). Defects are BundleError naming `path`."""
    tmp = tempfile.mkdtemp(prefix="dldoctor-bundle-")  # mode 0700
    try:
        yield _extract(path, tmp, _Rules(kind, host_root, max_members))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _extract(path: str, tmp: str, rules: _Rules) -> str:
    try:
        with open(path, "rb") as f:
            checked, top = _check_pass(f, rules)
            f.seek(0)
            _write_pass(f, checked, tmp, rules)
    except BundleError as exc:
        raise BundleError(f"{path}: {exc}") from None
    except _TooLarge as exc:
        raise BundleError(f"{path}: archive refused: {exc}") from None
    except EOFError:
        why = f"truncated archive: the {rules.kind} stream ends early"
        raise BundleError(f"{path}: {why}") from None
    except (gzip.BadGzipFile, zlib.error, lzma.LZMAError) as exc:
        raise BundleError(f"{path}: corrupted {rules.kind}: {exc}") from None
    except tarfile.TarError as exc:  # tarfile wraps a zlib error met while reading a header
        damaged = "zlib" in str(exc) or "lzma" in str(exc).lower()
        what = f"corrupted {rules.kind}" if damaged else "damaged tar archive"
        raise BundleError(f"{path}: {what}: {exc}") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot extract the archive: {exc}") from None
    return os.path.join(tmp, top) if top else tmp


class _XzStream:
    """xz's decoder under XZ_MEMLIMIT (lzma.LZMAFile takes no limit), reading concatenated
    streams and their padding as xz(1) does. A seek forward reads, one backward starts over
    (what tarfile asks of a compressed stream)."""

    def __init__(self, f):
        self.f = f
        self.start = f.tell()
        self._reset()

    def _reset(self) -> None:
        self.f.seek(self.start)
        self.dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=XZ_MEMLIMIT)
        self.pos = 0

    def read(self, n: int = -1) -> bytes:
        parts = []
        while n != 0:
            if self.dec.eof:  # another stream may follow, after zero padding
                data = self.dec.unused_data.lstrip(b"\0")
                while not data:
                    more = self.f.read(_CHUNK)
                    if not more:
                        return b"".join(parts)
                    data = more.lstrip(b"\0")
                self.dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=XZ_MEMLIMIT)
            elif self.dec.needs_input:
                data = self.f.read(_CHUNK)
                if not data:
                    raise EOFError("the xz stream ends before its end marker")
            else:
                data = b""
            out = self.dec.decompress(data, n)
            self.pos += len(out)
            parts.append(out)
            n -= len(out) if n > 0 else 0
        return b"".join(parts)

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == 1:
            pos += self.pos
        elif whence != 0:
            raise OSError("an xz stream seeks from its start or its position only")
        if pos < self.pos:
            self._reset()
        while self.pos < pos and self.read(min(_CHUNK, pos - self.pos)):
            pass
        return self.pos

    def tell(self) -> int:
        return self.pos


def _open_tar(f, kind: str = GZIP) -> tarfile.TarFile:
    raw = _XzStream(f) if kind == XZ else gzip.GzipFile(fileobj=f, mode="rb")
    return tarfile.open(fileobj=_Capped(raw), mode="r:", tarinfo=_SafeTarInfo)


def first_names(path: str, kind: str, limit: int) -> list[str]:
    """The names of the first `limit` members, nothing written: enough to tell a layout
    from another. [] when the archive cannot be read that far (opening it says why)."""
    names: list[str] = []
    try:
        with open(path, "rb") as f, _open_tar(f, kind) as tar:
            for member in tar:
                names.append(member.name)
                if len(names) >= limit:
                    break
    except (_TooLarge, EOFError, OSError, tarfile.TarError, zlib.error, lzma.LZMAError):
        return []
    return names


def _check_pass(f, rules: _Rules) -> tuple[list[tuple[str, tarfile.TarInfo]], str]:
    """Every member, normalised and checked, before anything is written; the top folder."""
    checked: list[tuple[str, tarfile.TarInfo]] = []
    seen: set[str] = set()
    total = 0
    with _open_tar(f, rules.kind) as tar:
        for member in tar:
            if len(checked) >= rules.max_members:
                raise _TooLarge(f"more than {rules.max_members} members")
            name = _name(member)
            if name in seen:
                raise BundleError(f"member {name!r} appears twice")
            seen.add(name)
            if member.type in _TYPES:
                raise BundleError(f"member {name!r} is {_TYPES[member.type]}")
            if not (member.isreg() or member.isdir() or member.issym()):
                raise BundleError(f"member {name!r} has an unknown type {member.type!r}")
            total += member.size if member.isreg() else 0
            if total > MAX_BYTES:
                raise _TooLarge(f"its members hold more than {MAX_BYTES} bytes uncompressed")
            checked.append((name, member))
        # tarfile ends quietly at a short read; only a block of zeros ends an archive.
        # (the last block read is the one at tar.offset that ended the loop)
        ended = tar.fileobj.tell() == tar.offset + tarfile.BLOCKSIZE
        ended = ended and tar.fileobj.last == bytes(tarfile.BLOCKSIZE)
        # To the end, in any case: gzip checks its CRC there, and damaged deflate data (the
        # likelier cause of a header tarfile stopped at) is named as such.
        while tar.fileobj.read(_CHUNK):
            pass
        if not ended:
            raise BundleError("truncated archive: no end-of-archive marker")
    top = _top_folder(checked)
    links = set()
    for name, member in checked:
        if any(parent in links for parent in _parents(name)):
            raise BundleError(f"member {name!r} lies under a symbolic link")
        if member.issym():
            _check_link(name, member.linkname, top, rules.host_root)
            links.add(name)
    return checked, top


def _name(member: tarfile.TarInfo) -> str:
    raw = member.name
    name = posixpath.normpath(raw) if raw else ""
    if raw.startswith("/"):
        raise BundleError(f"member {raw!r} has an absolute name")
    if not name or "\0" in name or ".." in name.split("/"):
        raise BundleError(f"member {raw!r} leaves the archive (a '..' in its name)")
    return name


def _parents(name: str) -> Iterator[str]:
    parts = name.split("/")
    for i in range(1, len(parts)):
        yield "/".join(parts[:i])


def _top_folder(checked: list[tuple[str, tarfile.TarInfo]]) -> str:
    """The one folder all members lie under (the layout `write_archive` makes), or '' for an
    archive of the bundle's contents themselves."""
    tops = {name.split("/", 1)[0] for name, _ in checked if name != "."}
    if len(tops) != 1:
        return ""
    (top,) = tops
    kinds = [m for name, m in checked if name == top]
    nested = any(name.startswith(top + "/") for name, _ in checked)
    if top in (FILES, COMMANDS, PROBES) or not nested or any(not m.isdir() for m in kinds):
        return ""
    return top


def _check_link(name: str, target: str, top: str, host_root: str = FILES) -> None:
    """Links resolve as if files/ were the root (docs/bundle-format.md): an absolute target
    is a host path there. Anywhere else it, and a relative one climbing out, is refused.
    `host_root` "" makes the top folder that root (a sos report)."""
    files = posixpath.join(top, host_root).rstrip("/") + "/" if top or host_root else ""
    if not target or "\0" in target:
        raise BundleError(f"symbolic link {name!r} has no target")
    if target.startswith("/"):
        if not name.startswith(files):
            raise BundleError(f"symbolic link {name!r} points outside the bundle ({target!r})")
        return
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    inside = resolved == top or resolved.startswith(top + "/") if top else True
    if resolved == ".." or resolved.startswith(("../", "/")) or not inside:
        raise BundleError(f"symbolic link {name!r} points outside the bundle ({target!r})")


def _write_pass(f, checked: list[tuple[str, tarfile.TarInfo]], tmp: str, rules: _Rules) -> None:
    """The checked members again, written under `tmp`: files with O_EXCL|O_NOFOLLOW, and
    no member lies under a link (checked), so nothing is written through one."""
    count = 0
    with _open_tar(f, rules.kind) as tar:
        for member in tar:
            if count >= len(checked) or _key(member) != _key(checked[count][1]):
                raise BundleError("the archive changed while it was read")
            name = checked[count][0]
            count += 1
            if name == ".":
                continue
            target = os.path.join(tmp, name)
            for parent in _parents(name):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(os.path.join(tmp, parent), 0o700)
            if member.isdir():
                with contextlib.suppress(FileExistsError):
                    os.mkdir(target, 0o700)
            elif member.issym():
                os.symlink(member.linkname, target)
            else:
                _copy(tar.extractfile(member), target, member.size)
    if count != len(checked):
        raise BundleError("the archive changed while it was read")


def _key(member: tarfile.TarInfo) -> tuple:
    return member.name, member.type, member.size, member.linkname, member.offset_data


def _copy(src, target: str, size: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with src, open(os.open(target, flags, 0o600), "wb") as out:
        while size > 0 and (chunk := src.read(min(_CHUNK, size))):
            out.write(chunk)
            size -= len(chunk)
    if size:
        raise BundleError(f"truncated archive: {target!r} ends early")


def write_archive(bundle_dir: str, dest: str) -> None:
    """Pack bundle directory `bundle_dir` into the `.tar.gz` at `dest` (which must not
    exist). Members lie under one folder named like `dest` without its suffix, in sorted
    order, owned by 0:0 with fixed modes and the manifest's time: the same bundle packs to
    the same bytes. Only regular files, folders and links the reader accepts are packed.
    Written to a temporary file beside `dest`, renamed at the end: never half an archive."""
    dest = os.path.abspath(dest)
    if os.path.exists(dest):
        raise BundleError(f"{dest} already exists; choose a new path")
    base = os.path.basename(dest)
    top = next((base[: -len(s)] for s in SUFFIXES if base.endswith(s)), base) or "bundle"
    mtime = _created(bundle_dir)
    fd, tmp = tempfile.mkstemp(prefix=".dldoctor-archive-", dir=os.path.dirname(dest))
    try:
        with open(fd, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime) as gz:
                with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                    _pack(tar, bundle_dir, "", top, mtime)
            raw.flush()
            os.fsync(raw.fileno())
        os.rename(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _created(bundle_dir: str) -> int:
    try:
        created = BundleReader(bundle_dir).manifest.get("created")
        when = _dt.datetime.strptime(str(created), "%Y-%m-%dT%H:%M:%SZ")
        return int(when.replace(tzinfo=_dt.timezone.utc).timestamp())
    except (BundleError, OSError, ValueError):
        return int(time.time())


def _pack(tar: tarfile.TarFile, root: str, rel: str, top: str, mtime: int) -> None:
    folder = os.path.join(root, rel)
    tar.addfile(_info(posixpath.join(top, rel) if rel else top, tarfile.DIRTYPE, 0o755, mtime))
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        name = posixpath.join(rel, entry.name) if rel else entry.name
        member = posixpath.join(top, name)
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(entry.path)
            try:
                _check_link(member, target, top)
            except BundleError:
                continue  # the reader would refuse the archive
            info = _info(member, tarfile.SYMTYPE, 0o777, mtime)
            info.linkname = target
            tar.addfile(info)
        elif stat.S_ISDIR(st.st_mode):
            _pack(tar, root, name, top, mtime)
        elif stat.S_ISREG(st.st_mode):
            info = _info(member, tarfile.REGTYPE, 0o644, mtime)
            with open(entry.path, "rb") as f:
                data = f.read()
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _info(name: str, kind: bytes, mode: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = kind, mode, mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def read_bundle(path: str, cleanup: contextlib.ExitStack) -> tuple[BundleReader, list[str]]:
    """A bundle to replay, directory or archive (extracted for the life of `cleanup`), its
    contents and manifest checked: (the reader, the names that differ from the manifest).
    An archive is written whole by dldoctor, so a difference there is damage: refused.
    Defects are BundleError, naming `path` (never the temporary directory, gone at exit)."""
    root = path
    try:
        root = cleanup.enter_context(open_bundle(path))
        reader = BundleReader(root)
        reader.require_contents()
        changed = reader.verify()
        if changed and is_archive(path):
            raise BundleError(
                f"{path}: archive damaged: {len(changed)} member(s) differ from its manifest: "
                + ", ".join(map(repr, changed[:5]))
                + (" ..." if len(changed) > 5 else "")
            )
    except (BundleError, OSError) as exc:
        message = str(exc) if isinstance(exc, BundleError) else f"cannot read bundle {path}: {exc}"
        if root != path:
            message = message.replace(os.path.abspath(root), path)
        raise BundleError(message) from None
    return reader, changed
