"""The interactive app (Textual). The only package that imports Textual; `--check` and
`--json` never import it."""

from __future__ import annotations


def run_app(session, on_end=None) -> int:
    """Run the app until the user quits (0) or a signal ends it (128 + its number).
    `on_end` is called before a signal ends the process without returning here."""
    from dldoctor.tui.app import DoctorApp

    app = DoctorApp(session, on_end=on_end)
    app.run()
    return 128 + app.signalled if app.signalled else 0
