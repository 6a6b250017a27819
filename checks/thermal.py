"""Thermal and power checks: GPU temperature margins, clock slowdowns, power draw; board
and CPU sensors (sensors that lie are reported as unreliable, not as overheating)."""

from __future__ import annotations

from dldoctor.checks.needs import host_side_gpus, label, needs, nvidia_gpus, reporting_gpus
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.thermal import thermal_sensors
from dldoctor.model import Outcome, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check

# Clock-event reasons by what they say about the host. Idle, application clocks, sync boost
# and the software power cap are the GPU doing what it was told.
HARDWARE = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
SOFTWARE_THERMAL = ("sw_thermal_slowdown",)
MARGIN_C = 5  # closer than this to the slowdown temperature is a warning


@check(
    "thermal.gpu.temperature",
    "GPU temperature",
    remediation="Check airflow and fans (BMC fan policy), blanking panels, inlet temperature "
    "and, for liquid-cooled systems, coolant flow.",
    requires=nvidia_gpus,
)
@needs(
    reporting_gpus("temperature_c", nobody="no GPU reports its temperature", what="its temperature")
)
def gpu_temperature(facts: Facts, policy: Policy, known: list[g.Gpu]) -> Outcome:
    # 0 °C with no slowdown threshold is not a reading: a vGPU guest whose virtualization
    # mode could not be read, or a broken sensor. Judging it would pass "hottest GPU 0 °C".
    unreliable = [x for x in known if x.temperature_c == 0 and x.temp_slowdown_c is None]
    why = "0 °C and no slowdown threshold: not a real reading (a vGPU guest or a broken sensor)"
    doubts = [f"{label(x)}: {why}" for x in unreliable]
    known = [x for x in known if x not in unreliable]
    if not known:
        return skipped(f"no GPU reports a usable temperature ({why})", doubts)
    hot, close, lines = [], [], list(doubts)
    for x in known:
        limit = x.temp_slowdown_c
        margin = f", {limit - x.temperature_c} °C below slowdown ({limit} °C)" if limit else ""
        line = f"{label(x)}: {x.temperature_c} °C{margin}"
        lines.append(line)
        if limit and x.temperature_c >= limit:
            hot.append(line)
        elif limit and limit - x.temperature_c < MARGIN_C:
            close.append(line)
    if hot:
        return failed(
            f"{len(hot)} GPU(s) at or above their slowdown temperature", hot + close + doubts
        )
    if close:
        return warned(f"{len(close)} GPU(s) within {MARGIN_C} °C of slowdown", close + doubts)
    hottest = max(known, key=lambda x: x.temperature_c)
    return passed(f"hottest GPU {hottest.temperature_c} °C ({label(hottest)})", lines)


@check(
    "thermal.gpu.clocks",
    "GPU clock slowdowns",
    remediation="Hardware slowdown and power brake come from the board or the power supply "
    "(PSU, power cables, BMC power capping); thermal slowdown from cooling. Step time on the "
    "whole job drops to the slowest GPU's.",
    requires=nvidia_gpus,
)
@needs(
    reporting_gpus(
        "clock_event_reasons",
        nobody="no GPU reports its clock-event reasons",
        what="its clocks or their slowdown reasons",
    )
)
def gpu_clocks(facts: Facts, policy: Policy, known: list[g.Gpu]) -> Outcome:
    hardware = [
        f"{label(x)}: {', '.join(r for r in x.clock_event_reasons if r in HARDWARE)}"
        for x in known
        if set(x.clock_event_reasons) & set(HARDWARE)
    ]
    thermal = [
        f"{label(x)}: sw_thermal_slowdown"
        for x in known
        if set(x.clock_event_reasons) & set(SOFTWARE_THERMAL)
    ]
    benign = sorted(
        {r for x in known for r in x.clock_event_reasons} - set(HARDWARE) - set(SOFTWARE_THERMAL)
    )
    note = [f"benign reasons active: {', '.join(benign)}"] if benign else []
    if hardware:
        return failed(f"hardware slowdown on {len(hardware)} GPU(s)", hardware + thermal + note)
    if thermal:
        return warned(f"thermal slowdown on {len(thermal)} GPU(s)", thermal + note)
    return passed(f"no slowdown on {len(known)} GPU(s)", note)


@check("thermal.gpu.power", "GPU power", requires=nvidia_gpus)
@needs(host_side_gpus("its power draw"))
def gpu_power(facts: Facts, policy: Policy, gpus: list[g.Gpu]) -> Outcome:
    known = [x for x in gpus if x.power_draw_w is not None and x.power_limit_w]
    if not known:
        return skipped("no GPU reports power draw and limit")
    lines = [f"{label(x)}: {x.power_draw_w:.0f} of {x.power_limit_w:.0f} W" for x in known]
    at_limit = [x for x in known if x.power_draw_w >= 0.98 * x.power_limit_w]
    draw = sum(x.power_draw_w for x in known)
    summary = f"{draw:.0f} W drawn by {len(known)} GPU(s)"
    if at_limit:
        summary += f"; {len(at_limit)} at the power limit (normal under full load)"
    return passed(summary, lines)


@check(
    "thermal.sensors",
    "Board and CPU temperatures",
    remediation="Check cooling for the hot component; a CPU at its critical temperature "
    "throttles and slows data loading for every GPU.",
)
def board_sensors(facts: Facts, policy: Policy) -> Outcome:
    sensors = facts.get(thermal_sensors)
    if not sensors:
        return skipped("no thermal zones or hwmon sensors exposed")
    reliable = [s for s in sensors if s.reliable and s.celsius is not None]
    unreliable = [
        f"{s.source} ({s.label or 'unlabelled'}): {s.why_unreliable}"
        for s in sensors
        if not s.reliable
    ]
    # At the critical temperature is a failure; within 5 °C of it only a warning: Intel
    # desktop parts report TjMax as "critical" and run close to it under load by design.
    hot = [
        f"{s.source} ({s.label}): {s.celsius:.0f} °C, critical {s.critical_c:.0f} °C"
        for s in reliable
        if s.critical_c and s.celsius >= s.critical_c
    ]
    near = [
        f"{s.source} ({s.label}): {s.celsius:.0f} °C, critical {s.critical_c:.0f} °C"
        for s in reliable
        if s.critical_c and s.critical_c - MARGIN_C <= s.celsius < s.critical_c
    ]
    notes = [f"unreliable: {u}" for u in unreliable]
    if hot:
        return failed(f"{len(hot)} sensor(s) at their critical temperature", hot + near + notes)
    if near:
        return warned(f"{len(near)} sensor(s) within {MARGIN_C} °C of critical", near + notes)
    if not reliable:
        return skipped(
            "no sensor gives a believable reading", [f"unreliable: {u}" for u in unreliable]
        )
    top = max(reliable, key=lambda s: s.celsius)
    return passed(
        f"hottest {top.celsius:.0f} °C ({top.source} {top.label})".rstrip(),
        [f"unreliable: {u}" for u in unreliable],
    )
