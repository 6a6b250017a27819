"""Property tests: no exception escapes any parser entry point, whatever the text, and
none takes more than linear time.

Every function that reads host, bundle, report or policy text (found by its signature:
`test_every_entry_point_is_listed` fails on one left out) is fed random text, every
truncation Hypothesis picks of the real captures it parses (tests/fixtures/), and those
captures mutated the ways the fuzzing of issue 9 found defects: numbers past int()'s
4,300-digit limit, Unicode digits ("²", "٣"), deep nesting, long lines and NUL bytes.
The normal suite runs a bounded number of examples; DLDOCTOR_DEEP=1 selects the `deep`
profile (tests/conftest.py) for long runs. `test_entry_point_is_linear` times each on
long inputs of the shapes that made one quadratic (docs/architecture.md, "Hostile text").
"""

from __future__ import annotations

import functools
import gc
import importlib
import inspect
import json
import pkgutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dldoctor import keyfacts, model, slurm, tomllines
from dldoctor.active import dcgm, fio, nccltests, nvbandwidth, output, perftest, torchmeasure
from dldoctor.cudacompat import judge
from dldoctor.facts import (
    acs,
    amd,
    container,
    cpu,
    cudalibs,
    frameworks,
    gds,
    gpu,
    kmod,
    kmsg,
    kubernetes,
    limits,
    lspci,
    mdraid,
    mountinfo,
    net,
    numa,
    nvidia,
    nvlink,
    nvsmi,
    nvsmi_text,
    pcie,
    pythonenv,
    rdma,
    reading,
    shm,
    storage,
    sxid,
    system,
    thermal,
    toolkit,
    xid,
)
from dldoctor.fixes import boot, network
from dldoctor.fleet import nodes, report
from dldoctor.host import bugreport, sosreport
from dldoctor.render import npd
from dldoctor.tui import findings
from dldoctor.versions import at_least, version_tuple
from tests.support.strategies import HOSTILE

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
    "parse_ethtool_info": (net.parse_ethtool_info, ("ethtool/*.txt",)),
    "strip_comments": (gds.strip_comments, ("gds/cufile-*.json",)),
    "parse_cufile": (gds.parse_cufile, ("gds/cufile-*.json",)),
    "parse_toml": (
        lambda text: container.parse_toml("config.toml", text),
        ("kubernetes/containerd-*.toml", "container/*.toml"),
    ),
    "parse_json_config": (
        lambda text: container.parse_json_config("daemon.json", text),
        ("container/docker-daemon-*.json",),
    ),
    "parse_cdi": (lambda text: container.parse_cdi("nvidia.yaml", text), ("container/cdi-*",)),
    "parse_cdi_yaml": (
        lambda text: container.parse_cdi_yaml("nvidia.yaml", text),
        ("container/cdi-*.yaml",),
    ),
    "parse_cdi_json": (lambda text: container.parse_cdi_json("nvidia.json", text), ()),
    "parse_tool_version": (container.parse_tool_version, ()),
    "parse_driver_ready": (kubernetes.parse_driver_ready, ("kubernetes/driver-ready-*",)),
    "parse_gdscheck": (gds.parse_gdscheck, ("gds/gdscheck-*.txt",)),
    "parse_stats": (gds.parse_stats, ("gds/nvidia-fs-stats-*.txt",)),
    "parse_nvidia_proc_version": (kmod.parse_nvidia_proc_version, ()),
    "blacklist_lines": (lambda t: kmod.blacklist_lines(t, "nouveau"), ()),
    "parse_kernel_log": (
        lambda t: xid.parse_kernel_log(t, now_monotonic=1e5, now_epoch=1.7e9),
        ("corpus/dmesg-xid/*.txt",),
    ),
    "parse_sxid": (
        lambda t: sxid.parse_sxid(t, now_monotonic=1e5, now_epoch=1.7e9),
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
    "parse_lspci": (lspci.parse_lspci, ("acs/*.txt",)),
    "parse_cpulist": (numa.parse_cpulist, (f"{NUMA_NODES}/cpulist",)),
    "parse_nvidia_smi_text": (nvsmi_text.parse_nvidia_smi_text, ("corpus/nvidia-smi-q/*.txt",)),
    "parse_show_node": (slurm.parse_show_node, ("slurm/show-node-*.txt",)),
    "cmdline_blacklists": (lambda t: kmod.cmdline_blacklists(t, "nouveau"), ()),
    "kept_lines": (lambda t: kmsg.kept_lines(_bytes(t)), ("corpus/dmesg-xid/*.txt",)),
    "read_lines": (lambda t: kmsg.read_lines(t, "NVRM", "NVRM"), ("corpus/dmesg-xid/*.txt",)),
    "normalise_pci_bus_id": (gpu.normalise_pci_bus_id, ()),
    "define": (lambda t: toolkit.define(t, "CUDA_VERSION"), ("cuda/cuda-13.0-cuda.h",)),
    "load_json": (reading.load_json, ("corpus/rocm-smi-json/*.json",)),
    "parse_environ": (lambda t: system.parse_environ(_bytes(t)), ()),
    # the active tier's measuring tools (their stdout)
    "parse_text": (nvbandwidth.parse_text, ("corpus/nvbandwidth/*.txt",)),
    "parse_nvbandwidth": (nvbandwidth.parse, ("corpus/nvbandwidth/*",)),
    "json_document": (output.json_document, ("corpus/nvbandwidth/*", "corpus/dcgmi-diag/*")),
    "parse_row": (nccltests.parse_row, ()),
    "parse_all_reduce_perf": (nccltests.parse, ("corpus/nccl-tests/*.log",)),
    "parse_dcgmi_diag": (lambda t: dcgm.parse(output.json_document(t)), ("corpus/dcgmi-diag/*",)),
    "parse_torch_measure": (lambda t: torchmeasure.parse(output.json_document(t)), ()),
    # reports, bundles and foreign readers
    "parse": (lambda t: nodes.parse(_bytes(t)), ("../golden/bugreports/*.json",)),
    "key_facts": (lambda t: keyfacts.key_facts(reading.load_json(t)[0]), ()),
    "fold": (lambda t: report.fold(t.split(",")), ()),
    "parse_bug_report": (lambda t: bugreport.parse_bug_report(_bytes(t)), ()),
    "command_words": (bugreport.command_words, ()),
    "mdadm_section": (lambda t: sosreport.mdadm_section(t, "/dev/md0"), ()),
    "shorten": (lambda t: npd.shorten(t, 80), ()),
    "quoted": (lambda t: model.quoted(t, model.SUMMARY_CHARS), ()),
    "remediation_text": (findings.remediation_text, ()),
    "commands_in": (findings.commands_in, ()),
    # policy text, and the host files a fix edits
    "line_of": (lambda t: tomllines.line_of(t, "firmware.minimums[1].version"), ("policies/*",)),
    "shape_problem": (tomllines.shape_problem, ("policies/*",)),
    "basic_string": (tomllines.basic_string, ()),
    "edit_grub_defaults": (lambda t: boot.edit_grub_defaults(t, ["iommu=pt"]), ()),
    "netplan_names": (network.netplan_names, ()),
    # the active tier's host tools
    "parse_fio_json": (fio.parse_fio_json, ("perf/fio-*.json",)),
    "parse_ib_write_bw": (perftest.parse_ib_write_bw, ("perf/ib_write_bw-*",)),
}


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


