"""The main screen: checks stream in; findings by category; one finding's evidence."""

from __future__ import annotations

import gc
import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Input, ProgressBar, Static

from dldoctor.model import PROBLEMS, WORST_FIRST, Status, counts
from dldoctor.tui.findings import (
    GLYPHS,
    EvidenceList,
    FindingDetail,
    FindingsTree,
    HostHeader,
    commands_in,
    matches,
)
from dldoctor.tui.footer import SteadyFooter

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
# The status filter, cycled by `s`: everything, what needs attention, then each status.
STATUS_FILTERS: tuple[tuple[str, frozenset[Status] | None], ...] = (
    ("all", None),
    ("problems", frozenset(PROBLEMS)),
    *((s.value, frozenset({s})) for s in WORST_FIRST),
)
# Keys that move the tree's cursor: the user has chosen what to read.
MOVES = {"up", "down", "pageup", "pagedown", "home", "end", "enter", "left", "right"}
COUNTED = WORST_FIRST
# Running checks are listed once they have taken this long: a quick one does not flicker.
SHOW_RUNNING_AFTER_S = 0.3
SPINNER_FRAME_S = 0.1


class RunChanged(Message):
    """The Session's run changed (`event`: RunStarted, CheckStarted, CheckFinished or
    RunEnded), posted from the run's thread. The screen redraws from the Session, so one
    redraw answers every change queued before it: a burst of checks finishing costs one."""

    def __init__(self, event: object):
        super().__init__()
        self.event = event

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RunChanged)


class RunningPanel(Static):
    """The checks running for a while, each with a spinner and what it waits on. The
    spinner and the seconds are the one thing the clock draws: the panel ticks only while
    it shows a check, and wakes once when a running check is due to be shown."""

    def __init__(self, session, **kwargs):
        super().__init__(**kwargs)
        self.session = session
        self._due = None  # the timer that shows a check once it has run for a while
        self._shape: tuple[int, ...] = ()  # the width of each line last drawn

    def draw(self) -> None:
        if self.session.run.error:
            self._tick(None)
            self.update(Text(f"the run stopped: {self.session.run.error}", "bold red"))
            self.display = True
            return
        running = self.session.running()
        slow = [r for r in running if r.seconds >= SHOW_RUNNING_AFTER_S]
        self._tick(SPINNER_FRAME_S if slow else None)
        if running and not slow and self._due is None:
            self._due = self.set_timer(SHOW_RUNNING_AFTER_S - running[0].seconds, self._shown)
        if not slow:
            self.display = False
            return
        frame = SPINNER[int(time.monotonic() * 10) % len(SPINNER)]
        lines = Text()
        for r in slow[:4]:
            waiting = f"waiting on {r.waiting_on}" if r.waiting_on else "computing"
            left = f" · {r.seconds_left:.0f} s left" if r.seconds_left is not None else ""
            lines.append(f"{frame} {r.check_id}  {waiting} · {r.seconds:.0f} s{left}\n", "yellow")
        if len(slow) > 4:
            lines.append(f"  and {len(slow) - 4} more running", "dim")
        lines = lines.rstrip() or lines
        # A spinner frame keeps every line's width: the panel is repainted, and the screen
        # is not laid out again (a layout measures the detail's whole evidence, 10 times a
        # second, and a key pressed meanwhile waited for it).
        shape = tuple(line.cell_len for line in lines.split("\n"))
        self.update(lines, layout=shape != self._shape or not self.display)
        self._shape = shape
        self.display = True

    def _shown(self) -> None:
        self._due = None
        self.draw()

    def _tick(self, interval: float | None) -> None:
        if self.auto_refresh != interval:
            self.auto_refresh = interval

    def automatic_refresh(self) -> None:
        self.draw()
        _out_of_the_collector_until_the_end()  # a probe hangs: the keys' redraws too


