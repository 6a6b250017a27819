"""CUDA-stack facts (doctor/facts/toolkit.py, pythonenv.py, frameworks.py, cudalibs.py): parsers on real captures (fixtures/cuda, see its
README), the facts on hand-built bundles, and the toolkit of this machine through LiveHost."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dldoctor.facts import Facts
from dldoctor.facts import cudalibs as cuda_libs
from dldoctor.facts import frameworks as cuda_fw
from dldoctor.facts import pythonenv as pyenv
from dldoctor.facts import system as sysf
from dldoctor.facts import toolkit as cuda_tk
from dldoctor.facts.system import parse_environ
from dldoctor.host import LiveHost, ProbeFailed, RecordingHost
from dldoctor.host.replay import ReplayHost
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import FIXTURES

CUDA = FIXTURES / "cuda"


def fx(name: str) -> str:
    return (CUDA / name).read_text()


def environ(**env: str) -> bytes:
    return b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())


def facts_of(builder: BundleBuilder) -> Facts:
    return Facts(ReplayHost(str(builder.root)))


ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 57  # a compiled nvcc, as far as a 4 KiB read tells

# --- parsers on real text -------------------------------------------------------------


def test_nvcc_version_real_outputs():
    assert cuda_tk.parse_nvcc_version(fx("nvcc-version-13.0.txt")) == ("13.0", "13.0.88")
    assert cuda_tk.parse_nvcc_version(fx("nvcc-version-11.5.txt")) == ("11.5", "11.5.119")
    assert cuda_tk.parse_nvcc_version("nvcc: command not found\n") == ("", "")


def test_nvcc_wrapper_script_target():
    assert (
        cuda_tk.nvcc_script_target(fx("usr-local-bin-nvcc.sh")) == "/usr/local/cuda-13.0/bin/nvcc"
    )
    assert cuda_tk.nvcc_script_target('#!/bin/sh\nexec nvcc.real "$@"\n') == ""
    assert cuda_tk.nvcc_script_target("\x7fELF...") == ""


def test_cuda_headers_of_this_machine():
    assert (
        cuda_tk.cuda_version_from_header(fx("cuda-13.0-cuda_runtime_api.h"), "CUDART_VERSION")
        == "13.0"
    )
    assert cuda_tk.cuda_version_from_header(fx("cuda-13.0-cuda.h"), "CUDA_VERSION") == "13.0"
    assert (
        cuda_tk.cuda_version_from_header("#define CUDA_VERSION 12040\n", "CUDA_VERSION") == "12.4"
    )
    assert (
        cuda_tk.cuda_version_from_header("#define CUDA_VERSION 10020 // ten two\n", "CUDA_VERSION")
        == "10.2"
    )
    assert cuda_tk.cuda_version_from_header("/* no macro here */", "CUDA_VERSION") == ""
    assert (
        cuda_tk.cuda_version_from_header("#define CUDA_VERSION CUDA_VERSION_X\n", "CUDA_VERSION")
        == ""
    )


def test_version_json_and_txt():
    assert cuda_tk.parse_version_json(fx("version-11.5.2.json")) == ("11.5.2", [])
    # 11.8 and 12.x runfiles wrote a date as the patch number.
    assert (
        cuda_tk.parse_version_json('{"cuda": {"version": "11.8.20220929"}}')[0] == "11.8.20220929"
    )
    version, notes = cuda_tk.parse_version_json('{"cuda": {"version": ')
    assert version == "" and "not JSON" in notes[0]
    assert cuda_tk.parse_version_json('["cuda"]') == ("", ["version.json has no cuda.version"])
    assert cuda_tk.parse_version_json('{"cuda_cudart": {"version": "12.4.127"}}')[0] == ""
    assert cuda_tk.parse_version_txt("CUDA Version 10.2.89\n") == ("10.2.89", [])
    assert cuda_tk.parse_version_txt("garbage")[0] == ""


def test_cudnn_header_macros_not_the_combined_number():
    assert cuda_libs.parse_cudnn_header(fx("cudnn_version-9.24.0.h")) == ("9.24.0", [])
    # cuDNN 8's encoding would make 9.24.0 look like 8.x if CUDNN_VERSION were read.
    old = "#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 7\n"
    assert cuda_libs.parse_cudnn_header(old) == ("8.9.7", [])
    version, notes = cuda_libs.parse_cudnn_header("#include <cudnn_version.h>\n")
    assert version == "" and notes


def test_nccl_header():
    assert cuda_libs.parse_nccl_header(fx("nccl-2.30.7.h")) == ("2.30.7", [])
    assert cuda_libs.parse_nccl_header("#define NCCL_MAJOR x\n")[0] == ""


def test_ldconfig_this_machine_and_a_driver_host():
    libs, notes = cuda_libs.parse_ldconfig(fx("ldconfig-p-this-machine.txt"))
    assert libs == {
        "libcudart.so.13": ("/usr/local/cuda-13.0/lib/libcudart.so.13",),
        "libcudart.so": ("/usr/local/cuda-13.0/lib/libcudart.so",),
    }
    assert notes == []
    libs, notes = cuda_libs.parse_ldconfig(fx("ldconfig-p-driver-lines.txt") + "garbage line\n")
    assert libs["libcuda.so.1"] == (
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib/i386-linux-gnu/libcuda.so.1",
    )
    assert set(libs) == {"libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ml.so.580.126.09"}
    assert notes == ["1 unparsed ldconfig line(s)"]


def test_dist_dirnames():
    assert pyenv.parse_dist_dirname("nvidia_cuda_runtime-13.0.96.dist-info") == (
        "nvidia-cuda-runtime",
        "13.0.96",
    )
    assert pyenv.parse_dist_dirname("torch-2.4.0+cu121.dist-info") == ("torch", "2.4.0+cu121")
    assert pyenv.parse_dist_dirname("torch-2.0.0-py3.10.egg-info") == ("torch", "2.0.0")
    assert pyenv.parse_dist_dirname("Jax_CUDA12.Plugin-0.4.30.dist-info")[0] == "jax-cuda12-plugin"
    assert pyenv.parse_dist_dirname("torch") is None
    assert pyenv.parse_dist_dirname("README.txt") is None


def test_torch_metadata_real():
    meta = pyenv.parse_metadata(fx("torch-2.14.1-METADATA"))
    assert (meta.name, meta.version, meta.notes) == ("torch", "2.14.1", ())
    reqs = {r.name: r for r in meta.requires}
    assert reqs["nvidia-cudnn-cu13"].pinned == "9.24.0.43"
    assert reqs["nvidia-nccl-cu13"].pinned == "2.30.7"
    assert reqs["cuda-toolkit"].pinned == "13.0.3"  # torch 2.14 takes CUDA from cuda-toolkit
    assert reqs["nvidia-cudnn-cu13"].marker == 'platform_system == "Linux"'
    assert reqs["triton"].pinned == "" and not reqs["triton"].extra_only
    assert reqs["pyyaml"].extra_only


def test_tensorflow_metadata_extras_are_marked():
    meta = pyenv.parse_metadata(fx("tensorflow_cpu-2.21.0-METADATA"))
    assert (meta.name, meta.version) == ("tensorflow-cpu", "2.21.0")
    cudnn = next(r for r in meta.requires if r.name == "nvidia-cudnn-cu12")
    assert cudnn.extra_only and cudnn.spec == "<10.0,>=9.3.0.75" and cudnn.pinned == ""


def test_metadata_garbage_is_noted():
    meta = pyenv.parse_metadata("Name: torch\nthis line has no colon\nRequires-Dist: ;;\n")
    assert meta.name == "torch" and meta.version == ""
    assert any("no Version" in n for n in meta.notes)
    assert any("no colon" in n for n in meta.notes)
    assert any("Requires-Dist" in n for n in meta.notes)
    assert pyenv.parse_metadata("").notes == ("metadata has no Name", "metadata has no Version")


def test_torch_version_py_real_files():
    new = cuda_fw.parse_torch_version_py(fx("torch-2.14.1+cu130-version.py"))
    assert (new.version, new.cuda, new.hip, new.notes) == ("2.14.1+cu130", "13.0", "", ())
    old = cuda_fw.parse_torch_version_py(fx("torch-2.4.0+cu121-version.py"))
    assert (old.version, old.cuda) == ("2.4.0+cu121", "12.1")
    cpu = cuda_fw.parse_torch_version_py("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\n")
    assert (cpu.version, cpu.cuda) == ("2.13.0+cpu", "")
    plain = cuda_fw.parse_torch_version_py('__version__ = "2.0.1"\ncuda = "11.8"\nhip = None\n')
    assert (plain.version, plain.cuda, plain.hip) == ("2.0.1", "11.8", "")
    rocm = cuda_fw.parse_torch_version_py(
        "__version__ = '2.11.0+rocm7.13.0'\ncuda: Optional[str] = None\n"
        "hip: Optional[str] = '7.13.99004'\n"
    )
    assert (rocm.cuda, rocm.hip) == ("", "7.13.99004")
    broken = cuda_fw.parse_torch_version_py("def nothing(): pass\n")
    assert (broken.version, broken.cuda) == ("", None) and len(broken.notes) == 2


def test_cuda_from_local_version():
    assert cuda_fw.cuda_from_local_version("2.4.0+cu121") == "12.1"
    assert cuda_fw.cuda_from_local_version("2.14.1+cu130") == "13.0"
    assert cuda_fw.cuda_from_local_version("1.4.0+cu92") == "9.2"
    assert cuda_fw.cuda_from_local_version("2.13.0+cpu") == ""


def test_tensorflow_build_info():
    cpu = cuda_fw.parse_tf_build_info(fx("tensorflow_cpu-2.21.0-build_info.py"))
    assert (cpu.cuda, cpu.cudnn) == ("", "")
    gpu = cuda_fw.parse_tf_build_info(fx("tensorflow-cuda12.1-build_info.py"))
    assert (gpu.cuda, gpu.cudnn, gpu.notes) == ("12.1", "8", ())
    as_dict = cuda_fw.parse_tf_build_info(
        "build_info = {'cuda_version': '12.3', 'cudnn_version': '8'}"
    )
    assert (as_dict.cuda, as_dict.cudnn) == ("12.3", "8")
    odd = cuda_fw.parse_tf_build_info("build_info = {}")
    assert (odd.cuda, odd.cudnn) == (None, None) and odd.notes


def test_deepspeed_info():
    cpu = cuda_fw.parse_deepspeed_info(fx("deepspeed-0.17.6-cpu-git_version_info_installed.py"))
    assert (cpu.version, cpu.cuda, cpu.nccl) == ("0.17.6", "", "")
    cuda = cuda_fw.parse_deepspeed_info(
        "version='0.14.0'\ntorch_info={'version': '2.2', 'cuda_version': '12.1', "
        "'nccl_version': '2.18', 'hip_version': '0.0'}\n"
    )
    assert (cuda.cuda, cuda.nccl) == ("12.1", "2.18")
    assert cuda_fw.parse_deepspeed_info("garbage").notes


def test_environ():
    assert parse_environ(environ(PATH="/usr/bin:/bin", CUDA_HOME="/x=y")) == {
        "PATH": "/usr/bin:/bin",
        "CUDA_HOME": "/x=y",
    }
    assert parse_environ(b"no-equals\0=novalue\0\xff=\xfe\0") == {"\ufffd": "\ufffd"}


def test_script_runs_in_a_real_interpreter():
    out = subprocess.run(
        [sys.executable, *sysf.PATH_PYTHON_ARGV[1:]], capture_output=True, text=True, timeout=60
    )
    data = json.loads(out.stdout)
    assert data["executable"] and data["version"].count(".") == 2
    assert all(os.path.isdir(p) and os.path.realpath(p) == p for p in data["sys_path"])


# --- toolkits -------------------------------------------------------------------------


def pip_assembled_cuda_13(b: BundleBuilder, *, headers: bool = True) -> BundleBuilder:
    """/usr/local/cuda-13.0 as on the development machine: wheels, no version.json."""
    root = "/usr/local/cuda-13.0"
    for name in fx("cuda-13.0-toplevel.txt").split():
        if name not in ("lib64", "include", "dist-info"):
            (b.root / "files" / root.lstrip("/") / name).mkdir(parents=True, exist_ok=True)
    b.link(f"{root}/lib64", "lib")
    b.file(f"{root}/bin/nvcc", ELF)
    if headers:
        b.file(f"{root}/include/cuda_runtime_api.h", fx("cuda-13.0-cuda_runtime_api.h"))
        b.file(f"{root}/include/cuda.h", fx("cuda-13.0-cuda.h"))
    for name in fx("cuda-13.0-dist-info.txt").split():
        b.file(f"{root}/dist-info/{name}/INSTALLER", "pip\n")
    runtime = f"{root}/dist-info/nvidia_cuda_runtime-13.0.96.dist-info/METADATA"
    b.file(runtime, fx("cuda-13.0-nvidia_cuda_runtime-METADATA"))
    b.link("/usr/local/cuda", "/usr/local/cuda-13.0")
    b.file("/usr/local/bin/nvcc", fx("usr-local-bin-nvcc.sh"))
    b.file("/proc/self/environ", environ(PATH="/root/.cargo/bin:/usr/local/bin:/usr/bin:/bin"))
    b.command(["nvcc", "--version"], fx("nvcc-version-13.0.txt"))
    return b


def test_pip_assembled_toolkit_is_13_0_from_its_header(tmp_path):
    tks = facts_of(pip_assembled_cuda_13(BundleBuilder(tmp_path))).get(cuda_tk.toolkits)
    assert tks.toolkits == (
        cuda_tk.CudaToolkit(
            path="/usr/local/cuda-13.0",
            version="13.0",
            source="include/cuda_runtime_api.h",
            nvcc_version="13.0.88",
            links=("/usr/local/cuda",),
        ),
    )
    # nvcc on PATH is /usr/local/bin/nvcc, a wrapper script that runs the 13.0 one.
    assert (tks.selected, tks.selected_by, tks.notes) == (
        "/usr/local/cuda-13.0",
        "nvcc on PATH",
        (),
    )
    assert tks.get("/usr/local/cuda").version == "13.0"


def test_pip_assembled_toolkit_without_headers_uses_its_dist_info(tmp_path):
    b = pip_assembled_cuda_13(BundleBuilder(tmp_path), headers=False)
    (tk,) = facts_of(b).get(cuda_tk.toolkits).toolkits
    assert (tk.version, tk.source) == ("13.0", "dist-info/nvidia_cuda_runtime-13.0.96.dist-info")


def test_several_toolkits_and_cuda_home_wins(tmp_path):
    b = BundleBuilder(tmp_path)
    b.file("/usr/local/cuda-11.5/version.json", fx("version-11.5.2.json"))
    b.file("/usr/local/cuda-11.5/bin/nvcc", ELF)
    b.file(
        "/usr/local/cuda-12.4/version.json", '{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}'
    )
    b.file("/usr/local/cuda-10.2/version.txt", "CUDA Version 10.2.89\n")
    b.link("/usr/local/cuda", "cuda-12.4")
    b.file("/usr/local/lib/libfoo.so", b"")  # not a toolkit
    b.file(
        "/proc/self/environ",
        environ(PATH="/usr/local/cuda-11.5/bin:/usr/bin", CUDA_HOME="/usr/local/cuda"),
    )
    b.command(["nvcc", "--version"], fx("nvcc-version-11.5.txt"))
    tks = facts_of(b).get(cuda_tk.toolkits)
    got = {t.path: (t.version, t.source, t.nvcc_version, t.links) for t in tks.toolkits}
    assert got == {
        "/usr/local/cuda-10.2": ("10.2.89", "version.txt", "", ()),
        "/usr/local/cuda-11.5": ("11.5.2", "version.json", "11.5.119", ()),
        "/usr/local/cuda-12.4": ("12.4.1", "version.json", "", ("/usr/local/cuda",)),
    }
    assert (tks.selected, tks.selected_by) == ("/usr/local/cuda-12.4", "CUDA_HOME")
    assert tks.notes == (
        "nvcc on PATH belongs to /usr/local/cuda-11.5, but CUDA_HOME selects /usr/local/cuda-12.4",
    )


def test_without_nvcc_the_cuda_link_selects(tmp_path):
    b = BundleBuilder(tmp_path)
    b.file("/usr/local/cuda-12.4/version.json", '{"cuda": {"version": "12.4.1"}}')
    b.link("/usr/local/cuda", "/usr/local/cuda-12.4")
    b.file("/proc/self/environ", environ(PATH="/usr/bin"))
    b.command(["nvcc", "--version"], status="not_installed")
    tks = facts_of(b).get(cuda_tk.toolkits)
    assert (tks.selected, tks.selected_by, tks.notes) == (
        "/usr/local/cuda-12.4",
        "/usr/local/cuda",
        (),
    )


def test_missing_cuda_home_and_dangling_link_are_noted(tmp_path):
    b = BundleBuilder(tmp_path)
    b.link("/usr/local/cuda", "/usr/local/cuda-12.1")
    b.file("/opt/cuda/version.json", '{"cuda": {"version": "12.6.3"}}')
    b.file("/proc/self/environ", environ(CUDA_HOME="/opt/nothing", CUDA_PATH="relative/cuda"))
    tks = facts_of(b).get(cuda_tk.toolkits)
    assert [(t.path, t.version) for t in tks.toolkits] == [("/opt/cuda", "12.6.3")]
    assert (tks.selected, tks.selected_by) == ("/opt/nothing", "CUDA_HOME")
    assert set(tks.notes) == {
        "CUDA_PATH=relative/cuda is not an absolute path: not followed",
        "/usr/local/cuda points to /usr/local/cuda-12.1, which does not exist",
        "CUDA_HOME=/opt/nothing does not exist",
    }


def test_toolkit_garbage_gives_notes_not_exceptions(tmp_path):
    b = BundleBuilder(tmp_path)
    b.file("/usr/local/cuda-12.2/version.json", '{"cuda": {"version": ')
    b.file("/usr/local/cuda-12.2/include/cuda_runtime_api.h", "/* truncated */\n")
    b.file("/usr/local/cuda-12.2/include/cuda.h", "#define CUDA_VERSION 12020\n")
    b.file("/usr/local/cuda-12.3/version.txt", "who knows\n")
    b.file("/usr/local/cuda-12.3/include/cuda.h", "nothing\n")
    b.file("/usr/local/cuda-9.9/bin/nvcc", ELF)
    b.answer("read", "/proc/self/environ", status="permission_denied")
    b.command(["nvcc", "--version"], "nvcc: something odd\n")
    tks = facts_of(b).get(cuda_tk.toolkits)
    by = {t.path: t for t in tks.toolkits}
    assert (by["/usr/local/cuda-12.2"].version, by["/usr/local/cuda-12.2"].source) == (
        "12.2",
        "include/cuda.h",
    )
    assert any("not JSON" in n for n in by["/usr/local/cuda-12.2"].notes)
    assert any("CUDART_VERSION" in n for n in by["/usr/local/cuda-12.2"].notes)
    assert by["/usr/local/cuda-12.3"].version == ""
    assert len(by["/usr/local/cuda-12.3"].notes) == 3
    assert by["/usr/local/cuda-9.9"].notes == (
        "no version.json, version.txt, version header or dist-info says its version",
    )
    assert tks.selected == ""
    assert any("no release line" in n for n in tks.notes)


def test_usr_local_timeout_is_a_probe_failure(tmp_path):
    b = BundleBuilder(tmp_path).answer("list", "/usr/local", status="timeout", timeout_s=5.0)
    with pytest.raises(ProbeFailed):
        facts_of(b).get(cuda_tk.toolkits)


# --- libraries ------------------------------------------------------------------------


def test_libraries_from_ldconfig(tmp_path):
    text = fx("ldconfig-p-this-machine.txt") + fx("ldconfig-p-driver-lines.txt")
    b = BundleBuilder(tmp_path).command(["ldconfig", "-p"], text)
    libs = facts_of(b).get(cuda_libs.libraries)
    assert libs.command == "ldconfig -p" and libs.notes == ()
    assert set(libs.named("libcuda")) == {"libcuda.so.1"}
    assert set(libs.named("libcudart")) == {"libcudart.so.13", "libcudart.so"}
    assert libs.named("libcudnn") == {}


def test_libraries_fall_back_to_sbin_and_time_out_as_errors(tmp_path):
    b = BundleBuilder(tmp_path / "a")
    b.command(["ldconfig", "-p"], status="not_installed")
    b.command(
        ["/sbin/ldconfig", "-p"],
        "\tlibcudnn.so.9 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.9\n",
    )
    libs = facts_of(b).get(cuda_libs.libraries)
    assert libs.command == "/sbin/ldconfig -p"
    assert libs.libraries == {"libcudnn.so.9": ("/usr/lib/x86_64-linux-gnu/libcudnn.so.9",)}
    empty = facts_of(BundleBuilder(tmp_path / "b")).get(cuda_libs.libraries)
    assert empty.libraries == {} and empty.command == "" and empty.notes
    hung = BundleBuilder(tmp_path / "c").command(["ldconfig", "-p"], status="timeout", timeout_s=10)
    with pytest.raises(ProbeFailed):
        facts_of(hung).get(cuda_libs.libraries)


# --- Python environments, frameworks, wheels ------------------------------------------

VENV = "/opt/venv/lib/python3.11/site-packages"
SYSTEM = "/usr/lib/python3/dist-packages"
LOCAL = "/usr/local/lib/python3.11/dist-packages"


def dist(b: BundleBuilder, site: str, folder: str, metadata: str | None = None) -> None:
    path = f"{site}/{folder}"
    if metadata is None:
        b.file(f"{path}/RECORD", "")
    else:
        b.file(f"{path}/METADATA", metadata)


def python_envs(b: BundleBuilder, *, path_python: list[str] | None) -> BundleBuilder:
    b.probe(
        "python",
        {
            "executable": "/opt/venv/bin/python",
            "version": "3.11.7",
            "sys_path": [
                "/usr/lib/python3.11",
                VENV,
                "/opt/venv/lib64/python3.11/site-packages",
                SYSTEM,
            ],
            "site_packages": [VENV],
        },
    )
    b.link("/opt/venv/lib64", "lib")
    b.file("/usr/lib/python3.11/os.py", "")
    if path_python is not None:
        out = {"executable": "/usr/bin/python3", "version": "3.11.2", "sys_path": path_python}
        # pyenv-style shims may print a line of their own before the script's.
        b.command(list(sysf.PATH_PYTHON_ARGV), "pyenv: using 3.11.2\n" + json.dumps(out) + "\n")
    return b


def torch_cu130(b: BundleBuilder, site: str) -> None:
    b.file(f"{site}/torch/version.py", fx("torch-2.14.1+cu130-version.py"))
    dist(b, site, "torch-2.14.1.dist-info", fx("torch-2.14.1-METADATA"))
    dist(
        b, site, "nvidia_cudnn_cu13-9.24.0.43.dist-info", fx("nvidia_cudnn_cu13-9.24.0.43-METADATA")
    )
    dist(b, site, "nvidia_nccl_cu13-2.30.7.dist-info")
    dist(b, site, "cuda_toolkit-13.0.3.dist-info")
    b.file(f"{site}/nvidia/cudnn/include/cudnn_version.h", fx("cudnn_version-9.24.0.h"))
    b.file(f"{site}/nvidia/nccl/include/nccl.h", fx("nccl-2.30.7.h"))


def test_frameworks_across_two_environments(tmp_path):
    b = python_envs(BundleBuilder(tmp_path), path_python=["/usr/lib/python3.11", LOCAL, SYSTEM])
    torch_cu130(b, VENV)
    # The system python3: an older torch whose pins differ from the wheels it sees, TF (CPU),
    # DeepSpeed.
    b.file(f"{LOCAL}/torch/version.py", fx("torch-2.4.0+cu121-version.py"))
    dist(b, LOCAL, "torch-2.4.0+cu121.dist-info",
         "Metadata-Version: 2.1\nName: torch\nVersion: 2.4.0+cu121\n"
         'Requires-Dist: nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux"\n'
         "Requires-Dist: nvidia-nccl-cu12==2.20.5\n")  # fmt: skip
    dist(b, LOCAL, "nvidia_nccl_cu12-2.21.5.dist-info")
    b.file(
        f"{LOCAL}/tensorflow/python/platform/build_info.py",
        fx("tensorflow_cpu-2.21.0-build_info.py"),
    )
    dist(b, LOCAL, "tensorflow_cpu-2.21.0.dist-info", fx("tensorflow_cpu-2.21.0-METADATA"))
    b.file(f"{LOCAL}/deepspeed/git_version_info_installed.py",
           fx("deepspeed-0.17.6-cpu-git_version_info_installed.py"))  # fmt: skip
    dist(b, LOCAL, "deepspeed-0.17.6.dist-info", "Name: deepspeed\nVersion: 0.17.6\n")
    # Both interpreters see the Debian folder: JAX with the CUDA 12 plugin lives there.
    dist(b, SYSTEM, "jax-0.10.2.dist-info", fx("jax-0.10.2-METADATA"))
    dist(b, SYSTEM, "jaxlib-0.10.2.dist-info", fx("jaxlib-0.10.2-METADATA"))
    dist(b, SYSTEM, "jax_cuda12_plugin-0.10.2.dist-info")
    dist(b, SYSTEM, "jax_cuda12_pjrt-0.10.2.dist-info")
    dist(b, SYSTEM, "nvidia_cudnn_cu12-9.8.0.87.dist-info")
    b.file(f"{SYSTEM}/jax/__init__.py", "")
    facts = facts_of(b)

    envs = facts.get(pyenv.python_environments)
    assert [(e.executable, e.source) for e in envs.environments] == [
        ("/opt/venv/bin/python", "dldoctor"),
        ("/usr/bin/python3", "python3 on PATH"),
    ]
    # lib64 -> lib: the venv's folder counts once.
    assert envs.environments[0].site_dirs == ("/usr/lib/python3.11", VENV, SYSTEM)
    shared = {s.path: s.environments for s in envs.sites}[SYSTEM]
    assert shared == ("/opt/venv/bin/python", "/usr/bin/python3")

    got = {(f.name, f.location): f for f in facts.get(cuda_fw.frameworks)}
    new = got[("torch", f"{VENV}/torch")]
    assert (new.version, new.cuda, new.cudnn, new.nccl, new.notes) == (
        "2.14.1+cu130", "13.0", "9.24.0.43", "2.30.7", ())  # fmt: skip
    assert new.environments == ("/opt/venv/bin/python",)
    old = got[("torch", f"{LOCAL}/torch")]
    # What its interpreter would load: the wheels it sees anywhere on its path, not the pins.
    assert (old.version, old.cuda, old.cudnn, old.nccl) == (
        "2.4.0+cu121",
        "12.1",
        "9.8.0.87",
        "2.21.5",
    )
    assert set(old.notes) == {
        "requires nvidia-cudnn-cu12==9.1.0.70 but 9.8.0.87 is installed",
        "requires nvidia-nccl-cu12==2.20.5 but 2.21.5 is installed",
    }
    tf = got[("tensorflow", f"{LOCAL}/tensorflow")]
    assert (tf.version, tf.cuda, tf.cudnn, tf.nccl) == ("2.21.0", "", "", "")
    assert "installed as tensorflow-cpu" in tf.notes
    ds = got[("deepspeed", f"{LOCAL}/deepspeed")]
    assert (ds.version, ds.cuda, ds.cudnn, ds.nccl) == ("0.17.6", "", None, "")
    jax = got[("jax", f"{SYSTEM}/jax")]
    # A folder two interpreters share: the wheels either of them sees (python3's NCCL).
    assert (jax.version, jax.cuda, jax.cudnn, jax.nccl) == ("0.10.2", "12", "9.8.0.87", "2.21.5")
    assert "jaxlib 0.10.2" in jax.notes and "jax-cuda12-plugin 0.10.2" in jax.notes
    assert jax.environments == ("/opt/venv/bin/python", "/usr/bin/python3")

    wheels = {(w.name, w.location): (w.version, w.cuda) for w in facts.get(pyenv.nvidia_wheels)}
    assert wheels == {
        ("nvidia-cudnn-cu13", VENV): ("9.24.0.43", "13"),
        ("nvidia-nccl-cu13", VENV): ("2.30.7", "13"),
        ("cuda-toolkit", VENV): ("13.0.3", ""),
        ("nvidia-nccl-cu12", LOCAL): ("2.21.5", "12"),
        ("nvidia-cudnn-cu12", SYSTEM): ("9.8.0.87", "12"),
    }

    cudnn = {(c.path, c.version, c.source) for c in facts.get(cuda_libs.cudnn)}
    assert cudnn == {
        (f"{VENV}/nvidia/cudnn", "9.24.0.43", "wheel nvidia-cudnn-cu13"),
        (f"{SYSTEM}/nvidia/cudnn", "9.8.0.87", "wheel nvidia-cudnn-cu12"),
    }
    nccl = {(n.path, n.version, n.source) for n in facts.get(cuda_libs.nccl)}
    assert nccl == {
        (f"{VENV}/nvidia/nccl", "2.30.7", "wheel nvidia-nccl-cu13"),
        (f"{LOCAL}/nvidia/nccl", "2.21.5", "wheel nvidia-nccl-cu12"),
    }


def test_tensorflow_cuda_build_and_a_shadowed_torch(tmp_path):
    b = python_envs(BundleBuilder(tmp_path), path_python=None)
    b.file(
        f"{VENV}/tensorflow/python/platform/build_info.py", fx("tensorflow-cuda12.1-build_info.py")
    )
    dist(b, VENV, "tensorflow-2.15.0.dist-info", "Name: tensorflow\nVersion: 2.15.0\n")
    dist(b, VENV, "nvidia_cudnn_cu12-8.9.4.25.dist-info")
    b.file(f"{VENV}/torch/version.py", "__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\n")
    b.file(f"{SYSTEM}/torch/version.py", fx("torch-2.4.0+cu121-version.py"))
    facts = facts_of(b)
    got = {(f.name, f.location): f for f in facts.get(cuda_fw.frameworks)}
    tf = got[("tensorflow", f"{VENV}/tensorflow")]
    assert (tf.version, tf.cuda, tf.cudnn, tf.nccl) == ("2.15.0", "12.1", "8", None)
    assert "nvidia-cudnn-cu12 8.9.4.25 is installed beside it" in tf.notes
    cpu = got[("torch", f"{VENV}/torch")]
    assert (cpu.version, cpu.cuda, cpu.cudnn, cpu.nccl) == ("2.13.0+cpu", "", "", "")
    shadowed = got[("torch", f"{SYSTEM}/torch")]
    assert f"/opt/venv/bin/python imports torch from {VENV}/torch, not from here" in shadowed.notes
    assert "requires no cuDNN wheel: bundled in torch/lib, or the system's" in shadowed.notes
    assert facts.get(pyenv.python_environments).notes == ()  # python3 absent: not an oddity


def test_framework_garbage_gives_notes(tmp_path):
    b = python_envs(BundleBuilder(tmp_path), path_python=None)
    b.command(list(sysf.PATH_PYTHON_ARGV), "Traceback: not json\n")
    b.file(f"{VENV}/torch/version.py", "print('hello')\n")
    dist(
        b,
        VENV,
        "torch-2.4.0+cu121.dist-info",
        "Name: torch\nRequires-Dist: nvidia-cudnn-cu12==9.1.0.70\n",
    )
    dist(b, VENV, "deepspeed-0.14.0.dist-info", "Metadata-Version: 2.1\n")
    dist(
        b,
        VENV,
        "jaxlib-0.4.7+cuda11.cudnn86.dist-info",
        "Name: jaxlib\nVersion: 0.4.7+cuda11.cudnn86\n",
    )
    facts = facts_of(b)
    got = {f.name: f for f in facts.get(cuda_fw.frameworks)}
    torch = got["torch"]
    assert (torch.version, torch.cuda, torch.cudnn) == ("2.4.0+cu121", "12.1", "9.1.0.70")
    assert "requires nvidia-cudnn-cu12==9.1.0.70, which is not installed" in torch.notes
    assert "CUDA 12.1 taken from the version's +cu suffix" in torch.notes
    assert any("no __version__" in n for n in torch.notes)
    assert any("version taken from the folder name (2.4.0+cu121)" in n for n in torch.notes)
    assert got["deepspeed"].version == "0.14.0" and got["deepspeed"].location == VENV
    jaxlib = got["jaxlib"]
    assert (jaxlib.version, jaxlib.cuda, jaxlib.cudnn) == ("0.4.7+cuda11.cudnn86", "11", "8.6")
    assert any("printed" in n for n in facts.get(pyenv.python_environments).notes)


def test_no_probe_and_no_python3(tmp_path):
    b = BundleBuilder(tmp_path).command(list(sysf.PATH_PYTHON_ARGV), status="not_installed")
    facts = facts_of(b)
    envs = facts.get(pyenv.python_environments)
    assert envs.environments == () and envs.notes == ("interpreter probe: missing",)
    assert facts.get(cuda_fw.frameworks) == () and facts.get(pyenv.nvidia_wheels) == ()


def test_python3_failure_is_noted(tmp_path):
    b = BundleBuilder(tmp_path).command(
        list(sysf.PATH_PYTHON_ARGV), stderr="Unknown option: -I\n", returncode=2
    )
    assert facts_of(b).get(pyenv.python_environments).notes == (
        "interpreter probe: missing",
        "python3 on PATH exited with 2: Unknown option: -I",
    )


# --- cuDNN and NCCL headers -----------------------------------------------------------


def test_cudnn_and_nccl_headers(tmp_path):
    b = BundleBuilder(tmp_path)
    # Debian/Ubuntu packages: the plain name is an alternatives link to the _v9 header.
    b.file("/usr/include/x86_64-linux-gnu/cudnn_version_v9.h", fx("cudnn_version-9.24.0.h"))
    b.link("/etc/alternatives/cudnn_version_h", "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h")
    b.link("/usr/include/cudnn_version.h", "/etc/alternatives/cudnn_version_h")
    b.file("/usr/include/nccl.h", fx("nccl-2.30.7.h"))
    # A cuDNN 7 tarball copied into a toolkit: the macros were in cudnn.h then.
    b.file("/usr/local/cuda-10.2/version.txt", "CUDA Version 10.2.89\n")
    b.file("/usr/local/cuda-10.2/include/cudnn.h",
           "#define CUDNN_MAJOR 7\n#define CUDNN_MINOR 6\n#define CUDNN_PATCHLEVEL 5\n")  # fmt: skip
    # A cuDNN 9 tarball whose version header lost its macros; its cudnn.h only includes it.
    b.file("/usr/local/cuda-12.4/version.json", '{"cuda": {"version": "12.4.1"}}')
    b.file("/usr/local/cuda-12.4/include/cudnn_version.h", "#pragma once\n")
    b.file("/usr/local/cuda-12.4/include/cudnn.h", '#include "cudnn_version.h"\n')
    facts = facts_of(b)
    cudnn = facts.get(cuda_libs.cudnn)
    assert [(c.version, c.source, c.path) for c in cudnn] == [
        ("9.24.0", "cudnn_version.h", "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h"),
        ("7.6.5", "cudnn.h", "/usr/local/cuda-10.2/include/cudnn.h"),
        ("", "cudnn_version.h", "/usr/local/cuda-12.4/include/cudnn_version.h"),
    ]
    assert cudnn[0].notes == ("found as /usr/include/cudnn_version.h",)
    assert cudnn[2].notes == ("cudnn_version.h: no numeric CUDNN_MAJOR/CUDNN_MINOR defines",)
    nccl = facts.get(cuda_libs.nccl)
    assert [(n.version, n.path) for n in nccl] == [("2.30.7", "/usr/include/nccl.h")]


# --- this machine ---------------------------------------------------------------------

THIS_TOOLKIT = "/usr/local/cuda-13.0"


@pytest.mark.skipif(not os.path.isdir(THIS_TOOLKIT), reason=f"no {THIS_TOOLKIT} here")
def test_live_pip_assembled_toolkit_is_13_0():
    tks = Facts(LiveHost()).get(cuda_tk.toolkits)
    tk = tks.get(THIS_TOOLKIT)
    assert tk is not None, tks
    assert tk.path == THIS_TOOLKIT and tk.version == "13.0", tk


def test_live_facts_record_and_replay_the_same(tmp_path):
    recording = RecordingHost(LiveHost())
    all_facts = (
        cuda_tk.toolkits,
        cuda_libs.libraries,
        cuda_libs.cudnn,
        cuda_libs.nccl,
        cuda_fw.frameworks,
        pyenv.nvidia_wheels,
    )
    live = Facts(recording)
    values = [live.get(f) for f in all_facts]
    bundle = recording.write_bundle(str(tmp_path / "bundle"), argv=["test"])
    replayed = Facts(ReplayHost(bundle))
    assert [replayed.get(f) for f in all_facts] == values
