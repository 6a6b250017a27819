"""CUDA software facts: toolkits, cuDNN, NCCL, library sonames, and the frameworks in the
Python environments — all read from files and command output, never by importing torch & co.

Where each version comes from (docs: shared notes, ecosystem section 2):

- a toolkit's version: `version.json` (CUDA >= 11.1), `version.txt` (<= 11.0), the
  `CUDART_VERSION` / `CUDA_VERSION` macro of its headers, then the dist-info folders of a
  toolkit assembled from pip wheels (`<toolkit>/dist-info/nvidia_cuda_runtime-13.0.96...`);
- cuDNN and NCCL: the MAJOR/MINOR/PATCH macros of their headers (never the combined
  CUDNN_VERSION: its encoding changed in cuDNN 9), and the `nvidia-cudnn-cuNN` /
  `nvidia-nccl-cuNN` wheels;
- frameworks: `torch/version.py`, `tensorflow/python/platform/build_info.py`,
  `deepspeed/git_version_info_installed.py` and the dist-info METADATA of each package.

Environment variables (PATH, CUDA_HOME, CUDA_PATH) come from `/proc/self/environ`, read
through the Host like any file, so a bundle replays them.

Only one answer per fact is required (`.require()`): the listing of /usr/local and the
`ldconfig -p` run. Any other answer that is neither ok nor missing becomes a note of the
item it concerns, so one slow file does not hide the rest of the inventory.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from dldoctor.facts import FactContext, fact
from dldoctor.facts.system import PATH_PYTHON_ARGV, SCRIPT, environ, path_python  # noqa: F401
from dldoctor.host.base import MISSING, NOT_INSTALLED, Answer, ProbeFailed

HEADER_BYTES = 256 * 1024  # the version macros sit in the first few KiB of each header
SMALL_FILE_BYTES = 1024 * 1024
SCRIPT_BYTES = 4096  # enough to see whether nvcc is a wrapper script, and where it leads
LINK_HOPS = 8

# --- links ----------------------------------------------------------------------------


def _follow(ctx: FactContext, path: str) -> str:
    """Follow symbolic links at the last component of `path` (alternatives chains too)."""
    path = posixpath.normpath(path)
    for _ in range(LINK_HOPS):
        answer = ctx.host.readlink(path)
        if not answer.ok or not isinstance(answer.value, str) or not answer.value:
            break
        path = posixpath.normpath(posixpath.join(posixpath.dirname(path), answer.value))
    return path


def _realpath(ctx: FactContext, path: str, cache: dict[str, str], depth: int = 0) -> str:
    """Every component's links resolved (`venv/lib64 -> lib`), via the Host's readlink."""
    path = posixpath.normpath(path)
    if path in ("/", "//", ""):
        return "/"
    if path in cache:
        return cache[path]
    parent = _realpath(ctx, posixpath.dirname(path), cache, depth)
    here = posixpath.join(parent, posixpath.basename(path))
    result = here
    if depth < 4 * LINK_HOPS:
        answer = ctx.host.readlink(here)
        if answer.ok and isinstance(answer.value, str) and answer.value:
            result = _realpath(ctx, posixpath.join(parent, answer.value), cache, depth + 1)
    cache[path] = result
    return result


def _note_unless_missing(notes: list[str], answer: Answer) -> None:
    if answer.status != MISSING and not answer.ok:
        notes.append(answer.describe())


# --- nvcc -----------------------------------------------------------------------------

_NVCC_RELEASE = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)*)")


def parse_nvcc_version(text: str) -> tuple[str, str]:
    """`nvcc --version` -> ("13.0", "13.0.88"); ("", "") when the text has no release line."""
    m = _NVCC_RELEASE.search(text)
    return (m.group(1), m.group(2)) if m else ("", "")


_EXEC_TARGET = re.compile(r"""(/[^\s"'`;|&]*/bin/nvcc)(?![\w.-])""")


def nvcc_script_target(text: str) -> str:
    """The absolute `.../bin/nvcc` a wrapper script runs (`exec /usr/local/cuda-13.0/bin/nvcc
    "$@"`); "" when the text is not a script or names none."""
    if not text.startswith("#!"):
        return ""
    m = _EXEC_TARGET.search(text)
    return m.group(1) if m else ""


@dataclass(frozen=True)
class _Nvcc:
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
    elif answer.status not in (MISSING, NOT_INSTALLED):
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
    real = _follow(ctx, target or found)
    bin_dir = posixpath.dirname(real)
    if posixpath.basename(bin_dir) != "bin":
        notes.append(f"nvcc on PATH is {real}, not in a bin/ folder: its toolkit is unknown")
        return _Nvcc(found, "", release, version)
    return _Nvcc(found, posixpath.dirname(bin_dir), release, version)


# --- toolkit versions -----------------------------------------------------------------


def parse_version_json(text: str) -> tuple[str, list[str]]:
    """CUDA >= 11.1 `version.json`: {"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, ...}."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return "", [f"version.json is not JSON ({exc})"]
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


def define(text: str, macro: str) -> str | None:
    """The value of `#define MACRO value` (first match), or None."""
    m = re.search(
        rf"^[ \t]*#[ \t]*define[ \t]+{macro}[ \t]+(\S[^\n]*?)[ \t]*(?://.*|/\*.*)?$",
        text,
        re.MULTILINE,
    )
    return m.group(1) if m else None


def cuda_version_from_header(text: str, macro: str) -> str:
    """`#define CUDART_VERSION 13000` (or CUDA_VERSION 12040) -> "13.0" / "12.4"."""
    value = define(text, macro)
    if value is None or not value.isdigit():
        return ""
    number = int(value)
    return f"{number // 1000}.{number % 1000 // 10}"


def _major_minor(version: str) -> str:
    m = re.match(r"(\d+)\.(\d+)", version)
    return f"{m.group(1)}.{m.group(2)}" if m else version


_DIST_INFO = re.compile(r"^(?P<name>.+)-(?P<version>[^-]+)\.dist-info$")
_EGG_INFO = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-[^/]*)?\.egg-info$")


def canonical_name(name: str) -> str:
    """PEP 503: `Nvidia_CUDNN.cu12` -> `nvidia-cudnn-cu12`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_dist_dirname(entry: str) -> tuple[str, str] | None:
    """`nvidia_cudnn_cu12-9.1.0.70.dist-info` -> ("nvidia-cudnn-cu12", "9.1.0.70")."""
    m = _DIST_INFO.match(entry) or _EGG_INFO.match(entry)
    return (canonical_name(m.group("name")), m.group("version")) if m else None


@dataclass(frozen=True)
class CudaToolkit:
    path: str  # the folder, links followed
    version: str  # "12.4.1", "13.0"; "" when nothing told
    source: str  # what gave it: "version.json", "include/cuda.h", "dist-info/...", ...
    nvcc_version: str  # "13.0.88" when known (nvcc on PATH, or the nvcc wheel's dist-info)
    notes: tuple[str, ...] = ()
    links: tuple[str, ...] = ()  # other paths that lead here: /usr/local/cuda, CUDA_HOME...


@dataclass(frozen=True)
class CudaToolkits:
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
                _note_unless_missing(notes, answer)
    wheels: dict[str, tuple[str, str]] = {}  # canonical name -> (version, dist-info folder)
    if "dist-info" in entries:
        listing = ctx.host.listdir(posixpath.join(path, "dist-info"))
        for entry in listing.value if listing.ok else ():
            parsed = parse_dist_dirname(entry)
            if parsed:
                wheels[re.sub(r"-cu\d+$", "", parsed[0])] = (parsed[1], entry)
        _note_unless_missing(notes, listing)
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
        _note_unless_missing(notes, usr_local)
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
    nvcc_home = _follow(ctx, nvcc.toolkit) if nvcc.toolkit else ""
    resolved_of: dict[str, str] = {nvcc.toolkit: nvcc_home} if nvcc.toolkit else {}
    for path, why in candidates:
        real = resolved_of.get(path) or _follow(ctx, path)
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
            if why in ("CUDA_HOME", "CUDA_PATH") and listing.status == MISSING:
                notes.append(f"{why}={path} does not exist")
            elif path != real and listing.status == MISSING:
                notes.append(f"{path} points to {real}, which does not exist")
            else:
                _note_unless_missing(notes, listing)
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


# --- Python environments --------------------------------------------------------------


@dataclass(frozen=True)
class PythonEnvironment:
    executable: str
    version: str
    source: str  # "dldoctor" (the interpreter running it) or "python3 on PATH"
    site_dirs: tuple[str, ...]  # import order, links resolved


@dataclass(frozen=True)
class SiteDir:
    path: str
    entries: tuple[str, ...]  # its top level only
    environments: tuple[str, ...]  # executables that import from it


@dataclass(frozen=True)
class PythonEnvironments:
    environments: tuple[PythonEnvironment, ...]
    sites: tuple[SiteDir, ...]
    notes: tuple[str, ...] = ()


def _str_list(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str) and v] if isinstance(value, list) else []


