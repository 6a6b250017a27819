"""What the app's tests share: sessions on fixture bundles or a temporary root, and
waiting for a run to end without sleeping blindly."""

from __future__ import annotations

import asyncio
import shutil
import threading

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
    """Pause the app until `condition()` holds; AssertionError past `timeout`."""
    waited = 0.0
    while not condition():
        assert waited < timeout, f"still waiting after {timeout} s"
        await pilot.pause(0.05)
        waited += 0.05
    await pilot.pause()


async def finished(pilot, session: Session) -> None:
    await until(pilot, lambda: session.done)
    await pilot.pause(0.2)  # the screen's next refresh draws the end


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
