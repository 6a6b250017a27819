"""CUDA stack checks: toolkits, runtimes against the driver, cuDNN against the frameworks."""

from __future__ import annotations

from dldoctor import cudacompat
from dldoctor.checks.needs import UNASKED, WHY
from dldoctor.facts import Facts
from dldoctor.facts import cudalibs as cuda_libs
from dldoctor.facts import frameworks as cuda_fw
from dldoctor.facts import pythonenv as pyenv
from dldoctor.facts import toolkit as cuda_tk
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.pci import NVIDIA, pci_devices
from dldoctor.model import Outcome, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check
from dldoctor.versions import matches, version_tuple


def major(version: str | None) -> str:
    parts = version_tuple(version or "")
    return str(parts[0]) if parts else ""


def pinned_toolkit(pin: str) -> str:
    return (
        f"Install CUDA {pin} and select it (/usr/local/cuda, CUDA_HOME or PATH), or correct "
        "[cuda] expected_toolkit if the fleet moved on."
    )


@check("cuda.toolkit", "CUDA toolkit")
def toolkit(facts: Facts, policy: Policy) -> Outcome:
    tks = facts.get(cuda_tk.toolkits)
    pin = policy.cuda.expected_toolkit
    if not tks.toolkits and pin:
        return failed(
            f"no CUDA toolkit installed; the policy expects CUDA {pin}",
            tks.notes,
            remediation=pinned_toolkit(pin),
        )
    if not tks.toolkits:
        return skipped(
            "no CUDA toolkit installed (PyTorch and JAX wheels bring their runtime)", tks.notes
        )
    lines = []
    for t in tks.toolkits:
        via = f", also {', '.join(t.links)}" if t.links else ""
        lines.append(f"{t.path}: CUDA {t.version or 'unknown'} (from {t.source or 'nothing'}{via})")
        lines.extend(f"{t.path}: {n}" for n in t.notes)
    chosen = tks.get(tks.selected) if tks.selected else None
    if chosen is None:
        summary = (
            f"{len(tks.toolkits)} toolkit(s), none selected by CUDA_HOME, PATH or /usr/local/cuda"
        )
    else:
        summary = f"CUDA {chosen.version or '?'} at {chosen.path} (selected by {tks.selected_by})"
    if pin:
        same = matches(chosen.version, pin) if chosen else False
        if same is False:
            return failed(
                f"{summary}; the policy expects CUDA {pin}",
                lines + list(tks.notes),
                remediation=pinned_toolkit(pin),
            )
        if same is None:
            return warned(
                f"{summary}; its version cannot be compared with the policy's {pin}",
                lines + list(tks.notes),
            )
        summary += " as the policy expects"
    return passed(summary, lines + list(tks.notes))


def runtimes(facts: Facts) -> list[tuple[str, str, bool]]:
    """(what, CUDA version, in use) for every CUDA runtime found. A toolkit nothing selects
    (an old one left in /usr/local) is listed but cannot fail the host."""
    tks = facts.get(cuda_tk.toolkits)
    chosen = tks.get(tks.selected) if tks.selected else None
    found = []
    for t in tks.toolkits:
        if t.version:
            found.append((f"toolkit {t.path}", t.version, t is chosen or len(tks.toolkits) == 1))
    for fw in facts.get(cuda_fw.frameworks):
        if fw.cuda:
            found.append((f"{fw.name} {fw.version} ({fw.location})", fw.cuda, True))
    return found


def compat_libcuda(facts: Facts) -> tuple[str, ...]:
    """cuda-compat's libcuda (forward compatibility on datacenter GPUs), if installed."""
    libs = facts.get(cuda_libs.libraries).named("libcuda")
    return tuple(p for paths in libs.values() for p in paths if "/compat/" in p)