@fact("python.environments")
def python_environments(ctx: FactContext) -> PythonEnvironments:
    notes: list[str] = []
    envs: list[PythonEnvironment] = []
    cache: dict[str, str] = {}
    info = ctx.host.probe("python")
    if info.ok and isinstance(info.value, dict):
        data = info.value
        paths = _str_list(data.get("sys_path")) + _str_list(data.get("site_packages"))
        real = tuple(dict.fromkeys(_realpath(ctx, p, cache) for p in paths))
        envs.append(
            PythonEnvironment(
                str(data.get("executable", "")), str(data.get("version", "")), "dldoctor", real
            )
        )
    else:
        notes.append(f"interpreter probe: {info.status}")
    try:
        path = ctx.get(path_python)
    except ProbeFailed as exc:  # a hung python3 on PATH: the other environment still counts
        path = None
        notes.append(str(exc))
    if path is not None:
        notes.extend(path.notes)
        if path.sys_path:
            envs.append(
                PythonEnvironment(path.executable, path.version, "python3 on PATH", path.sys_path)
            )

    unique: list[PythonEnvironment] = []
    for env in envs:
        twin = next((u for u in unique if u.site_dirs == env.site_dirs), None)
        if twin is None:
            unique.append(env)
        else:
            notes.append(
                f"{env.executable or env.source} uses the same site folders as "
                f"{twin.executable or twin.source}"
            )
    users: dict[str, list[str]] = {}
    for env in unique:
        for path in env.site_dirs:
            users.setdefault(path, []).append(env.executable or env.source)
    sites: list[SiteDir] = []
    for path, who in users.items():
        if posixpath.basename(path) == "lib-dynload":
            continue  # extension modules of the standard library only
        listing = ctx.host.listdir(path)
        if listing.ok:
            sites.append(SiteDir(path, tuple(listing.value), tuple(who)))
        else:
            _note_unless_missing(notes, listing)
    return PythonEnvironments(tuple(unique), tuple(sites), tuple(notes))