# What makes a function an entry point: public, at module level, its first parameter
# text or bytes by one of these names. The ones that raise by contract are tested through
# their callers.
TEXT_PARAMETERS = {"text", "data", "line", "raw", "cmdline", "entry", "link_target"}
BY_CONTRACT = {
    "dldoctor.shellwords.split": "ValueError on an unclosed quote: read by os-release, "
    "command_words and the sos reader, all listed",
    "dldoctor.tomllines.key_lines": "ValueError on text it cannot place: read by line_of",
    "dldoctor.cli.shared.id_list": "argparse.ArgumentTypeError on no id: argparse's type for "
    "--only/--skip, tested through the command line (test_cli)",
}


def _entry_points() -> set[str]:
    modules = []
    for package in ("dldoctor", "dldoctor.checks", "dldoctor.fixes", "dldoctor.snapshots"):
        path = importlib.import_module(package).__path__
        modules += [package] + [i.name for i in pkgutil.walk_packages(path, package + ".")]
    found = set()
    for name in dict.fromkeys(m for m in modules if not m.endswith("__main__")):
        for attr, value in vars(importlib.import_module(name)).items():
            if not inspect.isfunction(value) or value.__module__ != name or attr[0] == "_":
                continue
            params = list(inspect.signature(value).parameters.values())
            if params and params[0].annotation in ("str", "bytes"):
                if params[0].name in TEXT_PARAMETERS or attr.startswith("parse"):
                    found.add(f"{name}.{attr}")
    return found


