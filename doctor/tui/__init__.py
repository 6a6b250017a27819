"""The interactive app (Textual). The only package that imports Textual; `--check` and
`--json` never import it."""

from __future__ import annotations


def run_app(session) -> int:
    from dldoctor.tui.app import DoctorApp

    DoctorApp(session).run()
    return 0
