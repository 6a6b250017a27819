"""The detail's evidence: folded to one line an answer, `v` shows each answer's text and
folds it again; what it shows is the bundle's own answer; and a key costs the rows on the
screen, not the finding's whole evidence (a finding on an 8-GPU host is decided on 470
answers)."""

from __future__ import annotations

import asyncio

from dldoctor.tui.findings import EvidenceList, FindingDetail, evidence_rows
from dldoctor.tui.session import EvidenceView
from tests.support.paths import HOSTS
from tests.support.tui import SIZE, app_for, bundle_session, finished, selected, until

BIG = "hgx-h100x8-gpu3-x8"
LSPCI = "run lspci -vvv -D -d ::0604"


def _stdout(bundle: str, command: str) -> list[str]:
    """A command's answer as the bundle keeps it on disk."""
    folder = command.removeprefix("run ").replace(" ", "_").replace("/", "_").replace(":", "_")
    return (HOSTS / bundle / "commands" / folder / "stdout").read_text().splitlines()


def _drawn(widget: EvidenceList, row: int) -> str:
    """Row `row` as the line API draws it for the screen."""
    return widget.render_line(row).text.rstrip()


def test_the_evidence_folds_to_a_line_an_answer_and_v_unfolds_the_real_answer():
    session = bundle_session(BIG)
    raw = _stdout(BIG, LSPCI)
    assert len(raw) == 90  # longer than the 60 lines an answer shows

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            await finished(pilot, session)
            await selected(pilot, "pci.acs")
            screen = pilot.app.results
            evidence = screen.query_one(EvidenceList)
            finding = screen.current()
            await until(pilot, lambda: evidence.rows and "pci.acs" in str(screen.selected))
            folded = evidence.text()
            # One row an answer, after the heading; a one-line answer with its value.
            assert len(evidence.rows) == 3 + len(finding.evidence)
            assert f"▸ {LSPCI} · 90 lines" in folded and raw[1].strip() not in folded
            assert "(v shows their text)" in folded
            assert "▸ read /sys/bus/pci/devices/0000:00:00.0/vendor: 0x8086" in folded
            await pilot.press("v")
            await until(pilot, lambda: "(v folds them)" in evidence.text())
            texts = [("".join(t for t, _ in pieces)) for pieces, _ in evidence.rows]
            at = texts.index(f"  ▾ {LSPCI} · 90 lines")
            assert texts[at + 1 : at + 61] == [f"      {line.expandtabs(8)}" for line in raw[:60]]
            assert texts[at + 61] == "      … 30 more line(s)"
            width = evidence.size.width  # as drawn: cut to the pane with "…", never wrapped
            assert len(texts[at + 1]) > width
            assert _drawn(evidence, at + 1) == texts[at + 1][: width - 1] + "…"
            await pilot.press("v")
            await until(pilot, lambda: "(v shows their text)" in evidence.text())
            assert evidence.text() == folded
            # The toggle is the user's: it holds for the next finding too.
            await pilot.press("v", "down")
            await until(pilot, lambda: screen.selected != "pci.acs")
            assert "(v folds them)" in evidence.text()

    asyncio.run(flow())


def test_a_filter_change_draws_the_rows_on_screen_not_the_whole_evidence(monkeypatch):
    """Work, not time: on the 8-GPU bundle, its PCIe finding's evidence unfolded (over
    400 rows), each `s` draws no more evidence rows than the screen shows (twice), and the detail's Static
    holds no evidence at all."""
    session = bundle_session(BIG)
    drawn: list[int] = []
    render_line = EvidenceList.render_line

    def counted(self, y):
        drawn.append(y)
        return render_line(self, y)

    monkeypatch.setattr(EvidenceList, "render_line", counted)

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            await finished(pilot, session)
            screen = pilot.app.results
            evidence = screen.query_one(EvidenceList)
            await pilot.press("v")
            await until(pilot, lambda: "(v folds them)" in evidence.text())
            assert screen.selected == "pci.link.width" and len(evidence.rows) > 400
            for _ in range(7):  # every status filter, back to all
                drawn.clear()
                await pilot.press("s")
                await pilot.pause()
                # A screen's rows, twice at most (the redraw, then the cursor's move to the
                # finding it selects): a tenth of the evidence, whatever its length.
                assert len(drawn) <= 2 * SIZE[1], (screen.status_filter, len(drawn))
                detail = screen.query_one(FindingDetail).content
                assert len(getattr(detail, "renderables", ())) < 40
            assert screen.selected == "pci.link.width" and len(evidence.rows) > 400

    asyncio.run(flow())


def test_an_answers_control_characters_never_reach_the_terminal():
    shown = EvidenceView("read /etc/motd", "ok", ("\x1b[2Jgone\r", "\tindented"))
    rows = evidence_rows([shown], unfolded=True)
    texts = ["".join(t for t, _ in pieces) for pieces, _ in rows]
    assert "      �[2Jgone�" in texts and f"      {' ' * 8}indented" in texts
    assert not any(c in "".join(texts) for c in "\x1b\r\t")
    one = evidence_rows([EvidenceView("read /x", "ok", ("\x1b[31mred",))], unfolded=False)
    assert "".join(t for t, _ in one[-1][0]) == "  ▸ read /x: �[31mred"
