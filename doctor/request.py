"""One run of dldoctor as its command line asked for it: which host, under which policy,
which checks, by when. Built once by request_from, from any command's parsed arguments
(dldoctor.cli.shared.add_request_arguments gives every command the same four options,
add_active_arguments the active tier's --active and --force where they mean something),
and handed to the command: --check, the app, snapshot, diff, fix, genconf,
slurm-healthcheck, fleet (docs/architecture.md, "A request's path").

On the `--check` fast path: it imports neither Textual nor py-cpuinfo.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, replace

from dldoctor.policy import Policy


@dataclass(frozen=True)
class Request:
    policy: Policy = Policy()
    policy_source: str = "built-in"  # what load_policy says it read
    policy_path: str | None = None  # --policy, as given
    bundle: str | None = None  # --from: a bundle, a sos report or an nvidia-bug-report log
    root: str | None = None  # --root: files read under it, commands run on this host
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    timeout: float | None = None  # --timeout, as given (already in policy.timeouts)
    deadline: float | None = None  # --deadline, as given (already in policy.timeouts)
    strict: bool = False
    no_plugins: bool = False
    started: float = 0.0  # time.monotonic() when the command line was read
    active: bool = False  # --active: the measuring checks too (docs/active.md)
    force: bool = False  # --force: measure GPUs that other processes are using

    @property
    def deadline_at(self) -> float:
        """When the run ends (monotonic), whatever hangs: the active tier's budget is
        added to the deadline."""
        t = self.policy.timeouts
        return self.started + t.deadline_s + (t.active_s if self.active else 0.0)

    @property
    def host_root(self) -> str:
        return self.root or "/"


def request_from(args: argparse.Namespace, *, started: float | None = None) -> Request:
    """The request of a parsed command line; UsageError or InputError (from dldoctor.cli,
    said in one line with its exit code) for what no command can run with. A command's
    parser that lacks an option (fleet's has no --only) gets that option's default."""
    from dldoctor.cli.shared import UsageError

    given = vars(args)
    policy, source = policy_from(given.get("policy"), given.get("timeout"), given.get("deadline"))
    # A missing --from is said by its opener (host.foreign, snapshots.archive), the same
    # line for every command: "bundle not found: PATH".
    bundle, root = given.get("bundle"), given.get("root")
    if bundle and root:
        raise UsageError("--from and --root cannot be used together")
    # The active tier's --force (dest `force_measure`: `fix` and `genconf` have a --force
    # of their own, which must never let a measurement load busy GPUs).
    active, force = bool(given.get("active")), bool(given.get("force_measure"))
    if force and not active:
        raise UsageError(
            "--force: only with --active (it lets the measuring checks load GPUs that "
            "other processes use)"
        )
    return Request(
        policy=forced(policy, force),
        policy_source=source,
        policy_path=given.get("policy"),
        bundle=bundle or None,
        root=root or None,
        only=tuple(given.get("only") or ()),
        skip=tuple(given.get("skip") or ()),
        timeout=given.get("timeout"),
        deadline=given.get("deadline"),
        strict=bool(given.get("strict")),
        no_plugins=bool(given.get("no_plugins")),
        active=active,
        force=force,
        started=time.monotonic() if started is None else started,
    )


def policy_from(path: str | None, timeout: float | None, deadline: float | None):
    """(the policy of `--policy path`, with --timeout and --deadline in its timeouts, where
    it came from): InputError for a policy that cannot be read, UsageError for a bad flag."""
    from dldoctor.cli.shared import InputError, UsageError
    from dldoctor.policy import MAX_TIMEOUT_S, TIMEOUT_RANGE, PolicyError, load_policy

    try:
        policy, source = load_policy(path)
    except PolicyError as exc:
        raise InputError(str(exc)) from None
    timeouts = policy.timeouts
    for flag, value in (("--timeout", timeout), ("--deadline", deadline)):
        if value is not None and not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
            raise UsageError(f"{flag} {TIMEOUT_RANGE}")
    if timeout is not None:
        timeouts = replace(timeouts, command_s=timeout, filesystem_s=timeout, nvml_s=timeout)
    if deadline is not None:
        timeouts = replace(timeouts, deadline_s=deadline)
    return replace(policy, timeouts=timeouts), source


def forced(policy: Policy, force: bool) -> Policy:
    """The policy with `--force` in it (the checks see the policy, not the command line)."""
    return replace(policy, perf=replace(policy.perf, force=True)) if force else policy
