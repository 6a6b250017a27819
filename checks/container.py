"""The container GPU runtime: the NVIDIA Container Toolkit, the nvidia runtime in each
engine's configuration (Docker, containerd, CRI-O), the CDI specs against the GPUs the
driver sees, and the toolkit's own config.toml against the host.

Each engine's check runs only where that engine is installed; every check is skipped,
saying so, on a host with no container engine at all. A configuration file that does not
parse warns, naming the file and line (a garbage read is no proof of a broken file); a
file that could not be read is an `error`, never "present" or "absent". No check here
restarts or reconfigures an engine: that disturbs running jobs (docs/container.md).
"""

from __future__ import annotations

from dldoctor.checks.needs import WHY, gpu_words
from dldoctor.facts import Facts
from dldoctor.facts.container import (
    DOCKER_CONFIG,
    TOOLKIT_CONFIG,
    CdiSpec,
    EngineConfig,
    cdi_specs,
    containerd_config,
    crio_config,
    docker_config,
    engines,
    host_side,
    runtime_binaries,
    toolkit,
    toolkit_config,
)
from dldoctor.facts.nvidia import nvidia
from dldoctor.model import Outcome, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check
from dldoctor.versions import at_least

ENGINES = "Docker, containerd, CRI-O or Podman"
CDI_GENERATE = "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
# The runtimes an engine knows without a configuration naming them.
BUILT_IN = {"docker": ("runc", "io.containerd.runc.v2"), "containerd": ("runc",),
            "cri-o": ("runc", "crun")}  # fmt: skip


def any_engine(facts: Facts) -> Outcome | None:
    """Requirement: a container engine is installed; else a skip that says none is."""
    found = facts.get(engines)
    if found.found:
        return None
    if found.unknown:
        return errored("whether a container engine is installed could not be told",
                       list(found.unknown))  # fmt: skip
    return skipped(f"no container engine on this host ({ENGINES})")


def engine(name: str, title: str):
    def need(facts: Facts) -> Outcome | None:
        found = facts.get(engines)
        if found.has(name):
            return None
        if found.unknown:
            return errored(f"whether {title} is installed could not be told", list(found.unknown))
        return skipped(f"{title} is not installed")

    need.__name__ = f"{name.replace('-', '')}_installed"
    return need


@check(
    "container.toolkit",
    "NVIDIA Container Toolkit",
    requires=any_engine,
    remediation="Install the NVIDIA Container Toolkit (the nvidia-container-toolkit package "
    "from NVIDIA's repository) at or above the policy's [container] min_toolkit, then "
    "configure each engine: `nvidia-ctk runtime configure --runtime=docker` (or containerd, "
    "crio) and restart it when no job runs.",
)
def container_toolkit(facts: Facts, policy: Policy) -> Outcome:
    """The toolkit's version (`nvidia-ctk --version`, else `nvidia-container-cli
    --version`) against `[container] min_toolkit`; installed without a version when only
    its files are there. Skipped on a host without an NVIDIA GPU."""
    stack = facts.get(nvidia)
    if not stack.usable:
        why = WHY.get(stack.error, f"no GPU facts ({stack.error_message})")
        return skipped(f"{why}: whether containers need the toolkit is not judged")
    if not stack.gpus:
        return skipped("the NVIDIA driver reports no GPUs: the toolkit is not needed")
    tk = facts.get(toolkit)
    found = facts.get(engines).found
    lines = [f"{e.name}: {'; '.join(e.signs)}" for e in found]
    lines += list(tk.said) + list(tk.notes)
    if not tk.installed:
        if tk.said or tk.notes:
            return errored("whether the NVIDIA Container Toolkit is installed could not be told",
                           lines)  # fmt: skip
        # A warning: an engine beside the GPUs may serve only CPU containers (a CI
        # runner, a monitoring agent); where jobs run in containers it is the fault.
        return warned(
            f"the NVIDIA Container Toolkit is not installed: containers of "
            f"{', '.join(e.name for e in found)} cannot reach the GPUs",
            lines,
        )
    where = [f"{tk.runtime_binary} is there" if tk.runtime_binary else
             "nvidia-container-runtime was not found"]  # fmt: skip
    if tk.config_present:
        where.append("its config.toml is there")
    if not tk.version:
        return passed("the NVIDIA Container Toolkit is installed (version not reported)",
                      where + lines)  # fmt: skip
    said = f"NVIDIA Container Toolkit {tk.version} ({tk.tool})"
    newer = at_least(tk.version, policy.container.min_toolkit)
    if newer is False:
        return warned(
            f"{said} is older than {policy.container.min_toolkit}",
            [f"[container] min_toolkit is {policy.container.min_toolkit}: releases before "
             "1.17.8 let a crafted image escape to the host (CVE-2025-23266, CVE-2025-23267)",
             *where, *lines],
        )  # fmt: skip
    if newer is None:
        where.insert(0, f"{tk.version} cannot be compared with {policy.container.min_toolkit}")
    return passed(said, where + lines)


