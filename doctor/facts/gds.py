"""GPUDirect Storage: the nvidia-fs module (/proc/modules, /sys/module/nvidia_fs/version,
/proc/driver/nvidia-fs/stats), cuFile's configuration (/etc/cufile.json) and, where the tool
is installed, what `gdscheck -p` says of the platform.

/etc/cufile.json is JSON with `//` comments (NVIDIA's default is mostly comments), and
hand-edited ones gather trailing commas: both are stripped before it is parsed. The stats
file starts with the module's versions, as nvfs-stat.c prints them:

    GDS Version: 1.14.0.31
    NVFS statistics(ver: 4.0)
    NVFS Driver(version: 2.25.7)

`gdscheck -p` prints the release, the module's version and the oldest one its library
takes (`nvidia_fs version:  2.27 nvidia_fs minimum version: 2.12`; GDS 1.7 wrote
`libcufile version:` there), one `NAME : Supported|Unsupported` line per storage driver, the
cuFile settings it read, and the platform's verdict.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from dldoctor.facts import FactContext, fact
from dldoctor.facts.kmod import modules
from dldoctor.facts.reading import read_text
from dldoctor.host.base import AnswerStatus

CUFILE_JSON = "/etc/cufile.json"
NVFS_VERSION = "/sys/module/nvidia_fs/version"
NVFS_STATS = "/proc/driver/nvidia-fs/stats"
GDSCHECK = "/usr/local/cuda/gds/tools/gdscheck"
GDSCHECK_ARGV = (GDSCHECK, "-p")
CUFILE_MAX_BYTES = 1 << 20  # NVIDIA's default is 11 KiB
STATS_MAX_BYTES = 64 << 10  # the header is what is read; per-GPU lines follow it


# --- cufile.json ------------------------------------------------------------------------


def strip_comments(text: str) -> str:
    """`text` without `//` and `/* */` comments outside strings, and without a comma
    before a closing bracket: what cuFile's reader accepts, for json.loads."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(c)
        i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


@dataclass(frozen=True)
class CufileConfig:
    settings: dict[str, Any] | None  # None: not valid JSON (error says why)
    error: str = ""

    def get(self, section: str, key: str, default: Any = None) -> Any:
        """settings[section][key] (`fs.nfs` style sections by dots), or `default`."""
        node: Any = self.settings or {}
        for part in (*section.split("."), key):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


def parse_cufile(text: str) -> CufileConfig:
    try:
        settings = json.loads(strip_comments(text))
    except (ValueError, RecursionError) as exc:
        return CufileConfig(None, str(exc)[:200])
    if not isinstance(settings, dict):
        return CufileConfig(None, f"the top level is a {type(settings).__name__}, not an object")
    return CufileConfig(settings)


# --- gdscheck -p and the stats file -----------------------------------------------------

_RELEASE = re.compile(r"GDS release version:\s*(\S+)")
_NVFS = re.compile(r"nvidia_fs version:\s*(\S+)")
_MINIMUM = re.compile(r"nvidia_fs minimum version:\s*(\S+)")
_DRIVER_LINE = re.compile(r"^\s*([A-Za-z][\w ./-]{0,40}?)\s*:\s*(Supported|Unsupported)\s*$")
_PLATFORM = re.compile(r"Platform verification (succeeded|error|failed)", re.IGNORECASE)
_STATS_GDS = re.compile(r"^GDS Version:\s*(\S+)", re.MULTILINE)
_STATS_NVFS = re.compile(r"NVFS Driver\(version:\s*([\d.:]+)\)")


@dataclass(frozen=True)
class Gdscheck:
    release: str = ""  # "1.7.1.12"
    nvidia_fs: str = ""  # the module's version as gdscheck read it: "2.17"
    nvidia_fs_minimum: str = ""  # the oldest the library takes (GDS 1.16: printed)
    drivers: dict[str, bool] = field(default_factory=dict)  # "NVMe" -> supported
    platform: str = ""  # "succeeded", "error"; "" when not printed


def parse_gdscheck(text: str) -> Gdscheck:
    def first(pattern: re.Pattern) -> str:
        m = pattern.search(text)
        return m.group(1) if m else ""

    drivers: dict[str, bool] = {}
    for line in text.splitlines()[:400]:
        m = _DRIVER_LINE.match(line)
        if m:
            drivers.setdefault(m.group(1).strip(), m.group(2) == "Supported")
    platform = first(_PLATFORM).lower()
    return Gdscheck(
        first(_RELEASE),
        first(_NVFS),
        first(_MINIMUM),
        drivers,
        "error" if platform == "failed" else platform,
    )


def parse_stats(text: str) -> tuple[str, str]:
    """(GDS version, nvidia-fs version) of the stats file's header; "" for what is not
    there. Old modules print the driver's version with colons (`2:3:1`)."""
    gds = _STATS_GDS.search(text)
    nvfs = _STATS_NVFS.search(text)
    return (gds.group(1) if gds else "", nvfs.group(1).replace(":", ".") if nvfs else "")


# --- the fact ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Gds:
    nvidia_fs: bool = False  # the module is loaded
    modules_readable: bool = True
    nvidia_fs_version: str = ""  # /sys/module/nvidia_fs/version, else the stats header
    stats: bool = False  # /proc/driver/nvidia-fs/stats answered
    stats_gds_version: str = ""
    cufile: CufileConfig | None = None  # None: no /etc/cufile.json
    gdscheck: Gdscheck | None = None  # None: not run (not in use, or not installed)
    gdscheck_said: str = ""  # why gdscheck has no answer, when it was asked
    notes: tuple[str, ...] = ()

    @property
    def in_use(self) -> bool:
        return self.nvidia_fs or self.cufile is not None


def _text(ctx: FactContext, path: str, limit: int, notes: list[str]) -> str | None:
    """The text of `path`; None when it is missing, or unreadable (noted)."""
    return read_text(ctx.host, path, notes, max_bytes=limit)


@fact("gds")
def gds(ctx: FactContext) -> Gds:
    """Whether GPUDirect Storage is set up here, and how; `gdscheck -p` is run only on a
    host that uses GDS (the module loaded or a cufile.json present)."""
    notes: list[str] = []
    mods = ctx.get(modules)
    loaded = "nvidia_fs" in mods.loaded
    version = (_text(ctx, NVFS_VERSION, 256, notes) or "").strip() if loaded else ""
    stats_text = _text(ctx, NVFS_STATS, STATS_MAX_BYTES, notes)
    stats_gds, stats_nvfs = parse_stats(stats_text or "")
    raw = _text(ctx, CUFILE_JSON, CUFILE_MAX_BYTES, notes)
    cufile = parse_cufile(raw) if raw is not None else None
    checked, said = None, ""
    if loaded or cufile is not None:
        answer = ctx.host.run(list(GDSCHECK_ARGV))
        if answer.ok:
            checked = parse_gdscheck(answer.text)
            if not (checked.release or checked.drivers):
                checked, said = None, f"{GDSCHECK} -p printed nothing understood"
        elif answer.status != AnswerStatus.NOT_INSTALLED:
            said = answer.describe()
    return Gds(
        nvidia_fs=loaded,
        modules_readable=mods.readable,
        nvidia_fs_version=version or stats_nvfs,
        stats=stats_text is not None,
        stats_gds_version=stats_gds,
        cufile=cufile,
        gdscheck=checked,
        gdscheck_said=said,
        notes=tuple(notes),
    )
