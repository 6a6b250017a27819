"""Export a snapshot of what this run saw: where, and redacted or not."""

from __future__ import annotations

import os

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, Switch


class ExportScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, session):
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        dest = self.session.suggested_dest()
        with Vertical(id="export"):
            yield Static(
                "Export a snapshot (a support bundle `dldoctor --from` replays)", id="export-title"
            )
            yield Label("Path (.tar.gz, or a folder name without it)")
            yield Input(value=dest, id="export-path")
            with Horizontal(id="export-redact-row"):
                yield Switch(value=True, id="export-redact")
                yield Label("Redact host names, addresses, serials and users")
            with Horizontal(id="export-buttons"):
                yield Button("Export", variant="primary", id="export-go")
                yield Button("Close", id="export-close")
            yield Static(id="export-state")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "export-close":
            self.dismiss(None)
        elif event.button.id == "export-go":
            self.start()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.start()

    def action_close(self) -> None:
        self.dismiss(None)

    def start(self) -> None:
        if self.session.run.report is None:
            self.query_one("#export-state", Static).update("wait for the checks to finish")
            return
        path = self.query_one("#export-path", Input).value.strip()
        redact = self.query_one("#export-redact", Switch).value
        self.query_one("#export-state", Static).update("writing…")
        self.export(path, redact)

    @work(thread=True, exit_on_error=False, group="export")
    def export(self, path: str, redact: bool) -> None:
        try:
            written = self.session.export(path, redact=redact)
            size = _size(written)
            said = f"written: {written} ({size / 1024:.0f} KiB)"
            if redact:
                said += "; redacted (the map back to the names stays in ~/.config/dldoctor)"
        except Exception as exc:  # noqa: BLE001 - said in the form, never a traceback
            said = f"not written: {exc}"
        self.app.call_from_thread(self.query_one("#export-state", Static).update, said)


def _size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(path) for n in names)
