"""CUDA toolkits, read from files and command output (never by importing anything).

A toolkit's version comes from `version.json` (CUDA >= 11.1), `version.txt` (<= 11.0), the
`CUDART_VERSION` / `CUDA_VERSION` macro of its headers, then the dist-info folders of a
toolkit assembled from pip wheels (`<toolkit>/dist-info/nvidia_cuda_runtime-13.0.96...`).
Which one a build would use: PATH's nvcc, CUDA_HOME / CUDA_PATH, `/usr/local/cuda`.
Environment variables come from `/proc/self/environ`, read through the Host like any file,
so a bundle replays them.

Only the listing of /usr/local is required (`.require()`); any other answer that is neither
ok nor missing becomes a note of the toolkit it concerns.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.pythonenv import SMALL_FILE_BYTES, parse_dist_dirname
from dldoctor.facts.reading import follow, load_json, note_unless_missing, to_int
from dldoctor.facts.system import environ
from dldoctor.host.base import AnswerStatus

HEADER_BYTES = 256 * 1024  # the version macros sit in the first few KiB of each header
SCRIPT_BYTES = 4096  # enough to see whether nvcc is a wrapper script, and where it leads

# --- nvcc -----------------------------------------------------------------------------

_NVCC_RELEASE = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)*)")


def parse_nvcc_version(text: str) -> tuple[str, str]:
    """`nvcc --version` -> ("13.0", "13.0.88"); ("", "") when the text has no release line."""
    m = _NVCC_RELEASE.search(text)
    return (m.group(1), m.group(2)) if m else ("", "")


# A shell word, then its last `/bin/nvcc`: one pattern for both rescanned a long run of
# path characters from every `/` in it (quadratic).
_SHELL_WORD = re.compile(r"""[^\s"'`;|&]+""")
_NVCC_END = re.compile(r"/bin/nvcc(?![\w.-])")


def nvcc_script_target(text: str) -> str:
    """The absolute `.../bin/nvcc` a wrapper script runs (`exec /usr/local/cuda-13.0/bin/nvcc
    "$@"`); "" when the text is not a script or names none."""
    if not text.startswith("#!"):
        return ""
    for word in _SHELL_WORD.finditer(text):
        ends = [m.end() for m in _NVCC_END.finditer(word.group())]
        if ends:
            return word.group()[word.group().find("/") : ends[-1]]
    return ""


class _Nvcc(NamedTuple):
    path: str = ""  # where PATH finds it
    toolkit: str = ""  # the toolkit folder it belongs to (the parent of its bin/)
    release: str = ""  # "13.0"
    version: str = ""  # "13.0.88"


def _nvcc_on_path(ctx: FactContext, env: dict[str, str], notes: list[str]) -> _Nvcc:
    answer = ctx.host.run(["nvcc", "--version"])
    release = version = ""
    if answer.ok:
        release, version = parse_nvcc_version(answer.text)
        if answer.value.returncode != 0:
            notes.append(f"`nvcc --version` exited with {answer.value.returncode}")
        elif not release:
            notes.append(f"`nvcc --version` printed no release line: {answer.text[:80]!r}")
    elif answer.status not in (AnswerStatus.MISSING, AnswerStatus.NOT_INSTALLED):
        notes.append(answer.describe())
    found, content = "", b""
    for folder in dict.fromkeys(env.get("PATH", "").split(":")):
        if not folder.startswith("/"):
            continue  # relative PATH entries depend on the working directory: not followed
        probe = ctx.host.read(posixpath.join(folder, "nvcc"), max_bytes=SCRIPT_BYTES)
        if probe.ok:
            found, content = probe.key, probe.value or b""
            break
    if not found:
        if answer.ok:
            notes.append("nvcc runs, but it was not found in the PATH folders (environment?)")
        return _Nvcc("", "", release, version)
    target = nvcc_script_target(content.decode("utf-8", "replace"))
    if content.startswith(b"#!") and not target:
        notes.append(f"{found} is a script that names no .../bin/nvcc: its toolkit is unknown")
        return _Nvcc(found, "", release, version)
    real = follow(ctx, target or found)
    bin_dir = posixpath.dirname(real)
    if posixpath.basename(bin_dir) != "bin":
        notes.append(f"nvcc on PATH is {real}, not in a bin/ folder: its toolkit is unknown")
        return _Nvcc(found, "", release, version)
    return _Nvcc(found, posixpath.dirname(bin_dir), release, version)


