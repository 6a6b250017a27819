"""Deep-learning frameworks in the Python environments, read from their version files and
METADATA without importing them (seconds each): `torch/version.py`,
`tensorflow/python/platform/build_info.py`, `deepspeed/git_version_info_installed.py`,
JAX's CUDA plugins."""

from __future__ import annotations

import ast
import posixpath
import re
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.pythonenv import (
    SMALL_FILE_BYTES,
    Metadata,
    SiteDir,
    is_cuda_wheel,
    python_environments,
    read_metadata,
    site_dists,
)
from dldoctor.facts.reading import note_unless_missing
from dldoctor.host.base import Answer

# --- frameworks -----------------------------------------------------------------------


def _py_value(text: str, name: str) -> str | None:
    """`name = 'x'` / `name: Optional[str] = "x"` -> "x"; `= None` -> ""; absent -> None.

    Only the module-level lines that assign `name` are read, with `ast` (never executed):
    a regex over the lines was quadratic on a long one, and parsing the whole file took
    seconds on a large one. A generated version file assigns each name once, on one line:
    the first line that assigns it is the one read."""
    m = re.search(rf"^{re.escape(name)}[ \t]*[:=]", text, re.MULTILINE)
    if m is None:
        return None
    end = text.find("\n", m.start())
    found = _constant(text[m.start() : None if end < 0 else end], name)
    return found if isinstance(found, str) else ("" if found is None else None)


def _constant(line: str, name: str) -> object:
    """The constant the line assigns to `name`; ... when it assigns none."""
    try:
        tree = ast.parse(line)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # not Python, NUL bytes
        return ...
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name and isinstance(value, ast.Constant):
            return value.value
    return ...


class TorchBuild(NamedTuple):
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


class TfBuild(NamedTuple):
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


class DeepSpeedBuild(NamedTuple):
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


class Framework(NamedTuple):
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
        self.dists = site_dists(site)
        self.wheels = wheels  # canonical name -> version, for this site's environments

    def read(self, *parts: str) -> Answer:
        return self.ctx.host.read(posixpath.join(self.path, *parts), max_bytes=SMALL_FILE_BYTES)

    def metadata(self, name: str, notes: list[str]) -> Metadata | None:
        dist = self.dists.get(name)
        return read_metadata(self.ctx, self.path, dist, notes) if dist else None

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
            note_unless_missing(notes, answer)
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
        for dist in site_dists(site).values():
            if is_cuda_wheel(dist.name):
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