# --- dist-info METADATA ---------------------------------------------------------------


@dataclass(frozen=True)
class Requirement:
    name: str  # canonical
    spec: str  # ">=12.5.82,<13.0", "==9.1.0.70", ""
    marker: str  # 'platform_system == "Linux"', ""

    @property
    def pinned(self) -> str:
        """The version of an exact pin (`==9.1.0.70`), else ""."""
        m = re.fullmatch(r"===?\s*([^,\s*]+)", self.spec.strip())
        return m.group(1) if m else ""

    @property
    def extra_only(self) -> bool:
        """Installed only when an extra was asked for (`; extra == "and-cuda"`)."""
        return bool(re.search(r"\bextra\s*==", self.marker))


_REQUIREMENT = re.compile(
    r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*?)\s*(?:;(.*))?"
)


def parse_requirement(line: str) -> Requirement | None:
    """One Requires-Dist value (PEP 508 subset: name, extras, specifier, marker)."""
    m = _REQUIREMENT.fullmatch(line)
    if m is None:
        return None
    spec = m.group(2).strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1].strip()
    return Requirement(canonical_name(m.group(1)), spec, (m.group(3) or "").strip())


@dataclass(frozen=True)
class Metadata:
    name: str  # canonical; "" when absent
    version: str  # "" when absent
    requires: tuple[Requirement, ...] = ()
    notes: tuple[str, ...] = ()


