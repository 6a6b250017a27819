"""A guided fix: its plan (diff and commands), the interlocks' verdict, then, confirmed,
the apply log as it runs and the re-verified status."""

from __future__ import annotations

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import RichLog, Static

from dldoctor.tui.confirm import ConfirmScreen
from dldoctor.tui.footer import SteadyFooter


class FixScreen(Screen):
    BINDINGS = [
        Binding("a", "apply", "Apply"),
        Binding("escape,q", "back", "Back"),
    ]

    def __init__(self, session, fix_id: str):
        super().__init__()
        self.session = session
        self.fix_id = fix_id
        self.flow = None
        self.applied = False

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{self.fix_id}: building the plan…", "bold"), id="fix-title")
        with VerticalScroll(id="plan-scroll"):
            yield Static(id="plan")
        yield Static(id="interlocks")
        yield RichLog(id="apply-log", wrap=True, markup=False)
        yield SteadyFooter()

    def on_mount(self) -> None:
        self.query_one("#apply-log", RichLog).display = False
        self.build()

    @work(thread=True, exit_on_error=False, group="fix")
    def build(self) -> None:
        from dldoctor.tui.fixflow import FixFlow

        try:
            flow = FixFlow.open(self.session, self.fix_id)
        except Exception as exc:  # noqa: BLE001 - a refusal on screen, not a traceback
            self.app.call_from_thread(self._show_error, str(exc))
            return
        self.app.call_from_thread(self._show, flow)

    def _show_error(self, message: str) -> None:
        self.query_one("#fix-title", Static).update(Text(f"{self.fix_id}: {message}", "bold red"))

    def _show(self, flow) -> None:
        self.flow = flow
        title = Text.assemble((f"{flow.fix_id}", "bold"), f": {flow.plan.title}")
        if flow.plan.resolves:
            title.append(f"  (resolves {', '.join(flow.plan.resolves)})", "dim")
        self.query_one("#fix-title", Static).update(title)
        self.query_one("#plan", Static).update(
            Syntax(flow.preview, "diff", theme="ansi_dark", word_wrap=True)
        )
        lines = Text("Interlocks: " + "\n".join(flow.interlocks))
        if flow.refusal:
            lines.append(f"\nCannot apply here: {flow.refusal}", "bold yellow")
        else:
            lines.append("\nPress a to apply (you will be asked to confirm).", "green")
        self.query_one("#interlocks", Static).update(lines)

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_apply(self) -> None:
        if self.flow is None:
            self.notify("the plan is still being built", severity="warning")
            return
        if self.flow.refusal or self.applied:
            self.notify(self.flow.refusal or "already applied", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_apply()

        steps = len(self.flow.plan.steps)
        self.app.push_screen(
            ConfirmScreen(
                f"Apply {self.fix_id}?",
                f"{steps} step(s), as previewed. A journal "
                "and backups are written first; `dldoctor fix --undo` reverts it.",
                yes="Yes, apply",
            ),
            answered,
        )

    @work(thread=True, exit_on_error=False, group="fix")
    def run_apply(self) -> None:
        log = self.query_one("#apply-log", RichLog)
        self.app.call_from_thread(setattr, log, "display", True)

        def say(line: str, style: str = "") -> None:
            self.app.call_from_thread(log.write, Text(line, style))

        say("applying…", "bold")
        self.app.applying = True
        try:
            ended = self.flow.apply(self.session, say)
        except Exception as exc:  # noqa: BLE001 - the journal says it was rolled back
            say(f"not applied: {exc}", "bold red")
            return
        finally:
            self.app.applying = False
        self.applied = True
        say(ended, "bold green" if "fixed" in ended or "verified" in ended else "bold yellow")
        say("re-running the checks in the list…", "dim")
        self.app.call_from_thread(self.session.start)
