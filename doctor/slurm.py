"""`dldoctor slurm-healthcheck`: the checks as Slurm's HealthCheckProgram (docs/slurm.md).

slurmd runs the program every HealthCheckInterval, kills it at 60 s and only logs its exit
status: taking the node out of service is the program's own job. With `--drain` a failed run
drains the node with a reason that starts with `dldoctor:`, and a passing run resumes the
node only when that prefix is still its reason: a node drained by a person or by another
tool is never resumed, nor its reason overwritten. A run that could not finish (exit 3)
changes nothing: it says nothing about the node.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from dldoctor.cli.check import diagnose_for
from dldoctor.cli.guard import guard_deadline
from dldoctor.cli.shared import (
    Parser,
    UsageError,
    add_active_arguments,
    add_request_arguments,
    add_selection_arguments,
    write_output,
)
from dldoctor.exitcodes import ExitCode, exit_code_for
from dldoctor.model import Finding, Status

log = logging.getLogger("dldoctor")

PREFIX = "dldoctor:"
# slurmd kills the program at 60 s: the checks' deadline, then at most two scontrol calls
# (read the node, change it), then the watchdog's and the backstop's slack stay under it.
MAX_DEADLINE_S = 40.0
SCONTROL_TIMEOUT_S = 5.0
SCONTROL_CALLS = 2
# Slurm 22.05 keeps and shows a 5000-character reason whole; `sinfo -R` shows 50 of them.
# A reason is for a person reading sinfo: the report has the rest.
MAX_REASON_CHARS = 256
# slurmd starts the program with SLURMD_NODENAME as its whole environment: no PATH, so
# neither scontrol nor the tools the checks run would be found.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# With --active in a prolog (docs/active.md, "As a Slurm prolog"): a job's start waits for the
# prolog, and slurmctld gives a batch job BatchStartTimeout to start (10 s by default; a
# site measuring in its prolog raises it: AWS ParallelCluster ships 180 s). The checks'
# deadline and the measuring budget together stay under this, so that with the scontrol
# calls and the backstop's slack the run ends within 180 s.
MAX_PROLOG_S = 165.0
# Slurm sets these in a prolog's environment, never in the HealthCheckProgram's.
PROLOG_ENV = ("SLURM_JOB_ID", "SLURM_SCRIPT_CONTEXT")
# Only this command's: scontrol could not read or change the node (not found, no
# controller, timed out). The verdict is in the output.
SLURM_FAILED = 7

VERDICTS = {
    ExitCode.OK: "healthy",
    ExitCode.PROBLEMS: "problems found",
    ExitCode.INCOMPLETE: "incomplete (some checks could not finish)",
}


class SlurmError(Exception):
    pass


def build_parser() -> Parser:
    p = Parser(
        prog="dldoctor slurm-healthcheck",
        description="Run the checks as Slurm's HealthCheckProgram; with --drain, drain the "
        "node when they fail and resume it when they pass (only a node dldoctor drained).",
        epilog="Exit codes: 0 healthy, 1 problems found, 2 usage error, 3 some checks could "
        "not finish (the node is left as it is), 4 unreadable policy, 5 internal error, "
        f"{SLURM_FAILED} scontrol could not read or change the node. See docs/slurm.md.",
    )
    add_request_arguments(
        p,
        helps={
            "--timeout": "time limit of each command and filesystem probe of the checks",
            "--deadline": f"the checks end by then (default 20, policy timeouts.deadline_s; "
            f"at most {MAX_DEADLINE_S:g}: slurmd kills the program at 60 s)",
        },
        refused={"--from": "a health check is of this node: no bundle stands for it"},
    )
    add_active_arguments(
        p,
        helps={
            "--active": "also run the measuring checks, within Slurm's limits: in a prolog "
            f"the deadline and timeouts.active_s together at most {MAX_PROLOG_S:g} s, as a "
            f"HealthCheckProgram at most {MAX_DEADLINE_S:g} s (docs/slurm.md)",
        },
    )
    add_selection_arguments(p)
    p.add_argument("--strict", action="store_true", help="warnings also fail (and drain)")
    p.add_argument(
        "--drain",
        action="store_true",
        help="drain the node when the checks fail, resume it when they pass and dldoctor "
        "drained it (default: only report)",
    )
    p.add_argument(
        "--node",
        metavar="NAME",
        help="the Slurm node name (default: SLURMD_NODENAME, which slurmd sets, else the "
        "short host name)",
    )
    p.add_argument("--no-plugins", action="store_true", help="do not load third-party checks")
    return p


def main(argv: Sequence[str], watchdog: list[int] | None = None) -> int:
    """The command; `watchdog` as in dldoctor.cli.main (None: called in-process, no watchdog)."""
    from dldoctor.request import request_from

    started = time.monotonic()
    args = build_parser().parse_args(list(argv))
    os.environ.setdefault("PATH", DEFAULT_PATH)
    request = request_from(args, started=started)
    request = replace(request, policy=_within_slurms_limit(request.policy, request.deadline))
    if request.active:
        request = replace(request, policy=_measuring_within(request.policy, in_prolog()))
    deadline_at = request.deadline_at
    if watchdog is not None:
        guard_deadline(deadline_at + SCONTROL_CALLS * SCONTROL_TIMEOUT_S, watchdog)
    findings = _diagnose(request, deadline_at)
    code = exit_code_for(findings, strict=args.strict)
    node = args.node or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    lines = [f"{f.status.value} {f.id}: {f.summary}" for f in _worth_saying(findings)]
    verdict = VERDICTS[code]
    if not args.drain:
        action = "not changed (no --drain)"
    else:
        try:
            action = act(node, code, drain_reason(findings, strict=args.strict))
        except SlurmError as exc:
            action, code = f"not changed: {exc}", SLURM_FAILED
    # First: slurmd logs a failed health check as one line, "health_check failed: rc:1
    # output:" and the first line of the output.
    lines.insert(
        0,
        f"dldoctor: {verdict} in {time.monotonic() - started:.1f} s (exit {int(code)}); "
        f"node {node}: {action}",
    )
    write_output(lambda: print("\n".join(lines)))
    return int(code)


def _within_slurms_limit(policy, deadline_flag: float | None):
    deadline = policy.timeouts.deadline_s
    if deadline <= MAX_DEADLINE_S:
        return policy
    if deadline_flag is not None:
        raise UsageError(
            f"--deadline {deadline_flag:g}: at most {MAX_DEADLINE_S:g} s for "
            "slurm-healthcheck (slurmd kills it at 60 s)"
        )
    log.warning(
        "the policy's timeouts.deadline_s (%g s) is cut to %g s: slurmd kills the "
        "health check at 60 s",
        deadline,
        MAX_DEADLINE_S,
    )
    return replace(policy, timeouts=replace(policy.timeouts, deadline_s=MAX_DEADLINE_S))


def in_prolog(environ=None) -> bool:
    """Run as a Prolog (slurmd sets the job's variables), not as the HealthCheckProgram
    (whose whole environment is SLURMD_NODENAME)."""
    environ = os.environ if environ is None else environ
    return any(environ.get(name) for name in PROLOG_ENV)


def _measuring_within(policy, prolog: bool):
    """The policy whose measuring budget fits Slurm's limit: the checks' deadline and
    timeouts.active_s together at most MAX_PROLOG_S in a prolog, MAX_DEADLINE_S as a
    HealthCheckProgram (slurmd kills it at 60 s). A budget cut says so on stderr; none
    left is a usage error."""
    t = policy.timeouts
    limit, where = (MAX_PROLOG_S, "a prolog") if prolog else (MAX_DEADLINE_S, "a health check")
    room = limit - t.deadline_s
    if t.active_s <= room:
        return policy
    if room < 1:
        raise UsageError(
            f"--active: the deadline ({t.deadline_s:g} s) leaves no time to measure in "
            f"{where} ({limit:g} s in all); lower --deadline"
        )
    log.warning(
        "timeouts.active_s (%g s) is cut to %g s: in %s the deadline and the measuring "
        "budget together are at most %g s",
        t.active_s,
        room,
        where,
        limit,
    )
    return replace(policy, timeouts=replace(t, active_s=room))


def _diagnose(request, deadline_at: float) -> list[Finding]:
    """The same run as `dldoctor --check`, in this process."""
    with contextlib.ExitStack() as cleanup:
        return diagnose_for(request, cleanup, deadline_at=deadline_at)[0].findings


def _worth_saying(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.status in (Status.FAIL, Status.ERROR, Status.WARN)]


def drain_reason(findings: Sequence[Finding], *, strict: bool = False) -> str:
    """`dldoctor: <failing ids>: <the first one's summary>`, one printable line of at most
    MAX_REASON_CHARS; "" when nothing failed."""
    bad = [f for f in findings if f.status is Status.FAIL]
    bad += [f for f in findings if strict and f.status is Status.WARN]
    if not bad:
        return ""
    text = f"{PREFIX} {', '.join(f.id for f in bad)}: {bad[0].summary}"
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - 3].rstrip() + "..."
    # scontrol drops a closing quote from reason=: what Slurm keeps must equal what we sent.
    return text.rstrip('"')


@dataclass(frozen=True)
class NodeState:
    state: str  # "IDLE+DRAIN"
    reason: str  # "" when none; without Slurm's " [user@time]" stamp

    @property
    def drained_by_us(self) -> bool:
        return self.reason.startswith(PREFIX)


def parse_show_node(text: str) -> NodeState:
    """The State and Reason of `scontrol show node NAME` (one node, several lines)."""
    state = reason = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Reason="):
            reason = _unstamped(line[len("Reason=") :])
        elif line.startswith("State="):
            state = line.split()[0][len("State=") :]
    return NodeState(state, reason)


def _unstamped(reason: str) -> str:
    """The reason without the " [root@2026-12-01T17:28:43]" Slurm adds when it shows one."""
    stamp = reason.rfind(" [")
    if stamp >= 0 and reason.endswith("]") and "@" in reason[stamp:]:
        reason = reason[:stamp]
    return reason.strip()


def act(node: str, code: int, reason: str) -> str:
    """Drain or resume `node` after a run that exited `code`; what was done, in words."""
    if code not in (ExitCode.OK, ExitCode.PROBLEMS):
        return "left as it is: the checks could not finish, so they say nothing of the node"
    from dldoctor.host.live import LiveHost

    slurm = LiveHost(command_timeout=SCONTROL_TIMEOUT_S)
    now = parse_show_node(_scontrol(slurm, "show", "node", node))
    if now.reason and not now.drained_by_us:
        return f"left as it is ({now.state}): its reason is someone else's: {now.reason}"
    if code == ExitCode.OK:
        if not now.drained_by_us:
            return f"left as it is ({now.state})"
        _scontrol(slurm, "update", f"nodename={node}", "state=resume")
        return f"resumed (dldoctor had drained it: {now.reason})"
    # The same checks failing again: the numbers in a summary (memory available) move from
    # run to run, and are no reason to rewrite the node's reason every interval.
    if _checks_named(now.reason) == _checks_named(reason) and "DRAIN" in now.state:
        return f"already drained: {now.reason}"
    _scontrol(slurm, "update", f"nodename={node}", "state=drain", f"reason={reason}")
    return f"drained: {reason}"


def _checks_named(reason: str) -> str:
    """The check ids of a dldoctor reason ("dldoctor: a.b, c.d: summary" -> "a.b, c.d")."""
    parts = reason.split(": ", 2)
    return parts[1] if len(parts) > 1 and parts[0] == PREFIX.rstrip(":") else ""


def _scontrol(host, *args: str) -> str:
    answer = host.run(["scontrol", *args], timeout=SCONTROL_TIMEOUT_S)
    if not answer.ok:
        raise SlurmError(answer.describe())
    result = answer.value
    if result.returncode != 0:
        why = (result.stderr or result.stdout).decode("utf-8", "replace").strip()
        why = why.splitlines()[-1] if why else "no message"
        raise SlurmError(f"`scontrol {' '.join(args)}` exited {result.returncode}: {why}")
    return result.text
