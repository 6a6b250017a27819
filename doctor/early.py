"""The slowest answers of a full run, each a child interpreter's start-up: a live host
starts them (Host.prefetch) before the facts and the checks are imported, so that they run
on another core while this one imports. Nothing of dldoctor is imported here but the
standard-library pyenv shim reader: that is the point of this module.
"""

from __future__ import annotations

import os
import shutil

from dldoctor.pyenvshim import shim_target

# Runs in the `python3` found on PATH (any Python 3; one line, double quotes only, so that
# the command line shows plainly in evidence). It prints its site folders, links resolved,
# so that two names of one folder count once. Changing this text changes the command
# line, and bundles recorded with the old one no longer answer it.
PATH_PYTHON_SCRIPT = (
    "import json,os,platform,site,sys;"
    'ps=[os.path.realpath(p) for p in sys.path+list(getattr(site,"getsitepackages",list)())'
    " if p and os.path.isdir(p)];"
    'print(json.dumps({"executable":sys.executable,"version":platform.python_version(),'
    '"sys_path":sorted(set(ps),key=ps.index)}))'
)
PATH_PYTHON_ARGV = ("python3", "-I", "-c", PATH_PYTHON_SCRIPT)
EARLY_PROBES = ("nvml",)


def path_python_argv(target: str | None) -> tuple[str, ...]:
    """The command that asks PATH's `python3`: through `target`, the interpreter a pyenv
    shim there runs (the `python` probe's `path_python3_exec`), when it is known."""
    return (target, *PATH_PYTHON_ARGV[1:]) if target else PATH_PYTHON_ARGV


def early_runs() -> tuple[tuple[str, ...], ...]:
    """The commands a whole run asks for that are worth starting first: the same command
    the python.path fact will ask for, found the way the `python` probe finds it."""
    # Children run from "/" (LiveHost), so pyenv looks for .python-version from there.
    target = shim_target(shutil.which("python3"), os.environ, "/")
    return (path_python_argv(target),)