def runtime_lines(config: EngineConfig) -> list[str]:
    lines = [f"read {', '.join(config.files)}"] if config.files else []
    for r in config.runtimes:
        binary = f" -> {r.binary}" if r.binary else ""
        lines.append(f"runtime {r.handler}{binary} ({r.source})")
    if config.default_runtime:
        lines.append(f"default runtime: {config.default_runtime} ({config.default_source})")
    if config.schema:
        lines.append(f"config schema {config.schema}")
    if config.cdi_enabled is not None:
        lines.append(f"CDI {'enabled' if config.cdi_enabled else 'disabled'}")
    return lines


def judge_runtimes(
    facts: Facts, config: EngineConfig, *, title: str, configure: str, none_file: str
) -> Outcome:
    """The verdict on one engine's runtimes: the nvidia runtime declared, its binary on
    the host, the default runtime one the engine knows."""
    lines = runtime_lines(config) + list(config.notes)
    bad: list[str] = []
    odd: list[str] = list(config.errors)
    if not config.present:
        if config.notes:
            return errored(f"{title}'s configuration could not be read", lines)
        odd.append(f"{title} has no nvidia runtime: {none_file}")
    declared = {r.handler for r in config.runtimes}
    default = config.default_runtime
    if default and default not in declared and default not in BUILT_IN.get(config.engine, ()):
        bad.append(f"the default runtime {default!r} ({config.default_source}) is not declared: "
                   f"{title} cannot start containers")  # fmt: skip
    unknown: list[str] = []
    binaries = facts.get(runtime_binaries)
    for r in config.nvidia_runtimes:
        binary = binaries.get(r.binary)
        if binary is None:
            if not r.binary:
                odd.append(f"runtime {r.handler} ({r.source}) names no binary")
            continue
        lines += list(binary.notes)
        if binary.found is False:
            bad.append(f"runtime {r.handler} ({r.source}) runs {r.binary}, which is not on "
                       "the host: containers asking for it fail to start")  # fmt: skip
        elif binary.found is None:
            unknown.append(f"whether {r.binary} is on the host could not be told")
    if config.files and not config.nvidia_runtimes and not config.errors:
        odd.append(f"{title} declares no nvidia runtime ({', '.join(config.files)})")
    if bad:
        return failed(bad[0] if len(bad) == 1 else f"{len(bad)} faults in {title}'s runtimes",
                      bad + odd + unknown + lines, remediation=configure)  # fmt: skip
    if unknown:
        return errored(unknown[0], unknown + odd + lines)
    if odd:
        return warned(odd[0] if len(odd) == 1 else f"{len(odd)} problems in {title}'s runtimes",
                      odd + lines, remediation=configure)  # fmt: skip
    names = ", ".join(r.handler for r in config.nvidia_runtimes)
    said = (
        f" (default: {default})" if default in {r.handler for r in config.nvidia_runtimes} else ""
    )
    return passed(f"{title} declares the nvidia runtime: {names}{said}", lines)


