"""Builds the synthetic GPU fixture hosts under fixtures/hosts/ (too large to write by hand).

    python -m tests.hostgen            # rewrite them; review the diff like code

`tests/test_hostgen.py` checks that the committed bundles are what this script makes.
NVML answers come from the fake pynvml run through the real probe, so nvml.json has
exactly the shape a live host records. The other files are what such hosts hold: the
formats are those of the real files (see the comments), the values are invented.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from dldoctor.nvml_probe import collect
from tests.bundlebuilder import BundleBuilder
from tests.fake_pynvml import Err, FakeNvml, PciInfo, h100

HOSTS = Path(__file__).parent / "fixtures" / "hosts"

UBUNTU_2204 = """PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
UBUNTU_CODENAME=jammy
"""

NOUVEAU_BLACKLIST = "blacklist nouveau\noptions nouveau modeset=0\n"


def meminfo(total_gib: int) -> str:
    kb = total_gib * 1024 * 1024
    return (
        f"MemTotal:       {kb} kB\nMemFree:        {kb * 9 // 10} kB\n"
        f"MemAvailable:   {kb * 19 // 20} kB\nBuffers:          204800 kB\n"
        "Cached:         8388608 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\n"
        "HugePages_Total:       0\nHugepagesize:       2048 kB\n"
    )


def proc_modules(names: list[str]) -> str:
    # /proc/modules: name size refcount users state address [taint]
    return "".join(f"{n} 1048576 0 - Live 0x0000000000000000 (POE)\n" for n in names)


def base_host(b: BundleBuilder, hostname: str, ram_gib: int) -> None:
    b.file("/etc/os-release", UBUNTU_2204)
    b.file("/proc/sys/kernel/osrelease", "5.15.0-105-generic\n")
    b.file("/proc/sys/kernel/hostname", hostname + "\n")
    b.file("/proc/meminfo", meminfo(ram_gib))
    b.file("/proc/self/mountinfo", "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n")
    b.file("/proc/1/cgroup", "0::/init.scope\n")
    b.file("/proc/cmdline", "BOOT_IMAGE=/vmlinuz-5.15.0-105-generic root=/dev/nvme0n1p2 ro\n")
    b.command(["python3", "--version"], "Python 3.10.12\n")
    b.command(["getconf", "GNU_LIBC_VERSION"], "glibc 2.35\n")
    b.probe("python", {
        "executable": "/opt/venv/bin/python3", "version": "3.10.12", "implementation": "CPython",
        "prefix": "/opt/venv", "base_prefix": "/usr", "in_venv": True,
        "path_python3": "/usr/bin/python3",
        "sys_path": ["/usr/lib/python3.10", "/opt/venv/lib/python3.10/site-packages"],
        "site_packages": ["/opt/venv/lib/python3.10/site-packages"],
    })  # fmt: skip
    # A host bridge, so the PCI bus is never NVIDIA-only.
    pci_device(b, "0000:00:00.0", "8086", "09a2", "060000", "", 0)


def pci_device(b: BundleBuilder, address: str, vendor: str, device: str, klass: str,
               driver: str, numa: int) -> None:  # fmt: skip
    base = f"/sys/bus/pci/devices/{address}"
    b.file(f"{base}/vendor", f"0x{vendor}\n").file(f"{base}/device", f"0x{device}\n")
    b.file(f"{base}/class", f"0x{klass}\n").file(f"{base}/numa_node", f"{numa}\n")
    if driver:
        b.link(f"{base}/driver", f"../../../bus/pci/drivers/{driver}")


def nvml(b: BundleBuilder, fake: FakeNvml) -> None:
    data = collect(fake)
    data["binding"] = "nvidia-ml-py (fixture)"  # the installed binding's version varies
    (b.root / "nvml.json").write_text(json.dumps({"status": "ok", "value": data}, indent=1))


def nvidia_driver(
    b: BundleBuilder, version: str, extra_modules: list[str] = (), library: str = ""
) -> None:
    modules = [*extra_modules, "nvidia_uvm", "nvidia_modeset", "nvidia"]
    b.file("/proc/modules", proc_modules(modules))
    b.file("/sys/module/nvidia/version", version + "\n")
    lib = "/usr/lib/x86_64-linux-gnu"
    # `ldconfig -p` lines as glibc prints them; the .so.1 link names the library's version.
    ldconfig = (
        "3 libs found in cache `/etc/ld.so.cache'\n"
        f"\tlibnvidia-ml.so.1 (libc6,x86-64) => {lib}/libnvidia-ml.so.1\n"
        f"\tlibcuda.so.1 (libc6,x86-64) => {lib}/libcuda.so.1\n"
        f"\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => {lib}/libc.so.6\n"
    )
    b.command(["ldconfig", "-p"], ldconfig)
    b.link(f"{lib}/libnvidia-ml.so.1", f"libnvidia-ml.so.{library or version}")
    b.file("/etc/modprobe.d/blacklist-nouveau.conf", NOUVEAU_BLACKLIST)


SITE = "/opt/venv/lib/python3.10/site-packages"
FIXTURE_CUDA = Path(__file__).parent / "fixtures" / "cuda"


def dist_info(b: BundleBuilder, name: str, version: str, requires: list[str] = ()) -> None:
    folder = f"{SITE}/{name.replace('-', '_')}-{version}.dist-info"
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             *(f"Requires-Dist: {r}" for r in requires)]  # fmt: skip
    b.file(f"{folder}/METADATA", "\n".join(lines) + "\n")


def torch_cu121(b: BundleBuilder) -> None:
    """PyTorch 2.4.0+cu121 as pip installs it: its version.py and the CUDA wheels it pins."""
    b.file(f"{SITE}/torch/version.py", (FIXTURE_CUDA / "torch-2.4.0+cu121-version.py").read_text())
    pins = {"nvidia-cuda-runtime-cu12": "12.1.105", "nvidia-cudnn-cu12": "9.1.0.70",
            "nvidia-nccl-cu12": "2.20.5"}  # fmt: skip
    dist_info(
        b,
        "torch",
        "2.4.0+cu121",
        [f'{n}=={v}; platform_system == "Linux"' for n, v in pins.items()],
    )
    for name, version in pins.items():
        dist_info(b, name, version)


def cuda_toolkit(b: BundleBuilder, version: str) -> None:
    short = ".".join(version.split(".")[:2])
    b.file(f"/usr/local/cuda-{short}/version.json",
           json.dumps({"cuda": {"name": "CUDA SDK", "version": version}}, indent=3) + "\n")  # fmt: skip
    b.link("/usr/local/cuda", f"cuda-{short}")


def journal(b: BundleBuilder, lines: list[str], now: int) -> None:
    b.command(["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise"],
              "".join(line + "\n" for line in lines))  # fmt: skip
    b.command(["date", "+%s"], f"{now}\n")


QUIET_JOURNAL = [
    "2026-11-29T08:00:01.000000+0000 gpu-node kernel: Linux version 5.15.0-105-generic",
    "2026-11-29T08:00:09.512000+0000 gpu-node kernel: nvidia-nvlink: Nvlink Core is being initialized",
]
NOW = 1796025600  # 2026-11-30T08:00:00Z, the moment the fixture logs were "read"


def hgx_h100x8_healthy(b: BundleBuilder) -> None:
    """An HGX H100 server: 8 GPUs, 4 NVSwitches, Fabric Manager running, R550 driver."""
    base_host(b, "hgx-h100-01", 2048)
    for i in range(8):
        pci_device(b, f"0000:{0x18 + 0x10 * i:02x}:00.0", "10de", "2330", "030200", "nvidia",
                   0 if i < 4 else 1)  # fmt: skip
    for i in range(4):
        pci_device(b, f"0000:{0xC5 + i:02x}:00.0", "10de", "22a3", "068000", "nvidia", 1)
    nvidia_driver(b, "550.54.15", ["nvidia_peermem"])
    nvml(b, FakeNvml([h100(i) for i in range(8)]))
    b.command(["systemctl", "is-active", "nvidia-fabricmanager"], "active\n")
    journal(b, QUIET_JOURNAL, NOW)
    cuda_toolkit(b, "12.4.1")
    torch_cu121(b)


def workstation_rtx4090_nouveau(b: BundleBuilder) -> None:
    """A desktop with an RTX 4090 that Nouveau grabbed: no NVIDIA driver installed."""
    base_host(b, "ws-ml-07", 128)
    pci_device(b, "0000:01:00.0", "10de", "2684", "030000", "nouveau", -1)
    pci_device(b, "0000:01:00.1", "10de", "22ba", "040300", "snd_hda_intel", -1)
    b.file("/proc/modules", proc_modules(["nouveau", "drm_ttm_helper", "snd_hda_intel"]))
    nvml(b, FakeNvml([], init=Err(12)))  # NVML_ERROR_LIBRARY_NOT_FOUND
    b.command(["nvidia-smi", "-q", "-x"], status="not_installed")


def a100(index: int, **overrides):
    """An A100 SXM4 80GB (Ampere: row remapping, no page retirement)."""
    script = h100(index, nvmlDeviceGetName="NVIDIA A100-SXM4-80GB",
                  nvmlDeviceGetArchitecture=7, nvmlDeviceGetCudaComputeCapability=(8, 0),
                  nvmlDeviceGetPciInfo=PciInfo(f"00000000:{0x07 + 0x10 * index:02X}:00.0"),
                  nvmlDeviceGetNvLinkState=lambda link: 1 if link < 12 else Err(2))  # fmt: skip
    script.update(overrides)
    return script


def a100_driver470_torch_cu121(b: BundleBuilder) -> None:
    """One A100 on an R470 driver (CUDA 11.4) under a PyTorch built for CUDA 12.1."""
    base_host(b, "train-a100-02", 512)
    pci_device(b, "0000:07:00.0", "10de", "20b2", "030200", "nvidia", 0)
    nvidia_driver(b, "470.82.01")
    fake = FakeNvml([a100(0, nvmlDeviceGetTemperatureV=Err(13), nvmlDeviceGetTemperature=31,
                          nvmlDeviceGetCurrentClocksEventReasons=Err(13),
                          nvmlDeviceGetCurrentClocksThrottleReasons=0x1)],
                    driver="470.82.01", cuda=11040)  # fmt: skip
    nvml(b, fake)
    journal(b, QUIET_JOURNAL, NOW)
    torch_cu121(b)


def a100x8_remap_pending_xid79(b: BundleBuilder) -> None:
    """An 8x A100 node after a bad night: GPU 3 has a row remap pending, GPU 5 fell off."""
    base_host(b, "dgx-a100-11", 2048)
    for i in range(8):
        pci_device(b, f"0000:{0x07 + 0x10 * i:02x}:00.0", "10de", "20b2", "030200", "nvidia",
                   0 if i < 4 else 1)  # fmt: skip
    for i in range(6):
        pci_device(b, f"0000:{0xC4 + i:02x}:00.0", "10de", "1af1", "068000", "nvidia", 1)
    nvidia_driver(b, "535.154.05", ["nvidia_peermem"])
    gpus = [a100(i) for i in range(8)]
    gpus[3]["nvmlDeviceGetRemappedRows"] = (0, 1, 1, 0)  # corrected, uncorrected, pending, failure
    gpus[3]["nvmlDeviceGetTotalEccErrors"] = lambda err_type, counter: 1 if err_type == 1 else 0
    nvml(b, FakeNvml(gpus, driver="535.154.05", cuda=12020, lost=(5,)))
    b.command(["systemctl", "is-active", "nvidia-fabricmanager"], "active\n")
    # journalctl -o short-iso-precise lines, as the R535 driver writes them.
    journal(b, [
        *QUIET_JOURNAL,
        "2026-11-30T05:41:17.120331+0000 dgx-a100-11 kernel: NVRM: Xid (PCI:0000:37:00): 64, "
        "pid=20355, name=python, Row Remapper Error: (0x00000005ad3e0fc0) - All reserved rows "
        "for bank are remapped",
        "2026-11-30T06:02:44.871203+0000 dgx-a100-11 kernel: NVRM: Xid (PCI:0000:57:00): 79, "
        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "2026-11-30T06:02:44.871260+0000 dgx-a100-11 kernel: NVRM: GPU 0000:57:00.0: GPU has "
        "fallen off the bus.",
    ], NOW)  # fmt: skip


SCENARIOS = {
    "hgx-h100x8-healthy": hgx_h100x8_healthy,
    "workstation-rtx4090-nouveau": workstation_rtx4090_nouveau,
    "a100-driver470-torch-cu121": a100_driver470_torch_cu121,
    "a100x8-remap-pending-xid79": a100x8_remap_pending_xid79,
}


def build(root: Path, name: str) -> Path:
    target = root / name
    if target.exists():
        shutil.rmtree(target)
    SCENARIOS[name](BundleBuilder(target))
    return target


def main() -> int:
    for name in SCENARIOS:
        print(build(HOSTS, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
