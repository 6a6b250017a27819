"""In-process probes: what only the running interpreter can answer.

Each returns JSON-able data, so a RecordingHost can store it and a ReplayHost can
give it back unchanged on another machine.
"""

from __future__ import annotations

import platform
import shutil
import sys
from collections.abc import Callable
from typing import Any


def python_info() -> dict[str, Any]:
    """The interpreter that runs dldoctor, and the `python3` a user would get from PATH."""
    return {
        "executable": sys.executable,
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "in_venv": sys.prefix != sys.base_prefix,
        "path_python3": shutil.which("python3"),
    }


PROBES: dict[str, Callable[[], Any]] = {
    "python": python_info,
}