@check(
    "container.docker.runtime",
    "Docker nvidia runtime",
    requires=engine("docker", "Docker"),
    remediation="`nvidia-ctk runtime configure --runtime=docker` writes the nvidia runtime "
    "into /etc/docker/daemon.json; restart dockerd (`systemctl restart docker`) when no "
    "container runs: a restart stops them unless live-restore is set.",
)
def docker_runtime(facts: Facts, policy: Policy) -> Outcome:
    """/etc/docker/daemon.json: an nvidia runtime (`runtimes.nvidia.path`) whose binary
    is on the host, and a `default-runtime` that is declared. Without one, `docker run
    --gpus` still works through the toolkit's hook, but `--runtime=nvidia` and Compose's
    `runtime: nvidia` do not: a warning."""
    config = facts.get(docker_config)
    return judge_runtimes(
        facts, config, title="Docker",
        configure="`nvidia-ctk runtime configure --runtime=docker`, then restart dockerd "
        "when no container runs (a restart stops them unless live-restore is set).",
        none_file=f"no {DOCKER_CONFIG} (`--gpus` works through the toolkit's hook; "
        "`--runtime=nvidia` does not)",
    )  # fmt: skip


@check(
    "container.containerd.runtime",
    "containerd nvidia runtime",
    requires=engine("containerd", "containerd"),
    remediation="`nvidia-ctk runtime configure --runtime=containerd` adds the nvidia "
    "runtimes (a drop-in under /etc/containerd/conf.d with containerd 2); restart "
    "containerd when no pod runs on the node (drain it first), and point a RuntimeClass "
    "with handler `nvidia` at it, or use the GPU Operator, which does both.",
)
def containerd_runtime(facts: Facts, policy: Policy) -> Outcome:
    """containerd's config.toml and the drop-ins it imports, in schema version 1, 2 or 3:
    an nvidia runtime (`...containerd.runtimes.nvidia` with `options.BinaryName`) whose
    binary is on the host, and a `default_runtime_name` that is declared. Skipped where
    the CRI plugin is disabled (Docker's own containerd)."""
    config = facts.get(containerd_config)
    if config.cri_disabled:
        return skipped(
            "containerd's CRI plugin is disabled (disabled_plugins): it serves Docker only; "
            "see container.docker.runtime",
            runtime_lines(config),
        )
    return judge_runtimes(
        facts, config, title="containerd",
        configure="`nvidia-ctk runtime configure --runtime=containerd`, then restart "
        "containerd on a drained node.",
        none_file="no config.toml (/etc/containerd, k3s, RKE2): its built-in defaults "
        "run runc only",
    )  # fmt: skip


@check(
    "container.crio.runtime",
    "CRI-O nvidia runtime",
    requires=engine("cri-o", "CRI-O"),
    remediation="`nvidia-ctk runtime configure --runtime=crio` writes "
    "/etc/crio/crio.conf.d/99-nvidia.toml; restart CRI-O on a drained node.",
)
def crio_runtime(facts: Facts, policy: Policy) -> Outcome:
    """/etc/crio/crio.conf and crio.conf.d/*: `[crio.runtime.runtimes.nvidia]` with a
    `runtime_path` on the host, and a `default_runtime` that is declared."""
    config = facts.get(crio_config)
    return judge_runtimes(
        facts, config, title="CRI-O",
        configure="`nvidia-ctk runtime configure --runtime=crio`, then restart CRI-O on a "
        "drained node.",
        none_file="no crio.conf or crio.conf.d: CRI-O runs crun or runc only",
    )  # fmt: skip


def _effective(specs: list[CdiSpec]) -> dict[str, str]:
    """Device name -> the spec that defines it; a spec in a later folder (/var/run/cdi
    after /etc/cdi) overrides an earlier one, as the CDI registry does."""
    out: dict[str, str] = {}
    for spec in specs:
        for name in spec.devices:
            out[name] = spec.path
    return out