def _counts_line(tally: dict[str, int], done: bool, running: int, width: int) -> Text:
    """The counts in the widest form that fits `width`: every status; the statuses seen;
    closer together; the problems (or the passes) and the total; without "· done". Each
    count keeps its word: a glyph alone ("✗ 1") says nothing to a newcomer."""
    total = sum(tally.values())
    seen = [s for s in COUNTED if tally[s.value]] or [Status.PASS]
    problems = [s for s in seen if s in PROBLEMS]
    state = ("· done", "dim") if done else (f"· {running} running", "dim")
    of_total = (f"of {total}", "")
    forms = (
        (COUNTED, "  ", [state]),
        (seen, "  ", [state]),
        (seen, " ", [state]),
        (problems or [Status.PASS], " ", [of_total, state]),
        (problems or [Status.PASS], " ", [of_total]),
    )
    for statuses, gap, tail in forms:
        parts = [(f"{GLYPHS[s][0]} {tally[s.value]} {s.value}", GLYPHS[s][1]) for s in statuses]
        *most, last = [*parts, *tail]
        line = Text.assemble(*((text + gap, style) for text, style in most), last)
        if line.cell_len <= width:
            break
    return line


def _out_of_the_collector_until_the_end() -> None:
    """While the run goes, what it has read and what the screen has drawn (Textual's
    cached lines, each with 7 small caches) kept out of the cyclic collector's sight: a full
    collection walked them in the middle of a key while a probe hung, 20-50 ms of the
    key's CPU on the 8-GPU bundle. What is freed meanwhile is still freed (refcounting);
    the cycles left among it wait for the collection at the run's end (the run's deadline
    bounds the wait: 20 s by default). Freezing costs nothing: the lists are joined."""
    gc.freeze()


