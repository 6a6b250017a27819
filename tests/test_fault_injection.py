"""Fault injection through the Host (issue 9): over the fixture hosts, probes answer timed
out, permission denied, missing, an I/O error, garbage or something huge, one kind of
probe at a time and all at once. Every check must still end in a status with a reason:
never a crash, never a run that outlives its deadline, and never a verdict that rests on
the failure to look (a `fail` or a `pass` the baseline did not give, when the probe
timed out, was refused or broke).

"One at a time" faults one *family* of operations: the same read for every GPU, port or
disk at once (tests/support/faults.py `family`), since one code path reads them all; only the
checks that asked for that family in the baseline are run again. DLDOCTOR_DEEP=1 faults
every single operation instead.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dldoctor.diagnose import diagnose
from dldoctor.host.base import Op
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Finding, Status
from dldoctor.policy import Policy
from dldoctor.registry import CheckSpec, builtin_checks, ordered
from tests.support.faults import BLIND, FAULTS, FaultyHost, family, recorder
from tests.support.paths import HOSTS
from tests.support.strategies import HOSTILE

SPECS = ordered(builtin_checks())
SCENARIOS = sorted(p.name for p in HOSTS.iterdir() if p.is_dir())
DEEP = os.environ.get("DLDOCTOR_DEEP") == "1"
# A replay with every probe faulted takes well under a second; the deadline is what makes
# a hang a failed test instead of a stuck suite.
DEADLINE_S = 10.0


@functools.cache
def baseline(scenario: str) -> tuple[ReplayHost, dict[str, Finding], dict[str, set]]:
    """The host, its verdicts, and per check the (op, key) operations it asked for."""
    host = ReplayHost(str(HOSTS / scenario))
    verdicts: dict[str, Finding] = {}
    asked: dict[str, set] = {}
    for spec in SPECS:  # one at a time: the facts a check shares are asked by it too
        seen, keys = recorder(host)
        (verdicts[spec.id],) = run(seen, [spec]).findings
        asked[spec.id] = {(op, unit(key)) for op, key in keys}
    return host, verdicts, asked


def unit(key: str) -> str:
    """What one fault covers: one operation (deep runs) or its whole family."""
    return key if DEEP else family(key)


def run(host, specs: list[CheckSpec]):
    return diagnose(host, Policy(), specs, deadline_at=time.monotonic() + DEADLINE_S)


def problems(fault: str, report, before: dict[str, Finding]) -> list[str]:
    found = []
    for f in report.findings:
        was = before[f.id].status
        why = None
        if not f.summary.strip():
            why = "no reason given"
        elif "crashed" in f.summary:
            why = "crashed"
        elif "did not finish" in f.summary:
            why = "hung"
        elif fault in BLIND and f.status in (Status.FAIL, Status.PASS) and f.status != was:
            why = f"a {f.status.value} from a failure to look (was {was.value})"
        elif fault in ("garbage", "huge") and f.status == Status.FAIL and was != Status.FAIL:
            why = f"a fail from {fault} input (was {was.value})"
        if why:
            found.append(f"{f.id}: {why}: {f.status.value}: {f.summary[:160]}")
    return found


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_probe_faulted_at_once(scenario, fault):
    host, before, _ = baseline(scenario)
    # Huge listings at every level multiply (5,000 devices x 5,000 ports x ...): no host
    # or bundle can hold that; huge contents at once are the test.
    chosen = (lambda op, key: op != Op.LIST) if fault == "huge" else (lambda op, key: True)
    faulty = FaultyHost(host, fault, chosen)
    report = run(faulty, SPECS)
    assert faulty.hits > 0
    assert len(report.findings) == len(SPECS)
    assert problems(fault, report, before) == []
    if fault in BLIND:  # nothing was seen: no check may pass
        assert [f.id for f in report.findings if f.status == Status.PASS] == []


def variant(scenario: str) -> bool:
    """A condition of a platform whose healthy scenario is here too (`hgx-h100x8-ib-init`
    beside `hgx-h100x8-healthy`): it reads what that one reads, so the full matrix there
    covers its code paths."""
    platform = scenario.rsplit("-", 1)[0]
    while "-" in platform and f"{platform}-healthy" not in SCENARIOS:
        platform = platform.rsplit("-", 1)[0]
    return f"{platform}-healthy" in SCENARIOS and scenario != f"{platform}-healthy"


def matrix() -> list[tuple[str, str]]:
    """(scenario, fault) of the one-at-a-time runs. A condition's own verdict is the one a
    failure to look could turn into a pass: its variants run the blind faults, on the
    checks that do not pass there. Deep runs: everything everywhere."""
    return [
        (scenario, fault)
        for scenario in SCENARIOS
        for fault in FAULTS
        if DEEP or not variant(scenario) or fault in BLIND
    ]


def test_every_variant_has_its_healthy_platform_in_the_matrix():
    full = {s for s, fault in matrix() if fault == "huge"}
    assert {s for s in SCENARIOS if s.endswith("-healthy")} <= full
    assert "hgx-h100x8-ib-init" not in full or DEEP


@pytest.mark.parametrize("scenario, fault", matrix())
def test_each_probe_faulted_alone(scenario, fault):
    host, before, asked = baseline(scenario)
    judged = [
        s for s in SPECS if DEEP or not variant(scenario) or before[s.id].status != Status.PASS
    ]
    keys = set().union(*(asked[s.id] for s in judged))
    assert keys, "the baseline asked nothing"
    found = []
    for op, key in sorted(keys):
        specs = [s for s in judged if (op, key) in asked[s.id]]

        def chosen(o: str, k: str, op=op, key=key) -> bool:
            return o == op and unit(k) == key

        report = run(FaultyHost(host, fault, chosen), specs)
        found += [f"{op} {key}: {p}" for p in problems(fault, report, before)]
    assert found == []


# --- facts over mutated answers (Hypothesis) -------------------------------------------

# Edits of a real answer: at a fraction of its length, insert a hostile piece over a few
# characters; or cut it there.
EDITS = st.lists(
    st.tuples(st.floats(0, 1), HOSTILE.map(str.encode), st.integers(0, 8)), min_size=1, max_size=3
)


def edited(edits: list[tuple[float, bytes, int]], cut: float | None) -> Callable[[bytes], bytes]:
    def mutate(data: bytes) -> bytes:
        if cut is not None:
            return data[: int(len(data) * cut)]
        for where, piece, width in edits:
            at = int(len(data) * where)
            data = data[:at] + piece + data[at + width :]
        return data

    return mutate


@given(
    scenario=st.sampled_from(SCENARIOS),
    pick=st.floats(0, 1, exclude_max=True),
    edits=EDITS,
    cut=st.none() | st.floats(0, 1),
)
def test_checks_survive_a_mutated_answer(scenario, pick, edits, cut):
    """Any real file or command output of a fixture host, cut short or with a hostile piece
    written into it: every check that reads it ends with a reason, never a crash or hang."""
    host, before, asked = baseline(scenario)
    keys = sorted(k for k in set().union(*asked.values()) if k[0] in (Op.READ, Op.RUN))
    op, key = keys[int(pick * len(keys))]
    specs = [s for s in SPECS if (op, key) in asked[s.id]]
    faulty = FaultyHost(
        host, "mutated", lambda o, k: o == op and unit(k) == key, edited(edits, cut)
    )
    report = run(faulty, specs)
    assert faulty.hits > 0
    assert problems("mutated", report, before) == []
