"""A fix's command runner that records instead of running."""

from __future__ import annotations

from dldoctor.fixes.plan import CommandOutcome


class Recorder:
    """The commands a fix would run, in order; `fail` names the ones that exit 1."""

    def __init__(self, fail: tuple[str, ...] = ()):
        self.ran: list[list[str]] = []
        self.fail = fail
        self.seen_journal: list[dict] = []

    def __call__(self, argv):
        self.ran.append(list(argv))
        return CommandOutcome(1, "no such module") if argv[0] in self.fail else CommandOutcome(0)
