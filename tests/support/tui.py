"""What the app's tests share: sessions on fixture bundles or a temporary root, and
waiting on what the app shows, never on the clock."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time

from dldoctor.host.live import LiveHost
from dldoctor.host.replay import ReplayHost
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered
from dldoctor.tui.app import DoctorApp
from dldoctor.tui.session import Session
from tests.support.paths import HOSTS

SIZE = (120, 40)


def bundle_session(name: str) -> Session:
    path = str(HOSTS / name)
    return Session(lambda: ReplayHost(path), Policy(), ordered(builtin_checks()),
                   read_only=True, bundle=path, label=f"tests/fixtures/hosts/{name}")  # fmt: skip


def root_session(root) -> Session:
    """A live session reading a temporary root (commands still run here)."""
    return Session(lambda: LiveHost(str(root)), Policy(), ordered(builtin_checks()),
                   read_only=False, root=str(root))  # fmt: skip


def copy_root(tmp_path, name: str):
    root = tmp_path / "root"
    shutil.copytree(HOSTS / name / "files", root, symlinks=True)
    return root


async def until(pilot, condition, timeout: float = 30.0) -> None:
    """Let the app run until `condition()` holds, then until it has handled what was
    queued by then; AssertionError past `timeout` (a bound on a failure, not a wait)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"still waiting after {timeout} s"
        await pilot.pause(0.02)
    await pilot.pause()


async def finished(pilot, session: Session) -> None:
    """Until the run has ended, the results screen shows its end and the list's cursor has
    reached the selection (a redraw moves the cursor once the rebuilt tree is laid out)."""
    from dldoctor.tui.findings import FindingsTree

    screen = pilot.app.results

    def settled() -> bool:  # the redraw's cursor has reached its line
        return screen.query_one(FindingsTree).moving_to is None

    await until(pilot, lambda: session.done and screen.ended is session.run and settled())


async def selected(pilot, check_id: str) -> None:
    """Select `check_id` (as the command palette does), until the list's cursor is on it;
    a skip in a folded line has no row to be on: until the screen has it selected."""
    from dldoctor.tui.findings import FindingsTree

    screen = pilot.app.results
    screen.select(check_id)
    tree = screen.query_one(FindingsTree)

    def on_it() -> bool:
        node = _node(tree.root, check_id)
        folded = node is None or not all(a.is_expanded for a in _above(node))
        return screen.selected == check_id and (
            folded or getattr(tree.cursor_node, "data", None) == check_id
        )

    await until(pilot, on_it)


def _node(node, data):
    if node.data == data:
        return node
    return next((n for n in map(lambda c: _node(c, data), node.children) if n), None)


def _above(node):
    while node.parent is not None and node.parent.parent is not None:  # below the root
        node = node.parent
        yield node


def on_screen(pilot, name: str):
    """A condition: the app shows the screen named `name` ("FixScreen", ...)."""
    return lambda: type(pilot.app.screen).__name__ == name


class HangingHost(ReplayHost):
    """A replayed bundle whose read of `path` hangs until `release` is set: a probe
    stuck the way a dead NFS mount or a wedged driver leaves it."""

    def __init__(self, bundle: str, path: str, release: threading.Event):
        super().__init__(bundle)
        self.hang_path = path
        self.release = release

    def read(self, path, **kwargs):
        if path == self.hang_path:
            self.release.wait(60)
        return super().read(path, **kwargs)


def app_for(session: Session) -> DoctorApp:
    return DoctorApp(session)


def drive(session: Session, steps, size=SIZE) -> None:
    """The app on `session`, headless: `await steps(pilot)` once the run has ended."""

    async def flow():
        async with app_for(session).run_test(size=size) as pilot:
            await finished(pilot, session)
            await steps(pilot)

    asyncio.run(flow())
