"""Facts are lazy, memoised and shared between threads; the runner survives any check."""

from __future__ import annotations

import threading
import time
import types

import pytest

from dldoctor.facts import FactFailed, Facts, fact
from dldoctor.host import Answer, AnswerStatus, ProbeFailed
from dldoctor.host.live import CHILDREN, LiveHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status, passed
from dldoctor.policy import Policy
from dldoctor.registry import check, checks_in
from dldoctor.runner import CheckFinished, CheckStarted, Runner
from tests.support.bundlebuilder import BundleBuilder
from tests.support.commands import fake_command
from tests.support.guards import returns


def test_concurrent_askers_wait_for_one_probe(tmp_path):
    calls = []
    gate = threading.Event()

    @fact("slow")
    def slow(ctx):
        calls.append(1)
        gate.wait(2)
        return 42

    facts = Facts(ReplayHost(str(tmp_path)))
    results = []
    threads = [threading.Thread(target=lambda: results.append(facts.get(slow))) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    gate.set()
    for t in threads:
        t.join(5)
    assert results == [42] * 8
    assert len(calls) == 1


def test_evidence_follows_dependencies(tmp_path):
    b = BundleBuilder(tmp_path / "b").file("/proc/a", "1").file("/proc/b", "2")

    @fact("a")
    def a(ctx):
        return int(ctx.host.read("/proc/a").text)

    @fact("sum")
    def total(ctx):
        return ctx.get(a) + int(ctx.host.read("/proc/b").text)

    facts = Facts(ReplayHost(str(b.root)))
    assert facts.get(total) == 3
    assert [str(e) for e in facts.evidence(total)] == ["read /proc/a", "read /proc/b"]


def test_a_failing_fact_fails_every_asker_the_same_way(tmp_path):
    @fact("broken")
    def broken(ctx):
        raise ValueError("parser bug")

    facts = Facts(ReplayHost(str(tmp_path)))
    for _ in range(2):
        with pytest.raises(FactFailed, match="fact broken failed: ValueError: parser bug"):
            facts.get(broken)


def test_a_probe_timeout_surfaces_as_probe_failed(tmp_path):
    b = BundleBuilder(tmp_path / "b").command(["lspci"], status=AnswerStatus.TIMEOUT, timeout_s=3.0)

    @fact("pci")
    def pci(ctx):
        return ctx.host.run(["lspci"]).require().text

    with pytest.raises(ProbeFailed, match="`lspci` did not answer within 3 s"):
        Facts(ReplayHost(str(b.root))).get(pci)


def test_cycles_are_reported_not_deadlocked(tmp_path):
    @fact("x")
    def x(ctx):
        return ctx.get(x)

    with pytest.raises(FactFailed, match="cycle"):
        Facts(ReplayHost(str(tmp_path))).get(x)


def test_given_facts_for_unit_tests():
    @fact("n")
    def n(ctx):
        raise AssertionError("never computed")

    assert Facts.given({n: 7}).get(n) == 7

    @fact("other")
    def other(ctx):
        return 0

    with pytest.raises(FactFailed, match="no value given"):
        Facts.given({}).get(other)


# --- runner ---------------------------------------------------------------------------


checks_module = types.ModuleType("sample_checks")


@check("t.ok", "Fine")
def ok_check(facts, policy):
    return passed("all good")


@check("t.crash", "Crashes")
def crash_check(facts, policy):
    return {}["missing"]


# The hang check blocks until released (at the end of each test that runs it): a runner that
# waited it out would hang, not pass slowly.
HANGING, RELEASE = threading.Event(), threading.Event()


@check("t.hang", "Hangs")
def hang_check(facts, policy):
    HANGING.set()
    RELEASE.wait(60)


@check("t.wrong", "Returns garbage")
def wrong_check(facts, policy):
    return "pass"


@check("t.probe", "Probe times out")
def probe_check(facts, policy):
    raise ProbeFailed(Answer("run", "nvidia-smi", AnswerStatus.TIMEOUT, timeout_s=2.0))


for _fn in (ok_check, crash_check, hang_check, wrong_check, probe_check):
    _fn.__module__ = checks_module.__name__
    setattr(checks_module, _fn.__name__, _fn)


@pytest.fixture
def hang_released():
    HANGING.clear()
    RELEASE.clear()
    yield
    RELEASE.set()


def test_runner_turns_crashes_and_hangs_into_errors_and_keeps_order(hang_released):
    specs = sorted(checks_in(checks_module), key=lambda s: s.order)
    events = []
    runner = Runner(specs, Facts.given({}), Policy(), check_timeout=0.5,
                    listeners=[events.append])  # fmt: skip
    findings = returns(runner.run)
    assert HANGING.is_set() and not RELEASE.is_set()  # answered while the check still hung
    by_id = {f.id: f for f in findings}
    assert [f.id for f in findings] == [s.id for s in specs]
    assert by_id["t.ok"].status == Status.PASS
    assert by_id["t.crash"].status == Status.ERROR
    assert by_id["t.crash"].summary == "check crashed: KeyError: 'missing'"
    assert by_id["t.hang"].status == Status.ERROR
    assert "did not finish within 0.5 s" in by_id["t.hang"].summary
    assert "not an Outcome" in by_id["t.wrong"].summary
    assert by_id["t.probe"].summary == "`nvidia-smi` did not answer within 2 s (timed out)"
    assert sum(isinstance(e, CheckStarted) for e in events) == len(specs)
    assert sum(isinstance(e, CheckFinished) for e in events) == len(specs)


def test_one_hung_check_does_not_hold_up_the_others(hang_released):
    specs = sorted(checks_in(checks_module), key=lambda s: s.order)
    hang_first = [s for s in specs if s.id == "t.hang"] + [s for s in specs if s.id != "t.hang"]
    findings = returns(Runner(hang_first, Facts.given({}), Policy(), check_timeout=0.3).run)
    assert [f.status for f in findings][:2] == [Status.ERROR, Status.PASS]


# --- the run's deadline and hung probes ---------------------------------------------------

HUNG_TOOLS = [f"hung{i}" for i in range(12)]


def _checks_on_hung_tools(module_name: str):
    """Two checks per hung tool (the second waits on the first's fact) and one that needs
    nothing: 25 checks, far more than any pool of workers."""
    module = types.ModuleType(module_name)
    for tool in HUNG_TOOLS:
        tool_fact = fact(f"t.{tool}")(lambda ctx, tool=tool: ctx.host.run([tool]).require())
        for n in (1, 2):
            fn = lambda facts, policy, f=tool_fact: facts.get(f) and passed("answered")  # noqa: E731
            fn.__name__ = fn.__qualname__ = f"{tool}_{n}"
            fn.__module__ = module_name
            setattr(module, fn.__name__, check(f"t.{tool}.{n}", f"Needs {tool}")(fn))
    fine = check("t.fine", "Needs nothing")(lambda facts, policy: passed("fine"))
    fine.__module__ = module_name
    module.fine = fine
    return sorted(checks_in(module), key=lambda s: s.id)


def _hung_host(tmp_path, command_timeout: float) -> LiveHost:
    for tool in HUNG_TOOLS:
        fake_command(tmp_path, tool, f"echo {tool} >> {tmp_path}/started; exec sleep 300")
    return LiveHost(env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, command_timeout=command_timeout)


def test_n_hung_tools_cost_one_timeout_not_n(tmp_path):
    specs = _checks_on_hung_tools("hung_checks_n")
    host = _hung_host(tmp_path, command_timeout=1.0)
    # Twelve hung tools of 1 s each, 24 checks waiting on them: about one timeout. Run one
    # after the other they would take 12 s, and the deadline would cut the last ones off
    # ("did not finish before the run's deadline") instead of their own timeouts ending them.
    runner = Runner(specs, Facts(host), Policy(), check_timeout=60,
                    deadline=time.monotonic() + 8)  # fmt: skip
    findings = returns(runner.run)
    # Each tool ran once: the second check of a tool waited for the first one's fact.
    assert sorted((tmp_path / "started").read_text().split()) == sorted(HUNG_TOOLS)
    by_id = {f.id: f for f in findings}
    assert by_id["t.fine"].status == Status.PASS
    for tool in HUNG_TOOLS:
        for n in (1, 2):
            f = by_id[f"t.{tool}.{n}"]
            assert f.status == Status.ERROR
            assert f.summary == f"`{tool}` did not answer within 1 s (timed out)"


def test_at_the_deadline_unfinished_checks_name_what_they_wait_on(tmp_path):
    specs = _checks_on_hung_tools("hung_checks_deadline")
    host = _hung_host(tmp_path, command_timeout=300)
    # Nothing else would end the run: tools of 300 s, checks of 600 s.
    runner = Runner(specs, Facts(host), Policy(), check_timeout=600,
                    deadline=time.monotonic() + 1.0)  # fmt: skip
    try:
        findings = returns(runner.run)
    finally:
        CHILDREN.kill_all(close=False)  # the hung tools, left running by design
    by_id = {f.id: f for f in findings}
    assert by_id["t.fine"].status == Status.PASS
    for tool in HUNG_TOOLS:
        for n in (1, 2):  # the one running the tool and the one waiting for its fact
            f = by_id[f"t.{tool}.{n}"]
            assert f.status == Status.ERROR
            assert f.summary == (
                f"did not finish before the run's deadline: waiting on `{tool}` (300 s limit)"
            )
            assert "not judged" in f.details[0]


def test_the_probe_window_bounds_a_chain_of_hung_commands(tmp_path):
    # One fact asking three hung tools in turn (as ldconfig is asked at three paths): the
    # window that the run gives every probe bounds the chain to one timeout.
    host = _hung_host(tmp_path, command_timeout=1.0)

    @fact("t.chain")
    def chain(ctx):
        return [ctx.host.run([tool]) for tool in HUNG_TOOLS[:3]]

    start = time.monotonic()
    host.bound(commands_until=start + 1.3, until=start + 5)
    answers = returns(Facts(host).get, chain)
    assert answers[0].describe() == "`hung0` did not answer within 1 s (timed out)"
    assert answers[1].timeout_s < 1.0  # what was left of the window, not a timeout of its own
    assert [a.status for a in answers] == [AnswerStatus.TIMEOUT] * 3
    assert answers[2].describe() == "`hung2` was not run: the run's probe time (1.3 s) was used up"
