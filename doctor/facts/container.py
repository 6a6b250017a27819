"""The container GPU runtime: the NVIDIA Container Toolkit (its tools, its
/etc/nvidia-container-runtime/config.toml), the container engines on the host and the
runtimes their configurations name (Docker's /etc/docker/daemon.json, containerd's
config.toml and the drop-ins it imports, CRI-O's crio.conf and crio.conf.d), and the CDI
specs under /etc/cdi and /var/run/cdi.

(`doctor.facts.system.container` is another question: whether the doctor itself runs
inside a container.)

Configuration files are parsed with tomllib and json. A file that does not parse is kept
as a `ConfigFile` whose `error` names the file and, where the parser says, the line: the
checks report it, they never see a traceback. CDI specs are YAML by default (`nvidia-ctk
cdi generate`); PyYAML is no runtime dependency, so `parse_cdi_yaml` reads the few keys
the checks need (`cdiVersion`, `kind`, the `name` of each entry of `devices`) from the
block-style YAML nvidia-ctk writes, and says so when a spec is in a shape it does not
follow (flow style, anchors), instead of guessing.

The reading rule is reading.py's: missing is an answer, permission denied or an I/O error
is a note naming the path and what was answered (never "present"), a timeout raises.
A folder listing holding names no folder can hold ("..", a "/" inside, NUL) is no
listing: it is noted and treated as unread, never as "no specs".
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from typing import Any, NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.reading import describe_in_full, load_json
from dldoctor.host.base import Answer, AnswerStatus, ProbeFailed
from dldoctor.tomllines import shape_problem

CONFIG_MAX_BYTES = 1 << 20  # a containerd config.toml with every plugin written out: ~20 KiB
SPEC_MAX_BYTES = 4 << 20  # a CDI spec for 8 GPUs with MIG profiles: a few hundred KiB
MAX_SPECS = 64
MAX_DROP_INS = 64

TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"
# The GPU Operator's toolkit container installs the toolkit on the node here, with its
# config.toml under .config/ (and points the engines' runtimes at these binaries).
OPERATOR_TOOLKIT = "/usr/local/nvidia/toolkit"
TOOLKIT_CONFIGS = (
    TOOLKIT_CONFIG,
    f"{OPERATOR_TOOLKIT}/.config/nvidia-container-runtime/config.toml",
)
DOCKER_CONFIG = "/etc/docker/daemon.json"
CONTAINERD_CONFIGS = (
    "/etc/containerd/config.toml",
    # k3s and RKE2 run their own containerd with a generated config.
    "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
    "/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
)
CRIO_CONFIG = "/etc/crio/crio.conf"
CRIO_DROP_INS = "/etc/crio/crio.conf.d"
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
# Where a runtime named without a path ("nvidia-container-runtime") is looked for.
BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin", "/sbin", OPERATOR_TOOLKIT)
NVIDIA_RUNTIME = "nvidia-container-runtime"

TOOLKIT_ARGVS = (("nvidia-ctk", "--version"), ("nvidia-container-cli", "--version"))
ENGINE_ARGVS = {
    "docker": ("dockerd", "--version"),
    "containerd": ("containerd", "--version"),
    "cri-o": ("crio", "--version"),
    "podman": ("podman", "--version"),
}
# What each engine's `--version` prints: "Docker version 27.3.1, build 41ca978",
# "containerd containerd.io 1.7.27 05044ec...", "containerd github.com/containerd/containerd/v2
# v2.0.0 207ad71", "crio version 1.31.1" (1.2x print "Version:  1.28.1" in a table),
# "podman version 5.2.2". Anything else is not taken as the engine answering.
ENGINE_VERSIONS = {
    "docker": re.compile(r"^Docker version \S+", re.MULTILINE),
    "containerd": re.compile(r"^containerd \S+ v?\d+\.\d+\S*", re.MULTILINE),
    "cri-o": re.compile(r"^(?:crio version \S+|Version:\s+v?\d+\.\d+\S*)", re.MULTILINE),
    "podman": re.compile(r"^podman version \S+", re.MULTILINE),
}


def _toml_loads(text: str) -> dict[str, Any]:
    from dldoctor.policy import toml_parser

    return toml_parser().loads(text)


# --- files ------------------------------------------------------------------------------


class ConfigFile(NamedTuple):
    """One configuration file as read and parsed."""

    path: str
    data: dict[str, Any] | None  # None: not parsed (`error` says why)
    error: str = ""  # "not valid TOML (at line 3, column 1): ..." with the file named


def _checked(answer: Answer, notes: list[str]) -> bool:
    """reading.py's rule for one answer: True when ok; a timeout raises; anything but
    ok or missing is noted with the path."""
    if answer.status == AnswerStatus.TIMEOUT:
        raise ProbeFailed(answer)
    if answer.status not in (AnswerStatus.OK, AnswerStatus.MISSING):
        notes.append(describe_in_full(answer))
    return answer.ok


def read_file(ctx: FactContext, path: str, notes: list[str], limit: int) -> str | None:
    answer = ctx.host.read(path, max_bytes=limit + 1)
    if not _checked(answer, notes):
        return None
    if len(answer.value or b"") > limit:
        notes.append(f"{path} is larger than {limit} bytes: not read")
        return None
    return answer.text


def plausible_names(names: Any) -> bool:
    """Whether a listing could have come from a folder: readdir never gives "." or "..",
    a "/" or NUL inside a name, or a name over 255 bytes."""
    if not isinstance(names, tuple | list):
        return False
    for name in names:
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\0" in name:
            return False
        if len(name.encode("utf-8", "surrogateescape")) > 255:
            return False
    return True


def list_dir(ctx: FactContext, path: str, notes: list[str]) -> tuple[str, ...] | None:
    """The names in `path`; () when it is missing; None when unread (noted)."""
    answer = ctx.host.listdir(path)
    if answer.status == AnswerStatus.MISSING:
        return ()
    if not _checked(answer, notes):
        return None
    if not plausible_names(answer.value):
        notes.append(f"list {path}: the answer holds names no folder holds: not read")
        return None
    return tuple(sorted(answer.value))


def parse_toml(path: str, text: str) -> ConfigFile:
    # tomllib's time on deep nesting and long dotted keys is not linear: such a text is
    # refused first, as the policy loader does.
    shape = shape_problem(text)
    if shape:
        return ConfigFile(path, None, f"{path} is not read: {shape}")
    try:
        data = _toml_loads(text)
    except ValueError as exc:  # TOMLDecodeError is one; its message names line and column
        return ConfigFile(path, None, f"{path} is not valid TOML: {str(exc)[:160]}")
    except RecursionError:
        return ConfigFile(path, None, f"{path} is not valid TOML: nested too deeply")
    return ConfigFile(path, data)


def parse_json_config(path: str, text: str) -> ConfigFile:
    data, why = load_json(text)
    if data is None and why:
        return ConfigFile(path, None, f"{path} is not valid JSON: {why}")
    if not isinstance(data, dict):
        return ConfigFile(path, None, f"{path} is not a JSON object")
    return ConfigFile(path, data)


def dig(data: Any, *keys: str) -> Any:
    """data[k1][k2]...; None where a key is missing or a level is not a table."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def exists(ctx: FactContext, path: str, notes: list[str]) -> bool | None:
    """Whether `path` exists on the host: True, False (missing), None (could not tell,
    noted: permission denied is not "exists"). A directory answers an error on read:
    its listing is asked instead."""
    answer = ctx.host.read(path, max_bytes=1)
    if answer.status == AnswerStatus.TIMEOUT:
        raise ProbeFailed(answer)
    if answer.ok:
        return True
    if answer.status == AnswerStatus.MISSING:
        return False
    notes.append(describe_in_full(answer))
    return None


