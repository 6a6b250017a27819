"""The interpreter a pyenv shim runs, read from pyenv's files (doctor/pyenvshim.py), and the
python.path fact asking it directly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dldoctor.early import PATH_PYTHON_ARGV, early_runs, path_python_argv
from dldoctor.facts import Facts
from dldoctor.facts import system as sysf
from dldoctor.host.replay import ReplayHost
from dldoctor.pyenvshim import shim_target
from tests.support.bundlebuilder import BundleBuilder

# What `pyenv rehash` (pyenv 2.6.30, libexec/pyenv-rehash) wrote into /root/.pyenv/shims/
# python3 on this project's VM, with its root left as a placeholder.
SHIM = """#!/usr/bin/env bash
set -e
[ -n "$PYENV_DEBUG" ] && set -x

program="${0##*/}"

export PYENV_ROOT="@ROOT@"
SHIM_PATH=${0%/*}
if [[ $SHIM_PATH != "@ROOT@/shims" ]]; then
  export _PYENV_SHIM_PATH="$SHIM_PATH"
fi
exec "@ROOT@/libexec/pyenv" exec "$program" "$@"
"""


def executable(path: Path, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def pyenv_root(tmp_path: Path, *versions: str, global_version: str | None = "3.11.7") -> Path:
    """A pyenv root with a python3 shim, these versions installed, and a global version."""
    root = tmp_path / "pyenv"
    executable(root / "shims/python3", SHIM.replace("@ROOT@", str(root)))
    for v in versions:
        executable(root / "versions" / v / "bin/python3")
    if global_version is not None:
        (root / "version").write_text(global_version + "\n")
    return root


def target(root: Path, cwd: Path | str = "/", **environ: str) -> str | None:
    return shim_target(str(root / "shims/python3"), environ, str(cwd))


def test_the_global_version_names_the_interpreter(tmp_path):
    root = pyenv_root(tmp_path, "3.11.7", "3.12.1")
    assert target(root) == str(root / "versions/3.11.7/bin/python3")


def test_pyenv_version_wins_over_the_files_and_its_first_entry_counts(tmp_path):
    root = pyenv_root(tmp_path, "3.11.7", "3.12.1")
    assert target(root, PYENV_VERSION="3.12.1:3.11.7") == str(root / "versions/3.12.1/bin/python3")


def test_the_nearest_python_version_file_wins_comments_and_crlf_skipped(tmp_path):
    root = pyenv_root(tmp_path, "3.11.7", "3.12.1")
    work = tmp_path / "project/sub"
    work.mkdir(parents=True)
    (tmp_path / "project/.python-version").write_text("# pinned\r\n3.12.1 extra words\r\n")
    assert target(root, cwd=work) == str(root / "versions/3.12.1/bin/python3")


@pytest.mark.parametrize(
    "version",
    [
        "system",  # the next python3 on PATH: pyenv searches PATH without its shims
        "3.11",  # a prefix that `pyenv latest` completes
        "3.9.1",  # not installed: the shim fails with its own message
        "../../usr",  # a path, which pyenv checks stays under versions/
        "# only a comment",
    ],
)
def test_versions_pyenv_would_resolve_otherwise_answer_none(tmp_path, version):
    root = pyenv_root(tmp_path, "3.11.7", global_version=version)
    assert target(root) is None


def test_no_version_file_and_pyenv_dir_answer_none(tmp_path):
    root = pyenv_root(tmp_path, "3.11.7", global_version=None)
    assert target(root) is None
    assert target(pyenv_root(tmp_path, "3.11.7"), PYENV_DIR=str(tmp_path)) is None


def test_a_version_without_that_program_answers_none(tmp_path):
    root = pyenv_root(tmp_path, "3.11.7")
    (root / "versions/3.11.7/bin/python3").chmod(0o644)
    assert target(root) is None


def test_an_unknown_hook_or_plugin_command_answers_none(tmp_path):
    root = pyenv_root(tmp_path, "3.11.7")
    known = root / "plugins/pyenv-virtualenv/etc/pyenv.d/which/system-site-packages.bash"
    executable(known)
    executable(root / "plugins/pyenv-virtualenv/bin/pyenv-activate")
    assert target(root) == str(root / "versions/3.11.7/bin/python3")
    executable(tmp_path / "hooks/exec/pick-another.bash")
    assert target(root, PYENV_HOOK_PATH=str(tmp_path / "hooks")) is None
    executable(root / "plugins/pyenv-which-ext/bin/pyenv-which")
    assert target(root) is None


def test_what_is_no_pyenv_shim_answers_none(tmp_path):
    root = pyenv_root(tmp_path, "3.11.7")
    assert shim_target(str(root / "versions/3.11.7/bin/python3"), {}, "/") is None
    moved = executable(tmp_path / "bin/python3", SHIM.replace("@ROOT@", str(root)))
    assert shim_target(str(moved), {}, "/") is None  # pyenv then searches _PYENV_SHIM_PATH
    assert shim_target(str(tmp_path / "absent"), {}, "/") is None
    assert shim_target(None, {}, "/") is None


@pytest.mark.skipif(
    not (shutil.which("python3") or "").endswith("/shims/python3") or not shutil.which("pyenv"),
    reason="python3 on PATH is no pyenv shim here",
)
def test_pyenv_itself_agrees_on_this_machine():
    # From "/" as LiveHost runs its children; None would mean the shim is run as before.
    found = shim_target(shutil.which("python3"), os.environ, "/")
    which = subprocess.run(
        ["pyenv", "which", "python3"], cwd="/", capture_output=True, text=True, timeout=60
    )
    assert found is not None and found == which.stdout.strip()
    assert early_runs() == (path_python_argv(found),)


# --- the python.path fact --------------------------------------------------------------

OUT = {"executable": "/opt/py/bin/python3", "version": "3.12.1", "sys_path": ["/opt/py/lib"]}


def test_the_fact_asks_the_interpreter_the_probe_named(tmp_path):
    b = BundleBuilder(tmp_path).probe("python", {"path_python3_exec": "/opt/py/bin/python3"})
    b.command(list(path_python_argv("/opt/py/bin/python3")), json.dumps(OUT) + "\n")
    got = Facts(ReplayHost(str(tmp_path))).get(sysf.path_python)
    assert (got.executable, got.version, got.sys_path) == ("/opt/py/bin/python3", "3.12.1",
                                                            ("/opt/py/lib",))  # fmt: skip


def test_without_the_probe_s_answer_the_fact_asks_through_path(tmp_path):
    b = BundleBuilder(tmp_path).probe("python", {"path_python3": "/usr/bin/python3"})
    b.command(list(PATH_PYTHON_ARGV), json.dumps(OUT) + "\n")
    assert Facts(ReplayHost(str(tmp_path))).get(sysf.path_python).version == "3.12.1"
    assert path_python_argv(None) == PATH_PYTHON_ARGV
