"""cuDNN and NCCL (the MAJOR/MINOR/PATCH macros of their headers — never the combined
CUDNN_VERSION, whose encoding changed in cuDNN 9 — and their `nvidia-*-cuNN` wheels), and the
library sonames of `ldconfig -p`, which is required (`.require()`)."""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.pythonenv import python_environments, site_dists
from dldoctor.facts.reading import follow, to_int
from dldoctor.facts.toolkit import HEADER_BYTES, define, toolkits
from dldoctor.host.base import AnswerStatus

# --- cuDNN and NCCL -------------------------------------------------------------------


def _int_define(text: str, macro: str) -> int | None:
    return to_int(define(text, macro), minimum=0)


def parse_cudnn_header(text: str) -> tuple[str, list[str]]:
    """CUDNN_MAJOR / CUDNN_MINOR / CUDNN_PATCHLEVEL -> "9.24.0" (never CUDNN_VERSION)."""
    parts = [_int_define(text, m) for m in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL")]
    if parts[0] is None or parts[1] is None:
        return "", ["no numeric CUDNN_MAJOR/CUDNN_MINOR defines"]
    return ".".join(str(p) for p in parts if p is not None), []


def parse_nccl_header(text: str) -> tuple[str, list[str]]:
    """NCCL_MAJOR / NCCL_MINOR / NCCL_PATCH (+ NCCL_SUFFIX) -> "2.30.7"."""
    parts = [_int_define(text, m) for m in ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH")]
    if parts[0] is None or parts[1] is None:
        return "", ["no numeric NCCL_MAJOR/NCCL_MINOR defines"]
    suffix = (define(text, "NCCL_SUFFIX") or "").strip('"')
    return ".".join(str(p) for p in parts if p is not None) + suffix, []


class Cudnn(NamedTuple):
    version: str  # "9.24.0" from a header, "9.1.0.70" from a wheel
    source: str  # "cudnn_version.h", "wheel nvidia-cudnn-cu12", ...
    path: str  # the header (links followed), or the wheel's package folder
    notes: tuple[str, ...] = ()


class Nccl(NamedTuple):
    version: str
    source: str
    path: str
    notes: tuple[str, ...] = ()


SYSTEM_INCLUDES = (
    "/usr/include",
    "/usr/include/x86_64-linux-gnu",
    "/usr/include/aarch64-linux-gnu",
)
CUDNN_HEADERS = ("cudnn_version.h", "cudnn_version_v9.h", "cudnn_version_v8.h", "cudnn.h")


def _installs(ctx: FactContext, library: str, headers: tuple[str, ...], parser, cls) -> tuple:
    tks = ctx.get(toolkits)
    envs = ctx.get(python_environments)
    folders = [*SYSTEM_INCLUDES, *(posixpath.join(t.path, "include") for t in tks.toolkits)]
    found: list = []
    seen: dict[str, int] = {}
    for folder in dict.fromkeys(folders):
        for header in headers:
            path = posixpath.join(folder, header)
            answer = ctx.host.read(path, max_bytes=HEADER_BYTES)
            if not answer.ok:
                if answer.status != AnswerStatus.MISSING:
                    found.append(cls("", header, path, (answer.describe(),)))
                continue
            version, notes = parser(answer.text)
            if not version:
                if header != "cudnn.h":  # cuDNN >= 8's cudnn.h only includes the others
                    found.append(cls("", header, path, tuple(f"{header}: {n}" for n in notes)))
                continue
            real = follow(ctx, path)
            if real in seen:
                break
            seen[real] = len(found)
            link_note = (f"found as {path}",) if real != path else ()
            found.append(cls(version, header, real, link_note))
            break
    for site in envs.sites:
        dists = site_dists(site)
        wheel = next(
            (d for n, d in dists.items() if re.fullmatch(rf"nvidia-{library}-cu\d+", n)), None
        )
        package = posixpath.join(site.path, "nvidia", library)
        if wheel is not None:
            found.append(cls(wheel.version, f"wheel {wheel.name}", package))
        elif "nvidia" in site.entries:
            for header in headers[:1]:
                answer = ctx.host.read(
                    posixpath.join(package, "include", header), max_bytes=HEADER_BYTES
                )
                if answer.ok:
                    version, notes = parser(answer.text)
                    found.append(
                        cls(version, header, answer.key, tuple(notes) + ("no dist-info for it",))
                    )
    return tuple(found)


@fact("cuda.cudnn")
def cudnn(ctx: FactContext) -> tuple[Cudnn, ...]:
    return _installs(ctx, "cudnn", CUDNN_HEADERS, parse_cudnn_header, Cudnn)


@fact("cuda.nccl")
def nccl(ctx: FactContext) -> tuple[Nccl, ...]:
    return _installs(ctx, "nccl", ("nccl.h",), parse_nccl_header, Nccl)


# --- library sonames ------------------------------------------------------------------

# The path is stripped in Python: a lazy `.*?` before `\s*` was quadratic on a long line.
_LDCONFIG_LINE = re.compile(r"\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S.*)")
_SONAME_BASE = re.compile(r"(lib[^.]+)\.so")
LIBRARY_BASES = ("libcudart", "libcudnn", "libnccl", "libnvidia-ml", "libcuda")


def _wanted(soname: str) -> bool:
    m = _SONAME_BASE.match(soname)
    if m is None:
        return False
    base = m.group(1)
    return base in LIBRARY_BASES or base.startswith("libcudnn_")  # cuDNN 8/9 split libs


def parse_ldconfig(text: str) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """`ldconfig -p` -> {soname: paths} for the CUDA-stack libraries, in the cache's order."""
    libs: dict[str, list[str]] = {}
    unparsed = 0
    for line in text.splitlines():
        if not line.strip() or re.match(r"\d+ libs? found in cache|Cache generated by", line):
            continue
        m = _LDCONFIG_LINE.fullmatch(line)
        if m is None:
            unparsed += 1
            continue
        path = m.group(3).rstrip()
        if _wanted(m.group(1)) and path not in libs.setdefault(m.group(1), []):
            libs[m.group(1)].append(path)
    notes = [f"{unparsed} unparsed ldconfig line(s)"] if unparsed else []
    return {k: tuple(v) for k, v in libs.items()}, notes


class CudaLibraries(NamedTuple):
    libraries: dict[str, tuple[str, ...]]  # "libcudart.so.13" -> ("/usr/local/.../...",)
    command: str  # the ldconfig command line that answered; "" when none did
    notes: tuple[str, ...] = ()

    def named(self, base: str) -> dict[str, tuple[str, ...]]:
        """The entries of one library: named("libcuda") has libcuda.so.1, not libcudart."""
        return {
            k: v
            for k, v in self.libraries.items()
            if (m := _SONAME_BASE.match(k)) and m.group(1) == base
        }


LDCONFIG_ARGVS = (("ldconfig", "-p"), ("/sbin/ldconfig", "-p"), ("/usr/sbin/ldconfig", "-p"))


@fact("cuda.libraries")
def libraries(ctx: FactContext) -> CudaLibraries:
    notes: list[str] = []
    for argv in LDCONFIG_ARGVS:  # /sbin is not on every user's PATH
        answer = ctx.host.run(list(argv)).require()
        if answer.status in (AnswerStatus.MISSING, AnswerStatus.NOT_INSTALLED):
            continue
        if not answer.ok:
            notes.append(answer.describe())
            continue
        if answer.value.returncode != 0:
            notes.append(f"`{answer.key}` exited with {answer.value.returncode}")
            continue
        libs, more = parse_ldconfig(answer.text)
        return CudaLibraries(libs, answer.key, tuple(notes + more))
    return CudaLibraries({}, "", tuple(notes or ["ldconfig is not installed (or not recorded)"]))
