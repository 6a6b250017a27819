"""Stand-in measuring checks for the tests of the active tier's plumbing (the real ones are
checks/perf_gpu.py and checks/perf_host.py, written beside this): each measures by running
`standin-measure NAME {scratch}` (a real script the test puts first on PATH) through
dldoctor.active.measure and reads the figure it prints. Imported in-process by the tests,
and installed as a plugin (its source, under another module name) for the CLI's.

The environment sets what a test varies: the cost of a measurement
(DLDOCTOR_STANDIN_COST_S, default 5 s) and where its scratch folder is made
(DLDOCTOR_STANDIN_SCRATCH, default the temporary folder).
"""

from __future__ import annotations

import os
import tempfile

from dldoctor.active import measure
from dldoctor.active.gpus import idle_gpus
from dldoctor.active.judge import Measured, judge
from dldoctor.checks.needs import needs, nvidia_gpus
from dldoctor.facts import fact
from dldoctor.model import passed
from dldoctor.registry import check

TOOL = "standin-measure"


def _measured(ctx, name: str) -> float:
    cost = float(os.environ.get("DLDOCTOR_STANDIN_COST_S", "5"))
    scratch = os.environ.get("DLDOCTOR_STANDIN_SCRATCH") or tempfile.gettempdir()
    answer = measure(
        ctx,
        [TOOL, name, "{scratch}"],
        cost_s=cost,
        what=f"the stand-in's {name} rate of {scratch}",
        scratch_in=scratch,
    ).require()
    return float(answer.text.split()[0])


@fact("standin.first")
def first(ctx) -> float:
    return _measured(ctx, "first")


@fact("standin.second")
def second(ctx) -> float:
    return _measured(ctx, "second")


@check("perf.standin.first", "Stand-in measurement, first", active=True)
def first_rate(facts, policy):
    value = facts.get(first)
    return judge([Measured("/scratch", "standin_first", "first rate", value, "GB/s")], policy)


@check("perf.standin.second", "Stand-in measurement, second", active=True)
def second_rate(facts, policy):
    value = facts.get(second)
    return judge([Measured("/scratch", "standin_second", "second rate", value, "GB/s")], policy)


@check("perf.standin.gpu", "Stand-in GPU measurement", requires=nvidia_gpus, active=True)
@needs(idle_gpus)
def gpu_rate(facts, policy, gpus):
    return passed(f"would measure {len(gpus)} GPU(s)")
