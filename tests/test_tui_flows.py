"""The interactive app's flows, driven by Textual's Pilot on fixture bundles and on a
temporary root: a run to its end, a failing finding's evidence, filters, a fix previewed
and cancelled, a fix applied and re-verified, a snapshot exported and replayed, and a
hung probe that leaves the app answering keys."""

from __future__ import annotations

import asyncio
import io
import os
import tarfile
import threading

from dldoctor.fixes.gpu import NOUVEAU_CONF
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered
from dldoctor.tui.findings import EvidenceList, FindingDetail, FindingsTree
from dldoctor.tui.session import Session
from tests.support.cli import report_of, run_dldoctor, verdicts
from tests.support.commands import fake_command
from tests.support.paths import FIXTURES, HOSTS
from tests.support.trees import tree
from tests.support.tui import (
    SIZE,
    HangingHost,
    app_for,
    bundle_session,
    copy_root,
    drive,
    finished,
    on_screen,
    root_session,
    selected,
    until,
)


def _text(widget) -> str:
    """What a Static shows, as plain text."""
    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _leaves(tree: FindingsTree) -> list[str]:
    found = []

    def walk(node):
        for child in node.children:
            if isinstance(child.data, str) and not child.data.startswith("skips:"):
                found.append(child.data)
            walk(child)

    walk(tree.root)
    return found


def test_a_run_ends_with_every_finding_of_the_checklist_on_screen():
    session = bundle_session("hgx-h100x8-roce-mtu1500")
    expected = verdicts(
        report_of(
            run_dldoctor("--check", "--json", "--from", str(HOSTS / "hgx-h100x8-roce-mtu1500"))
        )
    )

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            await finished(pilot, session)
            screen = pilot.app.screen
            assert sorted(_leaves(screen.query_one(FindingsTree))) == sorted(expected)
            counts = _text(screen.query_one("#counts"))
            fails = sum(1 for s in expected.values() if s == "fail")
            assert f"✗ {fails} fail" in counts and "· done" in counts
            header = _text(screen.query_one("#host"))
            assert "hgx-h100-07" in header and "8 × NVIDIA H100 80GB HBM3" in header
            assert "(read-only)" in header

    asyncio.run(flow())


def test_the_worst_finding_opens_first_with_its_evidence_and_remediation():
    session = bundle_session("hgx-h100x8-roce-mtu1500")

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            await finished(pilot, session)
            screen = pilot.app.screen
            assert screen.selected == "network.roce"
            detail = _text(screen.query_one(FindingDetail))
            assert "ens1f0np0 MTU 1500 (needs ≥ 4200)" in detail
            evidence = screen.query_one(EvidenceList).text()
            assert "Evidence (the raw answers it was decided on)" in evidence
            assert "▸ read /sys/class/net/ens1f0np0/mtu: 1500" in evidence
            assert "What to do" in detail and "MTU of at least 4200" in detail
            await pilot.press("down")  # the next finding's detail replaces it
            await until(pilot, lambda: screen.selected != "network.roce")
            assert screen.selected in _text(screen.query_one(FindingDetail))

    asyncio.run(flow())


def test_filter_by_text_and_by_status():
    session = bundle_session("hgx-h100x8-nvlink-down")

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            await finished(pilot, session)
            screen = pilot.app.screen
            findings = screen.query_one(FindingsTree)
            everything = _leaves(findings)
            state = screen.query_one("#filter-state")
            await pilot.press("slash", *"nvlink", "enter")
            await until(pilot, lambda: "text: 'nvlink'" in _text(state))
            assert _leaves(findings) == ["gpu.nvlink"]
            await pilot.press("escape")
            await until(pilot, lambda: "text:" not in _text(state))
            assert sorted(_leaves(findings)) == sorted(everything)
            await pilot.press("s")  # problems only
            await until(pilot, lambda: "status: problems" in _text(state))
            problems = {
                f.id for f in session.findings() if f.status.value in ("fail", "warn", "error")
            }
            assert set(_leaves(findings)) == problems and "gpu.nvlink" in problems

    asyncio.run(flow())


