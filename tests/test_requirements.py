"""`@check(..., requires=...)`: what a check needs is asked by the runner before the check,
through the same facts view, with the same rules for failed facts and crashes."""

from __future__ import annotations

import pytest

from dldoctor.checks import driver, gpu_memory, precision
from dldoctor.checks.needs import needs
from dldoctor.facts import Facts, fact
from dldoctor.facts import gpu as g
from dldoctor.facts.nvidia import nvidia
from dldoctor.host import AnswerStatus
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status, passed, skipped
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, check, ordered
from dldoctor.runner import run_check
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import HOSTS


@fact("t.req.count")
def count(ctx):
    return int(ctx.host.read("/proc/t-count").text)


@fact("t.req.name")
def name(ctx):
    return ctx.host.read("/proc/t-name").text.strip()


@fact("t.req.broken")
def broken(ctx):
    raise ValueError("parser bug")


@fact("t.req.tool")
def tool(ctx):
    return ctx.host.run(["t-tool"]).require().text


def some_things(facts):
    if not facts.get(count):
        return skipped("no things on this host")
    return None


def judged(facts, policy):
    return passed(f"{facts.get(count)} things named {facts.get(name)}")


def spec(*requires, fn=judged):
    return check("t.req", "Things", requires=requires)(fn).__dldoctor_check__


def facts_with(tmp_path, n: int) -> Facts:
    b = BundleBuilder(tmp_path / "b").file("/proc/t-count", str(n)).file("/proc/t-name", "x")
    return Facts(ReplayHost(str(b.root)))


def never(facts, policy):
    raise AssertionError("the check ran although its requirement stopped it")


def test_a_requirement_that_skips_is_the_finding_and_its_facts_are_evidence(tmp_path):
    finding = run_check(spec(some_things, fn=never), facts_with(tmp_path, 0), Policy())
    assert (finding.status, finding.summary) == (Status.SKIP, "no things on this host")
    assert [str(e) for e in finding.evidence] == ["read /proc/t-count"]


def test_a_requirement_that_is_met_lets_the_check_judge(tmp_path):
    finding = run_check(spec(some_things), facts_with(tmp_path, 3), Policy())
    assert (finding.status, finding.summary) == (Status.PASS, "3 things named x")
    # Both asked for /proc/t-count: it is evidence once, then the check's own facts.
    assert [str(e) for e in finding.evidence] == ["read /proc/t-count", "read /proc/t-name"]


def test_requirements_are_asked_in_order_and_the_first_that_stops_wins(tmp_path):
    def named(facts):
        return skipped("unnamed") if not facts.get(name) else None

    def asks_nothing_more(facts):
        raise AssertionError("asked after an earlier requirement stopped the check")

    finding = run_check(spec(some_things, asks_nothing_more, fn=never),
                        facts_with(tmp_path, 0), Policy())  # fmt: skip
    assert finding.summary == "no things on this host"
    assert run_check(spec(named, some_things), facts_with(tmp_path, 2), Policy()).status == (
        Status.PASS
    )


def test_a_failed_fact_of_a_requirement_is_an_error_as_in_the_check(tmp_path):
    def parsed(facts):
        facts.get(broken)

    def asks_broken(facts, policy):
        return passed(str(facts.get(broken)))

    facts = facts_with(tmp_path, 1)
    through_requirement = run_check(spec(parsed, fn=never), facts, Policy())
    in_check = run_check(spec(fn=asks_broken), facts, Policy())
    assert through_requirement.status == Status.ERROR
    assert through_requirement.summary == "fact t.req.broken failed: ValueError: parser bug"
    assert (through_requirement.summary, through_requirement.details) == (
        in_check.summary,
        in_check.details,
    )


def test_a_probe_that_timed_out_for_a_requirement_is_an_error_with_its_evidence(tmp_path):
    b = BundleBuilder(tmp_path / "b").command(
        ["t-tool"], status=AnswerStatus.TIMEOUT, timeout_s=3.0
    )

    def tool_answers(facts):
        facts.get(tool)

    finding = run_check(spec(tool_answers, fn=never), Facts(ReplayHost(str(b.root))), Policy())
    assert finding.status == Status.ERROR
    assert finding.summary == "`t-tool` did not answer within 3 s (timed out)"
    assert [e.key for e in finding.evidence] == ["t-tool"]


