"""The fixes applied here, with their state; undo one."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from dldoctor.tui.confirm import ConfirmScreen
from dldoctor.tui.footer import SteadyFooter


class HistoryScreen(Screen):
    BINDINGS = [Binding("u", "undo", "Undo"), Binding("escape,q", "back", "Back")]

    def __init__(self, session):
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        yield Static("Fixes applied on this host (the journal in /var/lib/dldoctor)", id="title")
        yield DataTable(id="history", cursor_type="row")
        yield Static(id="history-state")
        yield SteadyFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("journal", "fix", "state", "verdict")
        self.load()

    def load(self) -> None:
        from dldoctor.tui.fixflow import history

        table = self.query_one(DataTable)
        table.clear()
        if self.session.read_only:  # this machine's journal is not the bundle host's
            self.query_one("#history-state", Static).update(
                "a replayed bundle holds no fix history, and nothing is undone from one "
                "(this machine's: `dldoctor fix --history`)"
            )
            return
        try:
            records = history(self.session)
        except Exception as exc:  # noqa: BLE001 - an unreadable journal, said on screen
            self.query_one("#history-state", Static).update(f"cannot read the journal: {exc}")
            return
        for r in records:
            table.add_row(r["id"], r["fix"], r["state"], _verdict(r), key=r["id"])
        note = "no fix was applied here" if not records else "u undoes the selected fix"
        self.query_one("#history-state", Static).update(note)

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_undo(self) -> None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return
        journal_id = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_undo(journal_id)

        fix = table.get_row(journal_id)[1]
        self.app.push_screen(
            ConfirmScreen(
                f"Undo {fix} ({journal_id})?",
                "Its files are restored from the journal's backups and its undo commands run.",
                yes="Yes, undo",
            ),
            answered,
        )

    @work(thread=True, exit_on_error=False, group="fix")
    def run_undo(self, journal_id: str) -> None:
        from dldoctor.tui.fixflow import undo_applied

        self.app.applying = True
        try:
            said = undo_applied(self.session, journal_id)
        except Exception as exc:  # noqa: BLE001 - a refusal on screen
            said = f"not undone: {exc}"
        finally:
            self.app.applying = False
        self.app.call_from_thread(self.load)
        self.app.call_from_thread(self.query_one("#history-state", Static).update, said)


def _verdict(record: dict) -> str:
    """The re-verified status holds while the fix is applied; an undone (or rolled back)
    fix has none: "pending a reboot" would say a reboot is still awaited. An apply left
    `applying` was interrupted (or runs now elsewhere): say what becomes of it."""
    from dldoctor.fixes.command import INTERRUPTED

    if record.get("state") == "applying":
        return INTERRUPTED
    return str(record.get("verdict", "")) if record.get("state") == "applied" else ""
