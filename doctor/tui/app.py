"""`dldoctor` on a terminal: the interactive doctor. One screen per task; the app reads
the Session (Reports, fix Plans) and never the host."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import termios
import threading
import time

from textual.app import App

from dldoctor.tui.palette import DoctorCommands
from dldoctor.tui.results import ResultsScreen

# After SIGTERM, the time Textual gets to restore the terminal before the process ends anyway.
EXIT_GRACE_S = 3.0


class DoctorApp(App):
    CSS_PATH = "dldoctor.tcss"
    TITLE = "dldoctor"
    COMMANDS = App.COMMANDS | {DoctorCommands}

    def __init__(self, session, *, on_end=None, **kwargs):
        super().__init__(**kwargs)
        self.session = session
        self.on_end = on_end  # what the run must undo however it ends (an unpacked bundle)
        self.results = ResultsScreen(session)
        self.signalled = 0  # the signal that ended the app, 0 when the user quit
        self.applying = False  # a fix is being applied or undone: a hangup waits for it

    def on_mount(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self._stop, sig)
        if not self.is_headless:
            self.set_interval(1.0, self._terminal_gone)
        self.sub_title = "bundle (read-only)" if self.session.read_only else "live"
        self.push_screen(self.results)
        for notice in self.session.notices:
            self.notify(notice, timeout=15)
        if self.session.generation == 0:  # not started by the caller
            self.session.start()

    def _stop(self, sig: int) -> None:
        """End on a signal. On a hangup the terminal is gone: nothing to restore on it, and
        Textual's shutdown can wait forever on writes to it, so the process ends at once —
        once a fix being applied has finished (its journal and rollback must complete). On
        SIGTERM the terminal is restored, with the same end as a backstop."""
        if self.signalled:
            return
        self.signalled = sig
        if sig != signal.SIGHUP:
            self.exit()
        threading.Thread(target=self._end_process, args=(sig,), daemon=True).start()

    def _end_process(self, sig: int) -> None:
        if sig != signal.SIGHUP:
            time.sleep(EXIT_GRACE_S)
        while self.applying:
            time.sleep(0.1)
        # os._exit skips atexit and the caller's cleanup: both are done here, or a hangup
        # would strand the commands running and the unpacked copy of a bundle in $TMPDIR.
        # Once the terminal is gone Textual's input thread spins on its end of file, holding
        # the interpreter lock: each file the clean-up removes would wait out a whole switch
        # interval (5 ms) to get it back, and a bundle's thousands took past 10 s.
        sys.setswitchinterval(1e-5)
        from dldoctor.host.live import kill_children

        kill_children()
        if self.on_end is not None:
            try:
                self.on_end()
            except Exception:  # the main thread closing it too (SIGTERM): it ends regardless
                pass
        os._exit(128 + sig)

    def _terminal_gone(self) -> None:
        """A terminal closed without a SIGHUP reaching us (Textual's input thread would spin
        on its end of file): the app ends as if hung up."""
        try:
            termios.tcgetattr(self._driver.fileno if self._driver else 0)
        except (termios.error, OSError, AttributeError):
            self._stop(signal.SIGHUP)

    # Opened from the results screen, the command palette and the fix flow alike.
    def open_fix(self, fix_id: str) -> None:
        from dldoctor.tui.fix import FixScreen

        self.push_screen(FixScreen(self.session, fix_id))

    def open_export(self) -> None:
        from dldoctor.tui.export import ExportScreen

        if self.session.run.report is None:
            self.notify("wait for the checks to finish", severity="warning")
            return
        self.push_screen(ExportScreen(self.session))

    def open_history(self) -> None:
        from dldoctor.tui.history import HistoryScreen

        self.push_screen(HistoryScreen(self.session))

    def open_topology(self) -> None:
        from dldoctor.tui.topology import TopologyScreen

        self.push_screen(TopologyScreen(self.session))

    def open_help(self) -> None:
        # Built once and kept (installed): its table is composed and laid out on the
        # first `?` only, and each later one shows it as it was.
        if not self.is_screen_installed("help"):
            self.install_screen(self._help_screen(), "help")
        self.push_screen("help")

    @staticmethod
    def _help_screen():
        from dldoctor.tui.confirm import ConfirmScreen
        from dldoctor.tui.export import ExportScreen
        from dldoctor.tui.fix import FixScreen
        from dldoctor.tui.help import HelpScreen
        from dldoctor.tui.history import HistoryScreen
        from dldoctor.tui.topology import TopologyScreen

        return HelpScreen(
            {
                "results": ResultsScreen.BINDINGS,
                "fix": FixScreen.BINDINGS,
                "confirm": ConfirmScreen.BINDINGS,
                "history": HistoryScreen.BINDINGS,
                "export": ExportScreen.BINDINGS,
                "topology": TopologyScreen.BINDINGS,
            }
        )

    def show_check(self, check_id: str) -> None:
        while len(self.screen_stack) > 2:  # back to the results
            self.pop_screen()
        self.results.select(check_id)

    def rerun_all(self) -> None:
        self.results.action_rerun_all()
