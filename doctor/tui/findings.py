"""The widgets of the results screen: the host header, the findings tree and the detail
of one finding. They draw what the Session holds; they ask the host nothing."""

from __future__ import annotations

import re
from typing import NamedTuple

from rich.cells import cell_len
from rich.console import Group
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from dldoctor.model import Finding, Status
from dldoctor.registry import CATEGORY_ORDER
from dldoctor.render.text import GLYPHS  # one glyph and colour per status, as the checklist
from dldoctor.tui.session import EvidenceView, HostView

COMMAND = re.compile(r"`([^`]+)`")


def glyph(status: Status) -> Text:
    char, style = GLYPHS[status]
    return Text(char, style=style)


class HostHeader(Static):
    def show(self, host: HostView) -> None:
        first = " · ".join(
            v for v in (host.name or "(host name not known yet)", host.os, host.kernel) if v
        )
        second = " · ".join(
            v for v in (host.gpus or "no NVIDIA GPU seen", host.driver, host.ram) if v
        )
        # One row each on a narrow terminal: a wrapped first line would push the source
        # ("(read-only)") out of the header's three rows.
        width = self.content_size.width
        lines = ((first, "bold"), (second, ""), (host.source, "dim"))
        self.update(Group(*(Text(_fit(t, width), style) for t, style in lines)))


def _fit(text: str, width: int) -> str:
    """`text` in `width` columns, its middle cut to "…": the ends say the most (the host's
    name; "(read-only)")."""
    if width <= 1 or len(text) <= width:
        return text
    head = (width - 1) // 2
    return f"{text[:head]}…{text[len(text) - (width - 1 - head):]}"


def matches(finding: Finding, text: str, statuses: frozenset[Status] | None) -> bool:
    if statuses is not None and finding.status not in statuses:
        return False
    if not text:
        return True
    hay = f"{finding.id} {finding.title} {finding.summary}".lower()
    return all(word in hay for word in text.lower().split())


class _Drawn(NamedTuple):
    """One category as the tree draws it: what its lines say, its node, the node of
    each finding in it and the first one not folded in its skips."""

    findings: tuple
    node: TreeNode
    leaves: dict[str, TreeNode]
    first: TreeNode | None


def _as_drawn(group: list[Finding]) -> tuple:
    return tuple((f.id, f.status, f.summary) for f in group)