def _keep_out_of_the_collector() -> None:
    """Once a run has ended, what it left (the answers of 8 GPUs' sysfs, lspci and
    nvidia-smi, the findings, the widgets) lives as long as the app: out of the cyclic
    collector's sight, a full collection no longer walks it all in the middle of a key
    (90-140 ms of a key's CPU, measured on the 8-GPU bundle). Refcounting still frees what
    a re-run replaces; the collection here finds the cycles the last run left first."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class ResultsScreen(Screen):
    # Narrower than this, the progress bar gives its columns to the counts (the counts
    # say "· N running" while the checks run).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    BINDINGS = [
        Binding("f", "fix", "Fix"),
        Binding("e", "export", "Export snapshot"),
        Binding("r", "rerun_all", "Re-run all"),
        # R and c stay out of the footer (help lists them; the detail says "c copies the
        # commands" where there are some): with them, "? Help" and "q Quit" did not fit
        # in 120 columns.
        Binding("R", "rerun_one", "Re-run this check", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("s", "cycle_status", "Status filter"),
        Binding("c", "copy", "Copy commands", show=False),
        # Out of the footer too: the detail says "v shows their text" under the evidence.
        Binding("v", "toggle_evidence", "Show or fold the raw evidence", show=False),
        Binding("u", "history", "Fix history"),
        Binding("m", "measure", "Measure (--active)", show=False),
        Binding("t", "topology", "Topology picture", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    # The filters: setting one redraws the list.
    text_filter = var("", init=False)
    status_filter = var(0, init=False)

    def __init__(self, session, **kwargs):
        super().__init__(**kwargs)
        self.session = session
        self.selected: str | None = None
        self.ended = None  # the run whose end the screen shows
        self._drawn: tuple = ()
        self._shown_detail: tuple = ()
        self._shown_evidence: tuple = ()
        self.evidence_unfolded = False  # each answer's text, or one line an answer (`v`)
        self._last: dict = {}
        self._filtered_out = False  # findings there are, the filters show none
        self.following = True  # the selection follows the worst finding until the user moves

    def compose(self) -> ComposeResult:
        yield HostHeader(id="host")
        with Horizontal(id="progress-row"):
            yield ProgressBar(
                total=len(self.session.specs), show_eta=False, show_percentage=False, id="progress"
            )
            yield Static(id="counts")
        yield RunningPanel(self.session, id="running")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                # The filter box takes the place of the line that says what is shown: one
                # row either way, so opening or closing it moves nothing on the screen (a
                # box above the body shifted it by three rows: the whole screen drawn again).
                with Vertical(id="filter-row"):
                    yield Static(id="filter-state")
                    yield Input(
                        placeholder="filter: words in the id, title or summary",
                        compact=True,
                        id="filter",
                    )
                yield FindingsTree(id="findings")
            with VerticalScroll(id="detail-scroll"):
                yield FindingDetail(id="detail")
                yield EvidenceList(id="evidence")
        yield SteadyFooter()

    def on_mount(self) -> None:
        self._open_box(False)
        self.query_one("#findings", FindingsTree).focus()
        # Subscribed before the first drawing: no change falls between the two.
        self.session.subscribe(lambda event: self.post_message(RunChanged(event)))
        self.refresh_state()
        self.call_after_refresh(self.refresh_state)  # the widgets' widths, once laid out

    def on_run_changed(self, message: RunChanged) -> None:
        self.refresh_state()
        if not self.session.done:
            _out_of_the_collector_until_the_end()

    def on_resize(self) -> None:
        self.call_after_refresh(self.refresh_state)  # the header and counts fit the width

    def watch_text_filter(self) -> None:
        self.refresh_state()

    def watch_status_filter(self) -> None:
        self.refresh_state()

    # --- drawing --------------------------------------------------------------------

    def refresh_state(self) -> None:
        """Redraw what changed, and only that: called when the run, a filter or the size
        changes, so the UI thread never waits on a probe and a key is answered at once."""
        session = self.session
        findings = session.findings()
        host = session.host_view()
        self._update(HostHeader, (host, self.query_one(HostHeader).size.width), lambda: host)
        run = session.run
        done = sum(s.id in run.findings for s in run.specs)
        self._update(
            "#progress", (len(run.specs), done), lambda: {"total": len(run.specs), "progress": done}
        )
        tally = counts(findings)
        running = session.running()
        width = self.query_one("#counts").size.width
        self._update(
            "#counts",
            (tuple(tally.items()), session.done, len(running), width),
            lambda: _counts_line(tally, session.done, len(running), width),
        )
        self.query_one(RunningPanel).draw()
        name, statuses = STATUS_FILTERS[self.status_filter]
        shown = [f for f in findings if matches(f, self.text_filter, statuses)]
        state = f"showing {len(shown)} of {len(findings)}"
        if name != "all" or self.text_filter:
            state += f" · status: {name}" + (
                f" · text: {self.text_filter!r}" if self.text_filter else ""
            )
        self._update("#filter-state", state, lambda: Text(state, "dim"))
        self._filtered_out = bool(findings) and not shown
        key = (session.generation, tuple((f.id, f.status, f.summary) for f in shown))
        if key != self._drawn:
            self._drawn = key
            # Until the user moves, the selection follows the worst finding so far: the
            # first to finish is seldom the one to read.
            follow = None if self.following else self.selected
            self.selected = self.query_one(FindingsTree).show(shown, follow)
        self._draw_detail()
        if session.done and width:  # drawn laid out: at the widths the screen has
            if self.ended is not session.run:  # once its end is on the screen
                self.call_after_refresh(_keep_out_of_the_collector)
            self.ended = session.run

    def _update(self, selector, key, content) -> None:
        """Give the widget `content()` when `key` differs from the last one it got."""
        if self._last.get(selector) == key:
            return
        self._last[selector] = key
        widget = self.query_one(selector)
        value = content()
        if isinstance(widget, ProgressBar):
            widget.update(**value)
        elif isinstance(widget, HostHeader):
            widget.show(value)
        else:
            widget.update(value)

    def _draw_detail(self) -> None:
        finding = self.current()
        key = (self.selected, finding, self._filtered_out)
        if key != self._shown_detail:
            self._shown_detail = key
            self.query_one(FindingDetail).show(
                finding, self.session.read_only, filtered_out=self._filtered_out
            )
        self._draw_evidence(finding)

    def _draw_evidence(self, finding) -> None:
        # A re-run's answers may differ behind an equal finding: its generation tells.
        key = (self.session.generation, finding, self.evidence_unfolded)
        if key == self._shown_evidence:
            return
        self._shown_evidence = key
        evidence = self.session.evidence(finding) if finding else []
        self.query_one(EvidenceList).show(evidence, self.evidence_unfolded)

    def current(self):
        return next((f for f in self.session.findings() if f.id == self.selected), None)

    # --- events ---------------------------------------------------------------------

    def on_key(self, event) -> None:
        if event.key in MOVES and isinstance(self.focused, FindingsTree):
            self.following = False

    def on_click(self, event) -> None:
        self.following = False

    def on_tree_node_highlighted(self, event: FindingsTree.NodeHighlighted) -> None:
        if event.node is not event.control.cursor_node or event.control.moving_to is not None:
            return  # the cursor has left it since, or a redraw is moving it: not a choice
        data = event.node.data
        if isinstance(data, str) and not data.startswith("skips:"):
            self.selected = data
            self._draw_detail()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.text_filter = event.value.strip()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(FindingsTree).focus()

    def on_descendant_blur(self, event) -> None:
        if event.widget.id == "filter":  # Enter, a click elsewhere: the line says the filter
            self._open_box(False)

    # --- actions --------------------------------------------------------------------

    def action_filter(self) -> None:
        self._open_box(True)
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if box.value:
            box.value = ""
        self.text_filter = ""
        self.status_filter = 0
        self.query_one(FindingsTree).focus()
        self._open_box(False)

    def _open_box(self, open_: bool) -> None:
        """The filter box in the row, or the line saying what is shown (the one widget
        shown, the other hidden: nothing is laid out again where nothing changed)."""
        box = self.query_one("#filter", Input)
        if box.display != open_:
            box.display = open_
            self.query_one("#filter-state").display = not open_

    def action_cycle_status(self) -> None:
        self.status_filter = (self.status_filter + 1) % len(STATUS_FILTERS)

    def action_toggle_evidence(self) -> None:
        self.evidence_unfolded = not self.evidence_unfolded
        self._draw_evidence(self.current())

    def action_rerun_all(self) -> None:
        if not self.session.done:
            self.notify("the checks are still running", severity="warning")
            return
        self.session.start()

    def action_rerun_one(self) -> None:
        finding = self.current()
        if finding is None or not self.session.done:
            self.notify("select a finished check first", severity="warning")
            return
        every = [*self.session.specs, *self.session.measuring]
        spec = next((s for s in every if s.id == finding.id), None)
        if spec is not None:
            self.session.start([spec])
            self.notify(f"re-running {finding.id}")

    def action_measure(self) -> None:
        """The active tier, after a confirmation that says what it loads and for how long
        at most; a bundle's measurements are replayed (nothing is loaded: no question)."""
        session = self.session
        if not session.measuring:
            self.notify("no measuring check to run (all ran already, or none is installed)",
                        severity="warning")  # fmt: skip
            return
        if not session.done:
            self.notify("the checks are still running", severity="warning")
            return
        if session.read_only:
            self._measure(True)
            return
        from dldoctor.tui.confirm import ConfirmScreen

        budget = session.policy.timeouts.active_s
        force = "" if session.policy.perf.force else " GPUs that other processes use are skipped."
        detail = (
            f"{len(session.measuring)} measuring check(s), one measurement at a time, for at "
            f"most {budget:g} s in all, load: " + "; ".join(session.measuring_loads()) + "."
            f"{force} No clock, power or GPU setting is changed."
        )
        self.app.push_screen(
            ConfirmScreen("Measure this host now?", detail, yes="Yes, measure"), self._measure
        )

    def _measure(self, yes: bool | None) -> None:
        if yes:
            self.session.start(self.session.measuring)
            self.notify(f"measuring: {len(self.session.measuring)} check(s)")

    def action_copy(self) -> None:
        finding = self.current()
        found = commands_in(finding.remediation) if finding else []
        if not found:
            self.notify("this finding names no command", severity="warning")
            return
        self.app.copy_to_clipboard("\n".join(found))
        self.notify(f"copied {len(found)} command(s) to the clipboard")

    def action_fix(self) -> None:
        finding = self.current()
        if finding is None or not finding.fixes:
            self.notify("this finding has no guided fix", severity="warning")
            return
        self.app.open_fix(finding.fixes[0])

    def action_export(self) -> None:
        self.app.open_export()

    def action_history(self) -> None:
        self.app.open_history()

    def action_help(self) -> None:
        self.app.open_help()

    def action_topology(self) -> None:
        self.app.open_topology()

    def select(self, check_id: str) -> None:
        """Show `check_id` (from the command palette), clearing filters that hide it."""
        self.following = False
        self.selected = check_id
        self._drawn = ()  # redrawn with the cursor on it
        self.action_clear_filter()
        self.refresh_state()