# --- toolkit versions -----------------------------------------------------------------


def parse_version_json(text: str) -> tuple[str, list[str]]:
    """CUDA >= 11.1 `version.json`: {"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, ...}."""
    data, why = load_json(text)
    if why:
        return "", [f"version.json is not JSON ({why})"]
    cuda = data.get("cuda") if isinstance(data, dict) else None
    version = cuda.get("version") if isinstance(cuda, dict) else None
    if not isinstance(version, str) or not re.match(r"\d+\.\d+", version):
        return "", ["version.json has no cuda.version"]
    return version.strip(), []


def parse_version_txt(text: str) -> tuple[str, list[str]]:
    """CUDA <= 11.0 `version.txt`: "CUDA Version 10.2.89"."""
    m = re.search(r"CUDA Version\s+(\d+(?:\.\d+)+)", text)
    if m is None:
        return "", [f"version.txt says {text.strip()[:60]!r}"]
    return m.group(1), []


# The value's comment and trailing blanks are cut in Python: a lazy value before `[ \t]*`
# and an optional comment made one `#define` line of 100k spaces cost a minute.
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\S[^\n]*)", re.MULTILINE)


def define(text: str, macro: str) -> str | None:
    """The value of `#define MACRO value` (first match), or None."""
    for m in _DEFINE.finditer(text):
        if m.group(1) == macro:
            value = m.group(2)
            for comment in ("//", "/*"):
                value = value.partition(comment)[0]
            return value.rstrip() or None
    return None


def cuda_version_from_header(text: str, macro: str) -> str:
    """`#define CUDART_VERSION 13000` (or CUDA_VERSION 12040) -> "13.0" / "12.4"."""
    number = to_int(define(text, macro), minimum=0)
    if number is None:
        return ""
    return f"{number // 1000}.{number % 1000 // 10}"


def _major_minor(version: str) -> str:
    m = re.match(r"(\d+)\.(\d+)", version)
    return f"{m.group(1)}.{m.group(2)}" if m else version


class CudaToolkit(NamedTuple):
    path: str  # the folder, links followed
    version: str  # "12.4.1", "13.0"; "" when nothing told
    source: str  # what gave it: "version.json", "include/cuda.h", "dist-info/...", ...
    nvcc_version: str  # "13.0.88" when known (nvcc on PATH, or the nvcc wheel's dist-info)
    notes: tuple[str, ...] = ()
    links: tuple[str, ...] = ()  # other paths that lead here: /usr/local/cuda, CUDA_HOME...


class CudaToolkits(NamedTuple):
    toolkits: tuple[CudaToolkit, ...]
    selected: str  # the toolkit CUDA_HOME / CUDA_PATH / PATH's nvcc / /usr/local/cuda picks
    selected_by: str  # "CUDA_HOME", "CUDA_PATH", "nvcc on PATH", "/usr/local/cuda", ""
    notes: tuple[str, ...] = ()

    def get(self, path: str) -> CudaToolkit | None:
        return next((t for t in self.toolkits if t.path == path or path in t.links), None)


def _inspect_toolkit(
    ctx: FactContext, path: str, entries: Iterable[str], nvcc: _Nvcc | None
) -> CudaToolkit:
    entries = set(entries)
    notes: list[str] = []
    version = source = ""
    for name, parser in (("version.json", parse_version_json), ("version.txt", parse_version_txt)):
        if version or name not in entries:
            continue
        answer = ctx.host.read(posixpath.join(path, name), max_bytes=SMALL_FILE_BYTES)
        if answer.ok:
            found, why = parser(answer.text)
            notes.extend(why)
            version, source = (found, name) if found else ("", "")
        else:
            notes.append(answer.describe())
    if not version and "include" in entries:
        for header, macro in (("cuda_runtime_api.h", "CUDART_VERSION"), ("cuda.h", "CUDA_VERSION")):
            answer = ctx.host.read(posixpath.join(path, "include", header), max_bytes=HEADER_BYTES)
            if answer.ok:
                found = cuda_version_from_header(answer.text, macro)
                if found:
                    version, source = found, f"include/{header}"
                    break
                notes.append(f"include/{header} has no numeric #define {macro}")
            else:
                note_unless_missing(notes, answer)
    wheels: dict[str, tuple[str, str]] = {}  # canonical name -> (version, dist-info folder)
    if "dist-info" in entries:
        listing = ctx.host.listdir(posixpath.join(path, "dist-info"))
        for entry in listing.value if listing.ok else ():
            parsed = parse_dist_dirname(entry)
            if parsed:
                wheels[re.sub(r"-cu\d+$", "", parsed[0])] = (parsed[1], entry)
        note_unless_missing(notes, listing)
    runtime = wheels.get("nvidia-cuda-runtime")
    nvcc_wheel = wheels.get("nvidia-cuda-nvcc")
    if not version:
        for wheel in (runtime, nvcc_wheel):
            if wheel:
                version, source = _major_minor(wheel[0]), f"dist-info/{wheel[1]}"
                break
    nvcc_version = nvcc.version if nvcc and nvcc.version else (nvcc_wheel[0] if nvcc_wheel else "")
    if nvcc and nvcc.release:
        if not version:
            version, source = nvcc.release, "nvcc --version"
        elif _major_minor(version) != nvcc.release:
            notes.append(f"nvcc reports release {nvcc.release}, but {source} says {version}")
    if not version:
        notes.append("no version.json, version.txt, version header or dist-info says its version")
    return CudaToolkit(path, version, source, nvcc_version, tuple(notes))


