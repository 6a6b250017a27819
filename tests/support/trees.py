"""File trees read back whole, for a test to compare before and after."""

from __future__ import annotations

import os

from dldoctor.fixes.plan import JOURNALS


def tree(root) -> dict[str, tuple[bytes, int, int, int]]:
    """Every file and link under root but the journal: bytes (a link's target), mode,
    owner."""
    found = {}
    for folder, _, files in os.walk(root):
        if os.path.join(root, JOURNALS.lstrip("/")) in folder:
            continue
        for name in files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if os.path.islink(path):  # sysfs copies: a link is its target, never followed
                data = os.readlink(path).encode()
            else:
                with open(path, "rb") as f:
                    data = f.read()
            found[os.path.relpath(path, root)] = (data, st.st_mode, st.st_uid, st.st_gid)
    return found


def example_root(path):
    """A root with a file to change (mode and owner of its own) and one to remove."""
    (path / "etc/modprobe.d").mkdir(parents=True)
    conf = path / "etc/modprobe.d/local.conf"
    conf.write_text("options nvidia NVreg_EnableGpuFirmware=0\n")
    conf.chmod(0o640)
    if os.geteuid() == 0:
        os.chown(conf, 1234, 4321)  # an owner the restore must bring back
    (path / "etc/old.conf").write_text("obsolete\n")
    return path


def bundle_contents(root) -> dict[str, tuple[str, bytes | str]]:
    """Every file (its bytes) and link (its target) under root, by relative path."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                found[rel] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    found[rel] = ("file", f.read())
    return found
