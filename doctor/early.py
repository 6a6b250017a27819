"""The slowest answers of a full run, each a child interpreter's start-up: a live host
starts them (Host.prefetch) before the facts and the checks are imported, so that they run
on another core while this one imports. Nothing of dldoctor is imported here: that is
the point of this module.
"""

from __future__ import annotations

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

EARLY_RUNS = (PATH_PYTHON_ARGV,)
EARLY_PROBES = ("nvml",)