_TOOLKIT_NAME = re.compile(r"cuda(-\d[\w.]*)?")


@fact("cuda.toolkits")
def toolkits(ctx: FactContext) -> CudaToolkits:
    notes: list[str] = []
    env = ctx.get(environ)
    nvcc = _nvcc_on_path(ctx, env, notes)
    candidates: list[tuple[str, str]] = []  # (path, why it is looked at)
    usr_local = ctx.host.listdir("/usr/local").require()
    if usr_local.ok:
        candidates += [
            (f"/usr/local/{n}", "/usr/local") for n in usr_local.value if _TOOLKIT_NAME.fullmatch(n)
        ]
    else:
        note_unless_missing(notes, usr_local)
    candidates.append(("/opt/cuda", "/opt/cuda"))
    if nvcc.toolkit:
        candidates.append((nvcc.toolkit, "nvcc on PATH"))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var) and not env[var].startswith("/"):
            notes.append(f"{var}={env[var]} is not an absolute path: not followed")
            env.pop(var)
        elif env.get(var):
            candidates.append((env[var], var))

    found: dict[str, CudaToolkit] = {}
    links: dict[str, list[str]] = {}
    absent: set[str] = set()
    nvcc_home = follow(ctx, nvcc.toolkit) if nvcc.toolkit else ""
    resolved_of: dict[str, str] = {nvcc.toolkit: nvcc_home} if nvcc.toolkit else {}
    for path, why in candidates:
        real = resolved_of.get(path) or follow(ctx, path)
        resolved_of[path] = real
        if real in found:
            if path != real and path not in links[real]:
                links[real].append(path)
            continue
        if real in absent:
            continue
        listing = ctx.host.listdir(real)
        if not listing.ok:
            absent.add(real)
            if why in ("CUDA_HOME", "CUDA_PATH") and listing.status == AnswerStatus.MISSING:
                notes.append(f"{why}={path} does not exist")
            elif path != real and listing.status == AnswerStatus.MISSING:
                notes.append(f"{path} points to {real}, which does not exist")
            else:
                note_unless_missing(notes, listing)
            continue
        found[real] = _inspect_toolkit(
            ctx, real, listing.value, nvcc if real == nvcc_home else None
        )
        links[real] = [path] if path != real else []

    selected, selected_by = "", ""
    for var in ("CUDA_HOME", "CUDA_PATH"):  # torch.utils.cpp_extension's order
        if env.get(var):
            selected, selected_by = resolved_of[env[var]], var
            break
    else:
        if nvcc_home:
            selected, selected_by = nvcc_home, "nvcc on PATH"
        elif resolved_of.get("/usr/local/cuda") in found:
            selected, selected_by = resolved_of["/usr/local/cuda"], "/usr/local/cuda"
    if nvcc_home and selected_by in ("CUDA_HOME", "CUDA_PATH") and nvcc_home != selected:
        notes.append(f"nvcc on PATH belongs to {nvcc_home}, but {selected_by} selects {selected}")
    result = tuple(
        CudaToolkit(t.path, t.version, t.source, t.nvcc_version, t.notes, tuple(links[p]))
        for p, t in sorted(found.items())
    )
    return CudaToolkits(result, selected, selected_by, tuple(notes))
