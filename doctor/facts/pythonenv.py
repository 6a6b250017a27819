"""Python environments (the interpreter running dldoctor and the `python3` on PATH), their
installed distributions (dist-info METADATA) and the pip `nvidia-*` CUDA wheels — read
through the Host, never by importing the packages."""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.reading import note_unless_missing, realpath
from dldoctor.facts.system import path_python
from dldoctor.host.base import AnswerStatus, ProbeFailed

SMALL_FILE_BYTES = 1024 * 1024

_DIST_INFO = re.compile(r"^(?P<name>.+)-(?P<version>[^-]+)\.dist-info$")
_EGG_INFO = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-[^/]*)?\.egg-info$")


def canonical_name(name: str) -> str:
    """PEP 503: `Nvidia_CUDNN.cu12` -> `nvidia-cudnn-cu12`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_dist_dirname(entry: str) -> tuple[str, str] | None:
    """`nvidia_cudnn_cu12-9.1.0.70.dist-info` -> ("nvidia-cudnn-cu12", "9.1.0.70")."""
    m = _DIST_INFO.match(entry) or _EGG_INFO.match(entry)
    return (canonical_name(m.group("name")), m.group("version")) if m else None


# --- Python environments --------------------------------------------------------------


class PythonEnvironment(NamedTuple):
    executable: str
    version: str
    source: str  # "dldoctor" (the interpreter running it) or "python3 on PATH"
    site_dirs: tuple[str, ...]  # import order, links resolved


class SiteDir(NamedTuple):
    path: str
    entries: tuple[str, ...]  # its top level only
    environments: tuple[str, ...]  # executables that import from it


class PythonEnvironments(NamedTuple):
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
        real = tuple(dict.fromkeys(realpath(ctx, p, cache) for p in paths))
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
            note_unless_missing(notes, listing)
    return PythonEnvironments(tuple(unique), tuple(sites), tuple(notes))


# --- dist-info METADATA ---------------------------------------------------------------


class Requirement(NamedTuple):
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


# The marker is split off and the specifier stripped in Python: a lazy specifier between
# two `\s*` made `a (` + 100k spaces + `)x` take minutes (holding the GIL).
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?(.*)", re.DOTALL)


def parse_requirement(line: str) -> Requirement | None:
    """One Requires-Dist value (PEP 508 subset: name, extras, specifier, marker)."""
    requirement, _, marker = line.partition(";")
    m = _REQUIREMENT.fullmatch(requirement)
    if m is None:
        return None
    spec = m.group(2).strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1].strip()
    return Requirement(canonical_name(m.group(1)), spec, marker.strip())


class Metadata(NamedTuple):
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


class _Dist(NamedTuple):
    name: str
    version: str  # from the folder name
    entry: str  # the dist-info folder


def site_dists(site: SiteDir) -> dict[str, _Dist]:
    found: dict[str, _Dist] = {}
    for entry in site.entries:
        parsed = parse_dist_dirname(entry)
        if parsed and parsed[0] not in found:
            found[parsed[0]] = _Dist(parsed[0], parsed[1], entry)
    return found


def read_metadata(ctx: FactContext, site: str, dist: _Dist, notes: list[str]) -> Metadata:
    folder = posixpath.join(site, dist.entry)
    name = "PKG-INFO" if dist.entry.endswith(".egg-info") else "METADATA"
    answer = ctx.host.read(posixpath.join(folder, name), max_bytes=SMALL_FILE_BYTES)
    if not answer.ok and name == "PKG-INFO" and answer.status == AnswerStatus.MISSING:
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


class NvidiaWheel(NamedTuple):
    name: str  # canonical: "nvidia-cudnn-cu12", "nvidia-cuda-runtime", "cuda-toolkit"
    version: str  # from its dist-info folder name
    cuda: str  # the CUDA major its name says ("12" for -cu12); "" when it says none
    location: str  # the site folder
    environments: tuple[str, ...] = ()


def is_cuda_wheel(name: str) -> bool:
    return name.startswith("nvidia-") or name == "cuda-toolkit"


@fact("python.nvidia_wheels")
def nvidia_wheels(ctx: FactContext) -> tuple[NvidiaWheel, ...]:
    found: list[NvidiaWheel] = []
    for site in ctx.get(python_environments).sites:
        for dist in site_dists(site).values():
            if is_cuda_wheel(dist.name):
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