@check(
    "container.cdi",
    "CDI specs for the GPUs",
    requires=any_engine,
    remediation=f"Regenerate the spec after every GPU or driver change: `{CDI_GENERATE}` "
    "(toolkit 1.18 and later regenerate /var/run/cdi/nvidia.yaml at boot through the "
    "nvidia-cdi-refresh service). Remove specs left by an older tool.",
)
def cdi(facts: Facts, policy: Policy) -> Outcome:
    """The CDI specs of kind nvidia.com/gpu in /etc/cdi and /var/run/cdi against the GPUs
    the driver sees: index names ("0".."N-1") and GPU UUIDs must be GPUs of this host, and
    every GPU must have a device. A spec from before a GPU swap is the classic "no devices
    in the container". No spec: skipped unless the toolkit runs in `cdi` mode."""
    found = facts.get(cdi_specs)
    mode = facts.get(toolkit_config).mode
    unread = list(found.unread)
    broken = [s.error for s in found.specs if s.error]
    specs = [s for s in found.specs if not s.error and s.nvidia_gpu]
    others = [f"{s.path}: kind {s.kind}" for s in found.specs if not s.error and not s.nvidia_gpu]
    if not specs:
        lines = broken + others + unread
        if unread:
            return errored("the CDI spec folders could not be read", lines)
        if broken:
            return warned(broken[0] if len(broken) == 1 else f"{len(broken)} CDI specs are "
                          "not understood", lines, remediation=f"`{CDI_GENERATE}`")  # fmt: skip
        if mode == "cdi":
            return failed(f"no CDI spec for nvidia.com/gpu in {', '.join(found.dirs)}, and "
                          f"{TOOLKIT_CONFIG} sets mode = \"cdi\": every GPU container fails",
                          lines)  # fmt: skip
        return skipped(f"no CDI spec for nvidia.com/gpu ({', '.join(found.dirs)}): containers "
                       "get the GPUs through the nvidia runtime's legacy path", lines)  # fmt: skip
    stack = facts.get(nvidia)
    if not stack.usable:
        return skipped(WHY.get(stack.error, "no GPU facts") + ": the CDI specs cannot be "
                       "compared with the GPUs", [s.path for s in specs])  # fmt: skip
    count = len(stack.gpus)
    uuids = {g.uuid.upper(): g.index for g in stack.gpus if g.uuid}
    names = _effective(specs)
    stale, seen = [], set()
    for name, path in names.items():
        base = name.split(":", 1)[0]  # "0:1" is MIG device 1 of GPU 0
        if base.isdigit():
            index = int(base)
            if index >= count:
                stale.append(f"{path}: device {name!r} names GPU {index}; the driver sees "
                             f"{count} GPU(s)")  # fmt: skip
            elif ":" not in name:
                seen.add(index)
        elif name.upper().startswith("GPU-"):
            if name.upper() not in uuids:
                stale.append(f"{path}: device {name} is no GPU of this host")
            else:
                seen.add(uuids[name.upper()])
    missing = sorted({g.index for g in stack.gpus} - seen)
    lines = [f"{s.path}: {len(s.devices)} device(s): {', '.join(s.devices[:10])}"
             + (" ..." if len(s.devices) > 10 else "") for s in specs]  # fmt: skip
    lines += broken + others + unread
    if stale or (missing and seen):
        said = stale[:]
        if missing:
            said.append(f"no device for {gpu_words(missing)}: the spec predates a GPU change")
        return failed(said[0] if len(said) == 1 else f"{len(said)} stale CDI devices", said + lines,
                      remediation=f"`{CDI_GENERATE}`, and remove the stale spec "
                      "if it is another file.")  # fmt: skip
    if missing:
        lines.insert(
            0, f"no index or UUID device for {gpu_words(missing)} (only {', '.join(names)})"
        )
    if broken:
        return warned(broken[0], lines, remediation=f"`{CDI_GENERATE}`")
    if unread:
        return errored(unread[0], lines)
    return passed(f"{len(specs)} CDI spec(s) name the {count} GPU(s) the driver sees", lines)


