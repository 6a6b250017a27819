"""A Kubernetes node's GPU plumbing, as the node itself shows it: the kubelet's state
folder and its device-plugin sockets, the container runtime's handlers (containerd,
CRI-O), the NVIDIA GPU Operator's validation markers and its driver container's root, and
the NVIDIA modules installed for the running kernel on the host itself.

Names and places are the projects' own:
- kubelet: /var/lib/kubelet, its registration socket device-plugins/kubelet.sock; the
  NVIDIA device plugin serves nvidia-gpu.sock there (older releases nvidia.sock; the MIG
  "mixed" strategy one socket per profile, nvidia-mig-<profile>.sock).
- the GPU Operator's validator (cmd/nvidia-validator/main.go, NVIDIA/gpu-operator
  a22dbf67): /run/nvidia/validations/ holds driver-ready (KEY=VALUE lines, IS_HOST_DRIVER
  among them), toolkit-ready, cuda-ready, plugin-ready and, with their components,
  nvidia-fs-ready, gdrcopy-ready, nvidia-peermem-ready, mofed-ready, vfio-pci-ready,
  vgpu-manager-ready, host-vgpu-manager-ready, vgpu-devices-ready, cc-manager-ready,
  workload-type; its driver container mounts its root at /run/nvidia/driver.
- the operator's runtime configs: /etc/containerd/config.toml with the drop-in
  /etc/containerd/conf.d/99-nvidia.toml, /etc/crio/crio.conf.d/99-nvidia.conf
  (controllers/object_controls.go); k3s and RKE2 keep containerd's under /var/lib/rancher.

The runtime configs are read once, by the container facts (doctor/facts/container.py:
containerd's every schema with its imports, k3s's and RKE2's, CRI-O's drop-ins), whose
handlers are what a RuntimeClass names.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from dldoctor.facts import FactContext, FactFailed, fact
from dldoctor.facts.container import EngineConfig, containerd_config, crio_config
from dldoctor.facts.reading import describe_in_full
from dldoctor.facts.system import kernel
from dldoctor.host.base import AnswerStatus, ProbeFailed

KUBELET = "/var/lib/kubelet"
DEVICE_PLUGINS = f"{KUBELET}/device-plugins"
KUBELET_SOCKET = "kubelet.sock"
# What a kubelet keeps in its folder once it has run (its config is kubeadm's and most
# installers'): a /var/lib/kubelet with none of these is no kubelet's (a package's leftover).
KUBELET_ENTRIES = ("config.yaml", "kubeconfig", "pki", "pods", "plugins", "plugins_registry",
                   "pod-resources", "device-plugins", "cpu_manager_state",
                   "memory_manager_state")  # fmt: skip
VALIDATIONS = "/run/nvidia/validations"
DRIVER_ROOT = "/run/nvidia/driver"
# What a node whose GPUs the operator runs has once it is ready (the validator's
# driver, toolkit, cuda and plugin steps); the others depend on the components enabled.
CORE_MARKERS = ("driver-ready", "toolkit-ready", "cuda-ready", "plugin-ready")
MODULES_DEP_MAX_BYTES = 8 << 20  # modules.dep of a distribution kernel: about 1 MiB
# A module of the NVIDIA driver in modules.dep: "updates/dkms/nvidia.ko.zst: ..." (DKMS),
# "kernel/drivers/video/nvidia.ko:" (a distribution's precompiled package).
_NVIDIA_KO = re.compile(r"^(\S*/)?nvidia\.ko(?:\.(?:xz|gz|zst))?:", re.MULTILINE)


class Listing(NamedTuple):
    """A folder as read: its names, or None when it is not there or could not be read
    (`why` says which: "" for not there)."""

    names: tuple[str, ...] | None
    why: str = ""

    @property
    def there(self) -> bool:
        return self.names is not None


class Kubernetes(NamedTuple):
    kubelet: Listing  # /var/lib/kubelet
    device_plugins: Listing = Listing(None)
    configs: tuple[EngineConfig, ...] = ()  # containerd's and CRI-O's
    unread: tuple[str, ...] = ()  # runtime configs or folders that could not be read
    validations: Listing = Listing(None)
    driver_ready: tuple[tuple[str, str], ...] = ()  # driver-ready's KEY=VALUE lines
    driver_root: Listing = Listing(None)  # /run/nvidia/driver
    host_modules: tuple[str, ...] = ()  # nvidia*.ko paths in the running kernel's modules.dep
    modules_why: str = ""  # why modules.dep could not be read ("" read, or not there)
    notes: tuple[str, ...] = ()

    @property
    def node(self) -> bool:
        return bool(set(self.kubelet.names or ()) & set(KUBELET_ENTRIES))

    @property
    def nvidia_sockets(self) -> tuple[str, ...]:
        names = self.device_plugins.names or ()
        return tuple(n for n in names if n.startswith("nvidia") and n.endswith(".sock"))

    @property
    def handlers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.handler for c in self.configs for r in c.runtimes))


def _listing(ctx: FactContext, path: str) -> Listing:
    answer = ctx.host.listdir(path)
    if answer.status == AnswerStatus.TIMEOUT:
        raise ProbeFailed(answer)
    if answer.ok and isinstance(answer.value, list | tuple):
        return Listing(tuple(str(n) for n in answer.value))
    if answer.status == AnswerStatus.MISSING:
        return Listing(None)
    return Listing(None, describe_in_full(answer) if not answer.ok else f"list {path}: odd answer")


def _text(ctx: FactContext, path: str, limit: int, unread: list[str]) -> str | None:
    answer = ctx.host.read(path, max_bytes=limit)
    if answer.status == AnswerStatus.TIMEOUT:
        raise ProbeFailed(answer)
    if answer.ok:
        return answer.text
    if answer.status != AnswerStatus.MISSING:
        unread.append(describe_in_full(answer))
    return None


def parse_driver_ready(text: str) -> tuple[tuple[str, str], ...]:
    """driver-ready's `IS_HOST_DRIVER=false` lines (the validator's createStatusFile)."""
    pairs = []
    for line in text.splitlines()[:64]:
        key, sep, value = line.strip().partition("=")
        if sep and re.fullmatch(r"[A-Z_]{1,64}", key):
            pairs.append((key, value.strip()[:200]))
    return tuple(pairs)


def nvidia_modules(modules_dep: str) -> tuple[str, ...]:
    """The NVIDIA driver's nvidia.ko entries of a modules.dep."""
    return tuple(m.group(0).rstrip(":") for m in _NVIDIA_KO.finditer(modules_dep))[:8]


