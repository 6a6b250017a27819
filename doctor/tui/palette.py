"""Command-palette entries: jump to a check, open a fix, export, re-run, history."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class DoctorCommands(Provider):
    def _entries(self):
        app = self.app
        session = app.session
        for f in session.findings():
            yield (
                f"check {f.id}: {f.title} ({f.status.value})",
                partial(app.show_check, f.id),
                f.summary,
            )
            for fix_id in f.fixes:
                yield (
                    f"fix {fix_id} (for {f.id})",
                    partial(app.open_fix, fix_id),
                    "preview the fix" + ("" if session.read_only else ", then apply it"),
                )
        yield ("export a snapshot", app.open_export, "a support bundle of this run")
        yield ("re-run all checks", app.rerun_all, "")
        yield ("fix history", app.open_history, "the fixes applied here; undo one")

    async def discover(self) -> Hits:
        for text, callback, help_text in self._entries():
            yield DiscoveryHit(text, callback, help=help_text or None)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self._entries():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, help=help_text or None)