def test_the_filter_box_opens_in_place_and_a_letter_builds_again_only_what_it_changed():
    """`/` shows the box in the row of the line that says what is shown, and Esc that line
    again: the list and the detail stay where they were. A filter that leaves a category's
    findings as they were keeps that category's nodes; Esc draws the list as before."""
    session = bundle_session("hgx-h100x8-nvlink-down")

    async def steps(pilot):
        screen = pilot.app.results
        tree = screen.query_one(FindingsTree)
        box, state = screen.query_one("#filter"), screen.query_one("#filter-state")
        regions = lambda: (tree.region, screen.query_one("#detail-scroll").region)  # noqa: E731
        before, line = regions(), state.region
        labels = [str(tree.get_node_at_line(i).label) for i in range(tree.last_line + 1)]
        everything = _leaves(tree)
        gpu = next(n for n in tree.root.children if " gpu " in f" {n.label.plain} ")
        assert all(isinstance(c.data, str) and c.data.startswith("gpu.") for c in gpu.children
                   if not c.data.startswith("skips:"))  # fmt: skip
        await pilot.press("slash")
        await until(pilot, lambda: box.has_focus)
        assert box.region == line and not state.display and regions() == before
        await pilot.press(*"gpu")
        await until(pilot, lambda: screen.text_filter == "gpu" and tree.moving_to is None)
        assert set(_leaves(tree)) < set(everything)
        assert gpu in tree.root.children  # every one of its findings matches: kept as drawn
        await pilot.press("escape")
        await until(pilot, lambda: state.display and screen.text_filter == "")
        await until(pilot, lambda: tree.moving_to is None)
        assert not box.display and state.region == line and regions() == before
        assert [str(tree.get_node_at_line(i).label) for i in range(tree.last_line + 1)] == labels
        assert _leaves(tree) == everything

    drive(session, steps)


def _nouveau_root(tmp_path, monkeypatch):
    root = copy_root(tmp_path, "workstation-rtx4090-nouveau")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "ran.log"
    fake_command(bindir, "update-initramfs", f'echo "update-initramfs $*" >> {log}')
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return root, log


async def _open_nouveau_fix(pilot, session):
    await finished(pilot, session)
    await selected(pilot, "gpu.nouveau")
    await pilot.press("f")
    fix = pilot.app.screen
    await until(pilot, lambda: fix.flow is not None)
    return fix


def test_a_fix_previewed_then_cancelled_changes_nothing(tmp_path, monkeypatch):
    root, log = _nouveau_root(tmp_path, monkeypatch)
    before = tree(root)
    session = root_session(root)

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            fix = await _open_nouveau_fix(pilot, session)
            plan = _text(fix.query_one("#plan"))
            assert "+blacklist nouveau" in plan and "run update-initramfs -u" in plan
            assert "does not disturb running GPU work" in _text(fix.query_one("#interlocks"))
            await pilot.press("a")
            await until(pilot, on_screen(pilot, "ConfirmScreen"))
            assert str(pilot.app.screen.query_one("#yes").label) == "Yes, apply (y)"
            await pilot.press("n")
            await until(pilot, lambda: pilot.app.screen is fix)
            assert not fix.applied
            await pilot.press("escape")
            await until(pilot, on_screen(pilot, "ResultsScreen"))

    asyncio.run(flow())
    assert tree(root) == before and not log.exists()


def test_a_fix_applied_after_confirmation_shows_the_re_verified_status(tmp_path, monkeypatch):
    root, log = _nouveau_root(tmp_path, monkeypatch)
    session = root_session(root)

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            fix = await _open_nouveau_fix(pilot, session)
            await pilot.press("a", "y")
            log = fix.query_one("#apply-log")
            await until(pilot, lambda: "re-running the checks" in _logged(log))
            assert fix.applied
            shown = _logged(log)
            assert "1. write /etc/modprobe.d/blacklist-nouveau.conf" in shown
            assert "2. run update-initramfs -u" in shown
            assert "pending a reboot (gpu.nouveau fail)" in shown
            await pilot.press("escape", "u")  # the history lists it, applied
            await until(pilot, on_screen(pilot, "HistoryScreen"))
            table = pilot.app.screen.query_one("#history")
            row = table.get_row_at(0)
            assert row[1:] == ["fix.gpu.blacklist_nouveau", "applied", "pending a reboot"]

    asyncio.run(flow())
    assert (root / NOUVEAU_CONF.lstrip("/")).exists()
    assert log.read_text() == "update-initramfs -u\n"


