"""Every screen of the app as an SVG (pytest-textual-snapshot), rendered from fixture
bundles at a fixed size: the results, filtered, a finding with a fix, the fix plan, the
confirmation, the history, the export form and the help. Nothing shown depends on the
clock once a run has ended. Update with `pytest --snapshot-update` and read the diff."""

from __future__ import annotations

import json

from tests.support.tui import (
    SIZE,
    app_for,
    bundle_session,
    copy_root,
    finished,
    on_screen,
    root_session,
    selected,
    until,
)

ROCE = "hgx-h100x8-roce-mtu1500"
NOUVEAU = "workstation-rtx4090-nouveau"


def _after_run(session, *keys, then=None, shows=None):
    """Once the run has ended: `then(pilot)`, `keys`, until the screen named `shows` is
    up (snap_compare then waits for the app to settle: its pause and animations)."""

    async def run_before(pilot):
        await finished(pilot, session)
        if then is not None:
            await then(pilot)
        if keys:
            await pilot.press(*keys)
        if shows is not None:
            await until(pilot, on_screen(pilot, shows))

    return run_before


def test_results_screen(snap_compare):
    session = bundle_session(ROCE)
    assert snap_compare(app_for(session), terminal_size=SIZE, run_before=_after_run(session))


def test_results_screen_filtering(snap_compare):
    """The filter box open, a word typed: one row, where the line saying what is shown was."""
    session = bundle_session(ROCE)
    assert snap_compare(
        app_for(session), terminal_size=SIZE, run_before=_after_run(session, "slash", *"roce")
    )


def test_results_screen_on_a_finding_with_a_fix(snap_compare):
    session = bundle_session(NOUVEAU)

    async def select(pilot):
        await selected(pilot, "gpu.nouveau")

    assert snap_compare(
        app_for(session), terminal_size=SIZE, run_before=_after_run(session, then=select)
    )


async def _open_fix(pilot):
    await selected(pilot, "gpu.nouveau")
    await pilot.press("f")
    await until(pilot, lambda: getattr(pilot.app.screen, "flow", None) is not None)


def test_fix_screen_on_a_bundle(snap_compare):
    session = bundle_session(NOUVEAU)
    assert snap_compare(
        app_for(session), terminal_size=SIZE, run_before=_after_run(session, then=_open_fix)
    )


def test_confirm_screen(snap_compare, tmp_path):
    session = root_session(copy_root(tmp_path, NOUVEAU))
    assert snap_compare(
        app_for(session),
        terminal_size=SIZE,
        run_before=_after_run(session, "a", then=_open_fix, shows="ConfirmScreen"),
    )


def test_history_screen(snap_compare, tmp_path):
    root = copy_root(tmp_path, NOUVEAU)
    journal = root / "var/lib/dldoctor/journal/20261201T120000Z-a1b2c3"
    journal.mkdir(parents=True)
    (journal / "journal.json").write_text(
        json.dumps(
            {
                "id": "20261201T120000Z-a1b2c3",
                "fix": "fix.gpu.blacklist_nouveau",
                "state": "applied",
                "verdict": "pending a reboot",
                "reboot": True,
                "resolves": ["gpu.nouveau"],
                "boot_id": "",
                "backups": [],  # what every journal holds (fixes/plan.py checks it on load)
                "done": 1,
                "commands": [],
            }
        )
    )
    session = bundle_session(NOUVEAU)
    session.root = str(root)  # the history of this root, the screens of a bundle
    session.read_only = False  # (a replayed bundle's own history lists nothing)
    assert snap_compare(
        app_for(session),
        terminal_size=SIZE,
        run_before=_after_run(session, "u", shows="HistoryScreen"),
    )


def test_export_form(snap_compare):
    session = bundle_session(NOUVEAU)

    async def fixed_path(pilot):
        await pilot.press("e")
        await until(pilot, on_screen(pilot, "ExportScreen"))
        path = pilot.app.screen.query_one("#export-path")
        path.cursor_blink = False  # a blinking cursor is drawn or not by the clock
        path.value = "/tmp/dldoctor-ws-ml-07.tar.gz"

    assert snap_compare(
        app_for(session), terminal_size=SIZE, run_before=_after_run(session, then=fixed_path)
    )


def test_help_screen(snap_compare):
    session = bundle_session(ROCE)
    assert snap_compare(
        app_for(session),
        terminal_size=SIZE,
        run_before=_after_run(session, "question_mark", shows="HelpScreen"),
    )
