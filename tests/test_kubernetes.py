"""Kubernetes node readiness for GPUs (checks/kubernetes.py) on node trees read through a
LiveHost: containerd configs as the NVIDIA toolkit's installer writes them and as its
tests start from (fixtures/kubernetes, SOURCES.md), driver-ready as the GPU Operator's
validator writes it, the device plugin's socket beside the kubelet's."""

from __future__ import annotations

import pytest

from dldoctor.checks import kubernetes as k
from dldoctor.facts import Facts
from dldoctor.facts.gpu import NO_SOURCE, Gpu, NvidiaStack
from dldoctor.facts.kubernetes import (
    kubernetes_node,
    nvidia_modules,
    parse_driver_ready,
)
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.pci import PciBus, pci_devices
from dldoctor.host.live import LiveHost
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from tests.support.faults import FaultyHost
from tests.support.paths import FIXTURES

K8S = FIXTURES / "kubernetes"
NVIDIA_CTK = (K8S / "containerd-v2-nvidia-ctk-installer-cdi.toml").read_text()
NO_NVIDIA = (K8S / "containerd-v2-toolkit-test-no-nvidia.toml").read_text()
MODULES_DEP = (K8S / "modules.dep-nvidia-dkms").read_text()
RELEASE = "5.15.0-105-generic"
GPUS = NvidiaStack(source="nvml", gpus=(Gpu(index=0, pci_bus_id="0000:18:00.0"),))
NO_GPUS = NvidiaStack(source="", error=NO_SOURCE)


def tree(root, files: dict[str, str]):
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def node(tmp_path, **files: str) -> dict[str, str]:
    """A GPU node's files: the kubelet's folder with its socket, the kernel's release."""
    base = {
        "/var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\n",
        "/var/lib/kubelet/device-plugins/kubelet.sock": "",
        "/proc/sys/kernel/osrelease": RELEASE + "\n",
    }
    return {**base, **files}


def facts_of(host, stack=GPUS) -> Facts:
    found = Facts(host).get(kubernetes_node)
    return Facts.given({kubernetes_node: found, nvidia: stack, pci_devices: PciBus()})


def judge(facts: Facts) -> dict[str, tuple[Status, str]]:
    out = {}
    for fn in (k.device_plugin, k.runtime_handler, k.gpu_operator, k.one_driver):
        skip = k.kubelet_node(facts)
        outcome = skip or fn(facts, Policy())
        out[fn.__name__] = (outcome.status, outcome.summary)
    return out


def live(tmp_path, files: dict[str, str]) -> LiveHost:
    return LiveHost(str(tree(tmp_path / "root", files)))


def handlers_of(tmp_path, path: str, text: str):
    """(containerd's, CRI-O's) configs as the node fact reads them (the container facts)."""
    host = live(tmp_path / path.strip("/").replace("/", "-"), node(tmp_path, **{path: text}))
    return Facts(host).get(kubernetes_node).configs