def _logged(log) -> str:
    return "\n".join(str(line.text) for line in log.lines)


def test_a_snapshot_exported_from_the_app_replays_with_the_same_verdicts(tmp_path):
    session = bundle_session("workstation-rtx4090-nouveau")
    dest = tmp_path / "exported.tar.gz"

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            await finished(pilot, session)
            header = _text(pilot.app.screen.query_one("#host"))  # Nouveau holds the GPU
            assert "1 NVIDIA GPU(s) on the PCI bus, none seen through the driver" in header
            await pilot.press("e")
            await until(pilot, on_screen(pilot, "ExportScreen"))
            form = pilot.app.screen
            form.query_one("#export-path").value = str(dest)
            await pilot.click("#export-go")
            await until(pilot, lambda: "written:" in _text(form.query_one("#export-state")))
            said = _text(form.query_one("#export-state"))
            assert str(dest) in said and "KiB" in said and "redacted" in said

    asyncio.run(flow())
    assert tarfile.is_tarfile(dest)
    replayed = report_of(run_dldoctor("--check", "--json", "--from", str(dest)))
    original = {f.id: f.status.value for f in session.run.report.findings}
    assert verdicts(replayed) == original


def test_a_hung_probe_shows_its_spinner_and_the_app_still_answers_keys():
    release = threading.Event()
    bundle = str(HOSTS / "hgx-h100x8-raid-degraded")
    session = Session(
        lambda: HangingHost(bundle, "/proc/mdstat", release),
        Policy(),
        ordered(builtin_checks()),
        read_only=True,
        bundle=bundle,
    )

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            screen = pilot.app.screen
            running = screen.query_one("#running")
            await until(pilot, lambda: "storage.raid" in _text(running), timeout=10)
            shown = _text(running)
            assert "waiting on read /proc/mdstat" in shown and " s left" in shown
            assert shown.strip()[0] in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
            assert running.auto_refresh  # the spinner turns while it is shown
            await pilot.press("s")  # answered while the probe hangs (benchmarks/tui.py times it)
            await until(
                pilot,
                lambda: "status: problems" in _text(screen.query_one("#filter-state")),
                timeout=10,
            )
            assert not session.done
            release.set()
            await finished(pilot, session)
            assert not running.display  # nothing left running: the spinner is gone
            assert running.auto_refresh is None  # and nothing on the screen ticks

    asyncio.run(flow())


def test_the_session_tells_its_subscribers_each_change_from_start_to_end():
    from dldoctor.runner import CheckFinished, CheckStarted
    from dldoctor.tui.session import RunEnded, RunStarted

    session = bundle_session("hgx-h100x8-roce-mtu1500")
    told = []
    session.subscribe(told.append)
    session.start().join(60)
    assert session.done
    assert isinstance(told[0], RunStarted) and told[0].run is session.run
    assert isinstance(told[-1], RunEnded) and told[-1].run is session.run
    finished = [e.spec.id for e in told if isinstance(e, CheckFinished)]
    assert sorted(finished) == sorted(s.id for s in session.specs)
    assert sum(isinstance(e, CheckStarted) for e in told) == len(session.specs)


def test_re_running_one_check_keeps_the_others_and_their_evidence():
    session = bundle_session("hgx-h100x8-roce-mtu1500")
    session.notices = ["fix fix.gpu.blacklist_nouveau: verified after reboot (20261201T1)"]

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            await finished(pilot, session)
            said = [n.message for n in pilot.app._notifications]
            assert said == session.notices  # the fixes judged after a boot, said at start
            before = {f.id: f for f in session.findings()}
            first_run = session.run
            await pilot.press("R")  # network.roce, the selected one
            await until(pilot, lambda: session.run is not first_run)
            await finished(pilot, session)
            after = {f.id: f for f in session.findings()}
            assert after.keys() == before.keys() and after["network.roce"].status.value == "fail"
            nvlink = session.evidence(after["gpu.nvlink"])
            assert nvlink and all(e.lines != ("(not kept by this run)",) for e in nvlink)

    asyncio.run(flow())


