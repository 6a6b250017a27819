"""CUDA-stack checks on hand-built facts."""

from __future__ import annotations

from dldoctor.checks import cuda as checks
from dldoctor.facts import Facts
from dldoctor.facts import cudalibs as cuda_libs
from dldoctor.facts import frameworks as cuda_fw
from dldoctor.facts import gpu as g
from dldoctor.facts import pythonenv as pyenv
from dldoctor.facts import toolkit as cuda_tk
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.pci import PciBus, PciDevice, pci_devices
from dldoctor.model import Status
from dldoctor.policy import Policy

R470 = g.NvidiaStack("nvml", driver_version="470.82.01", cuda_driver_version="11.4",
                     gpus=(g.Gpu(0, name="NVIDIA A100-SXM4-80GB"),))  # fmt: skip
TORCH = cuda_fw.Framework("torch", "2.4.0+cu121", "12.1", "9.1.0.70", "2.20.5", "/venv/site/torch")


def toolkit(path, version):
    return cuda_tk.CudaToolkit(path, version, "version.json", "")


def facts(over=None):
    base = {
        nvidia: R470,
        cuda_tk.toolkits: cuda_tk.CudaToolkits((), "", ""),
        cuda_fw.frameworks: (TORCH,),
        cuda_libs.libraries: cuda_libs.CudaLibraries({}, "ldconfig -p"),
    }
    return Facts.given({**base, **(over or {})})


def test_torch_cu121_on_r470_fails():
    outcome = checks.cuda_compat(facts(), Policy())
    assert outcome.status == Status.FAIL
    assert "CUDA 12.1 needs driver ≥ 530.30.02" in outcome.details[0]


def test_cuda_compat_package_turns_the_failure_into_a_warning():
    libs = cuda_libs.CudaLibraries(
        {"libcuda.so.1": ("/usr/local/cuda-12.1/compat/libcuda.so.1",)}, "x"
    )
    outcome = checks.cuda_compat(facts({cuda_libs.libraries: libs}), Policy())
    assert outcome.status == Status.WARN and "cuda-compat" in outcome.summary


def test_an_old_toolkit_nothing_selects_only_warns():
    tks = cuda_tk.CudaToolkits((toolkit("/usr/local/cuda-11.8", "11.8"), toolkit("/usr/local/cuda-13.0", "13.0")),
                          "/usr/local/cuda-11.8", "/usr/local/cuda")  # fmt: skip
    outcome = checks.cuda_compat(facts({cuda_tk.toolkits: tks, cuda_fw.frameworks: ()}), Policy())
    assert outcome.status == Status.WARN and "nothing selects" in outcome.summary


def test_framework_without_a_driver():
    none = g.NvidiaStack("nvml", error=g.NO_DRIVER)
    gpu_bus = PciBus((PciDevice("0000:3b:00.0", "10de", "20b2", "030200", ""),))
    with_gpu = facts({nvidia: none, pci_devices: gpu_bus})
    assert checks.framework_driver(with_gpu, Policy()).status == Status.FAIL
    cpu_only = facts({nvidia: none, pci_devices: PciBus()})
    assert checks.framework_driver(cpu_only, Policy()).status == Status.WARN


def test_cudnn_mismatch_beside_torch():
    wheel = pyenv.NvidiaWheel("nvidia-cudnn-cu11", "8.7.0.84", "11", "/venv/site")
    given = facts({pyenv.nvidia_wheels: (wheel,), cuda_libs.cudnn: ()})
    outcome = checks.cudnn(given, Policy())
    assert outcome.status == Status.FAIL and "built for CUDA 12" in outcome.summary
    bundled = cuda_fw.Framework("torch", "1.12.1+cu113", "11.3", None, None, "/venv/site/torch")
    quiet = facts({cuda_fw.frameworks: (bundled,), pyenv.nvidia_wheels: (), cuda_libs.cudnn: ()})
    assert checks.cudnn(quiet, Policy()).status == Status.PASS  # torch/lib carries it