def find_binary(ctx: FactContext, name: str, notes: list[str]) -> tuple[str, bool | None]:
    """(where `name` is, found): an absolute path is looked at; a bare name in BIN_DIRS.
    found None: it could not be told (noted)."""
    if name.startswith("/"):
        return name, exists(ctx, name, notes)
    unknown = False
    for folder in BIN_DIRS:
        where = posixpath.join(folder, name)
        found = exists(ctx, where, notes)
        if found:
            return where, True
        unknown = unknown or found is None
    return name, None if unknown else False


# --- runtimes named by the engines' configurations ---------------------------------------


class Runtime(NamedTuple):
    """A runtime an engine's configuration declares: the handler name a RuntimeClass or
    `docker run --runtime=` names it by, the binary it runs, the file it came from."""

    engine: str  # "docker", "containerd", "cri-o"
    handler: str  # "nvidia", "nvidia-cdi", "runc"
    binary: str  # the runtime binary as written ("" when the runtime names none)
    source: str  # the file that declares it
    runtime_type: str = ""  # containerd: "io.containerd.runc.v2"
    section: str = ""  # where in the file: `plugins."io.containerd.grpc.v1.cri"...runtimes.nvidia`

    @property
    def nvidia(self) -> bool:
        return NVIDIA_RUNTIME in posixpath.basename(self.binary) or (
            not self.binary and self.handler.startswith("nvidia")
        )


