"""The footer of every screen: Textual's, composed again only when what it shows changes."""

from __future__ import annotations

from textual.widgets import Footer


class SteadyFooter(Footer):
    """Textual's Footer rebuilds its keys (a widget each, styled anew) whenever the
    screen's bindings may have changed: each focus change (`/` into the filter, Esc out of
    it) and each return to the screen (Esc from the help), 30-60 ms of a key's CPU on a
    loaded machine for the same keys drawn again. This one rebuilds them when the keys it
    shows, their descriptions or whether they are enabled change."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._composed_for: tuple | None = None

    def bindings_changed(self, screen) -> None:
        shown = tuple(
            (binding.key, binding.description, enabled, tooltip)
            for _, binding, enabled, tooltip in screen.active_bindings.values()
            if binding.show or binding.key == self.app.COMMAND_PALETTE_BINDING
        )
        if self._bindings_ready and shown == self._composed_for:
            return
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._composed_for = shown  # as Footer's own test: it composes then
        super().bindings_changed(screen)