def parse_metadata(text: str) -> Metadata:
    """Core metadata (METADATA / PKG-INFO): the header block up to the first blank line."""
    fields: dict[str, str] = {}
    requires: list[Requirement] = []
    notes: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            break
        if line[0] in " \t":
            continue  # a continued value (long Description or License)
        key, sep, value = line.partition(":")
        if not sep:
            notes.append(f"unparsed metadata line {line[:60]!r}")
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "requires-dist":
            req = parse_requirement(value)
            if req is None:
                notes.append(f"unparsed Requires-Dist {value[:60]!r}")
            else:
                requires.append(req)
        else:
            fields.setdefault(key, value)
    if not fields.get("name"):
        notes.append("metadata has no Name")
    if not fields.get("version"):
        notes.append("metadata has no Version")
    return Metadata(
        canonical_name(fields.get("name", "")),
        fields.get("version", ""),
        tuple(requires),
        tuple(notes),
    )


@dataclass(frozen=True)
class _Dist:
    name: str
    version: str  # from the folder name
    entry: str  # the dist-info folder


def _dists(site: SiteDir) -> dict[str, _Dist]:
    found: dict[str, _Dist] = {}
    for entry in site.entries:
        parsed = parse_dist_dirname(entry)
        if parsed and parsed[0] not in found:
            found[parsed[0]] = _Dist(parsed[0], parsed[1], entry)
    return found


def _read_metadata(ctx: FactContext, site: str, dist: _Dist, notes: list[str]) -> Metadata:
    folder = posixpath.join(site, dist.entry)
    name = "PKG-INFO" if dist.entry.endswith(".egg-info") else "METADATA"
    answer = ctx.host.read(posixpath.join(folder, name), max_bytes=SMALL_FILE_BYTES)
    if not answer.ok and name == "PKG-INFO" and answer.status == MISSING:
        answer = ctx.host.read(folder, max_bytes=SMALL_FILE_BYTES)  # an egg-info file
    if not answer.ok:
        notes.append(f"{dist.entry}: {answer.describe()}")
        return Metadata(dist.name, dist.version)
    meta = parse_metadata(answer.text)
    notes.extend(f"{dist.entry}: {n}" for n in meta.notes)
    if not meta.version:
        notes.append(f"{dist.entry}: version taken from the folder name ({dist.version})")
        meta = Metadata(meta.name or dist.name, dist.version, meta.requires, meta.notes)
    return meta


# --- pip nvidia-* wheels --------------------------------------------------------------


@dataclass(frozen=True)
class NvidiaWheel:
    name: str  # canonical: "nvidia-cudnn-cu12", "nvidia-cuda-runtime", "cuda-toolkit"
    version: str  # from its dist-info folder name
    cuda: str  # the CUDA major its name says ("12" for -cu12); "" when it says none
    location: str  # the site folder
    environments: tuple[str, ...] = ()


def _is_cuda_wheel(name: str) -> bool:
    return name.startswith("nvidia-") or name == "cuda-toolkit"