class EngineConfig(NamedTuple):
    """What one engine's configuration says of runtimes."""

    engine: str
    files: tuple[str, ...] = ()  # the files read, in the order they apply
    runtimes: tuple[Runtime, ...] = ()  # the last declaration of each handler wins
    default_runtime: str = ""  # the handler the engine runs by default ("" unsaid)
    default_source: str = ""  # the file that says so
    schema: str = ""  # containerd: "version 2"; docker/cri-o: ""
    cdi_enabled: bool | None = None  # containerd enable_cdi, docker features.cdi (None: unsaid)
    errors: tuple[str, ...] = ()  # files that did not parse, naming file and line
    notes: tuple[str, ...] = ()  # reads that failed
    cri_disabled: bool = False  # containerd: `disabled_plugins` holds the CRI plugin

    @property
    def present(self) -> bool:
        return bool(self.files or self.errors)

    def runtime(self, handler: str) -> Runtime | None:
        return next((r for r in self.runtimes if r.handler == handler), None)

    @property
    def nvidia_runtimes(self) -> tuple[Runtime, ...]:
        return tuple(r for r in self.runtimes if r.nvidia)


# containerd's CRI plugin, per config schema: (plugin id, what the docs call it).
CONTAINERD_CRI = {
    1: ("cri", "version 1"),
    2: ("io.containerd.grpc.v1.cri", "version 2"),
    3: ("io.containerd.cri.v1.runtime", "version 3"),
}