def test_every_entry_point_is_listed():
    entry_points = _entry_points()
    assert len(entry_points) > 60  # the search itself must not silently find nothing
    missed = {e for e in entry_points - set(BY_CONTRACT) if e.rsplit(".", 1)[1] not in PARSERS}
    assert missed == set(), "add each to PARSERS (and a seed to SEEDS)"


# Parsers without a capture of their own still get realistic text to mutate.
SEEDS = {
    "parse_proc_modules": "nvidia_uvm 1531904 4 - Live 0x0000000000000000 (POE)\n",
    "parse_nvidia_proc_version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05\n",
    "parse_proc_limits": "Limit  Soft Limit  Hard Limit  Units\nMax open files  1024  524288  files\n",
    "parse_limits_conf": "* soft memlock unlimited\n@gpu hard nofile 1048576\n",
    "parse_systemctl_show": "LimitNOFILE=524288\nLimitMEMLOCK=infinity\n\nLimitNOFILE=1024\n",
    "systemd_limit": "8388608",
    "parse_link_speed": "16.0 GT/s PCIe",
    "parse_cdi_json": '{"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[{"name":"0"}]}',
    "parse_tool_version": "NVIDIA Container Toolkit CLI version 1.17.8\ncommit: f202b80\n",
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
    "cmdline_blacklists": "ro modprobe.blacklist=nouveau,nvidiafb rd.driver.blacklist=nouveau",
    "normalise_pci_bus_id": "00000000:18:00.0",
    "parse_environ": "PATH=/usr/bin\x00CUDA_VISIBLE_DEVICES=0,1\x00",
    "key_facts": '{"driver": {"version": "535.104.05"}, "gpus": [{"index": 0, "model": "H100"'
    '}], "cuda": {"toolkits": ["12.4"], "frameworks": [{"name": "torch", "version": "2.4"}]},'
    ' "pcie": [{"address": "0000:18:00.0", "width": 16}], "rdma": [{"device": "mlx5_0", '
    '"port": 1, "rate_gbps": 400}], "raid": [{"name": "md0", "level": "raid1"}]}',
    "fold": "node001,node002,node017,gpu-a-3,login",
    "parse_bug_report": "____________________________________________\n\nStart of NVIDIA bug "
    "report log file.\n\n____________________________________________\n\n"
    "/usr/bin/nvidia-smi -q\n\n==============NVSMI LOG==============\n",
    "command_words": '/usr/bin/lspci -d "10de:*" -v -xxx',
    "mdadm_section": "/dev/md0:\n     Raid Level : raid1\n/dev/md1:\n     Raid Level : raid0\n",
    "shorten": "GPU 0 has fallen off the bus: Xid 79 on 0000:18:00.0",
    "quoted": '/etc/os-release: PRETTY_NAME="Ubuntu 22.04.4 LTS"',
    "remediation_text": "Run `nvidia-smi -r` then `sudo systemctl restart nvidia-fabricmanager`.",
    "commands_in": "Run `nvidia-smi -r` then `sudo systemctl restart nvidia-fabricmanager`.",
    "basic_string": 'a "quoted" \\ path\twith\x01control',
    "edit_grub_defaults": 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\n',
    "netplan_names": "network:\n  ethernets:\n    ens1f0:\n      match:\n"
    "        macaddress: 00:11:22:33:44:55\n      set-name: ib0\n",
    "parse_row": "     8388608       2097152     float     sum      -1    185.8   45.15   79.02      0"
    "    183.2   45.79   80.12      0",
    "parse_torch_measure": '{"tool": "torch_measure", "version": 1, "results": {"gemm": '
    '[{"gpu": 0, "dtype": "bf16", "n": 8192, "tflops": 700.5}]}, "errors": []}',
}

