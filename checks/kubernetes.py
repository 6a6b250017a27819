"""Kubernetes node readiness for GPUs, judged from the node (doctor/facts/kubernetes.py):
the NVIDIA device plugin's socket, the container runtime's `nvidia` handler, the GPU
Operator's validation markers, and one NVIDIA driver rather than two. A host without
/var/lib/kubelet is no Kubernetes node: every check skips, saying so.
"""

from __future__ import annotations

from dldoctor.facts import FactFailed, Facts
from dldoctor.facts.container import CONTAINERD_CONFIGS, CRIO_CONFIG, CRIO_DROP_INS
from dldoctor.facts.kubernetes import (
    CORE_MARKERS,
    DEVICE_PLUGINS,
    DRIVER_ROOT,
    KUBELET,
    KUBELET_SOCKET,
    VALIDATIONS,
    Kubernetes,
    kubernetes_node,
)
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.pci import NVIDIA, pci_devices
from dldoctor.host.base import ProbeFailed
from dldoctor.model import Outcome, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check

NOT_A_NODE = f"not a Kubernetes node (no {KUBELET}: no kubelet here)"


def kubelet_node(facts: Facts) -> Outcome | None:
    """Requirement: the host is a Kubernetes node; else a skip that says it is not, or an
    error when /var/lib/kubelet could not be read (that is no answer either way)."""
    node = facts.get(kubernetes_node)
    if node.kubelet.why:
        return errored(f"whether this is a Kubernetes node could not be seen: {node.kubelet.why}")
    if node.kubelet.there and not node.node:
        return skipped(f"not a Kubernetes node: {KUBELET} holds no kubelet state "
                       "(no pods, plugins or config.yaml)")  # fmt: skip
    return None if node.node else skipped(NOT_A_NODE)


def gpu_node(facts: Facts) -> bool:
    """NVIDIA GPUs here: the driver's, else the PCI bus's (a node whose driver is broken
    is still a GPU node)."""
    try:
        stack = facts.get(nvidia)
        if stack.usable and stack.gpus:
            return True
    except (FactFailed, ProbeFailed):
        pass
    try:
        return bool(facts.get(pci_devices).gpus(NVIDIA))
    except (FactFailed, ProbeFailed):
        return False


NO_GPU = "no NVIDIA GPU on this node"


@check(
    "kubernetes.device_plugin",
    "NVIDIA device plugin socket",
    remediation="Pods get GPUs (`nvidia.com/gpu`) only from a device plugin registered with "
    f"the kubelet: its socket in {DEVICE_PLUGINS}/. Check the plugin's pod on this node "
    "(`kubectl -n gpu-operator get pods -o wide --field-selector spec.nodeName=<node>`, or "
    "the nvidia-device-plugin-daemonset's namespace) and its log; it waits for the driver "
    "and the toolkit, so a node with either missing has no plugin either.",
    requires=kubelet_node,
)
def device_plugin(facts: Facts, policy: Policy) -> Outcome:
    """nvidia-gpu.sock (nvidia.sock, nvidia-mig-*.sock) beside kubelet.sock: the device
    plugin registered with the kubelet. On a GPU node, none is a fail."""
    node = facts.get(kubernetes_node)
    listed = node.device_plugins
    if listed.why:
        return errored(f"{DEVICE_PLUGINS} could not be read: {listed.why}")
    sockets = node.nvidia_sockets
    names = list(listed.names or ())
    if sockets:
        beside = "" if KUBELET_SOCKET in (listed.names or ()) else (
            f"; no {KUBELET_SOCKET}: the kubelet is not running")  # fmt: skip
        outcome = passed if not beside else warned
        return outcome(f"{', '.join(sockets)} in {DEVICE_PLUGINS}{beside}", names)
    if not gpu_node(facts):
        return skipped(f"{NO_GPU}; no NVIDIA device plugin socket")
    if not listed.there:
        return failed(f"no {DEVICE_PLUGINS} folder on a GPU node: the kubelet's device manager "
                      "has not started, and no device plugin can register")  # fmt: skip
    if KUBELET_SOCKET not in (listed.names or ()):
        return warned(f"no {KUBELET_SOCKET} and no NVIDIA device plugin socket in "
                      f"{DEVICE_PLUGINS}: the kubelet is not running", names)  # fmt: skip
    return failed(
        f"{KUBELET_SOCKET} but no NVIDIA device plugin socket in {DEVICE_PLUGINS}: this GPU "
        "node offers no nvidia.com/gpu",
        names,
    )


def _config_lines(node: Kubernetes) -> list[str]:
    lines = []
    for c in node.configs:
        lines += c.errors
        if not c.files:
            continue
        said = ", ".join(r.handler for r in c.runtimes) or "none"
        default = f"; default {c.default_runtime}" if c.default_runtime else ""
        cdi = "; CDI enabled" if c.cdi_enabled else ""
        lines.append(f"{c.engine} ({', '.join(c.files)}): handlers {said}{default}{cdi}")
    return lines + list(node.unread)


