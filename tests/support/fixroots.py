"""Temporary roots copied from fixture hosts, for the fixes to change: nouveau loaded (the
blacklist fix, its initramfs tool faked), and the IOMMU in translated mode (the boot fix)."""

from __future__ import annotations

import os
import shutil

from dldoctor.fixes.verify import BOOT_ID
from tests.support.commands import fake_command
from tests.support.paths import HOSTS

NOUVEAU_HOST = HOSTS / "workstation-rtx4090-nouveau"
BLACKLIST_NOUVEAU = "fix.gpu.blacklist_nouveau"
IOMMU_HOST = HOSTS / "hgx-h100x8-iommu-translated"
IOMMU_PASSTHROUGH = "fix.pci.iommu_passthrough"


def nouveau_root(tmp_path):
    """(root, the log of the initramfs tool's runs, the env that puts it first on PATH)."""
    root = tmp_path / "root"
    shutil.copytree(NOUVEAU_HOST / "files", root, symlinks=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "ran.log"
    fake_command(bindir, "update-initramfs", f'echo "update-initramfs $*" >> {log}')
    env = {"PATH": f"{bindir}:{os.environ['PATH']}"}
    return root, log, env


def iommu_root(tmp_path):
    """The IOMMU host's files, on its first boot."""
    root = tmp_path / "root"
    shutil.copytree(IOMMU_HOST / "files", root, symlinks=True)
    (root / BOOT_ID.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    (root / BOOT_ID.lstrip("/")).write_text("11111111-boot-one\n")
    return root


def boot_without_nouveau(root) -> None:
    """The boot after the fix: a new boot id, nouveau no longer in /proc/modules, and no
    device bound to it."""
    (root / BOOT_ID.lstrip("/")).write_text("22222222-boot-two\n")
    modules = root / "proc/modules"
    modules.write_text("".join(ln for ln in modules.read_text().splitlines(True)
                               if not ln.startswith("nouveau ")))  # fmt: skip
    for folder, _, files in os.walk(root / "sys"):
        for name in files:
            link = os.path.join(folder, name)
            if name == "driver" and os.readlink(link).endswith("/nouveau"):
                os.unlink(link)
