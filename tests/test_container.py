"""The container GPU runtime (checks/container.py) on what nvidia-ctk writes: its default
config.toml, the containerd configs of schema versions 1, 2 and 3 with their drop-ins, the
CRI-O drop-in, Docker's daemon.json and a CDI spec (fixtures/container, SOURCES.md),
replayed from small bundles holding the 8 H100 GPUs of the hgx-h100x8-healthy host."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from dldoctor.checks import container as c
from dldoctor.facts import Facts
from dldoctor.facts.container import (
    ENGINE_ARGVS,
    containerd_config,
    crio_config,
    docker_config,
    parse_cdi_json,
    parse_cdi_yaml,
    parse_tool_version,
    plausible_names,
    toolkit_config,
)
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from tests.support.bundlebuilder import BundleBuilder
from tests.support.hostgen import cdi_spec
from tests.support.paths import FIXTURES, HOSTS

FIX = FIXTURES / "container"
TOOLKIT_TOML = (FIX / "nvidia-container-runtime-config-default.toml").read_text()
CDI_GENERATED = (FIX / "cdi-nvidia-ctk-generate-default.yaml").read_text()
HEALTHY = HOSTS / "hgx-h100x8-healthy"
UUIDS = [f"GPU-0000000{i}-aaaa-bbbb-cccc-000000000000" for i in range(8)]  # that host's GPUs
CTK = "NVIDIA Container Toolkit CLI version 1.17.8\ncommit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d\n"


def node(tmp_path, *, engine=("containerd", "containerd containerd.io 1.7.27 05044ec0a9a7"),
         toolkit=CTK, files=None, binaries=True) -> BundleBuilder:  # fmt: skip
    """A bundle with the healthy host's GPUs, an engine, the toolkit and `files`."""
    b = BundleBuilder(tmp_path / "node")
    shutil.copy(HEALTHY / "nvml.json", b.root / "nvml.json")
    if engine:
        b.command([ENGINE_ARGVS[engine[0]][0], "--version"], engine[1] + "\n")
    if toolkit:
        b.command(["nvidia-ctk", "--version"], toolkit)
        b.file("/etc/nvidia-container-runtime/config.toml", TOOLKIT_TOML)
    if binaries:
        for suffix in ("", ".cdi", ".legacy"):
            b.file(f"/usr/bin/nvidia-container-runtime{suffix}", "\x7fELF")
        b.file("/sbin/ldconfig", "\x7fELF")
    for path, text in (files or {}).items():
        b.file(path, text)
    return b


def judge(b: BundleBuilder, fn, policy=None):
    return fn(Facts(ReplayHost(str(b.root))), policy or Policy())


def spec_for(names) -> str:
    """nvidia-ctk's generated spec (as the fixture hosts have it) with these devices."""
    return cdi_spec([(n, [0]) for n in names])


# --- parsers --------------------------------------------------------------------------------


def test_the_cdi_subset_parser_agrees_with_pyyaml_on_nvidia_ctk_output():
    spec = parse_cdi_yaml("/etc/cdi/x.yaml", CDI_GENERATED)
    full = yaml.safe_load(CDI_GENERATED)
    assert (spec.kind, spec.version) == (full["kind"], full["cdiVersion"]) == (
        "example.com/device", "0.5.0")  # fmt: skip
    assert list(spec.devices) == [d["name"] for d in full["devices"]] == ["0", "all"]
    text = spec_for(["0", UUIDS[1], "0:1", "all"])
    assert list(parse_cdi_yaml("p", text).devices) == [
        d["name"] for d in yaml.safe_load(text)["devices"]
    ]


def test_sorted_key_specs_with_the_name_after_the_edits():
    # The shape sigs.k8s.io/yaml writes (keys sorted: `name` last, items at column 0), as
    # public captures of older nvidia-ctk releases show it.
    text = ("---\ncdiVersion: 0.5.0\ncontainerEdits:\n  env:\n  - NVIDIA_VISIBLE_DEVICES=void\n"
            "devices:\n- containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
            "  name: \"0\"\n- containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
            f"  name: {UUIDS[0]}\n- containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
            "  name: all\nkind: nvidia.com/gpu\n")  # fmt: skip
    spec = parse_cdi_yaml("p", text)
    assert spec.kind == "nvidia.com/gpu" and list(spec.devices) == ["0", UUIDS[0], "all"]
    assert list(spec.devices) == [d["name"] for d in yaml.safe_load(text)["devices"]]


