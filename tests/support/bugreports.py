"""The nvidia-bug-report fixture logs (tests/fixtures/SOURCES.md, "bugreports/").

`REAL` is a real log, copied unchanged (gzipped). The constructed one is assembled here, at
test time, in the layout of the current nvidia-bug-report.sh (change 37062940), from real
captures in tests/fixtures/corpus: an H100's `nvidia-smi -q` and `nvidia-smi nvlink -s`
(one machine), and a dmesg excerpt with Xid 94 and Xid 64 (another machine). Only the
prologue and the framing lines the script prints are written here; no capture is edited.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "corpus"
REAL = FIXTURES / "bugreports" / "maz906-caffe-gtx-titan-x-352.63.log.gz"
H100 = "utkuozdemir-linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
SEPARATOR = "_" * 44

# The script's prologue (its text as of change 37062940). Date and uname are the capture's
# own collection time and kernel (the capture's header); the host name is made up.
PROLOGUE = f"""{SEPARATOR}

Start of NVIDIA bug report log file.  Please include this file, along
with a detailed description of your problem, when reporting a graphics
driver bug via the NVIDIA Linux forum (see forums.developer.nvidia.com)
or by sending email to 'linux-bugs@nvidia.com'.

nvidia-bug-report.sh Version: 37062940

Date: Tue Jul 14 08:12:38 UTC 2026
uname: Linux h100-vm 5.15.0-185-generic #constructed SMP x86_64 x86_64 x86_64 GNU/Linux
command line flags: 

"""  # noqa: W291 - the script prints "command line flags: $SAVED_FLAGS"


def _block(text: str) -> str:
    return f"{SEPARATOR}\n\n{text}"


def constructed_sections() -> list[str]:
    """The log as the script writes it: one string per gzip member it appends."""
    smi = (CORPUS / "nvidia-smi-q" / f"{H100}-q-idle.txt").read_text()
    nvlink = (CORPUS / "nvidia-smi-nvlink-s" / f"{H100}-nvlink-s.txt").read_text()
    dmesg = (CORPUS / "dmesg-xid" / "imbue-dmesg-xid94-xid64-row-remapper.txt").read_text()
    return [
        PROLOGUE,
        _block("Skipping: lspci output\nlspci or hexdump not found\n\n"),
        _block(f"dmesg:\n\n{dmesg}"),
        # report_command(): the command line, a blank line, its output, a blank line.
        _block(
            f"/usr/bin/nvidia-smi --query\n\n{smi}\n"
            f"/usr/bin/nvidia-smi nvlink --status\n\n{nvlink}\n"
        ),
        f"{SEPARATOR}\n\nEnd of NVIDIA bug report log file.\n",
    ]


def write_constructed(folder: Path, *, compressed: bool = True) -> Path:
    """The constructed log in `folder`: gzipped member by member as the script does (one
    `gzip -c >>` per section), or plain."""
    sections = constructed_sections()
    if not compressed:
        path = folder / "nvidia-bug-report.log"
        path.write_text("".join(sections))
        return path
    path = folder / "nvidia-bug-report.log.gz"
    path.write_bytes(b"".join(gzip.compress(s.encode(), mtime=0) for s in sections))
    return path


def write_real(folder: Path, *, compressed: bool = True) -> Path:
    if compressed:
        return REAL
    path = folder / "nvidia-bug-report.log"
    path.write_bytes(gzip.decompress(REAL.read_bytes()))
    return path
