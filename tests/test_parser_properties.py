"""Property tests: no exception escapes any parser entry point, whatever the text.

Every pure parser in doctor/facts and doctor/versions.py is fed random text, every
truncation Hypothesis picks of the real captures it parses (tests/fixtures/), and those
captures mutated the ways the fuzzing of issue 9 found defects: numbers past int()'s
4,300-digit limit, Unicode digits ("²", "٣"), deep nesting, long lines and NUL bytes.
The normal suite runs a bounded number of examples; DLDOCTOR_DEEP=1 selects the `deep`
profile (tests/conftest.py) for long runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dldoctor.cudacompat import judge
from dldoctor.facts import (
    acs,
    amd,
    cpu,
    cudalibs,
    frameworks,
    kmod,
    kmsg,
    limits,
    mdraid,
    mountinfo,
    numa,
    nvidia,
    nvlink,
    nvsmi,
    pcie,
    pythonenv,
    rdma,
    shm,
    storage,
    system,
    thermal,
    toolkit,
)
from dldoctor.versions import at_least, version_tuple

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus"


def _texts(*patterns: str) -> list[str]:
    found = sorted(p for pattern in patterns for p in FIXTURES.glob(pattern) if p.is_file())
    assert found, patterns  # a renamed fixture must not silently drop the property
    return [p.read_text(encoding="utf-8", errors="replace") for p in found]


NUMA_NODES = "corpus/numactl/*/sys/devices/system/node/node*"

# name -> (the entry point on one text, the real captures it parses; () for none)
PARSERS: dict[str, tuple[Callable[[str], object], tuple[str, ...]]] = {
    "parse_lspci_acs": (acs.parse_lspci_acs, ("acs/*.txt",)),
    "parse_cmdline_iommu": (acs.parse_cmdline_iommu, ()),
    "parse_rocm_smi_json": (amd.parse_rocm_smi_json, ("corpus/rocm-smi-json/*.json",)),
    "parse_cpuinfo": (cpu.parse_cpuinfo, ("corpus/proc/procfs-cpuinfo.txt",)),
    "parse_cudnn_header": (cudalibs.parse_cudnn_header, ("cuda/cudnn_version-*.h",)),
    "parse_nccl_header": (cudalibs.parse_nccl_header, ("cuda/nccl-*.h",)),
    "parse_ldconfig": (cudalibs.parse_ldconfig, ("cuda/ldconfig-p-*.txt",)),
    "parse_torch_version_py": (frameworks.parse_torch_version_py, ("cuda/torch-*-version.py",)),
    "parse_tf_build_info": (frameworks.parse_tf_build_info, ("cuda/tensorflow*build_info.py",)),
    "parse_deepspeed_info": (frameworks.parse_deepspeed_info, ("cuda/deepspeed-*.py",)),
    "parse_proc_modules": (kmod.parse_proc_modules, ()),
    "parse_nvidia_proc_version": (kmod.parse_nvidia_proc_version, ()),
    "blacklist_lines": (lambda t: kmod.blacklist_lines(t, "nouveau"), ()),
    "parse_kernel_log": (
        lambda t: kmsg.parse_kernel_log(t, now_monotonic=1e5, now_epoch=1.7e9),
        ("corpus/dmesg-xid/*.txt",),
    ),
    "parse_sxid": (
        lambda t: kmsg.parse_sxid(t, now_monotonic=1e5, now_epoch=1.7e9),
        ("corpus/dmesg-sxid/*.txt",),
    ),
    "parse_proc_limits": (limits.parse_proc_limits, ()),
    "parse_limits_conf": (lambda t: limits.parse_limits_conf(t, "limits.conf"), ()),
    "parse_systemctl_show": (limits.parse_systemctl_show, ()),
    "systemd_limit": (limits.systemd_limit, ()),
    "parse_mdstat": (mdraid.parse_mdstat, ("corpus/mdstat/*.txt",)),
    "parse_mdadm_detail": (mdraid.parse_mdadm_detail, ("corpus/mdadm-detail/*.txt",)),
    "parse_cpulist_notes": (numa.parse_cpulist_notes, (f"{NUMA_NODES}/cpulist",)),
    "parse_node_meminfo": (numa.parse_node_meminfo, (f"{NUMA_NODES}/meminfo",)),
    "parse_nvlink_status": (nvlink.parse_nvlink_status, ("corpus/nvidia-smi-nvlink-s/*.txt",)),
    "parse_nvidia_smi_xml": (nvsmi.parse_nvidia_smi_xml, ("corpus/nvidia-smi-xml/*.xml",)),
    "parse_link_speed": (pcie.parse_link_speed, ()),
    "parse_link_width": (pcie.parse_link_width, ()),
    "parse_aer_counters": (pcie.parse_aer_counters, ()),
    "parse_upstream": (lambda t: pcie.parse_upstream(t, "0000:3b:00.0"), ()),
    "parse_bandwidth_limited": (pcie.parse_bandwidth_limited, ("corpus/pci/*.txt",)),
    "parse_dist_dirname": (pythonenv.parse_dist_dirname, ("cuda/cuda-13.0-dist-info.txt",)),
    "parse_requirement": (pythonenv.parse_requirement, ()),
    "parse_metadata": (pythonenv.parse_metadata, ("cuda/*METADATA",)),
    "parse_state": (rdma.parse_state, ()),
    "parse_rate": (rdma.parse_rate, ()),
    "parse_ibv_devinfo": (rdma.parse_ibv_devinfo, ("corpus/ibstat/*.txt",)),
    "parse_thp_mode": (shm.parse_thp_mode, ()),
    "parse_nvme_smart_log": (storage.parse_nvme_smart_log, ()),
    "parse_smartctl_json": (storage.parse_smartctl_json, ()),
    "parse_mountinfo": (mountinfo.parse_mountinfo, ("hosts/*/files/proc/self/mountinfo",)),
    "parse_os_release": (system.parse_os_release, ("corpus/os-release/*.txt",)),
    "parse_meminfo": (system.parse_meminfo, ("corpus/proc/procfs-meminfo.txt",)),
    "parse_getconf_libc": (system.parse_getconf_libc, ()),
    "runtime_from_cgroup": (system.runtime_from_cgroup, ()),
    "parse_millidegrees": (thermal.parse_millidegrees, ()),
    "parse_nvcc_version": (toolkit.parse_nvcc_version, ("cuda/nvcc-version-*.txt",)),
    "nvcc_script_target": (toolkit.nvcc_script_target, ("cuda/usr-local-bin-nvcc.sh",)),
    "parse_version_json": (toolkit.parse_version_json, ("cuda/version-*.json",)),
    "parse_version_txt": (toolkit.parse_version_txt, ()),
    "cuda_version_from_header": (
        lambda t: toolkit.cuda_version_from_header(t, "CUDA_VERSION"),
        ("cuda/cuda-13.0-cuda.h", "cuda/cuda-13.0-cuda_runtime_api.h"),
    ),
    "version_tuple": (version_tuple, ()),
    "at_least": (lambda t: at_least(t, "12.4"), ()),
    "judge_runtime": (lambda t: judge(t, "535.104.05"), ()),
    "judge_driver": (lambda t: judge("12.4", t), ()),
}

# Parsers without a capture of their own still get realistic text to mutate.
SEEDS = {
    "parse_proc_modules": "nvidia_uvm 1531904 4 - Live 0x0000000000000000 (POE)\n",
    "parse_nvidia_proc_version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05\n",
    "parse_proc_limits": "Limit  Soft Limit  Hard Limit  Units\nMax open files  1024  524288  files\n",
    "parse_limits_conf": "* soft memlock unlimited\n@gpu hard nofile 1048576\n",
    "parse_systemctl_show": "LimitNOFILE=524288\nLimitMEMLOCK=infinity\n\nLimitNOFILE=1024\n",
    "systemd_limit": "8388608",
    "parse_link_speed": "16.0 GT/s PCIe",
    "parse_link_width": "x16",
    "parse_aer_counters": "RxErr 0\nBadTLP 2\nTOTAL_ERR_COR 2\n",
    "parse_upstream": "../../../devices/pci0000:00/0000:00:01.0/0000:3b:00.0",
    "parse_requirement": "nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == 'Linux'",
    "parse_state": "4: ACTIVE",
    "parse_rate": "100 Gb/sec (4X EDR)",
    "parse_thp_mode": "always [madvise] never",
    "parse_nvme_smart_log": '{"critical_warning":0,"temperature":310,"media_errors":0}',
    "parse_smartctl_json": '{"smart_status":{"passed":true},"temperature":{"current":37}}',
    "parse_mountinfo": "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n",
    "parse_getconf_libc": "glibc 2.35",
    "runtime_from_cgroup": "0::/system.slice/docker-3f2a.scope\n",
    "parse_millidegrees": "49925",
    "parse_version_txt": "CUDA Version 10.2.89",
    "parse_cmdline_iommu": "BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt",
    "blacklist_lines": "blacklist nouveau\noptions nouveau modeset=0\n",
    "version_tuple": "5.15.0-91-generic",
    "at_least": "12.4.1",
    "judge_runtime": "12.4",
    "judge_driver": "535.104.05",
}

SAMPLES = {
    name: (_texts(*patterns) if patterns else []) + ([SEEDS[name]] if name in SEEDS else [])
    for name, (_, patterns) in PARSERS.items()
}


def test_every_parser_has_text_to_mutate():
    assert [name for name, texts in SAMPLES.items() if not texts] == []


# The hostile pieces the fuzzing found defects with, and a few of their relatives.
HOSTILE = st.one_of(
    st.integers(4290, 4400).map(lambda n: "1" * n),  # around int()'s digit limit
    st.integers(300, 420).map(lambda n: "9" * n),  # past float's range: inf
    st.sampled_from(["²", "¹", "٣", "1²", "0x", "-", "1_000", "\x00", "\ufffd", "\u2028"]),
    st.integers(900, 3000).map(lambda n: "[" * n),  # past the JSON decoder's recursion
    st.integers(900, 3000).map(lambda n: '{"a":' * n),
    st.integers(100, 2000).map(lambda n: "<a>" * n),
    st.tuples(st.sampled_from("a 0.:(x-\t"), st.integers(1000, 5000)).map(lambda t: t[0] * t[1]),
)


@st.composite
def mutated(draw, texts: list[str]) -> str:
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 8))  # replace a few characters, or none
        text = text[:at] + draw(HOSTILE) + text[at + cut :]
    return text


@st.composite
def truncated(draw, texts: list[str]) -> str:
    text = draw(st.sampled_from(texts))
    return text[: draw(st.integers(0, len(text)))]


@pytest.mark.parametrize("name", sorted(PARSERS))
@given(data=st.data())
def test_no_exception_escapes(name, data):
    parse, _ = PARSERS[name]
    texts = SAMPLES[name]
    text = data.draw(
        st.one_of(st.text(max_size=400), truncated(texts), mutated(texts)), label="text"
    )
    parse(text)  # the property: it returns


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=30,
)
NVML_KEYS = ["init", "driver_version", "cuda_driver_version", "gpus", "error", "code", "index"]


@given(
    data=st.one_of(
        JSON,
        st.dictionaries(st.sampled_from(NVML_KEYS), JSON),
        st.fixed_dictionaries(
            {"init": st.dictionaries(st.sampled_from(NVML_KEYS), JSON)},
            optional={"gpus": st.lists(st.dictionaries(st.text(max_size=30), JSON))},
        ),
    )
)
def test_nvml_probe_answer_never_raises(data):
    nvidia.parse_nvml_probe(data)


@given(st.binary(max_size=400) | st.text().map(lambda t: t.replace("\n", "\x00").encode()))
def test_environ_never_raises(data):
    system.parse_environ(data)