def test_specs_in_other_shapes_are_said_not_guessed():
    assert "flow style" in parse_cdi_yaml("p", "kind: nvidia.com/gpu\ndevices: [{name: a}]\n").error
    assert "second YAML document" in parse_cdi_yaml("p", "---\nkind: a\n---\nkind: b\n").error
    assert "no `kind`" in parse_cdi_yaml("p", "devices:\n  - name: x\n").error
    assert parse_cdi_yaml("p", "\x00\xff garbage").error
    as_json = json.dumps(yaml.safe_load(spec_for(["0", "all"])))
    assert parse_cdi_json("p.json", as_json).devices == ("0", "all")
    assert parse_cdi_json("p.json", "[1,").error.startswith("p.json is not valid JSON")


def test_tool_versions_and_listings():
    assert parse_tool_version(CTK) == "1.17.8"
    assert parse_tool_version("cli-version: 1.14.6\nlib-version: 1.14.6\nbuild date: x") == "1.14.6"
    assert parse_tool_version("garbage 99999") == ""
    assert plausible_names(("nvidia.yaml", "x.json"))
    assert not plausible_names(("..", "a")) and not plausible_names(("x/y",))


def test_containerd_schemas_1_2_and_3_with_their_drop_ins(tmp_path):
    v1 = (FIX / "containerd-v1-nvidia-ctk-configured.toml").read_text()
    b = node(tmp_path, files={"/etc/containerd/config.toml": v1})
    found = Facts(ReplayHost(str(b.root))).get(containerd_config)
    assert found.schema == "version 1" and found.cdi_enabled is True
    assert {r.handler: r.binary for r in found.nvidia_runtimes} == {
        "nvidia": "/usr/bin/nvidia-container-runtime",
        "nvidia-cdi": "/usr/bin/nvidia-container-runtime.cdi",
        "nvidia-legacy": "/usr/bin/nvidia-container-runtime.legacy",
    }
    for version in ("v2", "v3"):
        main = (FIX / f"containerd-{version}-nvidia-ctk-main.toml").read_text()
        drop = (FIX / f"containerd-{version}-nvidia-ctk-99-nvidia.toml").read_text()
        b = node(tmp_path / version, files={"/etc/containerd/config.toml": main,
                                            "/etc/containerd/conf.d/99-nvidia.toml": drop})  # fmt: skip
        found = Facts(ReplayHost(str(b.root))).get(containerd_config)
        assert found.schema == f"version {version[1]}"
        assert found.files == (
            "/etc/containerd/config.toml",
            "/etc/containerd/conf.d/99-nvidia.toml",
        )
        nvidia = found.runtime("nvidia")
        assert nvidia.source == "/etc/containerd/conf.d/99-nvidia.toml"
        assert nvidia.runtime_type == "io.containerd.runc.v2"
        assert found.runtime("runc").binary == "/usr/bin/runc"
        outcome = judge(b, c.containerd_runtime)
        assert outcome.status == Status.PASS, outcome
        assert outcome.summary.startswith("containerd declares the nvidia runtime: nvidia,")


def test_containerd_without_the_drop_in_warns_and_a_missing_binary_fails(tmp_path):
    main = (FIX / "containerd-v3-nvidia-ctk-main.toml").read_text()
    b = node(tmp_path / "a", files={"/etc/containerd/config.toml": main})
    outcome = judge(b, c.containerd_runtime)
    assert outcome.status == Status.WARN and "declares no nvidia runtime" in outcome.summary
    drop = (FIX / "containerd-v3-nvidia-ctk-99-nvidia.toml").read_text()
    b = node(tmp_path / "b", binaries=False, files={"/etc/containerd/config.toml": main,
                                                     "/etc/containerd/conf.d/99-nvidia.toml": drop})  # fmt: skip
    outcome = judge(b, c.containerd_runtime)
    assert outcome.status == Status.FAIL and "3 faults" in outcome.summary
    assert "/usr/bin/nvidia-container-runtime, which is not on the host" in outcome.details[0]