def _merge(base: dict, over: dict) -> dict:
    """containerd's merge of an imported file into the config: tables merged key by key,
    anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def containerd_runtimes(data: dict[str, Any], source: str) -> tuple[list[Runtime], str, str, Any]:
    """(the runtimes, the default handler, the schema, enable_cdi) of one containerd
    configuration (a file, or the merge of a file and its imports)."""
    version = data.get("version", 1)
    version = version if isinstance(version, int) and version in CONTAINERD_CRI else 1
    plugin, schema = CONTAINERD_CRI[version]
    plugins = dig(data, "plugins")
    cri = dig(plugins, plugin)
    if version == 1 and cri is None:
        cri = dig(plugins, "io.containerd.grpc.v1.cri")  # version 1 files written with ids
    block = dig(cri, "containerd")
    table = dig(block, "runtimes")
    found = []
    for handler, spec in (table or {}).items() if isinstance(table, dict) else ():
        if not isinstance(spec, dict):
            continue
        options = spec.get("options") if isinstance(spec.get("options"), dict) else {}
        binary = options.get("BinaryName") or options.get("Runtime") or ""
        binary = binary if isinstance(binary, str) else ""
        kind = spec.get("runtime_type") if isinstance(spec.get("runtime_type"), str) else ""
        section = f'plugins."{plugin}".containerd.runtimes.{handler}'
        found.append(Runtime("containerd", str(handler), binary, source, kind, section))
    default = dig(block, "default_runtime_name")
    if version == 1 and not isinstance(default, str):
        # version 1's `default_runtime` table, a runtime of its own.
        legacy = dig(block, "default_runtime")
        if isinstance(legacy, dict):
            binary = legacy.get("runtime_engine") or dig(legacy, "options", "BinaryName") or ""
            binary = binary if isinstance(binary, str) else ""
            kind = legacy.get("runtime_type") if isinstance(legacy.get("runtime_type"), str) else ""
            found.append(Runtime("containerd", "default_runtime", binary, source, kind,
                                 f"plugins.{plugin}.containerd.default_runtime"))  # fmt: skip
            default = "default_runtime"
    cdi = dig(cri, "enable_cdi")
    if cdi is None:  # nvidia-ctk writes version 1's under plugins.cri.containerd
        cdi = dig(block, "enable_cdi")
    return found, default if isinstance(default, str) else "", schema, cdi


def _imports(ctx: FactContext, main: str, data: dict, notes: list[str]) -> list[str]:
    """The files containerd imports from `main`, in order: each `imports` entry a path or
    a glob over one folder (relative ones against the config's folder)."""
    wanted = data.get("imports")
    if not isinstance(wanted, list):
        return []
    files: list[str] = []
    for pattern in wanted[:MAX_DROP_INS]:
        if not isinstance(pattern, str) or not pattern:
            continue
        if not pattern.startswith("/"):
            pattern = posixpath.join(posixpath.dirname(main), pattern)
        folder, name = posixpath.split(pattern)
        if not any(c in name for c in "*?["):
            files.append(pattern)
            continue
        names = list_dir(ctx, folder, notes)
        files += [posixpath.join(folder, n) for n in names or () if fnmatch.fnmatch(n, name)]
    return [f for f in dict.fromkeys(files) if f != main][:MAX_DROP_INS]


def _load(ctx: FactContext, engine: str, path: str, parse, notes: list[str]):
    """(the engine's main file parsed, None), or (None, the EngineConfig that says it is
    not there, not readable or not parsed)."""
    text = read_file(ctx, path, notes, CONFIG_MAX_BYTES)
    if text is None:
        return None, EngineConfig(engine, notes=tuple(notes))
    parsed = parse(path, text)
    if parsed.data is None:
        return None, EngineConfig(engine, errors=(parsed.error,), notes=tuple(notes))
    return parsed, None


def _read_toml(ctx: FactContext, path: str, notes: list[str], errors: list[str]) -> dict | None:
    """A drop-in's tables; None when it is not there, not readable (noted) or not TOML
    (its error kept in `errors`)."""
    text = read_file(ctx, path, notes, CONFIG_MAX_BYTES)
    if text is None:
        return None
    parsed = parse_toml(path, text)
    if parsed.data is None:
        errors.append(parsed.error)
    return parsed.data


def containerd_config_of(ctx: FactContext, main: str) -> EngineConfig:
    notes: list[str] = []
    parsed, none = _load(ctx, "containerd", main, parse_toml, notes)
    if none is not None:
        return none
    read: list[tuple[str, dict]] = [(main, parsed.data)]
    errors: list[str] = []
    merged = parsed.data
    for path in _imports(ctx, main, parsed.data, notes):
        drop = _read_toml(ctx, path, notes, errors)
        if drop is None:
            continue
        # An imported file without `version` follows the main file's schema.
        data = drop
        if "version" not in data and "version" in parsed.data:
            data = {**data, "version": parsed.data["version"]}
        read.append((path, data))
        merged = _merge(merged, drop)
    # Each runtime is credited to the last file that declares it.
    runtimes: dict[str, Runtime] = {}
    default, default_source, cdi = "", "", None
    for path, data in read:
        found, said, _, enable = containerd_runtimes(data, path)
        runtimes.update({r.handler: r for r in found})
        if said:
            default, default_source = said, path
        if enable is not None:
            cdi = enable
    files = [path for path, _ in read]
    _, _, schema, _ = containerd_runtimes(merged, main)
    disabled = merged.get("disabled_plugins")
    cri_off = isinstance(disabled, list) and any(
        p in ("cri", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime") for p in disabled
    )
    return EngineConfig(
        "containerd",
        files=tuple(files),
        runtimes=tuple(runtimes.values()),
        default_runtime=default,
        default_source=default_source,
        schema=schema,
        cdi_enabled=cdi if isinstance(cdi, bool) else None,
        errors=tuple(errors),
        notes=tuple(notes),
        cri_disabled=cri_off,
    )


@fact("containerd.config")
def containerd_config(ctx: FactContext) -> EngineConfig:
    """containerd's runtimes, from the first of CONTAINERD_CONFIGS that is there (and the
    drop-ins its `imports` name): each with its handler name (what a Kubernetes
    RuntimeClass's `handler` names) and the file that declares it. Both config schemas
    (version 2: `plugins."io.containerd.grpc.v1.cri"`, version 3:
    `plugins."io.containerd.cri.v1.runtime"`) and version 1 (`plugins.cri`, or no
    `version`) are read. No file: containerd's built-in defaults (runc only), `present`
    False."""
    notes: list[str] = []
    for main in CONTAINERD_CONFIGS:
        found = containerd_config_of(ctx, main)
        if found.present:
            return found._replace(notes=tuple(notes) + found.notes)
        notes += found.notes
    return EngineConfig("containerd", notes=tuple(notes))


@fact("docker.config")
def docker_config(ctx: FactContext) -> EngineConfig:
    """/etc/docker/daemon.json: `runtimes` ({"nvidia": {"path": ...}}), `default-runtime`,
    and `features.cdi`."""
    notes: list[str] = []
    parsed, none = _load(ctx, "docker", DOCKER_CONFIG, parse_json_config, notes)
    if none is not None:
        return none
    runtimes = []
    table = parsed.data.get("runtimes")
    for handler, spec in table.items() if isinstance(table, dict) else ():
        binary = spec.get("path") if isinstance(spec, dict) else None
        runtimes.append(Runtime("docker", str(handler), binary if isinstance(binary, str) else "",
                                DOCKER_CONFIG, section=f"runtimes.{handler}"))  # fmt: skip
    default = parsed.data.get("default-runtime")
    cdi = dig(parsed.data, "features", "cdi")
    return EngineConfig(
        "docker",
        files=(DOCKER_CONFIG,),
        runtimes=tuple(runtimes),
        default_runtime=default if isinstance(default, str) else "",
        default_source=DOCKER_CONFIG if isinstance(default, str) else "",
        cdi_enabled=cdi if isinstance(cdi, bool) else None,
        notes=tuple(notes),
    )


@fact("crio.config")
def crio_config(ctx: FactContext) -> EngineConfig:
    """/etc/crio/crio.conf, then /etc/crio/crio.conf.d/* in lexical order (CRI-O's own
    order: a later file overrides): `[crio.runtime.runtimes.<handler>]` with its
    `runtime_path`, and `[crio.runtime] default_runtime`."""
    notes: list[str] = []
    paths = [CRIO_CONFIG]
    names = list_dir(ctx, CRIO_DROP_INS, notes)
    paths += [posixpath.join(CRIO_DROP_INS, n) for n in (names or ())[:MAX_DROP_INS]]
    files, errors = [], []
    runtimes: dict[str, Runtime] = {}
    default, default_source = "", ""
    for path in paths:
        data = _read_toml(ctx, path, notes, errors)
        if data is None:
            continue
        files.append(path)
        runtime = dig(data, "crio", "runtime")
        table = dig(runtime, "runtimes")
        for handler, spec in table.items() if isinstance(table, dict) else ():
            binary = spec.get("runtime_path") if isinstance(spec, dict) else None
            runtimes[str(handler)] = Runtime(
                "cri-o", str(handler), binary if isinstance(binary, str) else "", path,
                dig(spec, "runtime_type") or "", f"crio.runtime.runtimes.{handler}",
            )  # fmt: skip
        said = dig(runtime, "default_runtime")
        if isinstance(said, str) and said:
            default, default_source = said, path
    return EngineConfig(
        "cri-o",
        files=tuple(files),
        runtimes=tuple(runtimes.values()),
        default_runtime=default,
        default_source=default_source,
        errors=tuple(errors),
        notes=tuple(notes),
    )


# --- the toolkit ---------------------------------------------------------------------------

_VERSION = re.compile(r"version:?\s+v?(\d+\.\d+(?:\.\d+)?(?:[-~.+][\w.~+-]*)?)", re.IGNORECASE)


def parse_tool_version(text: str) -> str:
    """The version in `nvidia-ctk --version` ("NVIDIA Container Toolkit CLI version
    1.17.8") or `nvidia-container-cli --version` ("cli-version: 1.17.8"); "" if none."""
    m = _VERSION.search(text[:4096])
    return m.group(1)[:40] if m else ""


class ToolkitConfig(NamedTuple):
    """/etc/nvidia-container-runtime/config.toml, the keys the checks judge."""

    file: ConfigFile | None  # None: no file (the toolkit's built-in defaults apply)
    no_cgroups: bool | None = None  # [nvidia-container-cli] no-cgroups (None: unset)
    ldconfig: str = ""  # [nvidia-container-cli] ldconfig: "@/sbin/ldconfig"
    mode: str = ""  # [nvidia-container-runtime] mode: "auto", "cdi", "legacy", "csv"
    spec_dirs: tuple[str, ...] = ()  # [nvidia-container-runtime.modes.cdi] spec-dirs
    notes: tuple[str, ...] = ()
    ldconfig_found: bool | None = None  # an "@" (host) ldconfig is there; None: not asked
    allow_container_ldconfig: bool = False  # [features] allow-ldconfig-from-container


def toolkit_settings(file: ConfigFile) -> ToolkitConfig:
    data = file.data or {}
    cli = dig(data, "nvidia-container-cli")
    no_cgroups = dig(cli, "no-cgroups")
    ldconfig = dig(cli, "ldconfig")
    mode = dig(data, "nvidia-container-runtime", "mode")
    dirs = dig(data, "nvidia-container-runtime", "modes", "cdi", "spec-dirs")
    allow = dig(data, "features", "allow-ldconfig-from-container") is True
    return ToolkitConfig(
        file,
        no_cgroups if isinstance(no_cgroups, bool) else None,
        ldconfig if isinstance(ldconfig, str) else "",
        mode if isinstance(mode, str) else "",
        tuple(d for d in dirs if isinstance(d, str)) if isinstance(dirs, list) else (),
        allow_container_ldconfig=allow,
    )


@fact("container.toolkit.config")
def toolkit_config(ctx: FactContext) -> ToolkitConfig:
    """The first of TOOLKIT_CONFIGS that is there: the package's, else the GPU Operator's."""
    notes: list[str] = []
    for path in TOOLKIT_CONFIGS:
        text = read_file(ctx, path, notes, CONFIG_MAX_BYTES)
        if text is not None:
            break
    else:
        return ToolkitConfig(None, notes=tuple(notes))
    found = toolkit_settings(parse_toml(path, text))
    where = None
    if found.ldconfig.startswith("@/"):
        # "@" marks a path on the host; ldconfig on Debian and Ubuntu is /sbin/ldconfig.real.
        where = exists(ctx, found.ldconfig[1:], notes)
    return found._replace(notes=tuple(notes), ldconfig_found=where)


class Toolkit(NamedTuple):
    version: str = ""  # "" when no tool answered with one
    tool: str = ""  # the tool that gave it: "nvidia-ctk"
    runtime_binary: str = ""  # where nvidia-container-runtime is ("" not found)
    config_present: bool = False  # a config.toml of TOOLKIT_CONFIGS is there
    said: tuple[str, ...] = ()  # what the tools answered when they did not answer a version
    notes: tuple[str, ...] = ()

    @property
    def installed(self) -> bool:
        return bool(self.version or self.runtime_binary or self.config_present)


@fact("container.toolkit")
def toolkit(ctx: FactContext) -> Toolkit:
    """The toolkit's version from `nvidia-ctk --version` (1.12 and later), else
    `nvidia-container-cli --version`; and its files: nvidia-container-runtime in BIN_DIRS,
    its config.toml."""
    notes: list[str] = []
    said: list[str] = []
    version, tool = "", ""
    for argv in TOOLKIT_ARGVS:
        answer = ctx.host.run(list(argv))
        if answer.status == AnswerStatus.TIMEOUT:
            raise ProbeFailed(answer)
        if answer.ok and answer.value.returncode == 0:
            version = parse_tool_version(answer.text)
            if version:
                tool = argv[0]
                break
            said.append(f"`{' '.join(argv)}` printed no version")
        elif answer.status not in (AnswerStatus.MISSING, AnswerStatus.NOT_INSTALLED):
            said.append(answer.describe() if not answer.ok else
                        f"`{' '.join(argv)}` exited with {answer.value.returncode}")  # fmt: skip
    where, found = find_binary(ctx, NVIDIA_RUNTIME, notes)
    config = any([exists(ctx, path, notes) for path in TOOLKIT_CONFIGS])
    return Toolkit(version, tool, where if found else "", config, tuple(said), tuple(notes))


class Engine(NamedTuple):
    name: str  # "docker", "containerd", "cri-o", "podman"
    version: str  # what `--version` printed, first line ("" when it did not answer)
    signs: tuple[str, ...]  # why it is taken as installed


class Engines(NamedTuple):
    found: tuple[Engine, ...]
    unknown: tuple[str, ...] = ()  # engines that could not be looked for (what was answered)

    def has(self, name: str) -> bool:
        return any(e.name == name for e in self.found)


@fact("container.engines")
def engines(ctx: FactContext) -> Engines:
    """The container engines installed: the engine's `--version` answered with its
    version line, or its configuration is there and parses."""
    configs = {
        "docker": ctx.get(docker_config),
        "containerd": ctx.get(containerd_config),
        "cri-o": ctx.get(crio_config),
    }
    found, unknown = [], []
    for name, argv in ENGINE_ARGVS.items():
        signs = []
        version = ""
        answer = ctx.host.run(list(argv))
        if answer.status == AnswerStatus.TIMEOUT:
            raise ProbeFailed(answer)
        said = ENGINE_VERSIONS[name].search(answer.text[:4096]) if answer.ok else None
        if answer.ok and answer.value.returncode == 0 and said:
            version = said.group(0)[:100]
            signs.append(f"`{' '.join(argv)}`: {version}")
        elif answer.status not in (AnswerStatus.MISSING, AnswerStatus.NOT_INSTALLED):
            unknown.append(answer.describe() if not answer.ok else
                           f"`{' '.join(argv)}` exited with {answer.value.returncode}")  # fmt: skip
        config = configs.get(name)
        # A file that does not parse is no sign: garbage read is no proof of an engine.
        if config is not None and config.files:
            signs.append(f"{config.files[0]} is there")
        if signs:
            found.append(Engine(name, version, tuple(signs)))
    return Engines(tuple(found), tuple(unknown))


# --- CDI ----------------------------------------------------------------------------------


class CdiSpec(NamedTuple):
    path: str
    kind: str = ""  # "nvidia.com/gpu"
    version: str = ""  # cdiVersion
    devices: tuple[str, ...] = ()  # the device names: "0", "all", "GPU-<uuid>", "0:1"
    error: str = ""  # why the spec was not understood ("" when it was)

    @property
    def nvidia_gpu(self) -> bool:
        return self.kind == "nvidia.com/gpu"


_KEY = re.compile(r"^([A-Za-z][\w.-]*):(?:\s+(.*))?$")
_ITEM = re.compile(r"^(\s*)-\s+(.*)$")


def _scalar(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw.split(" #", 1)[0].strip()


def parse_cdi_yaml(path: str, text: str) -> CdiSpec:
    """`cdiVersion`, `kind` and the device names of a CDI spec in the block style
    nvidia-ctk writes (`devices:` then `- name: "0"` items, any indent). A spec in another
    shape (flow style, anchors, tabs, documents after the first) is said, not guessed."""
    top: dict[str, str] = {}
    names: list[str] = []
    in_devices = False
    item_indent: int | None = None
    documents = 0
    for number, line in enumerate(text.splitlines()[:200_000], 1):
        if line.startswith("---"):
            documents += 1
            if documents > 1:
                return CdiSpec(path, error=f"{path}: line {number}: a second YAML document")
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            return CdiSpec(path, error=f"{path}: line {number}: a tab in the indentation")
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0 and not (in_devices and line.startswith("-")):
            m = _KEY.match(line.rstrip())
            if not m:
                return CdiSpec(path, error=f"{path}: line {number}: not a `key: value` line")
            key, value = m.group(1), (m.group(2) or "").strip()
            if value[:1] in ("&", "*", "[", "{", "|", ">") and key in ("devices", "kind"):
                return CdiSpec(path, error=f"{path}: line {number}: {key} is not in block "
                               "style (flow style, an anchor or an alias)")  # fmt: skip
            top[key] = _scalar(value)
            in_devices = key == "devices"
            continue
        if not in_devices:
            continue
        m = _ITEM.match(line)
        if m and (item_indent is None or len(m.group(1)) == item_indent):
            item_indent = len(m.group(1))
            rest = m.group(2)
            if rest.startswith("name:"):
                names.append(_scalar(rest[5:]))
            continue
        # A key of the current item, at its key indent ("  name:" after "- containerEdits:").
        if item_indent is not None and indent == item_indent + 2 and stripped.startswith("name:"):
            names.append(_scalar(stripped[5:]))
    if not top.get("kind"):
        return CdiSpec(path, error=f"{path}: no `kind` at the top level")
    return CdiSpec(path, top["kind"], top.get("cdiVersion", ""), tuple(names))


def parse_cdi_json(path: str, text: str) -> CdiSpec:
    data, why = load_json(text)
    if not isinstance(data, dict):
        return CdiSpec(path, error=f"{path} is not valid JSON: {why or 'not an object'}")
    kind = data.get("kind")
    devices = data.get("devices")
    names = tuple(
        str(d["name"]) for d in devices if isinstance(d, dict) and isinstance(d.get("name"), str)
    ) if isinstance(devices, list) else ()  # fmt: skip
    if not isinstance(kind, str) or not kind:
        return CdiSpec(path, error=f"{path}: no `kind`")
    version = data.get("cdiVersion")
    return CdiSpec(path, kind, version if isinstance(version, str) else "", names)


def parse_cdi(path: str, text: str) -> CdiSpec:
    return parse_cdi_json(path, text) if path.endswith(".json") else parse_cdi_yaml(path, text)


class CdiSpecs(NamedTuple):
    dirs: tuple[str, ...]  # the folders looked in
    specs: tuple[CdiSpec, ...]
    unread: tuple[str, ...] = ()  # folders or specs that could not be read (what was said)


@fact("container.cdi")
def cdi_specs(ctx: FactContext) -> CdiSpecs:
    """The CDI specs (*.yaml, *.yml, *.json) in /etc/cdi and /var/run/cdi, and in the
    toolkit's `spec-dirs` when its config names others."""
    dirs = list(CDI_DIRS)
    dirs += [d for d in ctx.get(toolkit_config).spec_dirs if d.startswith("/") and d not in dirs]
    specs: list[CdiSpec] = []
    unread: list[str] = []
    for folder in dirs[:8]:
        names = list_dir(ctx, folder, unread)
        for name in [n for n in names or () if n.endswith((".yaml", ".yml", ".json"))][:MAX_SPECS]:
            path = posixpath.join(folder, name)
            text = read_file(ctx, path, unread, SPEC_MAX_BYTES)
            if text is not None:
                specs.append(parse_cdi(path, text))
    return CdiSpecs(tuple(dirs[:8]), tuple(specs), tuple(unread))


# --- what the host's cgroups and ldconfig look like ---------------------------------------


class HostSide(NamedTuple):
    cgroup_v2: bool | None  # /sys/fs/cgroup/cgroup.controllers is there (None: unread)
    rootless: tuple[str, ...]  # signs of a rootless engine setup
    notes: tuple[str, ...] = ()


@fact("container.host")
def host_side(ctx: FactContext) -> HostSide:
    """What the toolkit's settings are judged against: the cgroup version and signs of
    rootless containers (subordinate ids in /etc/subuid, podman or rootless Docker's
    setup tool installed)."""
    notes: list[str] = []
    v2 = exists(ctx, "/sys/fs/cgroup/cgroup.controllers", notes)
    signs = []
    subuid = read_file(ctx, "/etc/subuid", notes, 1 << 20)
    if subuid and any(line.count(":") == 2 for line in subuid.splitlines()):
        signs.append("/etc/subuid gives users subordinate ids")
    _, setup = find_binary(ctx, "dockerd-rootless-setuptool.sh", notes)
    if setup:
        signs.append("dockerd-rootless-setuptool.sh is installed")
    return HostSide(v2, tuple(signs), tuple(notes))


class RuntimeBinary(NamedTuple):
    name: str  # as the configuration writes it
    where: str  # the path looked at (the first found for a bare name)
    found: bool | None  # None: could not be told (the notes say why)
    notes: tuple[str, ...] = ()


@fact("container.runtime_binaries")
def runtime_binaries(ctx: FactContext) -> dict[str, RuntimeBinary]:
    """Whether each NVIDIA runtime binary the engines' configurations name is on the host
    (a bare name is looked for in BIN_DIRS, as the engines' PATH would find it)."""
    names = {
        r.binary
        for config in (ctx.get(docker_config), ctx.get(containerd_config), ctx.get(crio_config))
        for r in config.nvidia_runtimes
        if r.binary
    }
    out = {}
    for name in sorted(names)[:16]:
        notes: list[str] = []
        where, found = find_binary(ctx, name, notes)
        out[name] = RuntimeBinary(name, where, found, tuple(notes))
    return out