@fact("python.nvidia_wheels")
def nvidia_wheels(ctx: FactContext) -> tuple[NvidiaWheel, ...]:
    found: list[NvidiaWheel] = []
    for site in ctx.get(python_environments).sites:
        for dist in _dists(site).values():
            if _is_cuda_wheel(dist.name):
                m = re.search(r"-cu(\d+)$", dist.name)
                found.append(
                    NvidiaWheel(
                        dist.name,
                        dist.version,
                        m.group(1) if m else "",
                        site.path,
                        site.environments,
                    )
                )
    return tuple(found)


# --- frameworks -----------------------------------------------------------------------


def _py_value(text: str, name: str) -> str | None:
    """`name = 'x'` / `name: Optional[str] = "x"` -> "x"; `= None` -> ""; absent -> None."""
    m = re.search(rf"^{name}\s*(?::[^=\n]*)?=\s*(.*?)\s*(?:#.*)?$", text, re.MULTILINE)
    if m is None:
        return None
    raw = m.group(1)
    q = re.fullmatch(r"""(['"])(.*)\1""", raw)
    if q:
        return q.group(2)
    return "" if raw == "None" else None


@dataclass(frozen=True)
class TorchBuild:
    version: str  # "2.4.0+cu121"; "" when absent
    cuda: str | None  # "12.1"; "" for a build without CUDA; None when the file does not say
    hip: str  # ROCm/HIP version of a ROCm build, else ""
    notes: tuple[str, ...] = ()


def parse_torch_version_py(text: str) -> TorchBuild:
    """`torch/version.py`, written at build time: `__version__`, `cuda`, `hip`."""
    notes: list[str] = []
    version = _py_value(text, "__version__") or ""
    cuda = _py_value(text, "cuda")
    if not version:
        notes.append("torch/version.py has no __version__")
    if cuda is None:
        notes.append("torch/version.py has no cuda = ... line")
    return TorchBuild(version, cuda, _py_value(text, "hip") or "", tuple(notes))


def cuda_from_local_version(version: str) -> str:
    """`2.4.0+cu121` -> "12.1", `+cu130` -> "13.0", `+cu92` -> "9.2"; "" when no +cuNNN."""
    m = re.search(r"\+cu(\d+)(\d)$", version)
    return f"{m.group(1)}.{m.group(2)}" if m else ""


def _dict_str(text: str, key: str) -> str | None:
    """`'key': 'v'` (dict literal) or `('key', 'v')` (OrderedDict) -> v."""
    m = re.search(rf"""['"]{key}['"]\s*[:,]\s*(['"])([^'"]*)\1""", text)
    return m.group(2) if m else None


def _dict_bool(text: str, key: str) -> bool | None:
    m = re.search(rf"""['"]{key}['"]\s*[:,]\s*(True|False)\b""", text)
    return None if m is None else m.group(1) == "True"


@dataclass(frozen=True)
class TfBuild:
    cuda: str | None
    cudnn: str | None
    notes: tuple[str, ...] = ()


def parse_tf_build_info(text: str) -> TfBuild:
    """`tensorflow/python/platform/build_info.py`: a dict or an OrderedDict of the build."""
    is_cuda = _dict_bool(text, "is_cuda_build")
    cuda, cudnn = _dict_str(text, "cuda_version"), _dict_str(text, "cudnn_version")
    if is_cuda is False:
        return TfBuild("", "", ("a build without CUDA (is_cuda_build False)",))
    if cuda is None and is_cuda is None:
        return TfBuild(None, None, ("build_info.py names neither cuda_version nor is_cuda_build",))
    return TfBuild(cuda, cudnn)


@dataclass(frozen=True)
class DeepSpeedBuild:
    version: str
    cuda: str | None
    nccl: str | None
    notes: tuple[str, ...] = ()