def test_dockers_own_containerd_is_skipped(tmp_path):
    # docker-ce's /etc/containerd/config.toml disables the CRI plugin.
    b = node(tmp_path, files={"/etc/containerd/config.toml": 'disabled_plugins = ["cri"]\n'})
    outcome = judge(b, c.containerd_runtime)
    assert outcome.status == Status.SKIP and "serves Docker only" in outcome.summary


def test_a_broken_config_names_file_and_line(tmp_path):
    main = (FIX / "containerd-v2-nvidia-ctk-main.toml").read_text()
    b = node(tmp_path, files={"/etc/containerd/config.toml": main + "\n[plugins\n"})
    outcome = judge(b, c.containerd_runtime)
    assert outcome.status == Status.WARN
    assert outcome.summary.startswith("/etc/containerd/config.toml is not valid TOML")
    assert "(at line 19, column 9)" in outcome.summary  # tomllib's position, kept
    b = node(tmp_path / "d", engine=("docker", "Docker version 27.3.1, build 41ca978"),
             files={"/etc/docker/daemon.json": '{"runtimes": {"nvidia": {"path": "x",}}}'})  # fmt: skip
    outcome = judge(b, c.docker_runtime)
    assert outcome.status == Status.WARN and "daemon.json is not valid JSON" in outcome.summary
    assert "line 1" in outcome.summary


def test_an_unreadable_config_is_an_error_not_absent(tmp_path):
    b = node(tmp_path, engine=("docker", "Docker version 27.3.1, build 41ca978"))
    b.answer("read", "/etc/docker/daemon.json", status="permission_denied", error="EACCES")
    outcome = judge(b, c.docker_runtime)
    assert outcome.status == Status.ERROR, outcome
    assert "could not be read" in outcome.summary
    assert any("/etc/docker/daemon.json" in d and "permission" in d for d in outcome.details)


def test_docker_and_crio_as_nvidia_ctk_configures_them(tmp_path):
    daemon = (FIX / "docker-daemon-nvidia-ctk-default-runtime.json").read_text()
    b = node(tmp_path / "d", engine=("docker", "Docker version 27.3.1, build 41ca978"),
             files={"/etc/docker/daemon.json": daemon})  # fmt: skip
    outcome = judge(b, c.docker_runtime)
    assert outcome.status == Status.PASS
    assert outcome.summary.endswith("nvidia, nvidia-cdi, nvidia-legacy (default: nvidia)")
    assert Facts(ReplayHost(str(b.root))).get(docker_config).default_runtime == "nvidia"
    mirror = (FIX / "docker-daemon-toolkit-tests-registry-mirror.json").read_text()
    b = node(tmp_path / "m", engine=("docker", "Docker version 27.3.1, build 41ca978"),
             files={"/etc/docker/daemon.json": mirror})  # fmt: skip
    assert judge(b, c.docker_runtime).status == Status.WARN
    crio = (FIX / "crio-nvidia-ctk-99-nvidia.toml").read_text()
    b = node(tmp_path / "c", engine=("cri-o", "crio version 1.31.1"),
             files={"/etc/crio/crio.conf.d/99-nvidia.toml": crio})  # fmt: skip
    found = Facts(ReplayHost(str(b.root))).get(crio_config)
    assert found.runtime("nvidia-cdi").binary == "/usr/bin/nvidia-container-runtime.cdi"
    assert judge(b, c.crio_runtime).status == Status.PASS
    # A default runtime nobody declares: CRI-O cannot start containers.
    b.file("/etc/crio/crio.conf.d/50-default.toml", '[crio.runtime]\ndefault_runtime = "nvidia2"\n')
    outcome = judge(b, c.crio_runtime)
    assert outcome.status == Status.FAIL and "'nvidia2'" in outcome.summary


# --- the toolkit ------------------------------------------------------------------------------


def test_toolkit_version_against_the_policy(tmp_path):
    b = node(tmp_path / "new")
    assert judge(b, c.container_toolkit).summary == "NVIDIA Container Toolkit 1.17.8 (nvidia-ctk)"
    old = node(tmp_path / "old", toolkit=CTK.replace("1.17.8", "1.16.1"))
    outcome = judge(old, c.container_toolkit)
    assert outcome.status == Status.WARN and "CVE-2025-23266" in outcome.details[0]
    b = node(tmp_path / "none", toolkit=None, binaries=False)
    outcome = judge(b, c.container_toolkit)
    assert outcome.status == Status.WARN and "not installed" in outcome.summary


