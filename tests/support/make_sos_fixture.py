"""Make the committed sos report fixture (tests/fixtures/foreign/sos/): a real `sos report`
of this machine, cleaned by `sos clean`, trimmed of what no dldoctor fact reads.

    sudo .venv/bin/python -m tests.support.make_sos_fixture [DEST_FOLDER]

Needs root and sos (`apt-get install sosreport`). The tests never run it: they replay
what it wrote. Read the result before committing it (tests/fixtures/foreign/SOURCES.md).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

from dldoctor.snapshots.archive import MAX_FOREIGN_MEMBERS, XZ, open_archive

PLUGINS = "kernel,memory,processor,md,filesys,pci,release,numa,host"
# Large and never read by dldoctor (kallsyms alone is 5 MB); sos's own logs and renderings
# of the manifest. The manifest still names them: it is kept as sos wrote it.
TRIM = (
    "proc/kallsyms",
    "proc/slabinfo",
    "proc/zoneinfo",
    "proc/pagetypeinfo",
    "proc/buddyinfo",
    "proc/*allocinfo",  # vmallocinfo (sos clean renames it after the host "vm")
    "proc/fs",
    "proc/locks",
    "sys/module/*/parameters",
    "sys/kernel/mm/ksm",
    "sys/firmware/acpi/tables",
    "sys/devices/system/cpu/cpu*/cpuidle",
    "sos_commands/kernel/modinfo_ALL_MODULES",
    "sos_commands/kernel/ls_-lt_.sys.kernel.slab",
    "sos_commands/filesys/lslocks",  # paths other programs hold locks on
    "sos_logs",
    "sos_reports/sos.html",
    "sos_reports/sos.json",
    "sos_reports/sos.txt",
)


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def trim(tree: str) -> None:
    for pattern in TRIM:
        for path in glob.glob(os.path.join(tree, pattern)):
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    # /proc/<pid>/mountinfo of every process: only sos's own (/proc/self) is read.
    own = os.readlink(os.path.join(tree, "proc/self"))
    for path in glob.glob(os.path.join(tree, "proc/[0-9]*")):
        if os.path.basename(path) != own:
            shutil.rmtree(path)


def pack(tree: str, dest: str) -> None:
    """`tree` as a .tar.xz under its own name, sorted, owned by 0:0, one mtime."""
    top = os.path.basename(tree)
    mtime = int(os.stat(os.path.join(tree, "version.txt")).st_mtime)

    def normal(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = mtime
        return info

    with tarfile.open(dest, "w:xz", format=tarfile.PAX_FORMAT) as tar:
        for folder, dirs, files in os.walk(tree):
            dirs.sort()
            rel = os.path.relpath(folder, tree)
            base = top if rel == "." else f"{top}/{rel}"
            tar.add(folder, base, recursive=False, filter=normal)
            for name in sorted(
                files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]
            ):
                tar.add(os.path.join(folder, name), f"{base}/{name}", filter=normal)
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]


def main() -> int:
    dest = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/foreign/sos"
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        _run(["sos", "report", "--batch", "--only-plugins", PLUGINS, "--tmp-dir", tmp])
        (raw,) = glob.glob(f"{tmp}/sosreport-*.tar.xz")
        _run(["sos", "clean", "--batch", "--no-update", "--tmp-dir", tmp, raw])
        (clean,) = glob.glob(f"{tmp}/sosreport-*-obfuscated.tar.xz")
        tree = stack.enter_context(
            open_archive(clean, XZ, host_root="", max_members=MAX_FOREIGN_MEMBERS)
        )
        trim(tree)
        os.makedirs(dest, exist_ok=True)
        out = os.path.join(dest, os.path.basename(tree) + ".tar.xz")
        pack(tree, out)
    print(out, os.path.getsize(out), "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