def test_a_requirement_that_crashes_is_an_error_that_names_it(tmp_path):
    def needs_a_table(facts):
        return {}["table"]

    finding = run_check(spec(needs_a_table, fn=never), facts_with(tmp_path, 1), Policy())
    assert finding.status == Status.ERROR
    assert finding.summary == "requirement needs_a_table crashed: KeyError: 'table'"
    assert finding.details[0].endswith("in needs_a_table")


def test_a_requirement_that_answers_garbage_is_an_error_that_names_it(tmp_path):
    def says_yes(facts):
        return True

    finding = run_check(spec(says_yes, fn=never), facts_with(tmp_path, 1), Policy())
    assert finding.status == Status.ERROR
    assert (
        finding.summary == "requirement says_yes crashed: TypeError: returned bool, not an Outcome"
    )


def test_requires_takes_one_function_or_several_and_nothing_else():
    assert check("t.one", "One", requires=some_things)(judged).__dldoctor_check__.requires == (
        some_things,
    )
    assert spec().requires == ()
    with pytest.raises(TypeError, match="requires= takes functions"):
        check("t.bad", "Bad", requires=["nvidia"])


def test_gpu_checks_skip_with_the_reason_the_driver_cannot_be_asked():
    broken = g.NvidiaStack("nvml", error=g.VERSION_MISMATCH, error_message="LibRmVersionMismatch")
    none = g.NvidiaStack("nvml", driver_version="550.54.15")
    for stack, why in [
        (broken, "the NVIDIA driver library and kernel module differ"),
        (none, "the NVIDIA driver reports no GPUs"),
    ]:
        for fn in (
            gpu_memory.ecc_errors,
            driver.driver_version,
            driver.persistence,
            precision.mixed_precision,
        ):
            finding = run_check(fn.__dldoctor_check__, Facts.given({nvidia: stack}), Policy())
            assert (finding.status, finding.summary) == (Status.SKIP, why), fn.__name__


def test_nvidia_gpus_is_asked_through_the_check_view_on_a_real_bundle():
    # ubuntu2204-healthy has no NVIDIA stack: the skip carries the NVML probe as evidence.
    facts = Facts(ReplayHost(str(HOSTS / "ubuntu2204-healthy")))
    finding = run_check(gpu_memory.ecc_mode.__dldoctor_check__, facts, Policy())
    assert (finding.status, finding.summary) == (
        Status.SKIP,
        "neither NVML (nvidia-ml-py) nor nvidia-smi is available",
    )
    assert "nvml" in {e.key for e in finding.evidence}


def test_a_need_hands_its_answer_or_its_skip_stands_on_a_direct_call_too(tmp_path):
    def things(facts):
        n = facts.get(count)
        return n if n else skipped("no things on this host")

    @needs(things)
    def judged_with(facts, policy, n):
        return passed(f"{n} things")

    assert judged_with(facts_with(tmp_path / "3", 3), Policy()).summary == "3 things"
    assert judged_with(facts_with(tmp_path / "0", 0), Policy()).summary == "no things on this host"
    finding = run_check(spec(fn=judged_with), facts_with(tmp_path / "0b", 0), Policy())
    assert (finding.status, [str(e) for e in finding.evidence]) == (
        Status.SKIP,
        ["read /proc/t-count"],
    )


def test_the_gpu_checks_keep_their_order_across_their_modules():
    # The report's order of the gpu category from before checks/gpu.py was split (and the
    # check added since): module by module in registry.MODULE_ORDER, each module's checks as
    # written (@needs included).
    assert [s.id for s in ordered(builtin_checks()) if s.category == "gpu"] == [
        "gpu.driver.loaded",
        "gpu.driver.version",
        "gpu.driver.module",
        "gpu.nouveau",
        "gpu.count",
        "gpu.persistence",
        "gpu.mig.pending",
        "gpu.compute_mode",
        "gpu.vbios",
        "gpu.fabricmanager",
        "gpu.nvlink",
        "gpu.ecc.mode",
        "gpu.ecc.errors",
        "gpu.memory.retired_pages",
        "gpu.memory.remapped_rows",
        "gpu.processes",
        "gpu.precision",
        "gpu.xid",
        "gpu.amd.inventory",
        "gpu.nvswitch.sxid",
    ]


def test_a_wrapped_check_keeps_its_place_in_its_module():
    # network's on_known_ports wraps three checks: their place is the line they are written
    # at, not the wrapper's (which put them before ib.errors, out of the golden files' order).
    assert [s.id for s in ordered(builtin_checks()) if s.category == "network"] == [
        "network.ib.state",
        "network.ib.rate",
        "network.ib.errors",
        "network.roce",
        "network.gpudirect",
        "network.firmware",
    ]
