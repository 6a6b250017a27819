"""The interpreter a pyenv shim runs, found from pyenv's own files, so that the `python3` on
PATH can be asked directly: through the shim, its answer costs some twenty bash processes
(`pyenv exec` → `pyenv-version-name` → `pyenv-which` ...), about 85 ms of CPU, for the same
interpreter and the same sys.path.

It follows `pyenv exec` (pyenv 2.x, libexec/pyenv-exec, -which, -version-name,
-version-file, -version-file-read) only where the answer is certain: a shim in its own
root's shims/ folder, a version named by PYENV_VERSION or by a version file, installed
under that name, with an executable bin/<program>. Anything else (the `system` version, a
prefix that `pyenv latest` would complete, PYENV_DIR, a hook or a plugin command that
could change the choice) answers None, and the shim is run as before. Standard library
only: the early start (doctor/early.py) asks before anything else is imported.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping

SHIM_MAX_BYTES = 4096
# What `pyenv rehash` writes into every shim (libexec/pyenv-rehash, create_prototype_shim).
_SHIM_ROOT = re.compile(r'^export PYENV_ROOT="([^"\n]+)"$', re.MULTILINE)
_SHIM_EXEC = re.compile(r'^exec "([^"\n]+)/libexec/pyenv" exec "\$program" "\$@"$', re.MULTILINE)
# Hooks that the stock pyenv and pyenv-virtualenv install: those of `which` change the
# command only when it is not executable, the `exec` one acts for pip alone. Any other
# hook of these three steps could choose another interpreter.
KNOWN_HOOKS = {
    "version-name": frozenset(),
    "which": frozenset({"conda.bash", "python-config.bash", "system-site-packages.bash"}),
    "exec": frozenset({"pip-rehash.bash"}),
}
# pyenv commands that a plugin's bin/ could replace (plugins come first on pyenv's PATH).
STEPS = ("exec", "which", "version-name", "version-file", "version-file-read", "prefix")


def shim_target(path: str | None, environ: Mapping[str, str], cwd: str) -> str | None:
    """The interpreter that the pyenv shim at `path` would exec, or None when `path` is no
    pyenv shim or its choice is not certain from the files."""
    if not path:
        return None
    root = _shim_root(path)
    if root is None or _hooked(root, environ):
        return None
    version = _version(root, environ, cwd)
    if version is None:
        return None
    prefix = os.path.join(root, "versions", version)
    target = os.path.join(prefix, "bin", os.path.basename(path))
    if os.path.isdir(prefix) and os.path.isfile(target) and os.access(target, os.X_OK):
        return target
    return None


def _shim_root(path: str) -> str | None:
    """PYENV_ROOT of a shim that lives in that root's shims/ folder (a shim found through
    another folder makes pyenv search differently: _PYENV_SHIM_PATH)."""
    try:
        with open(path, "rb") as f:
            text = f.read(SHIM_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    if not text.startswith("#!"):
        return None
    root, libexec = _SHIM_ROOT.search(text), _SHIM_EXEC.search(text)
    if root is None or libexec is None or root.group(1) != libexec.group(1):
        return None
    if os.path.dirname(path) != os.path.join(root.group(1), "shims"):
        return None
    return root.group(1)


def _hooked(root: str, environ: Mapping[str, str]) -> bool:
    """Whether a hook or a plugin command could make pyenv choose another interpreter."""
    folders = [p for p in environ.get("PYENV_HOOK_PATH", "").split(":") if p]
    folders += [os.path.join(root, "pyenv.d"), "/usr/etc/pyenv.d", "/usr/local/etc/pyenv.d"]
    folders += ["/etc/pyenv.d", "/usr/lib/pyenv/hooks"]
    folders += glob.glob(os.path.join(glob.escape(root), "plugins", "*", "etc", "pyenv.d"))
    for folder in folders:
        for step, known in KNOWN_HOOKS.items():
            hooks = glob.glob(os.path.join(glob.escape(folder), step, "*.bash"))
            if any(os.path.basename(h) not in known for h in hooks):
                return True
    plugins = glob.glob(os.path.join(glob.escape(root), "plugins", "*", "bin", "pyenv-*"))
    return any(os.path.basename(p)[len("pyenv-") :] in STEPS for p in plugins)


def _version(root: str, environ: Mapping[str, str], cwd: str) -> str | None:
    """The first version pyenv would try, when it is installed under exactly that name."""
    if environ.get("PYENV_DIR"):
        return None  # pyenv looks from there, then from the working folder: not followed
    names = environ.get("PYENV_VERSION") or _version_file(root, cwd)
    first = (names or "").split(":")[0]
    if not first or first in ("system", ".", "..") or "/" in first:
        return None
    return first if os.path.isdir(os.path.join(root, "versions", first)) else None


def _version_file(root: str, cwd: str) -> str | None:
    """What pyenv-version-file-read prints for the nearest .python-version (the working
    folder, then each parent) or, without one, the global version file."""
    folder = cwd
    while True:
        local = os.path.join(folder, ".python-version")
        if os.path.isfile(local):
            return _read_versions(local)
        parent = os.path.dirname(folder)
        if parent == folder:
            return _read_versions(os.path.join(root, "version"))
        folder = parent


def _read_versions(path: str) -> str | None:
    # The first word of each line that is not blank or a comment, joined by ":".
    try:
        with open(path, "rb") as f:
            text = f.read(64 * 1024).decode("utf-8", "replace")
    except OSError:
        return None
    words = [ln.split()[0] for ln in text.replace("\r", "\n").splitlines() if ln.split()]
    return ":".join(w for w in words if not w.startswith("#")) or None