SAMPLES = {
    name: (_texts(*patterns) if patterns else []) + ([SEEDS[name]] if name in SEEDS else [])
    for name, (_, patterns) in PARSERS.items()
}


def test_every_parser_has_text_to_mutate():
    assert [name for name, texts in SAMPLES.items() if not texts] == []


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


# --- linear time ---------------------------------------------------------------------------

SMALL, LARGE = 20_000, 200_000
# Linear growth is 10x from SMALL to LARGE, quadratic 100x: 30x leaves room for noise.
MAX_RATIO = 30
MAX_LARGE_S = 4.0  # the slowest linear parser (the XML one) reads 200 kB in well under 1 s
FLOOR_S = 5e-3  # below this a timing is noise (a busy machine): the ratio is taken against it
# Runs of one character, and the repeats that made a parser quadratic: shell-quoted words
# (os-release), continuation lines (SXid), dotted keys (TOML), a long line of a capture.
CHARS = " a0\\t\"'[{(<:=,.\\\\#\n-x;"


def _shapes(name: str, n: int) -> list[str]:
    shapes = [c * n for c in CHARS]
    shapes += ['K="' + "a " * (n // 2) + '"', "a." * (n // 2), "=" + "a\\ " * (n // 3)]
    for text in SAMPLES[name][:2]:
        lines = [line for line in text.splitlines() if 4 < len(line) < 300] or [text[:300]]
        line = max(lines, key=len)
        shapes.append((text + "\n") * (n // (len(text) + 1) + 1))  # the capture repeated
        shapes.append((line + "\n") * (n // (len(line) + 1) + 1))  # its longest line repeated
        shapes.append(line + " " * n + "x")
        shapes.append(line[: len(line) // 2] + "a" * n + line[len(line) // 2 :])
    return shapes


def _seconds(parse: Callable[[str], object], text: str, repeat: int) -> float:
    # Without the collector: its passes grow with the objects alive, not with the parser.
    best = float("inf")
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.thread_time()  # CPU time: another process's load is not counted
            parse(text)
            best = min(best, time.thread_time() - start)
    finally:
        gc.enable()
    return best


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_entry_point_is_linear(name):
    parse, _ = PARSERS[name]
    small, large = _shapes(name, SMALL), _shapes(name, LARGE)
    # screen every shape at SMALL once; time the slowest few at both sizes
    timed = sorted(((_seconds(parse, text, 1), i) for i, text in enumerate(small)), reverse=True)
    assert timed[0][0] < MAX_LARGE_S / 10, f"{timed[0][0]:.3f}s on {small[timed[0][1]][:20]!r}"
    for _, i in timed[:2]:
        # best of several: one run of either size can lose a time slice on a busy machine
        t_small = max(_seconds(parse, small[i], 3), FLOOR_S)
        t_large = _seconds(parse, large[i], 2)
        assert (
            t_large < MAX_LARGE_S and t_large / t_small < MAX_RATIO
        ), f"on {large[i][:20]!r}...: {t_small:.4f}s at {SMALL}, {t_large:.4f}s at {LARGE}"


def test_key_facts_of_a_deep_or_huge_inventory():
    # a value nested past repr's recursion, or huge, was turned into text whole
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    huge = list(range(200_000))
    inventory = {
        "cuda": {"frameworks": [{"name": "torch", "version": deep, "cuda": huge}],
                 "toolkits": [deep, "12.4"]},
        "gpus": [{"index": huge, "model": deep}],
        "rdma": [{"device": deep, "port": huge, "state": "ACTIVE"}],
        "raid": [{"name": "md0", "level": deep, "state": huge}],
        "firmware": {"bios_vendor": deep},
    }  # fmt: skip
    facts = keyfacts.key_facts(inventory)
    assert facts["gpu.count"] == "1" and facts["rdma.state"] == {"None port None": "ACTIVE"}
    assert all(len(str(v)) < 2_000 for v in facts.values())


@given(st.text(alphabet="ab \t\n'\"\\$#", max_size=40))
def test_shell_words_split_as_shlex_does(text):
    import shlex

    from dldoctor.shellwords import split

    try:
        expected = shlex.split(text)
    except ValueError:
        with pytest.raises(ValueError):
            split(text)
        return
    assert split(text) == expected


POLICIES = _texts("policies/*")


@given(text=st.one_of(st.text(max_size=400), truncated(POLICIES), mutated(POLICIES)))
def test_a_policy_is_read_or_refused_in_one_line(text):
    # PolicyError is the contract (exit 4); anything else escaping was exit 5
    import tempfile

    from dldoctor.policy import PolicyError, load_policy

    with tempfile.NamedTemporaryFile("w", suffix=".toml", encoding="utf-8",
                                     errors="surrogatepass") as f:  # fmt: skip
        f.write(text)
        f.flush()
        try:
            load_policy(f.name)
        except PolicyError as exc:
            assert "\n" not in str(exc)


@functools.cache
def _report() -> dict:
    from tests.support import fleetgen

    return fleetgen.real_report()  # a real report of a fixture host


@functools.cache
def _report_text() -> str:
    return json.dumps(_report())


@given(
    field=st.sampled_from(
        ["id", "title", "status", "summary", "evidence", "details", "schema_version"]
        + ["host", "inventory", "findings"]
    ),
    value=JSON,
    where=st.sampled_from(["finding", "root"]),
    indent=st.sampled_from([None, 2]),
    ascii_only=st.booleans(),
)
@example(field="evidence", value=float("nan"), where="finding", indent=None, ascii_only=True)
@example(field="status", value="bogus", where="finding", indent=None, ascii_only=True)
@example(field="schema_version", value=99, where="root", indent=None, ascii_only=True)
@example(field="host", value=[1], where="root", indent=None, ascii_only=True)
@example(field="title", value="\u00e9", where="finding", indent=2, ascii_only=False)
@example(field="schema_version", value=1.0, where="root", indent=None, ascii_only=True)
@example(field="inventory", value={"a": 2**70}, where="root", indent=None, ascii_only=True)
def test_a_node_report_reads_as_the_stdlib_reads_it(field, value, where, indent, ascii_only):
    # fleet report decodes with msgspec where it can: whatever the document, its answer is
    # the one json gives (repr: a NaN is not equal to itself).
    doc = json.loads(_report_text())
    (doc["findings"][0] if where == "finding" else doc)[field] = value
    data = json.dumps(doc, indent=indent, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert repr(nodes.parse(data)) == repr(nodes._report(json.loads(data)))


@given(
    field=st.sampled_from(["id", "title", "status", "summary", "evidence", "remediation"]),
    value=JSON,
    where=st.sampled_from(["finding", "host", "findings", "root"]),
)
@example(field="id", value=[], where="finding")  # exit 5 before
@example(field="summary", value={"a": 1}, where="finding")
def test_diff_reads_a_report_or_refuses_it_in_one_line(field, value, where):
    import copy
    import tempfile

    from dldoctor.diffing import DiffInputError, _report_side

    doc = copy.deepcopy(_report())
    if where == "finding":
        doc["findings"][0][field] = value
    elif where == "root":
        doc = value
    else:
        doc[where] = value
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(doc, f)
        f.flush()
        try:
            _report_side(f.name)
        except DiffInputError as exc:
            assert "\n" not in str(exc)