def parse_deepspeed_info(text: str) -> DeepSpeedBuild:
    """`deepspeed/git_version_info_installed.py`: version='0.17.6', torch_info={...}; '0.0'
    in torch_info means the build had none."""
    version = _py_value(text, "version") or ""

    def none_if_zero(value: str | None) -> str | None:
        return None if value is None else ("" if value in ("0.0", "0") else value)

    notes = () if version else ("git_version_info_installed.py has no version",)
    return DeepSpeedBuild(
        version,
        none_if_zero(_dict_str(text, "cuda_version")),
        none_if_zero(_dict_str(text, "nccl_version")),
        notes,
    )


@dataclass(frozen=True)
class Framework:
    name: str  # "torch", "tensorflow", "jax", "deepspeed"
    version: str
    cuda: str | None  # the CUDA it was built for; "" built without; None unknown
    cudnn: str | None  # the cuDNN it pins, was built for, or finds installed beside it
    nccl: str | None
    location: str  # its package folder (or its site folder when it has none)
    notes: tuple[str, ...] = ()
    environments: tuple[str, ...] = ()  # interpreters that import it from there


_TF_DISTS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tf-nightly",
    "tf-nightly-cpu",
    "tensorflow-intel",
    "tensorflow-aarch64",
    "tensorflow-cpu-aws",
)
_JAX_PLUGIN = re.compile(r"jax-(cuda|rocm)(\d+)-(plugin|pjrt)")


class _Site:
    """One site folder's dists, with the wheels installed anywhere its interpreters look."""

    def __init__(self, ctx: FactContext, site: SiteDir, wheels: dict[str, str]):
        self.ctx, self.site, self.path = ctx, site, site.path
        self.entries = set(site.entries)
        self.dists = _dists(site)
        self.wheels = wheels  # canonical name -> version, for this site's environments

    def read(self, *parts: str) -> Answer:
        return self.ctx.host.read(posixpath.join(self.path, *parts), max_bytes=SMALL_FILE_BYTES)

    def metadata(self, name: str, notes: list[str]) -> Metadata | None:
        dist = self.dists.get(name)
        return _read_metadata(self.ctx, self.path, dist, notes) if dist else None

    def pinned(self, meta: Metadata | None, family: str, notes: list[str]) -> str | None:
        """Version of the `nvidia-<family>-cuNN` wheel the framework requires: the installed
        one when present, else the pin; None when it requires none."""
        pattern = re.compile(rf"nvidia-{family}-cu\d+")
        reqs = [r for r in (meta.requires if meta else ()) if pattern.fullmatch(r.name)]
        req = next((r for r in reqs if not r.extra_only), None)
        if req is None:
            return None
        installed = self.wheels.get(req.name)
        if installed is None:
            notes.append(f"requires {req.name}{req.spec}, which is not installed")
            return req.pinned or None
        if req.pinned and installed != req.pinned:
            notes.append(f"requires {req.name}=={req.pinned} but {installed} is installed")
        return installed

    def installed(self, family: str, major: str = "") -> str | None:
        pattern = re.compile(f"nvidia-{family}-cu" + (re.escape(major) if major else r"\d+"))
        return next((v for n, v in self.wheels.items() if pattern.fullmatch(n)), None)


def _torch(s: _Site) -> Framework | None:
    if "torch" not in s.entries and "torch" not in s.dists:
        return None
    notes: list[str] = []
    meta = s.metadata("torch", notes)
    build = TorchBuild("", None, "")
    answer = s.read("torch", "version.py")
    if answer.ok:
        build = parse_torch_version_py(answer.text)
        notes.extend(build.notes)
    else:
        notes.append(f"torch/version.py: {answer.status}")
    version = build.version or (meta.version if meta else "")
    cuda = build.cuda
    if cuda is None and cuda_from_local_version(version):
        cuda = cuda_from_local_version(version)
        notes.append(f"CUDA {cuda} taken from the version's +cu suffix")
    if build.hip:
        notes.append(f"a ROCm build (HIP {build.hip})")
    if (
        meta
        and build.version
        and meta.version
        and build.version.split("+")[0] != meta.version.split("+")[0]
    ):
        notes.append(f"torch/version.py says {build.version}, its metadata {meta.version}")
    cudnn = s.pinned(meta, "cudnn", notes)
    nccl = s.pinned(meta, "nccl", notes)
    if cuda == "":
        cudnn = cudnn if cudnn is not None else ""
        nccl = nccl if nccl is not None else ""
    elif cuda and cudnn is None:
        notes.append("requires no cuDNN wheel: bundled in torch/lib, or the system's")
    location = posixpath.join(s.path, "torch") if "torch" in s.entries else s.path
    return Framework("torch", version, cuda, cudnn, nccl, location, tuple(notes))


