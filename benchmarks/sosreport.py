#!/usr/bin/env python3
"""How long `dldoctor --check --json --from` takes on a sos report of about 20 MB:

    sudo .venv/bin/python benchmarks/sosreport.py [--runs 5] [--report sosreport-....tar.xz]

Without --report it makes one of this machine (root and sos needed: `apt-get install
sosreport`) with the plugins named below (about 18 MB unpacked here). Three figures, each the
median of fresh processes: extracting the archive alone (xz decoding and the two checked
passes of snapshots/archive.py), `--from` the unpacked folder (the reading: the target is
2 s), and `--from` the archive (both). Figures only: nothing passes or fails.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from dldoctor.snapshots.archive import MAX_FOREIGN_MEMBERS, compression, open_archive

# The live test's plugins, and those that add logs, units and packages: about 18 MB on disk
# (11 MB of contents) on the project's small build VM; a GPU server's report is larger.
PLUGINS = (
    "kernel,pci,hardware,processor,memory,block,md,filesys,networking,process,logs,systemd,"
    "boot,devices,apt,python,host,release,numa,date,services,scsi,usb"
)


def wall(cmd: list[str]) -> float:
    began = time.monotonic()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.monotonic() - began


def size_of(folder: str) -> tuple[int, int, int]:
    """(bytes of contents, bytes on disk, files)."""
    total = disk = files = 0
    for path, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(path, name))
                total, disk, files = total + st.st_size, disk + st.st_blocks * 512, files + 1
    return total, disk, files


def extract_time(report: str) -> float:
    began = time.monotonic()
    with open_archive(report, compression(report), host_root="", max_members=MAX_FOREIGN_MEMBERS):
        return time.monotonic() - began


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--report", help="a sos report archive (default: make one here)")
    ns = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = ns.report
        if report is None:
            if os.geteuid() != 0 or not shutil.which("sos"):
                print("no --report, and sos report cannot run here (needs root and sos)")
                return 0
            subprocess.run(["sos", "report", "--batch", "--only-plugins", PLUGINS,
                            "--tmp-dir", tmp], check=True, capture_output=True)  # fmt: skip
            (report,) = glob.glob(f"{tmp}/sosreport-*.tar.xz")
        with open_archive(report, compression(report), host_root="",
                          max_members=MAX_FOREIGN_MEMBERS) as root:  # fmt: skip
            folder = shutil.copytree(root, f"{tmp}/unpacked", symlinks=True)
        size, disk, files = size_of(folder)
        print(f"sos report: {os.path.getsize(report) / 2**20:.1f} MiB compressed; unpacked "
              f"{files} files, {size / 2**20:.1f} MiB of contents, {disk / 2**20:.1f} MiB "
              "on disk")  # fmt: skip
        cli = [sys.executable, "-m", "dldoctor", "--check", "--json", "--no-plugins", "--from"]
        extract = [extract_time(report) for _ in range(ns.runs)]
        folder_t = [wall([*cli, folder]) for _ in range(ns.runs)]
        archive_t = [wall([*cli, report]) for _ in range(ns.runs)]
    for what, times in (
        ("extracting the archive (xz, two checked passes)", extract),
        ("--from the unpacked folder (reading; target 2 s)", folder_t),
        ("--from the archive (both, one process)", archive_t),
    ):
        print(f"{what}: median {statistics.median(times):.2f} s over {ns.runs} "
              f"(min {min(times):.2f}, max {max(times):.2f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