@check(
    "kubernetes.runtime",
    "Container runtime nvidia handler",
    remediation="The GPU Operator's RuntimeClass `nvidia` names the handler `nvidia`, which "
    "the container runtime must declare: `nvidia-ctk runtime configure --runtime=containerd` "
    "(or `--runtime=crio`) writes it, the operator's toolkit does it on its own; then "
    "restart the runtime. A config that is not valid TOML stops the runtime at its next "
    "restart.",
    requires=kubelet_node,
)
def runtime_handler(facts: Facts, policy: Policy) -> Outcome:
    """An `nvidia` runtime handler (nvidia, nvidia-cdi, nvidia-legacy, ...) in containerd's
    or CRI-O's config, drop-ins included."""
    node = facts.get(kubernetes_node)
    lines = _config_lines(node)
    broken = [e for c in node.configs for e in c.errors]
    nvidia_handlers = [h for h in node.handlers if h.startswith("nvidia")]
    if broken:
        return warned(f"a container runtime's config does not parse: {broken[0]}", lines)
    if nvidia_handlers:
        where = sorted({r.source for c in node.configs for r in c.runtimes
                        if r.handler in nvidia_handlers})  # fmt: skip
        return passed(f"runtime handler {', '.join(nvidia_handlers)} in {', '.join(where)}", lines)
    if not gpu_node(facts):
        return skipped(f"{NO_GPU}; no nvidia runtime handler", lines)
    if not any(c.present for c in node.configs):
        looked = ", ".join((*CONTAINERD_CONFIGS, CRIO_CONFIG, f"{CRIO_DROP_INS}/*"))
        if node.unread:
            return errored("the container runtime's config could not be read", lines)
        return skipped(f"no containerd or CRI-O config found (looked at {looked})")
    if any(c.cdi_enabled for c in node.configs):
        return warned("no nvidia runtime handler; CDI is enabled, which serves a device "
                      "plugin that injects GPUs by CDI, but not the RuntimeClass `nvidia`",
                      lines)  # fmt: skip
    return failed(
        "no nvidia runtime handler in the container runtime's config: pods of the "
        "RuntimeClass `nvidia` cannot start on this GPU node",
        lines,
    )


@check(
    "kubernetes.gpu_operator",
    "GPU Operator validations",
    remediation="The operator's validator writes a marker per step it has validated "
    f"({VALIDATIONS}/); a missing one names the step that failed. Read the "
    "nvidia-operator-validator pod's init containers' logs on this node "
    "(`kubectl -n gpu-operator logs <pod> -c driver-validation`, toolkit-validation, "
    "cuda-validation, plugin-validation).",
    requires=kubelet_node,
)
def gpu_operator(facts: Facts, policy: Policy) -> Outcome:
    """Where the GPU Operator runs (its /run/nvidia/validations is there): the markers of
    its driver, toolkit and CUDA validations (a fail when missing) and of the device plugin
    (a warning: the plugin may be disabled in its ClusterPolicy)."""
    node = facts.get(kubernetes_node)
    seen = node.validations
    if seen.why:
        return errored(f"{VALIDATIONS} could not be read: {seen.why}")
    if not seen.there:
        return skipped(f"the NVIDIA GPU Operator is not used on this node (no {VALIDATIONS})")
    names = set(seen.names or ())
    missing = [m for m in CORE_MARKERS if m not in names]
    ready = dict(node.driver_ready)
    driver = {"true": "the host's driver", "false": "the driver container"}.get(
        ready.get("IS_HOST_DRIVER", "").lower(), "")  # fmt: skip
    lines = [f"{VALIDATIONS}: {', '.join(sorted(names)) or 'empty'}"]
    lines += [f"driver-ready: {k}={v}" for k, v in node.driver_ready] + list(node.notes)
    hard = [m for m in missing if m != "plugin-ready"]
    if hard:
        return failed(f"the GPU Operator has not validated this node: {', '.join(missing)} "
                      "missing", lines)  # fmt: skip
    if missing:
        return warned("the GPU Operator validated the driver, toolkit and CUDA but not the "
                      "device plugin (no plugin-ready)", lines)  # fmt: skip
    using = f"; validated on {driver}" if driver else ""
    return passed(f"{', '.join(CORE_MARKERS)}{using}", lines)


@check(
    "kubernetes.driver",
    "One NVIDIA driver: host or container",
    remediation="A node runs the host's NVIDIA driver or the GPU Operator's driver "
    "container, never both: the two load different nvidia.ko builds into one kernel, and "
    "whichever loads second fails (or the libraries stop matching the module). Either "
    "remove the host's driver packages (and DKMS modules) or install the operator with "
    "`--set driver.enabled=false`, and reboot.",
    requires=kubelet_node,
)
def one_driver(facts: Facts, policy: Policy) -> Outcome:
    """The GPU Operator's driver container (its root mounted at /run/nvidia/driver, or
    driver-ready's IS_HOST_DRIVER=false) beside an NVIDIA driver installed on the host for
    the running kernel (nvidia.ko in its modules.dep): both is a fault."""
    node = facts.get(kubernetes_node)
    ready = dict(node.driver_ready)
    container = bool(node.driver_root.names) or ready.get("IS_HOST_DRIVER", "").lower() == "false"
    root = node.driver_root.names or ()
    said = [f"{DRIVER_ROOT}: {len(root)} entries"] if root else []
    if "IS_HOST_DRIVER" in ready:
        said.append(f"driver-ready: IS_HOST_DRIVER={ready['IS_HOST_DRIVER']}")
    said += [f"host module: {m}" for m in node.host_modules]
    unread = [w for w in (node.driver_root.why, node.modules_why) if w]
    if container and node.host_modules:
        return failed(
            f"both the GPU Operator's driver container and a host NVIDIA driver "
            f"({node.host_modules[0]}) for the running kernel",
            said + unread,
        )
    if unread:
        return errored(f"which NVIDIA driver this node uses could not be seen: {unread[0]}", said)
    if container:
        return passed(f"the GPU Operator's driver container ({DRIVER_ROOT}); no host driver "
                      "for the running kernel", said)  # fmt: skip
    if node.host_modules:
        return passed(f"the host's NVIDIA driver ({node.host_modules[0]}); no driver container",
                      said)  # fmt: skip
    if not gpu_node(facts):
        return skipped(f"{NO_GPU}; no NVIDIA driver")
    return skipped("no NVIDIA driver installed for the running kernel and no driver container",
                   said)  # fmt: skip
