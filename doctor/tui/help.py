"""Every key binding of the app, by screen."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from dldoctor.tui.footer import SteadyFooter


def _key(binding: Binding) -> str:
    names = {"slash": "/", "question_mark": "?", "escape": "Esc", "ctrl+p": "Ctrl+P"}
    return ", ".join(names.get(k, k) for k in binding.key.split(","))


class HelpScreen(Screen):
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Back")]

    def __init__(self, screens: dict[str, list[Binding]]):
        super().__init__()
        self.screens = screens

    def compose(self) -> ComposeResult:
        table = Table(title="dldoctor: keys", expand=True, show_lines=False)
        table.add_column("where")
        table.add_column("key", style="bold cyan")
        table.add_column("does")
        for where, bindings in self.screens.items():
            for b in bindings:
                table.add_row(where, _key(b), b.description or b.action)
        table.add_row("everywhere", "Ctrl+P", "command palette: checks, fixes, export")
        table.add_row("everywhere", "mouse", "click a finding, a button, scroll a pane")
        with VerticalScroll():
            yield Static(table)
        yield SteadyFooter()