class FindingsTree(Tree):
    """Categories, worst first, each with its findings worst first; skips folded into one
    line that expands."""

    def __init__(self, **kwargs):
        super().__init__("checks", **kwargs)
        self.show_root = False
        self.guide_depth = 3
        self.unfolded: set[str] = set()  # categories whose skips are shown
        # The node a redraw moves the cursor to, once laid out; until then the highlights
        # of the rebuilt tree (its first line) are the redraw's, not a choice.
        self.moving_to = None
        self._drawn: dict[str, _Drawn] = {}  # each category drawn, in the tree's order

    def show(self, findings: list[Finding], selected: str | None) -> str | None:
        """Draw `findings`; the id now selected. A category whose findings are as drawn
        keeps its nodes (a filter's letter, a check finishing, builds again only the
        categories it changed: the rest of the tree is neither built nor laid out anew)."""
        by_category: dict[str, list[Finding]] = {}
        for f in findings:
            by_category.setdefault(f.category, []).append(f)
        order = {c: i for i, c in enumerate(CATEGORY_ORDER)}

        def worst(c: str) -> tuple[int, int]:
            return (min(f.status.rank for f in by_category[c]), order.get(c, len(order)))

        wanted = {
            category: sorted(by_category[category], key=lambda f: f.status.rank)
            for category in sorted(by_category, key=worst)
        }
        drawn = self._drawn
        kept = [  # a category the user folded is drawn again unfolded, as it always was
            c
            for c, d in drawn.items()
            if c in wanted and d.findings == _as_drawn(wanted[c]) and d.node.is_expanded
        ]
        if kept != [c for c in wanted if c in kept]:  # the kept ones in another order
            kept = []
        for category in [c for c in drawn if c not in kept]:
            drawn.pop(category).node.remove()
        after = None  # the category node the next one goes below (None: the first)
        for category, group in wanted.items():
            if category not in kept:
                drawn[category] = self._category(category, group, after)
            after = drawn[category].node
        self._drawn = {c: drawn[c] for c in wanted}
        # The selection survives a redraw; none yet, or one the filter hides: the worst
        # finding shown, at once (the detail never shows what the list does not).
        # (A node has its line once the tree is laid out again: move after the refresh.)
        target = next(
            (d.leaves[selected] for d in self._drawn.values() if selected in d.leaves), None
        )
        first = next((d.first for d in self._drawn.values() if d.first is not None), None)
        chosen = target or first
        if chosen is not None:
            self.moving_to = chosen
            self.call_after_refresh(self._move_to, chosen)
        return chosen.data if chosen is not None else None

    def _category(self, category: str, group: list[Finding], after) -> _Drawn:
        """The nodes of `category`'s findings (`group`, worst first), below `after`."""
        shown = [f for f in group if f.status != Status.SKIP]
        skipped = [f for f in group if f.status == Status.SKIP]
        label = Text.assemble(
            glyph(group[0].status), " ", (category, "bold"), f"  {len(group)} check(s)"
        )
        if after is None and self.root.children:
            node = self.root.add(label, data=None, expand=True, before=0)
        else:
            node = self.root.add(label, data=None, expand=True, after=after)
        leaves = {f.id: node.add_leaf(_line(f), data=f.id) for f in shown}
        first = next(iter(leaves.values()), None)
        if skipped:
            fold = node.add(
                Text(f"{GLYPHS[Status.SKIP][0]} {len(skipped)} skipped", style="dim"),
                data=f"skips:{category}",
                expand=category in self.unfolded,
            )
            leaves.update({f.id: fold.add_leaf(_line(f), data=f.id) for f in skipped})
        return _Drawn(_as_drawn(group), node, leaves, first)

    def _move_to(self, node) -> None:
        if self.moving_to is node:  # not overtaken by a later redraw
            self.moving_to = None
        self.move_cursor(node)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        data = event.node.data
        if isinstance(data, str) and data.startswith("skips:"):
            self.unfolded.add(data[6:])

    def on_tree_node_collapsed(self, event: Tree.NodeCollapsed) -> None:
        data = event.node.data
        if isinstance(data, str) and data.startswith("skips:"):
            self.unfolded.discard(data[6:])


def _line(f: Finding) -> Text:
    return Text.assemble(glyph(f.status), " ", (f.id, "bold"), "  ", f.summary)


class FindingDetail(Static):
    """One finding: summary, details, the remediation and its fixes (its raw evidence is
    the EvidenceList below it)."""

    def show(
        self,
        finding: Finding | None,
        read_only: bool,
        *,
        filtered_out: bool = False,
    ) -> None:
        if finding is None:
            said = (
                "No finding matches the filter (Esc clears it)."
                if filtered_out
                else "Select a finding (↑/↓, Enter) to see its evidence."
            )
            self.update(Text(said, "dim"))
            return
        parts: list = [
            Text.assemble(
                glyph(finding.status), " ", (f"{finding.id}", "bold"), " — ", finding.title
            ),
            Text(finding.summary),
        ]
        if finding.details:
            parts += [Text("\nDetails", "bold underline")]
            parts += [Text(f"  • {d}") for d in finding.details]
        if finding.remediation:
            parts.append(Text("\nWhat to do", "bold underline"))
            parts.append(remediation_text(finding.remediation))
            if COMMAND.search(finding.remediation):
                parts.append(Text("  (c copies the commands)", "dim"))
        if finding.fixes:
            verb = "preview" if read_only else "preview and apply"
            parts.append(Text("\nGuided fix", "bold underline"))
            parts += [Text(f"  {i}  (press f to {verb})", "green") for i in finding.fixes]
        self.update(Group(*parts))


