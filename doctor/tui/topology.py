"""The host's topology as a text tree, with the findings marked on the parts they name
(dldoctor.topology; `t` on the results screen)."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from dldoctor.tui.footer import SteadyFooter


class TopologyScreen(Screen):
    BINDINGS = [Binding("escape,q,t", "app.pop_screen", "Back")]

    def __init__(self, session):
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        yield Static("Topology: link x trained/capable, GT/s trained/capable", id="title")
        with VerticalScroll():
            yield Static("drawing…", id="topology-tree", markup=False)
        yield SteadyFooter()

    def on_mount(self) -> None:
        self.draw(max(40, self.size.width - 2))

    @work(thread=True, exclusive=True)
    def draw(self, width: int) -> None:
        # In a thread: a fact the checks have not asked yet may still wait on a probe.
        try:
            text = self.session.topology_text(width)
        except Exception as exc:  # noqa: BLE001 - said on screen, never a traceback
            text = f"the topology could not be drawn: {type(exc).__name__}: {exc}"
        self.app.call_from_thread(self.query_one("#topology-tree", Static).update, text)