@check(
    "container.toolkit.config",
    "Container Toolkit settings",
    requires=any_engine,
    remediation=f"Edit {TOOLKIT_CONFIG} (`nvidia-ctk config --set KEY=VALUE --in-place`): "
    "`nvidia-container-cli.ldconfig` must name the host's ldconfig with a leading @ "
    "(@/sbin/ldconfig on RHEL, @/sbin/ldconfig.real on Debian and Ubuntu); `no-cgroups = "
    "true` is for rootless engines only. New containers see the change; no restart.",
)
def toolkit_settings(facts: Facts, policy: Policy) -> Outcome:
    """/etc/nvidia-container-runtime/config.toml against the host: an "@" (host) ldconfig
    that is missing fails (every legacy-mode GPU container fails to start); a container-side
    ldconfig warns unless features.allow-ldconfig-from-container (1.17 refuses it);
    `no-cgroups = true` without signs of a rootless engine warns (a rootful container then
    gets no device cgroup rules: "NVML: Unknown Error")."""
    tk = facts.get(toolkit)
    cfg = facts.get(toolkit_config)
    if cfg.file is None:
        if cfg.notes:
            return errored(f"{TOOLKIT_CONFIG} could not be read", list(cfg.notes))
        if not tk.installed:
            return skipped("the NVIDIA Container Toolkit is not installed")
        return skipped(f"no {TOOLKIT_CONFIG}: the toolkit's built-in defaults apply")
    if cfg.file.data is None:
        return warned(cfg.file.error, list(cfg.notes),
                      remediation="`nvidia-ctk config default --output=" + cfg.file.path +
                      "` writes a valid one (keep a copy of this one first).")  # fmt: skip
    cgroups = "(unset: false)" if cfg.no_cgroups is None else str(cfg.no_cgroups).lower()
    lines = [f"mode = {cfg.mode or '(unset: auto)'}", f"ldconfig = {cfg.ldconfig or '(unset)'}",
             f"no-cgroups = {cgroups}"]  # fmt: skip
    lines += list(cfg.notes)
    bad, odd = [], []
    if cfg.ldconfig.startswith("@"):
        if cfg.ldconfig_found is False:
            bad.append(f"ldconfig = {cfg.ldconfig!r}: {cfg.ldconfig[1:]} is not on the host; "
                       "containers in legacy mode fail to start")  # fmt: skip
        elif cfg.ldconfig_found is None:
            return errored(f"whether {cfg.ldconfig[1:]} is on the host could not be told", lines)
    elif cfg.ldconfig and not cfg.allow_container_ldconfig:
        odd.append(f"ldconfig = {cfg.ldconfig!r} is a path in the container: toolkit 1.17 and "
                   "later refuse it without features.allow-ldconfig-from-container")  # fmt: skip
    if cfg.no_cgroups:
        side = facts.get(host_side)
        lines += list(side.rootless) + list(side.notes)
        version = {True: "cgroup v2", False: "cgroup v1", None: "cgroup version unknown"}
        lines.append(version[side.cgroup_v2])
        if not side.rootless:
            odd.append("no-cgroups = true, and no sign of a rootless engine: rootful "
                       "containers get no device cgroup rules for the GPUs "
                       "(\"Failed to initialize NVML: Unknown Error\")")  # fmt: skip
    if bad:
        return failed(bad[0], bad + odd + lines)
    if odd:
        return warned(odd[0] if len(odd) == 1 else f"{len(odd)} toolkit settings to review",
                      odd + lines)  # fmt: skip
    return passed(f"{cfg.file.path}: " + ", ".join(lines[:3]), lines[3:])
