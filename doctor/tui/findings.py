"""The widgets of the results screen: the host header, the findings tree and the detail
of one finding. They draw what the Session holds; they ask the host nothing."""

from __future__ import annotations

import re

from rich.console import Group
from rich.text import Text
from textual.widgets import Static, Tree

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

    def show(self, findings: list[Finding], selected: str | None) -> str | None:
        """Draw `findings`; the id now selected."""
        by_category: dict[str, list[Finding]] = {}
        for f in findings:
            by_category.setdefault(f.category, []).append(f)
        order = {c: i for i, c in enumerate(CATEGORY_ORDER)}

        def worst(c: str) -> tuple[int, int]:
            return (min(f.status.rank for f in by_category[c]), order.get(c, len(order)))

        self.clear()
        target = first = None
        for category in sorted(by_category, key=worst):
            group = sorted(by_category[category], key=lambda f: f.status.rank)
            shown = [f for f in group if f.status != Status.SKIP]
            skipped = [f for f in group if f.status == Status.SKIP]
            label = Text.assemble(
                glyph(group[0].status), " ", (category, "bold"), f"  {len(group)} check(s)"
            )
            node = self.root.add(label, data=None, expand=True)
            for f in shown:
                leaf = node.add_leaf(_line(f), data=f.id)
                first = first or leaf
                if f.id == selected:
                    target = leaf
            if skipped:
                fold = node.add(
                    Text(f"{GLYPHS[Status.SKIP][0]} {len(skipped)} skipped", style="dim"),
                    data=f"skips:{category}",
                    expand=category in self.unfolded,
                )
                for f in skipped:
                    leaf = fold.add_leaf(_line(f), data=f.id)
                    if f.id == selected:
                        target = leaf
        # The selection survives a redraw; none yet, or one the filter hides: the worst
        # finding shown, at once (the detail never shows what the list does not).
        # (A node has its line once the tree is laid out again: move after the refresh.)
        chosen = target or first
        if chosen is not None:
            self.moving_to = chosen
            self.call_after_refresh(self._move_to, chosen)
        return chosen.data if chosen is not None else None

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
    """One finding: summary, details, the raw evidence, the remediation and its fixes."""

    def show(
        self,
        finding: Finding | None,
        evidence: list[EvidenceView],
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
        if evidence:
            parts.append(Text("\nEvidence (the raw answers it was decided on)", "bold underline"))
            for e in evidence:
                parts.append(
                    Text(f"  {e.source}" + ("" if e.status == "ok" else f" ({e.status})"), "cyan")
                )
                parts += [
                    Text(f"    {line}", "dim", no_wrap=True, overflow="ellipsis")
                    for line in e.lines
                ]
                if e.more:
                    parts.append(Text(f"    … {e.more} more line(s)", "dim italic"))
        self.update(Group(*parts))


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