def test_no_engine_at_all_skips_every_check(tmp_path):
    b = node(tmp_path, engine=None)
    facts = Facts(ReplayHost(str(b.root)))
    assert c.any_engine(facts).summary.startswith("no container engine on this host")
    assert c.engine("docker", "Docker")(facts).status == Status.SKIP


def test_toolkit_settings_against_the_host(tmp_path):
    b = node(tmp_path / "ok")
    outcome = judge(b, c.toolkit_settings)
    assert outcome.status == Status.PASS and "ldconfig = @/sbin/ldconfig" in outcome.summary
    cfg = Facts(ReplayHost(str(b.root))).get(toolkit_config)
    assert (cfg.mode, cfg.ldconfig_found, cfg.spec_dirs) == (
        "auto",
        True,
        ("/etc/cdi", "/var/run/cdi"),
    )
    # Debian's ldconfig.real named on a host that has none: legacy containers fail.
    deb = TOOLKIT_TOML.replace('"@/sbin/ldconfig"', '"@/sbin/ldconfig.real"')
    b = node(tmp_path / "deb", files={"/etc/nvidia-container-runtime/config.toml": deb})
    outcome = judge(b, c.toolkit_settings)
    assert (
        outcome.status == Status.FAIL
        and "/sbin/ldconfig.real is not on the host" in outcome.summary
    )
    rootful = TOOLKIT_TOML.replace("#no-cgroups = false", "no-cgroups = true")
    b = node(tmp_path / "nc", files={"/etc/nvidia-container-runtime/config.toml": rootful,
                                     "/sys/fs/cgroup/cgroup.controllers": "cpu memory\n"})  # fmt: skip
    outcome = judge(b, c.toolkit_settings)
    assert outcome.status == Status.WARN and "no sign of a rootless engine" in outcome.summary
    assert "cgroup v2" in outcome.details
    b.file("/etc/subuid", "alice:100000:65536\n")
    assert judge(b, c.toolkit_settings).status == Status.PASS


def test_a_permission_denied_ldconfig_is_no_verdict(tmp_path):
    b = node(tmp_path)
    b.answer("read", "/sbin/ldconfig", status="permission_denied", error="EACCES")
    outcome = judge(b, c.toolkit_settings)
    assert outcome.status == Status.ERROR and "could not be told" in outcome.summary


# --- CDI ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("names", [[str(i) for i in range(8)] + ["all"], UUIDS + ["all"],
                                   [str(i) for i in range(8)] + UUIDS + ["all"]])  # fmt: skip
def test_a_spec_for_the_gpus_the_driver_sees_passes(tmp_path, names):
    b = node(tmp_path, files={"/etc/cdi/nvidia.yaml": spec_for(names)})
    outcome = judge(b, c.cdi)
    assert outcome.status == Status.PASS, outcome
    assert outcome.summary == "1 CDI spec(s) name the 8 GPU(s) the driver sees"


def test_a_spec_from_before_a_gpu_swap_fails(tmp_path):
    swapped = UUIDS[:7] + ["GPU-5bd4c1e0-1234-5678-9abc-def012345678", "all"]
    b = node(tmp_path / "uuid", files={"/etc/cdi/nvidia.yaml": spec_for(swapped)})
    outcome = judge(b, c.cdi)
    assert outcome.status == Status.FAIL, outcome
    assert "GPU-5bd4c1e0-1234-5678-9abc-def012345678 is no GPU of this host" in outcome.details[0]
    assert "no device for GPU 7" in outcome.details[1]
    assert "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" in outcome.remediation
    # Generated when the host had 4 GPUs.
    b = node(
        tmp_path / "four", files={"/etc/cdi/nvidia.yaml": spec_for(["0", "1", "2", "3", "all"])}
    )
    outcome = judge(b, c.cdi)
    assert outcome.status == Status.FAIL and outcome.summary.startswith("no device for GPU 4-7")