@check(
    "cuda.compat",
    "CUDA runtime vs driver",
    remediation="Upgrade the NVIDIA driver to at least the version named (R580 or newer for "
    "CUDA 13), or install a framework build for an older CUDA (e.g. a +cu118 PyTorch wheel); "
    "on datacenter GPUs the cuda-compat package is a third way.",
)
def cuda_compat(facts: Facts, policy: Policy) -> Outcome:
    found = runtimes(facts)
    if not found:
        return skipped("no CUDA runtime found (no toolkit, no CUDA build of a framework)")
    stack = facts.get(nvidia)
    if not stack.usable or not stack.driver_version:
        reason = WHY.get(stack.error, "the driver version is unknown")
        return skipped(reason, [f"{what}: CUDA {v}" for what, v, _ in found])
    too_old, unused_old, lines = [], [], []
    for what, version, in_use in found:
        v = cudacompat.judge(version, stack.driver_version)
        if v.result == cudacompat.TOO_OLD:
            (too_old if in_use else unused_old).append(
                f"{what}: CUDA {v.runtime} needs driver ≥ {v.needed}"
            )
        elif v.result == cudacompat.MINOR_COMPAT:
            lines.append(
                f"{what}: CUDA {v.runtime} runs through minor-version compatibility "
                f"(driver ≥ {v.floor}); code that needs PTX JIT of newer PTX fails "
                f"below {v.needed}"
            )
        elif v.result == cudacompat.SUPPORTED:
            lines.append(f"{what}: CUDA {v.runtime} supported (needs ≥ {v.needed})")
        else:
            lines.append(f"{what}: CUDA {version} is not in the compatibility table")
    driver = f"driver {stack.driver_version} (CUDA {stack.cuda_driver_version or '?'})"
    compat = compat_libcuda(facts)
    if too_old and compat:
        return warned(
            f"{driver} is too old for {len(too_old)} CUDA runtime(s); they can only run "
            "through the cuda-compat package (datacenter GPUs)",
            too_old + unused_old + lines + [f"cuda-compat: {p}" for p in compat],
        )
    if too_old:
        return failed(
            f"{driver} is too old for {len(too_old)} CUDA runtime(s)", too_old + unused_old + lines
        )
    if unused_old:
        return warned(
            f"{driver} is too old for {len(unused_old)} installed toolkit(s) nothing selects",
            unused_old + lines,
            remediation="Remove the old toolkit, or upgrade the driver before anyone selects it.",
        )
    return passed(f"{driver} runs every CUDA runtime found ({len(found)})", lines)


@check(
    "cuda.cudnn",
    "cuDNN",
    remediation="Install the cuDNN wheel for the framework's CUDA major "
    "(`pip install nvidia-cudnn-cu12` for a +cu12x PyTorch), or reinstall the framework so "
    "pip resolves its pinned cuDNN.",
)
def cudnn(facts: Facts, policy: Policy) -> Outcome:
    cuda_builds = [fw for fw in facts.get(cuda_fw.frameworks) if fw.cuda and fw.name != "deepspeed"]
    wheels = facts.get(pyenv.nvidia_wheels)
    found = facts.get(cuda_libs.cudnn)
    details = [f"{c.source}: cuDNN {c.version or '?'} ({c.path})" for c in found]
    details += [f"{c.path}: {n}" for c in found for n in c.notes if not c.version]
    system = [c for c in found if c.version]  # a header that could not be read is no install
    if not cuda_builds:
        if system:
            return passed(
                f"cuDNN {system[0].version or '?'} installed; no CUDA framework uses it", details
            )
        return skipped("no CUDA build of a framework installed", details)
    problems, lines = [], []
    for fw in cuda_builds:
        want = major(fw.cuda)
        beside = [
            w
            for w in wheels
            if w.name.startswith("nvidia-cudnn") and fw.location.startswith(w.location)
        ]
        matching = [w for w in beside if w.cuda in ("", want)]
        if fw.cudnn:
            lines.append(f"{fw.name} {fw.version} (CUDA {fw.cuda}): cuDNN {fw.cudnn}")
        lines.extend(f"{fw.name}: {n}" for n in fw.notes)
        if beside and not matching:
            wrong = ", ".join(f"{w.name} {w.version}" for w in beside)
            problems.append(f"{fw.name} {fw.version} is built for CUDA {want}, beside it: {wrong}")
        elif not fw.cudnn and not matching and not system:
            # Older wheels carry cuDNN in torch/lib and conda in $CONDA_PREFIX/lib.
            lines.append(f"{fw.name} {fw.version}: no separate cuDNN found (bundled, or missing)")
    if problems:
        return failed("; ".join(problems), lines + details)
    return passed(f"cuDNN found for {len(cuda_builds)} CUDA framework build(s)", lines + details)


@check(
    "cuda.framework.driver",
    "Framework without driver",
    remediation="Install the NVIDIA driver, or install the framework's CPU build if this host "
    "is not meant to use GPUs.",
)
def framework_driver(facts: Facts, policy: Policy) -> Outcome:
    builds = [fw for fw in facts.get(cuda_fw.frameworks) if fw.cuda]
    if not builds:
        return skipped("no CUDA build of a framework installed")
    stack = facts.get(nvidia)
    names = ", ".join(f"{fw.name} {fw.version}" for fw in builds)
    if stack.usable:
        return passed(f"{names}: the NVIDIA driver is usable")
    why = WHY.get(stack.error, "the NVIDIA driver cannot be used")
    if stack.error in UNASKED:
        return errored(f"{names} built with CUDA, but {why}", [stack.error_message])
    if facts.get(pci_devices).gpus(NVIDIA):
        return failed(f"{names} built with CUDA, but {why}: it will run on the CPU only")
    return warned(
        f"{names} built with CUDA, but {why} and there is no NVIDIA GPU: "
        "it will run on the CPU only"
    )
