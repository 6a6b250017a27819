"""Probes: what only the running interpreter, or a child of it, can answer.

Each returns JSON-able data, so a RecordingHost can store it and a ReplayHost can
give it back unchanged on another machine.
"""

from __future__ import annotations

import os
import platform
import shutil
import site
import sys
from collections.abc import Callable
from typing import Any

from dldoctor.host.live import ChildProbe
from dldoctor.pyenvshim import shim_target


def python_info() -> dict[str, Any]:
    """The interpreter that runs dldoctor, and the `python3` a user would get from PATH."""
    path_python3 = shutil.which("python3")
    return {
        "executable": sys.executable,
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "in_venv": sys.prefix != sys.base_prefix,
        "path_python3": path_python3,
        # The interpreter a pyenv shim there runs, so that it can be asked without the
        # shim's bash chain; None when python3 on PATH is no shim or pyenv's choice is not
        # certain from its files (children run from "/": LiveHost).
        "path_python3_exec": shim_target(path_python3, os.environ, "/"),
        # Where its packages live, so facts can read dist-info and version files through
        # the Host (replayable) instead of importing torch & co. (seconds each).
        "sys_path": [p for p in sys.path if p and os.path.isdir(p)],
        "site_packages": [p for p in site.getsitepackages() if os.path.isdir(p)],
    }


PROBES: dict[str, Callable[[], Any] | ChildProbe] = {
    "python": python_info,
    # In a child process: an NVML call on a hung driver never returns, and a thread stuck
    # in a C call cannot be stopped; a child can be killed.
    "nvml": ChildProbe("dldoctor.nvml_probe"),
}