def test_a_later_folder_overrides_a_stale_spec(tmp_path):
    b = node(tmp_path, files={"/etc/cdi/nvidia.yaml": spec_for(["0", "1", "all"]),
                              "/var/run/cdi/nvidia.yaml": spec_for(UUIDS + ["all"])})  # fmt: skip
    # /etc/cdi names GPUs 0 and 1 by index, /var/run/cdi all eight by UUID: together the
    # registry has a device for each.
    outcome = judge(b, c.cdi)
    assert outcome.status == Status.PASS, outcome
    assert outcome.summary == "2 CDI spec(s) name the 8 GPU(s) the driver sees"
    fresh = node(tmp_path / "f", files={"/etc/cdi/nvidia.yaml": spec_for(["0", "8", "all"]),
                                        "/var/run/cdi/nvidia.yaml": spec_for(["0", "8", "all"])})  # fmt: skip
    outcome = judge(fresh, c.cdi)
    assert outcome.status == Status.FAIL
    assert outcome.details[0] == ("/var/run/cdi/nvidia.yaml: device '8' names GPU 8; the driver "
                                  "sees 8 GPU(s)")  # fmt: skip


def test_no_spec_skips_unless_the_runtime_needs_one(tmp_path):
    b = node(tmp_path / "auto")
    outcome = judge(b, c.cdi)
    assert outcome.status == Status.SKIP and "no CDI spec for nvidia.com/gpu" in outcome.summary
    cdi_mode = TOOLKIT_TOML.replace('mode = "auto"', 'mode = "cdi"')
    b = node(tmp_path / "cdi", files={"/etc/nvidia-container-runtime/config.toml": cdi_mode})
    assert judge(b, c.cdi).status == Status.FAIL
    # A listing no folder gives is no "no specs".
    b.answer("list", "/etc/cdi", status="ok", entries=["..", "x/y"])
    outcome = judge(b, c.cdi)
    assert outcome.status == Status.ERROR, outcome


def test_the_stale_cdi_host_fails_only_its_cdi_check():
    facts = Facts(ReplayHost(str(HOSTS / "hgx-h100x8-containerd-stale-cdi")))
    verdicts = {fn.__name__: fn(facts, Policy()).status for fn in (
        c.container_toolkit, c.containerd_runtime, c.toolkit_settings, c.cdi)}  # fmt: skip
    assert verdicts == {"container_toolkit": Status.PASS, "containerd_runtime": Status.PASS,
                        "toolkit_settings": Status.PASS, "cdi": Status.FAIL}  # fmt: skip
    outcome = c.cdi(facts, Policy())
    assert outcome.summary == (
        "/etc/cdi/nvidia.yaml: device GPU-7f3c2a91-5d0e-4b7a-9c1f-3e8d6b2a4c10 is no GPU of this host"
    )
    healthy = Facts(ReplayHost(str(HEALTHY)))
    assert c.any_engine(healthy).status == Status.SKIP


def test_a_gpu_operator_node_has_its_toolkit_under_usr_local_nvidia(tmp_path):
    # The GPU Operator's toolkit container: binaries and config.toml on the node under
    # /usr/local/nvidia/toolkit, the runtimes pointed there (nvidia-ctk's drop-in, its
    # RuntimeDir the operator's), no nvidia-ctk on PATH.
    operator = "/usr/local/nvidia/toolkit"
    main = (FIX / "containerd-v2-nvidia-ctk-main.toml").read_text()
    drop = (FIX / "containerd-v2-nvidia-ctk-99-nvidia.toml").read_text()
    drop = drop.replace("/usr/bin/nvidia-container-runtime", f"{operator}/nvidia-container-runtime")
    files = {"/etc/containerd/config.toml": main, "/etc/containerd/conf.d/99-nvidia.toml": drop,
             f"{operator}/.config/nvidia-container-runtime/config.toml": TOOLKIT_TOML,
             "/sbin/ldconfig": "\x7fELF"}  # fmt: skip
    files.update(
        {f"{operator}/nvidia-container-runtime{s}": "\x7fELF" for s in ("", ".cdi", ".legacy")}
    )
    b = node(tmp_path, toolkit=None, binaries=False, files=files)
    outcome = judge(b, c.container_toolkit)
    assert outcome.status == Status.PASS, outcome
    assert outcome.details[0] == f"{operator}/nvidia-container-runtime is there"
    assert judge(b, c.containerd_runtime).status == Status.PASS
    settings = judge(b, c.toolkit_settings)
    assert settings.status == Status.PASS and settings.summary.startswith(f"{operator}/.config/")
