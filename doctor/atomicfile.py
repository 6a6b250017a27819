"""One way to write a file that a reader never sees half-written: a temporary file in the
same folder, fsync, rename. Used by the fixes (a file they change) and, through
`write_output`, by every output a user names (a file a collector or a CI job reads while it
is replaced)."""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile

# Where the links of a process's open descriptors lie once resolved (/dev/fd, /dev/stdout
# and /proc/self/fd all lead here).
_FD_FOLDER = re.compile(r"/proc/\d+(/task/\d+)?/fd")
_MAX_LINKS = 40  # as the kernel's own limit on links followed in one path (ELOOP)


def write_atomically(
    path: str, data: bytes, mode: int = 0o644, *, make_parents: bool = True
) -> None:
    """Replace whatever stands at `path` (a link included: it becomes a regular file)."""
    folder = os.path.dirname(os.path.abspath(path))
    if make_parents:
        os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".dldoctor-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_output(path: str, data: bytes) -> None:
    """A user-named output (docs/outputs.md): a device, a FIFO or an open descriptor
    (/dev/stdout, /proc/self/fd/N) is written into, as any Unix tool does; a symbolic link
    is followed and stays a link; only a regular file, or nothing, is replaced atomically."""
    real, stream = output_target(path)
    if not stream:
        write_atomically(real, data, make_parents=False)
        return
    with open_stream(real) as f:
        f.write(data)


def open_stream(path: str):
    """A device, FIFO or descriptor, opened to write into. O_APPEND: a descriptor's file
    opened with `>>` (a log) keeps what it holds."""
    return open(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY), "wb")


def output_target(path: str) -> tuple[str, bool]:
    """(the path to write, whether it is a stream to write into rather than a file to
    replace): `path` with its links followed, each hop's folder resolved."""
    path = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        folder = os.path.realpath(os.path.dirname(path))
        if _FD_FOLDER.fullmatch(folder):
            # An open descriptor: its link's target (pipe:[N], a deleted file) need not be
            # a path, and replacing the file it names would not reach the descriptor.
            return path, True
        path = os.path.join(folder, os.path.basename(path))
        if not os.path.islink(path):
            try:
                kind = stat.S_IFMT(os.stat(path).st_mode)
            except FileNotFoundError:
                return path, False
            # A folder is no stream: replacing it fails (exit 6), and a snapshot says it exists.
            return path, kind not in (stat.S_IFREG, stat.S_IFDIR)
        path = os.path.join(folder, os.readlink(path))
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