def test_the_command_palette_opens_a_fix_and_jumps_to_a_check():
    session = bundle_session("workstation-rtx4090-nouveau")

    async def flow():
        async with app_for(session).run_test(size=SIZE) as pilot:
            await finished(pilot, session)
            await _palette(pilot, "fix fix.gpu.blacklist", "fix fix.gpu.blacklist_nouveau")
            await pilot.press("enter")
            await until(pilot, on_screen(pilot, "FixScreen"))
            assert pilot.app.screen.fix_id == "fix.gpu.blacklist_nouveau"
            await pilot.press("escape")
            await until(pilot, on_screen(pilot, "ResultsScreen"))
            await _palette(pilot, "check system.libc", "check system.libc")
            await pilot.press("enter")
            await until(pilot, on_screen(pilot, "ResultsScreen"))
            await until(pilot, lambda: pilot.app.screen.selected == "system.libc")
            assert "system.libc" in _text(pilot.app.screen.query_one(FindingDetail))

    asyncio.run(flow())


async def _palette(pilot, typed: str, first: str) -> None:
    """The command palette opened and `typed` in it, until its first hit reads `first`
    (the palette searches in a worker: Enter before its hits are in picks nothing)."""
    from textual.command import CommandList, CommandPalette

    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(pilot.app.screen, CommandPalette))
    await pilot.press(*typed)
    hits = pilot.app.screen.query_one(CommandList)

    def first_hit() -> str:
        return str(hits.get_option_at_index(0).prompt) if hits.option_count else ""

    await until(pilot, lambda: first_hit().startswith(first) and hits.highlighted == 0)


def _applied_nouveau_fix(root) -> dict:
    """The Nouveau fix applied under `root` by `dldoctor fix`'s own calls: a journal for
    the history to list."""
    from dldoctor.fixes.command import apply_and_verify, plan_for, target_for
    from dldoctor.host.live import LiveHost

    plan = plan_for("fix.gpu.blacklist_nouveau", LiveHost(str(root)), Policy())
    record, _ = apply_and_verify(plan, target_for(str(root), None), LiveHost(str(root)), Policy())
    return record


def test_undo_asks_yes_undo_and_the_history_drops_the_verdict_it_undid(tmp_path, monkeypatch):
    root, log = _nouveau_root(tmp_path, monkeypatch)
    assert _applied_nouveau_fix(root)["verdict"] == "pending a reboot"
    session = root_session(root)

    async def steps(pilot):
        await pilot.press("u")
        await until(pilot, on_screen(pilot, "HistoryScreen"))
        history = pilot.app.screen
        table = history.query_one("#history")
        assert table.get_row_at(0)[2:] == ["applied", "pending a reboot"]
        await pilot.press("u")
        await until(pilot, on_screen(pilot, "ConfirmScreen"))
        label = str(pilot.app.screen.query_one("#yes").label)
        assert label == "Yes, undo (y)"
        await pilot.press("y")
        await until(pilot, lambda: "undone" in _text(history.query_one("#history-state")))
        assert table.get_row_at(0)[2:] == ["undone", ""]

    drive(session, steps)
    assert not (root / NOUVEAU_CONF.lstrip("/")).exists()


def test_the_history_says_an_interrupted_apply_and_undo_rolls_it_back(tmp_path, monkeypatch):
    import json

    root, log = _nouveau_root(tmp_path, monkeypatch)
    record = _applied_nouveau_fix(root)
    # As an apply killed after its last step, before it could say "applied": the journal
    # the kill leaves (docs/fixes: the next apply or undo rolls it back).
    path = root / "var/lib/dldoctor/journal" / record["id"] / "journal.json"
    saved = json.loads(path.read_text())
    for key in ("ended", "boot_id", "verdict"):
        saved.pop(key, None)
    path.write_text(json.dumps({**saved, "state": "applying"}))
    session = root_session(root)

    async def steps(pilot):
        await pilot.press("u")
        await until(pilot, on_screen(pilot, "HistoryScreen"))
        history = pilot.app.screen
        table = history.query_one("#history")
        state, said = table.get_row_at(0)[2:]
        assert state == "applying" and said.startswith("interrupted")
        await pilot.press("u")
        await until(pilot, on_screen(pilot, "ConfirmScreen"))
        await pilot.press("y")
        await until(pilot, lambda: "rolled back" in _text(history.query_one("#history-state")))
        assert table.get_row_at(0)[2].startswith("rolled back: interrupted after step")

    drive(session, steps)
    assert not (root / NOUVEAU_CONF.lstrip("/")).exists()


