"""A fix as the app walks through it, without Textual: the plan and its preview, the
interlocks' verdict, whether it may be applied here, then the apply itself (the same
calls as `dldoctor fix`)."""

from __future__ import annotations

from dataclasses import dataclass

from dldoctor.fixes.command import apply_and_verify, need_root, plan_for, target_for
from dldoctor.fixes.interlocks import verdict_lines
from dldoctor.fixes.plan import FixError, Journal, Plan, Target, undo


@dataclass
class FixFlow:
    fix_id: str
    plan: Plan
    target: Target
    preview: str
    interlocks: list[str]
    refusal: str  # why it cannot be applied here; "" when it can

    @classmethod
    def open(cls, session, fix_id: str) -> FixFlow:
        """Build the plan from a fresh look at the host (a slow probe runs here: call it
        from a worker)."""
        plan = plan_for(fix_id, session.make_host(), session.policy)
        target = target_for(session.root, session.bundle or None)
        refusal = ""
        if session.read_only:
            refusal = "a replayed bundle can preview a fix, never apply it"
        elif not plan.steps:
            refusal = "nothing dldoctor can change here: the notes say what to do"
        else:
            try:
                need_root(session.root, f"dldoctor fix {fix_id} --apply")
            except FixError as exc:
                refusal = str(exc)
        if session.read_only and plan.disturbs_gpus:
            # The processes on this machine are not the bundle's host's.
            interlocks = [
                "would disturb GPU work: the processes holding a GPU are judged on the "
                "live host, never from a bundle"
            ]
        else:
            interlocks = verdict_lines(plan, session.root)
        return cls(fix_id, plan, target, plan.preview(target), interlocks, refusal)

    def apply(self, session, log) -> str:
        """Apply, telling `log(line)` each step; the line that ends the apply log."""

        def step(number, s):
            log(f"{number}. {s.describe(self.target).splitlines()[0]}")

        recovered: list[dict] = []
        record, statuses = apply_and_verify(
            self.plan, self.target, session.make_host(), session.policy, on_step=step,
            on_recovered=recovered.append,
        )  # fmt: skip
        checks = ", ".join(f"{k} {v}" for k, v in statuses.items())
        return _first(recovered) + f"applied ({record['id']}); {record['verdict']} ({checks})"


def history(session) -> list[dict]:
    return Journal(target_for(session.root, None)).history()


def undo_applied(session, journal_id: str) -> str:
    need_root(session.root, f"dldoctor fix --undo {journal_id}")
    recovered: list[dict] = []
    record = undo(journal_id, target_for(session.root, None), on_recovered=recovered.append)
    others = [r for r in recovered if r["id"] != journal_id]
    return _first(others) + f"{record['fix']}: {record['state']} ({record['id']})"


def _first(recovered: list[dict]) -> str:
    """The interrupted applies rolled back before this one ran, said first: an apply
    killed midway is finished off by the next apply or undo (docs/fixes)."""
    return "".join(f"{r['fix']} ({r['id']}): {r['state']}; " for r in recovered)