@fact("kubernetes.node")
def kubernetes_node(ctx: FactContext) -> Kubernetes:
    """What the node shows of Kubernetes and the NVIDIA GPU Operator; on a host without
    /var/lib/kubelet nothing else is read."""
    kubelet = _listing(ctx, KUBELET)
    if not Kubernetes(kubelet).node:
        return Kubernetes(kubelet)
    notes: list[str] = []
    configs = (ctx.get(containerd_config), ctx.get(crio_config))
    validations = _listing(ctx, VALIDATIONS)
    ready: tuple[tuple[str, str], ...] = ()
    if "driver-ready" in (validations.names or ()):
        text = _text(ctx, f"{VALIDATIONS}/driver-ready", 4096, notes)
        ready = parse_driver_ready(text or "")
    try:
        release = ctx.get(kernel).release
    except (FactFailed, ProbeFailed):  # no kernel release: no modules.dep to read
        release = ""
    host_modules: tuple[str, ...] = ()
    # Without the release, whether the host has a driver of its own is not known: said,
    # never taken for "none".
    modules_why = "" if release else "the running kernel's release could not be read"
    if release and ("/" in release or release.startswith(".")):
        release, modules_why = "", f"the kernel's release {release[:40]!r} names no folder"
    if release:
        said: list[str] = []
        dep = _text(ctx, f"/lib/modules/{release}/modules.dep", MODULES_DEP_MAX_BYTES, said)
        host_modules = nvidia_modules(dep or "")
        # Every installed kernel has one (depmod writes it): none means the host's
        # /lib/modules is out of sight (a container without it), not "no driver".
        missing = f"no /lib/modules/{release}/modules.dep: the host's modules are out of sight"
        modules_why = said[0] if said else (missing if dep is None else "")
    return Kubernetes(
        kubelet=kubelet,
        device_plugins=_listing(ctx, DEVICE_PLUGINS),
        configs=configs,
        unread=tuple(n for c in configs for n in c.notes),
        validations=validations,
        driver_ready=ready,
        driver_root=_listing(ctx, DRIVER_ROOT),
        host_modules=host_modules,
        modules_why=modules_why,
        notes=tuple(notes),
    )