def test_the_toolkits_containerd_config_declares_the_nvidia_handlers(tmp_path):
    containerd, _ = handlers_of(tmp_path, "/etc/containerd/config.toml", NVIDIA_CTK)
    assert [r.handler for r in containerd.runtimes] == ["nvidia", "nvidia-cdi", "nvidia-legacy"]
    assert (containerd.default_runtime, containerd.cdi_enabled, containerd.errors) == (
        "nvidia", True, ())  # fmt: skip
    plain, _ = handlers_of(tmp_path, "/etc/containerd/config.toml", NO_NVIDIA)
    assert [r.handler for r in plain.runtimes] == ["runc"] and plain.default_runtime == "runc"
    # containerd 2.x (config version 3) and CRI-O name the handler table alike.
    v3, _ = handlers_of(tmp_path, "/etc/containerd/config.toml", "version = 3\n[plugins."
                        "'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]\n"
                        "runtime_type = 'x'\n")  # fmt: skip
    _, crio = handlers_of(tmp_path, "/etc/crio/crio.conf.d/99-nvidia.conf",
                          '[crio.runtime]\ndefault_runtime = "nvidia"\n'
                          '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/x"\n')  # fmt: skip
    assert [r.handler for r in v3.runtimes] == ["nvidia"]
    assert ([r.handler for r in crio.runtimes], crio.default_runtime) == (["nvidia"], "nvidia")
    broken, _ = handlers_of(tmp_path, "/etc/containerd/config.toml",
                            NVIDIA_CTK[: len(NVIDIA_CTK) // 3] + '"')  # fmt: skip
    assert broken.errors and "/etc/containerd/config.toml" in broken.errors[0]
    assert not broken.runtimes


def test_driver_ready_and_modules_dep():
    ready = dict(parse_driver_ready((K8S / "driver-ready-driver-container").read_text()))
    assert (
        ready["IS_HOST_DRIVER"] == "false" and ready["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver"
    )
    assert parse_driver_ready("\x00garbage\nlower=case\n") == ()
    assert nvidia_modules(MODULES_DEP) == ("updates/dkms/nvidia.ko",)
    assert nvidia_modules("kernel/drivers/gpu/drm/nouveau/nouveau.ko.zst: x\n") == ()


def test_a_host_without_a_kubelet_skips_every_check_saying_so(tmp_path):
    facts = facts_of(live(tmp_path, {"/proc/sys/kernel/osrelease": RELEASE}))
    verdicts = judge(facts)
    assert set(verdicts.values()) == {(Status.SKIP, k.NOT_A_NODE)}
    assert "no kubelet" in k.NOT_A_NODE


def test_a_kubelet_folder_without_kubelet_state_is_no_node(tmp_path):
    verdicts = judge(facts_of(live(tmp_path, {"/var/lib/kubelet/leftover": ""})))
    assert {s for s, _ in verdicts.values()} == {Status.SKIP}
    assert "holds no kubelet state" in verdicts["device_plugin"][1]


def test_a_ready_operator_node_passes(tmp_path):
    files = node(
        tmp_path,
        **{
            "/var/lib/kubelet/device-plugins/nvidia-gpu.sock": "",
            # containerd reads the drop-in because its main config imports conf.d.
            "/etc/containerd/config.toml": (FIXTURES / "container"
                                            / "containerd-v2-nvidia-ctk-main.toml").read_text(),
            "/etc/containerd/conf.d/99-nvidia.toml": NVIDIA_CTK,
            "/run/nvidia/driver/usr/bin/nvidia-smi": "",
            "/run/nvidia/validations/driver-ready": (
                K8S / "driver-ready-driver-container"
            ).read_text(),
            "/run/nvidia/validations/toolkit-ready": "",
            "/run/nvidia/validations/cuda-ready": "",
            "/run/nvidia/validations/plugin-ready": "",
            f"/lib/modules/{RELEASE}/modules.dep": "kernel/fs/xfs/xfs.ko.zst:\n",
        },
    )
    verdicts = judge(facts_of(live(tmp_path, files)))
    assert verdicts["device_plugin"] == (
        Status.PASS, "nvidia-gpu.sock in /var/lib/kubelet/device-plugins")  # fmt: skip
    assert verdicts["runtime_handler"] == (
        Status.PASS,
        "runtime handler nvidia, nvidia-cdi, nvidia-legacy in /etc/containerd/conf.d/99-nvidia.toml",
    )
    assert verdicts["gpu_operator"] == (
        Status.PASS,
        "driver-ready, toolkit-ready, cuda-ready, plugin-ready; validated on the driver container",
    )
    assert verdicts["one_driver"][0] == Status.PASS
    assert "driver container" in verdicts["one_driver"][1]


def test_a_gpu_node_without_the_plugin_or_the_handler_fails(tmp_path):
    files = node(tmp_path, **{"/etc/containerd/config.toml": NO_NVIDIA,
                              f"/lib/modules/{RELEASE}/modules.dep": MODULES_DEP})  # fmt: skip
    host = live(tmp_path, files)
    verdicts = judge(facts_of(host))
    assert verdicts["device_plugin"][0] == Status.FAIL
    assert "no NVIDIA device plugin socket" in verdicts["device_plugin"][1]
    assert verdicts["runtime_handler"][0] == Status.FAIL
    assert verdicts["gpu_operator"][0] == Status.SKIP  # no operator here
    assert verdicts["one_driver"] == (
        Status.PASS, "the host's NVIDIA driver (updates/dkms/nvidia.ko); no driver container")  # fmt: skip
    # The same node without GPUs: nothing is missing.
    cpu_only = judge(facts_of(host, NO_GPUS))
    assert cpu_only["device_plugin"][0] == cpu_only["runtime_handler"][0] == Status.SKIP


def test_a_host_driver_beside_the_driver_container_fails(tmp_path):
    files = node(tmp_path, **{
        "/run/nvidia/driver/usr/bin/nvidia-smi": "",
        "/run/nvidia/validations/driver-ready": (K8S / "driver-ready-driver-container").read_text(),
        f"/lib/modules/{RELEASE}/modules.dep": MODULES_DEP,
    })  # fmt: skip
    verdicts = judge(facts_of(live(tmp_path, files)))
    assert verdicts["one_driver"][0] == Status.FAIL
    assert verdicts["one_driver"][1].startswith("both the GPU Operator's driver container and")
    assert verdicts["gpu_operator"] == (
        Status.FAIL,
        "the GPU Operator has not validated this node: toolkit-ready, cuda-ready, plugin-ready "
        "missing",
    )


@pytest.mark.parametrize("path", ["/var/lib/kubelet", "/var/lib/kubelet/device-plugins",
                                  "/run/nvidia/driver", "/run/nvidia/validations"])  # fmt: skip
def test_a_folder_that_cannot_be_read_is_never_taken_for_there(tmp_path, path):
    files = node(tmp_path, **{f"/lib/modules/{RELEASE}/modules.dep": MODULES_DEP,
                              "/run/nvidia/validations/driver-ready": "IS_HOST_DRIVER=true\n",
                              "/run/nvidia/driver/x": ""})  # fmt: skip
    inner = live(tmp_path, files)
    denied = FaultyHost(inner, "permission_denied", lambda op, key: key.rstrip("/") == path)
    verdicts = judge(facts_of(denied))
    said = {status for status, _ in verdicts.values()}
    if path == "/var/lib/kubelet":
        assert said == {Status.ERROR}
        assert all("permission denied" in s.lower() for _, s in verdicts.values())
    elif path == "/run/nvidia/driver":
        # The host driver's module and IS_HOST_DRIVER=true: the unread root is said.
        assert verdicts["one_driver"][0] == Status.ERROR
        assert "permission denied" in verdicts["one_driver"][1].lower()
    else:
        name = {"/var/lib/kubelet/device-plugins": "device_plugin"}.get(path, "gpu_operator")
        assert (
            verdicts[name][0] == Status.ERROR and "permission denied" in verdicts[name][1].lower()
        )


def test_the_operator_node_with_a_host_driver_replays_to_one_fail():
    facts = Facts(ReplayHost(str(FIXTURES / "hosts" / "hgx-h100x8-k8s-driver-conflict")))
    verdicts = judge(facts)
    assert [verdicts[n][0] for n in verdicts] == [Status.PASS] * 3 + [Status.FAIL]


def test_a_kernel_whose_modules_are_out_of_sight_is_no_verdict_on_the_host_driver(tmp_path):
    # A driver container, and no /lib/modules for the running kernel (a container that
    # does not mount it): whether the host has a driver too is not known.
    files = node(tmp_path, **{"/run/nvidia/driver/usr/bin/nvidia-smi": ""})
    status, summary = judge(facts_of(live(tmp_path, files)))["one_driver"]
    assert status == Status.ERROR and "modules are out of sight" in summary


def test_garbage_where_the_kubelet_folder_is_missing_makes_no_node(tmp_path):
    inner = live(tmp_path, {"/proc/sys/kernel/osrelease": RELEASE})
    garbled = FaultyHost(inner, "garbage", lambda op, key: key == "/var/lib/kubelet")
    verdicts = judge(facts_of(garbled))
    assert {s for s, _ in verdicts.values()} == {Status.SKIP}


def test_a_drop_in_the_main_config_does_not_import_declares_nothing(tmp_path):
    # containerd reads conf.d only where its config's `imports` names it: a drop-in
    # beside a config without that line is a handler containerd never sees.
    files = node(tmp_path, **{"/etc/containerd/config.toml": NO_NVIDIA,
                              "/etc/containerd/conf.d/99-nvidia.toml": NVIDIA_CTK})  # fmt: skip
    assert judge(facts_of(live(tmp_path, files)))["runtime_handler"][0] == Status.FAIL