# One row of the evidence: its pieces of (text, style); the piece `cut` (a path, a
# command) loses its middle when the row is too wide, so the value after it stays seen.
Row = tuple[tuple[tuple[str, str], ...], int]
FOLDED, UNFOLDED = "▸ ", "▾ "
# An answer's control characters (a file's escape sequences) would reach the terminal as
# they are: each is shown as one "�". Tabs are expanded, as lspci's indents need.
CONTROLS = {c: "\N{REPLACEMENT CHARACTER}" for c in (*range(32), 127) if c != 9}


def _shown(line: str) -> str:
    return line.expandtabs(8).translate(CONTROLS)


def evidence_rows(evidence: list[EvidenceView], unfolded: bool) -> list[Row]:
    """The evidence section: a heading, then each answer on one line (a one-line answer
    with its value), or `unfolded`, each answer followed by its text."""
    if not evidence:
        return []
    rows: list[Row] = [
        ((("", ""),), -1),
        ((("Evidence (the raw answers it was decided on)", "bold underline"),), -1),
        ((("  (v folds them)" if unfolded else "  (v shows their text)", "dim"),), -1),
    ]
    for e in evidence:
        rows.append(_answer_row(e, unfolded))
        if unfolded:
            rows += [(((f"      {_shown(line)}", "dim"),), -1) for line in e.lines]
            if e.more:
                rows.append((((f"      … {e.more} more line(s)", "dim italic"),), -1))
    return rows


def _answer_row(e: EvidenceView, unfolded: bool) -> Row:
    mark = UNFOLDED if unfolded else FOLDED
    if e.status != "ok":  # no text: the status says it all ("missing", "timeout")
        return ((("  " + mark, "dim"), (e.source, "cyan"), (f" ({e.status})", "")), 1)
    size = len(e.lines) + e.more
    if size == 1 and not unfolded:  # its value at a glance: "read …/mtu: 1500"
        return ((("  " + mark, "dim"), (e.source, "cyan"), (f": {_shown(e.lines[0])}", "")), 1)
    lines = f" · {size} line" + ("s" if size != 1 else "")
    return ((("  " + mark, "dim"), (e.source, "cyan"), (lines, "dim")), 1)


class EvidenceList(Widget):
    """The selected finding's evidence, drawn through Textual's line API: a redraw renders
    only the rows on the screen and a layout only counts them, so a finding decided on
    470 answers and 3000 lines of `nvidia-smi -q` costs a key what a finding with one
    answer does (as one Static, its every line was laid out on every key: 0.3-0.5 s)."""

    DEFAULT_CSS = "EvidenceList { height: auto; width: 1fr; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rows: list[Row] = []

    def show(self, evidence: list[EvidenceView], unfolded: bool) -> None:
        self.rows = evidence_rows(evidence, unfolded)
        self.refresh(layout=True)

    def text(self) -> str:
        """What it shows, as plain text (each row whole)."""
        return "\n".join("".join(t for t, _ in pieces) for pieces, _ in self.rows)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.rows)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if y >= len(self.rows):
            return Strip.blank(width, base)
        pieces, cut = self.rows[y]
        over = sum(cell_len(t) for t, _ in pieces) - width
        if over > 0 and cut >= 0 and cell_len(pieces[cut][0]) > over + 8:
            text, style = pieces[cut]
            keep = cell_len(text) - over
            pieces = (*pieces[:cut], (_fit(text, keep), style), *pieces[cut + 1 :])
        strip = Strip([Segment(t, base + Style.parse(s) if s else base) for t, s in pieces])
        if strip.cell_length > width:  # still too wide: its end gives way
            strip = Strip.join([strip.crop(0, max(0, width - 1)), Strip([Segment("…", base)])])
        return strip.extend_cell_length(width, base)


def remediation_text(text: str) -> Text:
    """The remediation with its `commands` set apart, so they stand out to copy."""
    out = Text("  ")
    last = 0
    for m in COMMAND.finditer(text):
        out.append(text[last : m.start()])
        out.append(m.group(1), style="bold cyan")
        last = m.end()
    out.append(text[last:])
    return out


def commands_in(text: str) -> list[str]:
    return COMMAND.findall(text)
