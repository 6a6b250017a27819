"""The example manifests in docs/kubernetes/ load (PyYAML, json) and carry what Kubernetes
and node-problem-detector require of them: the DaemonSet's identity, a selector equal to
its pod labels, a container with an image and a command, privileged, the host's PID
namespace, /sys /proc /dev and the NVIDIA library mounted read-only from the host, the
plugin config mounted; the plugin config passes NPD's own validation rules
(pkg/custompluginmonitor/types/config.go) and its command line is one dldoctor accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from dldoctor.cli import build_parser

DOCS = Path(__file__).parent.parent / "docs"
K8S = DOCS / "kubernetes"
CONFIG = K8S / "dldoctor-monitor.json"


def documents() -> list[dict]:
    return list(yaml.safe_load_all((K8S / "daemonset.yaml").read_text()))


def daemonset() -> dict:
    (ds,) = [d for d in documents() if d["kind"] == "DaemonSet"]
    return ds


def plugin_config() -> dict:
    return json.loads(CONFIG.read_text())


def test_every_manifest_has_the_fields_kubernetes_requires():
    docs = documents()
    assert {d["kind"] for d in docs} == {"ServiceAccount", "ClusterRoleBinding", "DaemonSet"}
    for d in docs:
        assert d["apiVersion"] and d["metadata"]["name"], d
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    account = next(d for d in docs if d["kind"] == "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"],
         "namespace": account["metadata"]["namespace"]}
    ]  # fmt: skip
    assert binding["roleRef"]["name"] == "system:node-problem-detector"


def test_the_daemonset_runs_privileged_with_the_host_mounted_read_only():
    ds = daemonset()
    assert ds["apiVersion"] == "apps/v1"
    spec = ds["spec"]
    assert spec["selector"]["matchLabels"] == spec["template"]["metadata"]["labels"]
    pod = spec["template"]["spec"]
    assert pod["hostPID"] is True
    assert pod["serviceAccountName"] == next(
        d["metadata"]["name"] for d in documents() if d["kind"] == "ServiceAccount"
    )
    (container,) = pod["containers"]
    assert container["image"] and container["command"][0] == "/node-problem-detector"
    assert container["securityContext"]["privileged"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert set(mounts) == set(volumes)  # every volume mounted, every mount a volume
    host_paths = {v["hostPath"]["path"]: name for name, v in volumes.items() if "hostPath" in v}
    for path in ("/sys", "/proc", "/dev", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"):
        assert path in host_paths, path
    for name in host_paths.values():
        assert mounts[name]["readOnly"] is True, name  # nothing of the host is writable
    nvml = mounts[host_paths["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"]]
    assert nvml["mountPath"].endswith("/libnvidia-ml.so.1")


def test_the_plugin_config_is_mounted_where_npd_is_told_to_read_it():
    pod = daemonset()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    flags = [a for a in container["command"] if a.startswith("--config.custom-plugin-monitor=")]
    (path,) = [flag.partition("=")[2] for flag in flags]
    assert Path(path).name == CONFIG.name
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(Path(path).parent))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    (generator,) = kustomization["configMapGenerator"]
    assert volume["configMap"]["name"] == generator["name"]
    assert generator["files"] == [CONFIG.name] and kustomization["resources"] == ["daemonset.yaml"]


def _duration_s(text: str) -> float:
    """A Go duration of the forms the config uses ("300s", "1m30s")."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    assert parts and text, text
    h, m, s = (int(p or 0) for p in parts.groups())
    return h * 3600 + m * 60 + s


def test_the_plugin_config_passes_npds_validation():
    config = plugin_config()
    assert config["plugin"] == "custom"  # the only plugin NPD supports
    assert config["pluginConfig"]["max_output_length"] == 80
    global_timeout = _duration_s(config["pluginConfig"]["timeout"])
    conditions = {c["type"]: c for c in config["conditions"]}
    assert set(conditions) == {"DLDoctorProblem"} and conditions["DLDoctorProblem"]["reason"]
    (rule,) = config["rules"]
    assert rule["type"] == "permanent" and rule["condition"] in conditions
    assert rule["reason"] and rule["path"].startswith("/")
    assert _duration_s(rule["timeout"]) <= global_timeout  # NPD refuses a longer rule timeout


def test_the_plugin_command_line_is_one_dldoctor_accepts():
    (rule,) = plugin_config()["rules"]
    args = build_parser().parse_args(rule["args"])
    assert args.check and args.format == "npd"
    # The run ends by its deadline, well before NPD kills it (the report, the interpreter's
    # start and the watchdog's slack fit in what is left).
    assert args.deadline is not None and args.deadline + 5 <= _duration_s(rule["timeout"])
    assert args.root == "/host"
    pod = daemonset()["spec"]["template"]["spec"]
    mounts = pod["containers"][0]["volumeMounts"]
    root = next(m for m in mounts if m["mountPath"] == args.root)
    volume = next(v for v in pod["volumes"] if v["name"] == root["name"])
    assert volume["hostPath"]["path"] == "/"


def test_the_image_installs_dldoctor_where_the_rule_runs_it():
    dockerfile = (K8S / "Dockerfile").read_text()
    (rule,) = plugin_config()["rules"]
    venv = str(Path(rule["path"]).parent.parent)
    assert f"python3 -m venv {venv}" in dockerfile
    assert (
        dockerfile.startswith("#") and "FROM registry.k8s.io/node-problem-detector/" in dockerfile
    )


@pytest.mark.parametrize("name", ["daemonset.yaml", "kustomization.yaml", CONFIG.name])
def test_the_monitoring_doc_links_each_example(name):
    assert f"kubernetes/{name}" in (DOCS / "monitoring.md").read_text()