def _tensorflow(s: _Site) -> Framework | None:
    dist = next((d for d in _TF_DISTS if d in s.dists), "")
    if "tensorflow" not in s.entries and not dist:
        return None
    notes: list[str] = []
    meta = s.metadata(dist, notes) if dist else None
    if not dist:
        notes.append("no tensorflow dist-info beside the package")
    elif dist != "tensorflow":
        notes.append(f"installed as {dist}")
    build = TfBuild(None, None)
    answer = s.read("tensorflow", "python", "platform", "build_info.py")
    if answer.ok:
        build = parse_tf_build_info(answer.text)
        notes.extend(build.notes)
    else:
        notes.append(f"tensorflow/python/platform/build_info.py: {answer.status}")
    cudnn = build.cudnn
    major = (build.cuda or "").split(".")[0]
    wheel_cudnn = s.installed("cudnn", major) if build.cuda else None
    if wheel_cudnn:
        notes.append(f"nvidia-cudnn-cu{major} {wheel_cudnn} is installed beside it")
    nccl = s.installed("nccl", major) if build.cuda else ("" if build.cuda == "" else None)
    location = posixpath.join(s.path, "tensorflow") if "tensorflow" in s.entries else s.path
    version = meta.version if meta else ""
    return Framework("tensorflow", version, build.cuda, cudnn, nccl, location, tuple(notes))


def _jax(s: _Site) -> Framework | None:
    if "jax" not in s.dists and "jaxlib" not in s.dists:
        return None
    notes: list[str] = []
    jax_meta = s.metadata("jax", notes)
    jaxlib = s.dists.get("jaxlib")
    version = jax_meta.version if jax_meta else ""
    cuda: str | None = ""
    cudnn: str | None = ""
    nccl: str | None = ""
    if jaxlib:
        jaxlib_meta = s.metadata("jaxlib", notes)
        jaxlib_version = jaxlib_meta.version if jaxlib_meta else jaxlib.version
        notes.append(f"jaxlib {jaxlib_version}")
        version = version or jaxlib_version
        # Before the plugins (jax < 0.4.14) jaxlib itself was the CUDA build:
        # `0.4.7+cuda11.cudnn86`.
        m = re.search(r"\+cuda(\d+)\.cudnn(\d)(\d+)$", jaxlib_version)
        if m:
            cuda, cudnn, nccl = m.group(1), f"{m.group(2)}.{m.group(3)}", None
    else:
        notes.append("jaxlib is not installed")
    for dist in s.dists.values():
        m = _JAX_PLUGIN.fullmatch(dist.name)
        if m is None:
            continue
        notes.append(f"{dist.name} {dist.version}")
        if jaxlib and dist.version != jaxlib.version:
            notes.append(f"{dist.name} {dist.version} does not match jaxlib {jaxlib.version}")
        if m.group(1) == "cuda":
            cuda = m.group(2)
            cudnn = s.installed("cudnn", cuda)
            nccl = s.installed("nccl", cuda)
        elif cuda == "":
            notes.append(f"a ROCm {m.group(2)} plugin")
    name = "jax" if jax_meta else "jaxlib"
    location = posixpath.join(s.path, name) if name in s.entries else s.path
    return Framework(name, version, cuda, cudnn, nccl, location, tuple(notes))