def test_the_fix_preview_marks_an_old_file_without_a_final_newline(tmp_path, monkeypatch):
    root, log = _nouveau_root(tmp_path, monkeypatch)
    old = root / NOUVEAU_CONF.lstrip("/")
    old.parent.mkdir(parents=True)
    old.write_text("# by hand\nblacklist nvidiafb")  # no newline at its end
    session = root_session(root)

    async def steps(pilot):
        fix = await _open_nouveau_fix(pilot, session)
        lines = _text(fix.query_one("#plan")).splitlines()
        at = lines.index("-blacklist nvidiafb")  # a line of its own, as diff prints it
        assert lines[at + 1] == "\\ No newline at end of file"
        assert "+blacklist nouveau" in lines

    drive(session, steps)
    assert old.read_text() == "# by hand\nblacklist nvidiafb" and not log.exists()


def test_the_nouveau_fix_on_a_host_without_an_nvidia_gpu_says_it_is_not_needed(
    tmp_path, monkeypatch
):
    root, log = _nouveau_root(tmp_path, monkeypatch)
    devices = root / "sys/bus/pci/devices"
    for address in os.listdir(devices):  # the GPU and its audio function gone: no NVIDIA
        if (devices / address / "vendor").read_text().strip() == "0x10de":
            (devices / address).unlink()
    before = tree(root)
    session = root_session(root)

    async def steps(pilot):
        await finished(pilot, session)
        found = {f.id: f for f in session.findings()}["gpu.nouveau"]
        # loaded, but driving nothing: no failure, and so no fix offered
        assert found.status.value == "skip" and "no NVIDIA device" in found.summary
        screen = pilot.app.screen
        await selected(pilot, "gpu.nouveau")
        await pilot.press("f")
        said = "this finding has no guided fix"
        await until(pilot, lambda: said in [n.message for n in pilot.app._notifications])
        assert pilot.app.screen is screen

    drive(session, steps)
    # asked for by name, the fix says why it has nothing to do
    proc = run_dldoctor("fix", "fix.gpu.blacklist_nouveau", "--root", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "not needed" in proc.stdout and "no NVIDIA device on the PCI bus" in proc.stdout
    assert "+blacklist nouveau" not in proc.stdout
    assert tree(root) == before and not log.exists()


def test_the_detail_never_shows_a_finding_the_filter_hid():
    session = bundle_session("hgx-h100x8-nvlink-down")

    async def steps(pilot):
        screen = pilot.app.screen
        tree = screen.query_one(FindingsTree)
        state = screen.query_one("#filter-state")
        worst = screen.selected
        await pilot.press("down")  # chosen by the user: no longer the worst one
        await until(pilot, lambda: screen.selected != worst)
        chosen = screen.selected
        assert chosen not in (None, "system.libc")
        assert chosen in _text(screen.query_one(FindingDetail))
        await pilot.press("slash", *"no such words", "enter")
        await until(pilot, lambda: "text: 'no such words'" in _text(state))
        assert _leaves(tree) == []
        detail = _text(screen.query_one(FindingDetail))
        assert chosen not in detail and "No finding matches the filter" in detail
        await pilot.press("slash", *["backspace"] * 13, *"system.libc", "enter")
        await until(pilot, lambda: "text: 'system.libc'" in _text(state))
        assert _leaves(tree) == ["system.libc"] and screen.selected == "system.libc"
        assert "system.libc" in _text(screen.query_one(FindingDetail))

    drive(session, steps)


def _rows(widget) -> list[str]:
    """The rows of a widget its container leaves on screen, as plain text."""
    shown = widget.region.intersection(widget.parent.region).height
    rows = widget.render_lines(widget.outer_size.region)[:shown]
    return [strip.text.rstrip() for strip in rows]


def test_at_40_columns_the_counts_and_the_header_still_say_what_they_mean():
    session = bundle_session("hgx-h100x8-gpu3-x8")

    async def steps(pilot):
        screen = pilot.app.screen
        counts = " ".join(_rows(screen.query_one("#counts")))
        assert "✗ 1 fail" in counts and "! 1 warn" in counts and "· done" in counts
        header = _rows(screen.query_one("#host"))
        assert len(header) == 3 and header[2].endswith("gpu3-x8 (read-only)")
        assert header[0].startswith(" hgx-h100-02") and "…" in header[0]

    drive(session, steps, size=(40, 30))


def test_a_terminal_narrowed_after_the_run_redraws_the_header_to_fit():
    session = bundle_session("hgx-h100x8-gpu3-x8")

    async def steps(pilot):
        header = pilot.app.screen.query_one("#host")
        assert "…" not in _rows(header)[0]  # 120 columns: the whole first line
        await pilot.resize_terminal(40, 30)  # no run event comes: the resize redraws
        await until(pilot, lambda: "…" in _rows(header)[0])
        assert _rows(header)[2].endswith("gpu3-x8 (read-only)")

    drive(session, steps)


def test_at_40_columns_the_export_form_fits_on_the_screen():
    session = bundle_session("hgx-h100x8-gpu3-x8")

    async def steps(pilot):
        await pilot.press("e")
        shown = on_screen(pilot, "ExportScreen")
        await until(pilot, lambda: shown() and pilot.app.screen.query_one("#export").region)
        form = pilot.app.screen.query_one("#export")
        assert form.region.x >= 0 and form.region.right <= 40
        assert pilot.app.screen.query_one("#export-go").region.right <= 40

    drive(session, steps, size=(40, 30))


def test_at_120_columns_the_footer_shows_help_and_quit():
    from textual.widgets._footer import FooterKey

    session = bundle_session("hgx-h100x8-gpu3-x8")

    async def steps(pilot):
        keys = {}

        def laid_out() -> bool:  # the footer lays its keys out after the screen's bindings
            keys.update({k.key: k for k in pilot.app.screen.query(FooterKey)})
            return {"question_mark", "q"} <= keys.keys() and all(k.region for k in keys.values())

        await until(pilot, laid_out)
        for key in ("question_mark", "q"):
            assert 0 < keys[key].region.right <= SIZE[0], key

    drive(session, steps)


def test_a_sos_report_without_the_drivers_answers_says_gpu_facts_not_captured():
    import contextlib

    from dldoctor.host.foreign import open_foreign

    sos = FIXTURES / "foreign" / "sos" / "sosreport-host0-2026-12-01-hsxafrq.tar.xz"
    with contextlib.ExitStack() as cleanup:
        host, folder = open_foreign(str(sos), cleanup)
        session = Session(lambda: host, Policy(), ordered(builtin_checks()),
                          read_only=True, bundle=folder, label=str(sos))  # fmt: skip

        async def steps(pilot):
            header = _text(pilot.app.screen.query_one("#host"))
            assert "GPU facts not captured" in header
            assert "no NVIDIA GPU seen" not in header

        drive(session, steps)


def test_the_export_suggests_a_name_without_the_host_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the suggestion lies in the working folder
    session = bundle_session("hgx-h100x8-roce-mtu1500")
    hostname = "hgx-h100-07"

    async def steps(pilot):
        assert session.run.report.host["hostname"] == hostname
        await pilot.press("e")
        await until(pilot, on_screen(pilot, "ExportScreen"))
        form = pilot.app.screen
        suggested = form.query_one("#export-path").value
        assert suggested.startswith(str(tmp_path)) and suggested.endswith(".tar.gz")
        assert hostname not in suggested
        await pilot.click("#export-go")
        await until(pilot, lambda: "written:" in _text(form.query_one("#export-state")))

    drive(session, steps)
    (archive,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert names and not [n for n in names if hostname in n]


def test_a_fix_previewed_from_a_bundle_judges_no_gpu_process_of_this_machine():
    session = bundle_session("hgx-h100x8-roce-mtu1500")

    async def steps(pilot):
        assert pilot.app.screen.selected == "network.roce"
        await pilot.press("f")
        fix = pilot.app.screen
        await until(pilot, lambda: fix.flow is not None)
        assert fix.flow.plan.disturbs_gpus
        said = _text(fix.query_one("#interlocks"))
        assert "no process holds a GPU now" not in said
        assert "judged on the live host, never from a bundle" in said

    drive(session, steps)


def test_the_history_of_a_bundle_lists_nothing_of_this_machine_and_undoes_nothing():
    session = bundle_session("workstation-rtx4090-nouveau")

    async def steps(pilot):
        await pilot.press("u")
        await until(pilot, on_screen(pilot, "HistoryScreen"))
        history = pilot.app.screen
        assert "a replayed bundle holds no fix history" in _text(
            history.query_one("#history-state")
        )
        assert history.query_one("#history").row_count == 0
        await pilot.press("u")  # answered once the press returns: Pilot waits for the screen
        await pilot.pause()
        assert pilot.app.screen is history  # nothing to confirm

    drive(session, steps)


def test_m_measures_after_a_confirmation_that_says_what_and_how_long(tmp_path):
    from dldoctor.host.live import LiveHost
    from dldoctor.registry import checks_in
    from tests.support import standin_perf

    bindir, log = tmp_path / "bin", tmp_path / "measured.log"
    bindir.mkdir()
    fake_command(bindir, "standin-measure", 'echo "$2" >> "$STANDIN_LOG"; echo 1.9')
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "STANDIN_LOG": str(log)}
    measuring = [s for s in checks_in(standin_perf) if s.id == "perf.standin.first"]
    passive = [s for s in ordered(builtin_checks()) if s.id == "system.kernel.version"]
    assert passive
    session = Session(lambda: LiveHost(env=env), Policy(), passive, read_only=False,
                      measuring=measuring)  # fmt: skip

    async def steps(pilot):
        await pilot.press("m")
        await until(pilot, on_screen(pilot, "ConfirmScreen"))
        asked = _text(pilot.app.screen.query_one("#confirm-detail"))
        assert "for at most 120 s in all" in asked and "No clock, power or GPU setting" in asked
        assert str(pilot.app.screen.query_one("#yes").label) == "Yes, measure (y)"
        await pilot.press("n")  # nothing is measured
        await until(pilot, on_screen(pilot, "ResultsScreen"))
        assert not log.exists()
        await pilot.press("m")
        await until(pilot, on_screen(pilot, "ConfirmScreen"))
        await pilot.press("y")
        await until(pilot, lambda: "perf.standin.first" in {f.id for f in session.findings()})
        await finished(pilot, session)
        found = {f.id: f for f in session.findings()}
        assert found["perf.standin.first"].status.value == "pass"
        assert "system.kernel.version" in found  # the other findings stay
        assert log.read_text().count("\n") == 1
        await pilot.press("question_mark")
        await until(pilot, on_screen(pilot, "HelpScreen"))
        helped = _text(pilot.app.screen.query_one("Static"))
        assert "Measure (--active)" in helped

    drive(session, steps)


def test_the_footer_is_built_again_only_when_the_keys_it_shows_change():
    """Work, not time: the help and back leave the results screen's footer keys as they
    were (the same widgets); the filter box, which takes the letters, shows fewer, and
    Esc out of it all of them again."""
    from textual.widgets._footer import FooterKey

    session = bundle_session("hgx-h100x8-roce-mtu1500")

    async def steps(pilot):
        screen = pilot.app.results

        def keys(on) -> list:
            return list(on.query(FooterKey))

        def said() -> list[str]:
            return [k.description for k in keys(screen)]

        before = keys(screen)
        everything = said()
        assert {"Fix", "Status filter", "Help", "Quit"} <= set(everything)
        await pilot.press("question_mark")
        await until(pilot, on_screen(pilot, "HelpScreen"))
        await until(pilot, lambda: keys(pilot.app.screen))
        assert "Back" in {k.description for k in keys(pilot.app.screen)}
        await pilot.press("escape")
        await until(pilot, lambda: pilot.app.screen is screen)
        assert keys(screen) == before and all(k.is_attached for k in before)
        await pilot.press("slash")
        await until(pilot, lambda: "Fix" not in said())  # typed into the box, not keys
        await pilot.press("escape")
        await until(pilot, lambda: said() == everything)

    drive(session, steps)
