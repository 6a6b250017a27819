"""One way to write a file that a reader never sees half-written: a temporary file in the
same folder, fsync, rename. Used by the fixes (a file they change) and by the report
outputs (a file a collector or a CI job reads while it is replaced)."""

from __future__ import annotations

import os
import tempfile


def write_atomically(
    path: str, data: bytes, mode: int = 0o644, *, make_parents: bool = True
) -> None:
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