def _deepspeed(s: _Site) -> Framework | None:
    if "deepspeed" not in s.entries and "deepspeed" not in s.dists:
        return None
    notes: list[str] = []
    build = DeepSpeedBuild("", None, None)
    if "deepspeed" in s.entries:
        answer = s.read("deepspeed", "git_version_info_installed.py")
        if answer.ok:
            build = parse_deepspeed_info(answer.text)
            notes.extend(build.notes)
        else:
            _note_unless_missing(notes, answer)
    version = build.version
    if not version:
        meta = s.metadata("deepspeed", notes)
        version = meta.version if meta else ""
    location = posixpath.join(s.path, "deepspeed") if "deepspeed" in s.entries else s.path
    return Framework("deepspeed", version, build.cuda, None, build.nccl, location, tuple(notes))


@fact("python.frameworks")
def frameworks(ctx: FactContext) -> tuple[Framework, ...]:
    envs = ctx.get(python_environments)
    wheels_by_env: dict[str, dict[str, str]] = {}
    for site in envs.sites:
        for dist in _dists(site).values():
            if _is_cuda_wheel(dist.name):
                for who in site.environments:
                    wheels_by_env.setdefault(who, {}).setdefault(dist.name, dist.version)
    found: list[Framework] = []
    first_seen: dict[tuple[str, str], str] = {}  # (environment, framework) -> location
    for site in envs.sites:
        wheels: dict[str, str] = {}
        for who in site.environments:
            for name, version in wheels_by_env.get(who, {}).items():
                wheels.setdefault(name, version)
        s = _Site(ctx, site, wheels)
        for detect in (_torch, _tensorflow, _jax, _deepspeed):
            fw = detect(s)
            if fw is None:
                continue
            notes = list(fw.notes)
            for who in site.environments:
                earlier = first_seen.setdefault((who, fw.name), fw.location)
                if earlier != fw.location:
                    notes.append(f"{who} imports {fw.name} from {earlier}, not from here")
            found.append(
                Framework(
                    fw.name,
                    fw.version,
                    fw.cuda,
                    fw.cudnn,
                    fw.nccl,
                    fw.location,
                    tuple(notes),
                    site.environments,
                )
            )
    return tuple(found)


# --- cuDNN and NCCL -------------------------------------------------------------------


def _int_define(text: str, macro: str) -> int | None:
    value = define(text, macro)
    return int(value) if value is not None and value.isdigit() else None


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


@dataclass(frozen=True)
class Cudnn:
    version: str  # "9.24.0" from a header, "9.1.0.70" from a wheel
    source: str  # "cudnn_version.h", "wheel nvidia-cudnn-cu12", ...
    path: str  # the header (links followed), or the wheel's package folder
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Nccl:
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
                if answer.status != MISSING:
                    found.append(cls("", header, path, (answer.describe(),)))
                continue
            version, notes = parser(answer.text)
            if not version:
                if header != "cudnn.h":  # cuDNN >= 8's cudnn.h only includes the others
                    found.append(cls("", header, path, tuple(f"{header}: {n}" for n in notes)))
                continue
            real = _follow(ctx, path)
            if real in seen:
                break
            seen[real] = len(found)
            link_note = (f"found as {path}",) if real != path else ()
            found.append(cls(version, header, real, link_note))
            break
    for site in envs.sites:
        dists = _dists(site)
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

_LDCONFIG_LINE = re.compile(r"\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S.*?)\s*")
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
        if _wanted(m.group(1)) and m.group(3) not in libs.setdefault(m.group(1), []):
            libs[m.group(1)].append(m.group(3))
    notes = [f"{unparsed} unparsed ldconfig line(s)"] if unparsed else []
    return {k: tuple(v) for k, v in libs.items()}, notes


@dataclass(frozen=True)
class CudaLibraries:
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
        if answer.status in (MISSING, NOT_INSTALLED):
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
