"""Builds the synthetic GPU fixture hosts under tests/fixtures/hosts/ (too large to write by hand).

    python -m tests.support.hostgen    # rewrite them; review the diff like code

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

from dldoctor.facts.acs import LSPCI_ARGV
from dldoctor.facts.gds import GDSCHECK_ARGV
from dldoctor.facts.limits import SYSTEMD_DEFAULTS_ARGV, SYSTEMD_UNITS_ARGV
from dldoctor.facts.system import PATH_PYTHON_ARGV
from dldoctor.nvml_probe import collect
from tests.support.bundlebuilder import BundleBuilder
from tests.support.fake_pynvml import (
    NOT_SUPPORTED,
    Err,
    FakeNvml,
    MemoryInfo,
    PciInfo,
    ProcessInfo,
    h100,
)
from tests.support.paths import FIXTURES, HOSTS

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
    path_python = {
        "executable": "/usr/bin/python3",
        "version": "3.10.12",
        "sys_path": ["/usr/lib/python3.10", "/usr/lib/python3/dist-packages"],
    }
    b.command(list(PATH_PYTHON_ARGV), json.dumps(path_python) + "\n")
    b.command(["getconf", "GNU_LIBC_VERSION"], "glibc 2.35\n")
    b.probe(
        "python",
        {
            "executable": "/opt/venv/bin/python3",
            "version": "3.10.12",
            "implementation": "CPython",
            "prefix": "/opt/venv",
            "base_prefix": "/usr",
            "in_venv": True,
            "path_python3": "/usr/bin/python3",
            "sys_path": ["/usr/lib/python3.10", "/opt/venv/lib/python3.10/site-packages"],
            "site_packages": ["/opt/venv/lib/python3.10/site-packages"],
        },
    )
    # A host bridge, so the PCI bus is never NVIDIA-only.
    pci_device(b, "0000:00:00.0", "8086", "09a2", "060000", "", 0)


def pci_device(
    b: BundleBuilder,
    address: str,
    vendor: str,
    device: str,
    klass: str,
    driver: str,
    numa: int,
    *,
    chain: tuple[str, ...] = (),
    link: tuple[float, int, float, int] | None = None,
    cpulist: str = "",
    aer: tuple[int, int, int] | None = None,
) -> None:
    """A PCI device as sysfs has it: its folder under /sys/devices/pciDDDD:BB/<ports...>/
    and the /sys/bus/pci/devices link to it. `chain`: the ports above it, nearest first;
    `link`: (current GT/s, current width, max GT/s, max width)."""
    top = chain[-1] if chain else address
    real = "/".join(["devices", f"pci{top[:7]}", *reversed(chain), address])
    base = f"/sys/{real}"
    b.file(f"{base}/vendor", f"0x{vendor}\n").file(f"{base}/device", f"0x{device}\n")
    b.file(f"{base}/class", f"0x{klass}\n").file(f"{base}/numa_node", f"{numa}\n")
    if cpulist:
        b.file(f"{base}/local_cpulist", cpulist + "\n")
    if link:
        cur_gts, cur_w, max_gts, max_w = link
        b.file(f"{base}/current_link_speed", f"{cur_gts:g} GT/s PCIe\n")
        b.file(f"{base}/current_link_width", f"{cur_w}\n")
        b.file(f"{base}/max_link_speed", f"{max_gts:g} GT/s PCIe\n")
        b.file(f"{base}/max_link_width", f"{max_w}\n")
    if aer:
        for name, total, kind in zip(
            ("correctable", "nonfatal", "fatal"), aer, ("COR", "NONFATAL", "FATAL"), strict=True
        ):
            b.file(f"{base}/aer_dev_{name}", f"RxErr 0\nTOTAL_ERR_{kind} {total}\n")
    if driver:
        b.link(f"{base}/driver", f"../../../bus/pci/drivers/{driver}")
    b.link(f"/sys/bus/pci/devices/{address}", f"../../../{real}")


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
FIXTURE_CUDA = FIXTURES / "cuda"


def dist_info(b: BundleBuilder, name: str, version: str, requires: list[str] = ()) -> None:
    folder = f"{SITE}/{name.replace('-', '_')}-{version}.dist-info"
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        *(f"Requires-Dist: {r}" for r in requires),
    ]
    b.file(f"{folder}/METADATA", "\n".join(lines) + "\n")


def torch_cu121(b: BundleBuilder) -> None:
    """PyTorch 2.4.0+cu121 as pip installs it: its version.py and the CUDA wheels it pins."""
    b.file(f"{SITE}/torch/version.py", (FIXTURE_CUDA / "torch-2.4.0+cu121-version.py").read_text())
    pins = {
        "nvidia-cuda-runtime-cu12": "12.1.105",
        "nvidia-cudnn-cu12": "9.1.0.70",
        "nvidia-nccl-cu12": "2.20.5",
    }
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
    b.file(
        f"/usr/local/cuda-{short}/version.json",
        json.dumps({"cuda": {"name": "CUDA SDK", "version": version}}, indent=3) + "\n",
    )
    b.link("/usr/local/cuda", f"cuda-{short}")


def journal(b: BundleBuilder, lines: list[str], now: int) -> None:
    b.command(
        ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise"],
        "".join(line + "\n" for line in lines),
    )
    b.command(["date", "+%s"], f"{now}\n")


QUIET_JOURNAL = [
    "2026-11-29T08:00:01.000000+0000 gpu-node kernel: Linux version 5.15.0-105-generic",
    "2026-11-29T08:00:09.512000+0000 gpu-node kernel: nvidia-nvlink: Nvlink Core is being initialized",
]
NOW = 1796025600  # 2026-11-30T08:00:00Z, the moment the fixture logs were "read"


# --- a two-socket 8-GPU server, with the topology knobs the [3/9] scenarios turn --------

GEN5, GEN4, IDLE = 32.0, 16.0, 2.5
CORES_PER_SOCKET = 16  # invented and small, so the fixture stays readable


def cpuinfo(sockets: int, cores: int, model: str) -> str:
    """/proc/cpuinfo with the fields the parser reads, SMT on (two threads per core)."""
    blocks, n = [], 0
    for _thread in range(2):
        for socket in range(sockets):
            for core in range(cores):
                blocks.append(
                    f"processor\t: {n}\nvendor_id\t: GenuineIntel\nmodel name\t: {model}\n"
                    f"physical id\t: {socket}\nsiblings\t: {cores * 2}\ncore id\t\t: {core}\n"
                    f"cpu cores\t: {cores}\nflags\t\t: fpu sse2 avx2 avx512f amx_tile\n"
                )
                n += 1
    return "\n".join(blocks)


# `systemctl show` of the launcher units (SYSTEMD_UNITS_ARGV): a Slurm node, slurmd unlimited.
SLURM_LAUNCHERS = (
    "Id=slurmd.service\nLoadState=loaded\nLimitMEMLOCK=infinity\nLimitNOFILE=131072\n\n"
    "Id=docker.service\nLoadState=not-found\nLimitMEMLOCK=8388608\nLimitNOFILE=524288\n\n"
    "Id=containerd.service\nLoadState=not-found\nLimitMEMLOCK=8388608\nLimitNOFILE=524288\n\n"
    "Id=kubelet.service\nLoadState=not-found\nLimitMEMLOCK=8388608\nLimitNOFILE=524288\n"
)
# A Kubernetes node on systemd's defaults: containerd 2.x and Docker 25 dropped LimitNOFILE=
# from their units, and none sets LimitMEMLOCK, so each gets DefaultLimit* (8 MiB, 524288).
CONTAINERD_LAUNCHERS = (
    "Id=slurmd.service\nLoadState=not-found\nLimitMEMLOCK=8388608\nLimitNOFILE=524288\n\n"
    "Id=docker.service\nLoadState=loaded\nLimitMEMLOCK=8388608\nLimitNOFILE=524288\n\n"
    "Id=containerd.service\nLoadState=loaded\nLimitMEMLOCK=8388608\nLimitNOFILE=524288\n\n"
    "Id=kubelet.service\nLoadState=loaded\nLimitMEMLOCK=8388608\nLimitNOFILE=524288\n"
)


def node_cpulist(node: int) -> str:
    lo, hi = node * CORES_PER_SOCKET, (node + 1) * CORES_PER_SOCKET - 1
    total = 2 * CORES_PER_SOCKET
    return f"{lo}-{hi},{lo + total}-{hi + total}"


def platform(
    b: BundleBuilder,
    ram_gib: int,
    memlock: int | None,
    shm_bytes: int,
    in_container: bool = False,
    nofile: tuple[int, int] = (1048576, 1048576),
    launchers: str = SLURM_LAUNCHERS,
    numa_balancing: int = 0,
) -> None:
    """CPU, NUMA, limits, /dev/shm, THP, IOMMU of a two-socket Sapphire Rapids server."""
    b.file("/proc/cpuinfo", cpuinfo(2, CORES_PER_SOCKET, "Intel(R) Xeon(R) Platinum 8480+"))
    for node in range(2):
        base = f"/sys/devices/system/node/node{node}"
        b.file(f"{base}/cpulist", node_cpulist(node) + "\n")
        kb = ram_gib * 1024 * 1024 // 2
        b.file(
            f"{base}/meminfo",
            f"Node {node} MemTotal:       {kb} kB\nNode {node} MemFree: {kb // 2} kB\n",
        )
    b.file("/proc/sys/kernel/numa_balancing", f"{numa_balancing}\n")
    b.command(["numactl", "--show"], "policy: default\npreferred node: current\n")
    for cpu in range(4 * CORES_PER_SOCKET):
        b.file(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", "performance\n")
    b.file("/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver", "intel_pstate\n")
    b.file("/sys/devices/system/cpu/smt/control", "on\n")
    lock = "unlimited" if memlock is None else str(memlock)
    # /proc/self/limits as the kernel prints it (fs/proc/base.c), trimmed to three rows.
    b.file(
        "/proc/self/limits",
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        f"Max open files            {nofile[0]:<20} {nofile[1]:<20} files     \n"
        f"Max locked memory         {lock:<20} {lock:<20} bytes     \n"
        "Max processes             4126935              4126935              processes \n",
    )
    if memlock is None:
        b.file(
            "/etc/security/limits.d/90-rdma.conf",
            "* soft memlock unlimited\n* hard memlock unlimited\n",
        )
    else:
        b.file("/etc/security/limits.conf", f"# site default\n* hard memlock {memlock // 1024}\n")
    b.command(
        list(SYSTEMD_DEFAULTS_ARGV), "DefaultLimitMEMLOCK=8388608\nDefaultLimitNOFILE=524288\n"
    )
    b.command(list(SYSTEMD_UNITS_ARGV), launchers)
    blocks = shm_bytes // 4096
    b.answer(
        "statvfs",
        "/dev/shm",
        status="ok",
        value={
            "f_bsize": 4096,
            "f_frsize": 4096,
            "f_blocks": blocks,
            "f_bfree": blocks,
            "f_bavail": blocks,
            "f_files": 1 << 20,
            "f_ffree": 1 << 20,
            "f_favail": 1 << 20,
            "f_flag": 4102,
            "f_namemax": 255,
        },
    )
    root = (
        "512 498 0:52 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A\n"
        if in_container
        else "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
    )
    b.file(
        "/proc/self/mountinfo",
        root + "30 22 0:27 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=X\n",
    )
    b.file("/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    b.file(
        "/sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never\n"
    )
    b.file("/sys/class/iommu/dmar0/.keep", "")
    b.file("/sys/kernel/iommu_groups/0/type", "identity\n")
    b.file(
        "/proc/cmdline", "BOOT_IMAGE=/vmlinuz-5.15.0-105-generic root=/dev/nvme0n1p2 ro iommu=pt\n"
    )


MDSTAT_CLEAN = """Personalities : [raid1] [raid0]
md1 : active raid0 nvme4n1[3] nvme3n1[2] nvme2n1[1] nvme1n1[0]
      15002949632 blocks super 1.2 512k chunks

md0 : active raid1 nvme0n1p2[1] nvme5n1p2[0]
      1874715648 blocks super 1.2 [2/2] [UU]
      bitmap: 1/14 pages [4KB], 65536KB chunk

unused devices: <none>
"""
# md0 lost a mirror; md1 (RAID 0 under /data) lost nvme3n1 and could not be assembled.
MDSTAT_BROKEN = """Personalities : [raid1] [raid0]
md1 : inactive nvme4n1[3](S) nvme2n1[1](S) nvme1n1[0](S)
      11252212224 blocks super 1.2

md0 : active raid1 nvme0n1p2[1](F) nvme5n1p2[0]
      1874715648 blocks super 1.2 [2/1] [U_]
      bitmap: 3/14 pages [12KB], 65536KB chunk

unused devices: <none>
"""


def statvfs(b: BundleBuilder, path: str, size_gib: float, free_pct: float) -> None:
    blocks = int(size_gib * GIB_BLOCKS)
    free = int(blocks * free_pct / 100)
    b.answer(
        "statvfs",
        path,
        status="ok",
        value={
            "f_bsize": 4096,
            "f_frsize": 4096,
            "f_blocks": blocks,
            "f_bfree": free,
            "f_bavail": free,
            "f_files": 1 << 26,
            "f_ffree": 1 << 25,
            "f_favail": 1 << 25,
            "f_flag": 4096,
            "f_namemax": 255,
        },
    )


GIB_BLOCKS = 2**30 // 4096


def storage(b: BundleBuilder, *, broken_raid: bool = False, ckpt_free_pct: float = 61.0) -> None:
    """Mirrored system disk (md0), a RAID 0 of four NVMe drives for datasets on /data (md1),
    and a separate NVMe drive for checkpoints, as the guide lays it out."""
    b.file("/proc/mdstat", MDSTAT_BROKEN if broken_raid else MDSTAT_CLEAN)
    data = "" if broken_raid else "40 22 9:1 / /data rw,noatime shared:20 - xfs /dev/md1 rw\n"
    b.file(
        "/proc/self/mountinfo",
        "22 1 9:0 / / rw,relatime shared:1 - ext4 /dev/md0 rw\n"
        "30 22 0:27 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=X\n"
        + data
        + "41 22 259:9 / /checkpoints rw,noatime shared:21 - ext4 /dev/nvme6n1 rw\n",
    )
    statvfs(b, "/", 1788, 72.0)
    statvfs(b, "/tmp", 1788, 72.0)
    if not broken_raid:
        statvfs(b, "/data", 13972, 38.0)
    statvfs(b, "/checkpoints", 7153, ckpt_free_pct)
    for i, (model, fw) in enumerate(
        (("SAMSUNG MZWLR7T6HALA-00007", "MPK7525Q"), ("SAMSUNG MZWLR7T6HALA-00007", "MPK7525Q"))
    ):
        base = f"/sys/class/nvme/nvme{i}"
        b.file(f"{base}/model", model + "\n").file(f"{base}/firmware_rev", fw + "\n")
        b.file(f"{base}/state", "live\n").file(f"{base}/transport", "pcie\n")
        b.file(f"{base}/serial", f"S4YPNA0R{i:06d}\n")
        b.command(
            ["nvme", "smart-log", f"/dev/nvme{i}", "--output-format=json"],
            json.dumps(
                {
                    "critical_warning": 0,
                    "temperature": 311,
                    "avail_spare": 100,
                    "spare_thresh": 10,
                    "percent_used": 3,
                    "media_errors": 0,
                }
            ),
        )


def lspci_block(address: str, what: str, redirect: bool) -> str:
    """One device of `lspci -vvv -D` with its ACS capability (other capabilities left out)."""
    flag = "+" if redirect else "-"
    return (
        f"{address} {what}\n"
        "\tCapabilities: [160 v1] Access Control Services\n"
        "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+\n"
        f"\t\tACSCtl:\tSrcValid{flag} TransBlk- ReqRedir{flag} CmpltRedir{flag} UpstreamFwd{flag} "
        "EgressCtrl- DirectTrans-\n\n"
    )


def hca(
    b: BundleBuilder,
    name: str,
    netdev: str,
    *,
    state: str = "4: ACTIVE",
    phys: str = "5: LinkUp",
    roce: bool = False,
    mtu: int = 4092,
    v2_gid: bool = True,
    ipv4: str = "10.10.10.11",
    pci: str = "",
    fw: str = "28.39.1002",
) -> None:
    """/sys/class/infiniband/<name>/ports/1 as mlx5 exposes it (InfiniBand NDR, or RoCE);
    `pci`: the PCI function its `device` link names."""
    base = f"/sys/class/infiniband/{name}"
    if pci:
        b.link(f"{base}/device", f"../../../{pci}")
    b.file(f"{base}/fw_ver", fw + "\n").file(f"{base}/hca_type", "MT4129\n")
    b.file(f"{base}/board_id", "MT_0000000838\n")
    port = f"{base}/ports/1"
    b.file(f"{port}/state", state + "\n").file(f"{port}/phys_state", phys + "\n")
    b.file(f"{port}/rate", ("200 Gb/sec (2X NDR)" if roce else "400 Gb/sec (4X NDR)") + "\n")
    b.file(f"{port}/link_layer", ("Ethernet" if roce else "InfiniBand") + "\n")
    for counter in ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors"):
        b.file(f"{port}/counters/{counter}", "0\n")
    if roce:
        link_local = "fe80:0000:0000:0000:ba3f:d2ff:fe12:3456"
        mapped = "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}".format(
            *map(int, ipv4.split("."))
        )
        gids = [(link_local, "IB/RoCE v1"), (link_local, "RoCE v2")]
        if v2_gid:
            gids += [(mapped, "IB/RoCE v1"), (mapped, "RoCE v2")]
        else:  # only the link-local v1 entry: no IPv4 address on the netdev
            gids = gids[:1]
        for i, (gid, kind) in enumerate(gids):
            b.file(f"{port}/gids/{i}", gid + "\n")
            b.file(f"{port}/gid_attrs/types/{i}", kind + "\n")
            b.file(f"{port}/gid_attrs/ndevs/{i}", netdev + "\n")
    b.file(f"/sys/class/net/{netdev}/mtu", f"{mtu}\n")


def h100_on_board(index: int):
    """GPU `index` of `gpu_server`: the board's eight repeat in PCI domain index // 8."""
    domain, j = divmod(index, 8)
    return h100(
        index,
        nvmlDeviceGetPciInfo=PciInfo(f"{domain:08X}:{0x18 + 0x10 * j:02X}:00.0"),
        nvmlDeviceGetNumaNodeId=j // 4,
        nvmlDeviceGetCpuAffinity=[0xFFFF if j < 4 else 0xFFFF0000],
    )


def gpu_server(
    b: BundleBuilder,
    hostname: str,
    *,
    ram_gib: int = 2048,
    narrow_gpu: int = -1,
    acs_redirect: bool = False,
    memlock: int | None = None,
    shm_bytes: int = 1024 * 2**30,
    ib_states: tuple[str, str] = ("4: ACTIVE",) * 2,
    roce_mtu: int = 0,
    roce_addressed: bool = False,
    peermem: bool = True,
    slow_gpu: int = -1,
    broken_raid: bool = False,
    ckpt_free_pct: float = 61.0,
    links_down: dict[int, tuple[int, ...]] | None = None,
    link_errors: dict[int, dict[tuple[int, int], int]] | None = None,
    fabricmanager: str = "active",
    kernel_lines: tuple[str, ...] = (),
    gpus: int = 8,
    nofile: tuple[int, int] = (1048576, 1048576),
    launchers: str = SLURM_LAUNCHERS,
    numa_balancing: int = 0,
    driver: tuple[str, int] = ("550.54.15", 12040),
    vbios: dict[int, str] | None = None,
    hca_fw: tuple[str, str] = ("28.39.1002",) * 2,
    gpu_overrides: dict[int, dict] | None = None,
    nic_switches: tuple[int, int] = (0, 4),
) -> None:
    """An HGX H100 server: 8 GPUs, each behind its own PCIe Gen5 switch, a ConnectX-7 beside
    GPUs 0 and 4 (`nic_switches`: the GPUs whose switches hold the two), four NVSwitches, two sockets, RDMA, Fabric Manager, R550 driver.

    `gpus` beyond 8 repeats that board in PCI domains 0001, 0002, ... (the benchmarks'
    large replays); the fixture hosts keep 8."""
    base_host(b, hostname, ram_gib)
    platform(
        b,
        ram_gib,
        memlock,
        shm_bytes,
        nofile=nofile,
        launchers=launchers,
        numa_balancing=numa_balancing,
    )
    lspci, limited = [], []
    for i in range(gpus):
        domain, j = divmod(i, 8)
        node = j // 4
        bus = 0x18 + 0x10 * j
        root = f"{domain:04x}:{0x80 * node:02x}:{1 + j % 4:02x}.0"
        up, down = f"{domain:04x}:{bus - 2:02x}:00.0", f"{domain:04x}:{bus - 1:02x}:00.0"
        gpu = f"{domain:04x}:{bus:02x}:00.0"
        pci_device(b, root, "8086", "352a", "060400", "pcieport", node, link=(GEN5, 16, GEN5, 16))
        pci_device(
            b,
            up,
            "1000",
            "c030",
            "060400",
            "pcieport",
            node,
            chain=(root,),
            link=(GEN5, 16, GEN5, 16),
        )
        pci_device(
            b,
            down,
            "1000",
            "c030",
            "060400",
            "pcieport",
            node,
            chain=(up, root),
            link=(GEN5, 16, GEN5, 16),
        )
        width = 8 if i == narrow_gpu else 16
        # Idle H100s sit at 2.5 GT/s until work arrives.
        pci_device(
            b,
            gpu,
            "10de",
            "2330",
            "030200",
            "nvidia",
            node,
            chain=(down, up, root),
            link=(IDLE, width, GEN5, 16),
            cpulist=node_cpulist(node),
            aer=(0, 0, 0),
        )
        lspci += [
            lspci_block(up, "PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch", False),
            lspci_block(
                down, "PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch", acs_redirect
            ),
        ]
        if i == narrow_gpu:
            limited.append(
                f"2026-11-29T08:00:05.101000+0000 {hostname} kernel: pci {gpu}: 252.048 Gb/s "
                f"available PCIe bandwidth, limited by 32.0 GT/s PCIe x8 link at {down} "
                "(capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)"
            )
        if j in nic_switches:  # a ConnectX-7 on a second port of the GPU's switch
            nic_port, nic = f"{domain:04x}:{bus - 1:02x}:01.0", f"{domain:04x}:{bus + 1:02x}:00.0"
            pci_device(
                b,
                nic_port,
                "1000",
                "c030",
                "060400",
                "pcieport",
                node,
                chain=(up, root),
                link=(GEN5, 16, GEN5, 16),
            )
            pci_device(
                b,
                nic,
                "15b3",
                "1021",
                "020700",
                "mlx5_core",
                node,
                chain=(nic_port, up, root),
                link=(GEN5, 16, GEN5, 16),
                cpulist=node_cpulist(node),
            )
            lspci.append(
                lspci_block(
                    nic_port, "PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch", acs_redirect
                )
            )
    for i in range(4):
        pci_device(
            b,
            f"0000:{0xC5 + i:02x}:00.0",
            "10de",
            "22a3",
            "068000",
            "nvidia",
            1,
            chain=("0000:80:05.0",),
        )
    pci_device(
        b, "0000:80:05.0", "8086", "352a", "060400", "pcieport", 1, link=(GEN5, 16, GEN5, 16)
    )
    b.command(list(LSPCI_ARGV), "".join(lspci))
    for i, name in enumerate(("mlx5_0", "mlx5_1")):
        pci = f"0000:{0x19 + 0x10 * nic_switches[i]:02x}:00.0"  # beside GPU 0, and GPU 4
        if roce_mtu:  # a RoCE fabric: Ethernet link layer, GIDs, the netdev's MTU matters
            v2 = roce_addressed or roce_mtu >= 4200
            ipv4 = f"10.10.10.{11 + i}"
            # A RoCE port whose net interface is down reads DOWN (Disabled).
            phys = "3: Disabled" if ib_states[i].endswith("DOWN") else "5: LinkUp"
            hca(b, name, f"ens{i + 1}f0np0", state=ib_states[i], phys=phys, roce=True,
                mtu=roce_mtu, v2_gid=v2, ipv4=ipv4, pci=pci, fw=hca_fw[i])  # fmt: skip
        else:
            phys = "2: Polling" if ib_states[i].endswith("DOWN") else "5: LinkUp"
            hca(b, name, f"ib{i}", state=ib_states[i], phys=phys, pci=pci, fw=hca_fw[i])
    for name in ("eno1", "lo"):
        b.file(f"/sys/class/net/{name}/mtu", "1500\n")
    nvidia_driver(b, driver[0], ["nvidia_peermem"] if peermem else [])
    boards = [h100_on_board(i) for i in range(gpus)]
    if narrow_gpu >= 0:  # the driver sees the link the slot trained to, as sysfs does
        boards[narrow_gpu]["nvmlDeviceGetCurrPcieLinkWidth"] = 8
    for i, version in (vbios or {}).items():
        boards[i]["nvmlDeviceGetVbiosVersion"] = version
    if slow_gpu >= 0:  # HW_SLOWDOWN (0x8) with the power brake (0x80): a PSU or cable fault
        boards[slow_gpu]["nvmlDeviceGetCurrentClocksEventReasons"] = 0x8 | 0x80
        boards[slow_gpu]["nvmlDeviceGetTemperatureV"] = 47
    for i, down in (links_down or {}).items():
        boards[i]["nvmlDeviceGetNvLinkState"] = lambda link, down=down: int(link not in down)
    for i, counts in (link_errors or {}).items():
        boards[i]["nvmlDeviceGetNvLinkErrorCounter"] = lambda link, kind, c=counts: c.get(
            (link, kind), 0
        )
    for i, overrides in (gpu_overrides or {}).items():
        boards[i].update(overrides)
    nvml(b, FakeNvml(boards, driver=driver[0], cuda=driver[1]))
    state = fabricmanager + "\n"
    b.command(
        ["systemctl", "is-active", "nvidia-fabricmanager"],
        state,
        returncode=0 if fabricmanager == "active" else 3,
    )
    journal(b, QUIET_JOURNAL + limited + list(kernel_lines), NOW)
    storage(b, broken_raid=broken_raid, ckpt_free_pct=ckpt_free_pct)
    cuda_toolkit(b, "12.4.1")
    torch_cu121(b)


def hgx_h100x8_healthy(b: BundleBuilder) -> None:
    gpu_server(b, "hgx-h100-01")


def hgx_h100x8_gpu3_x8(b: BundleBuilder) -> None:
    """GPU 3 trained down to x8: a half-seated card or a bad riser."""
    gpu_server(b, "hgx-h100-02", narrow_gpu=3)


def hgx_h100x8_nic_far_socket(b: BundleBuilder) -> None:
    """Both ConnectX-7s in the first socket's switches (beside GPUs 0 and 1): GPUs 4-7 on
    the second socket reach the fabric only across the socket link."""
    gpu_server(b, "hgx-h100-25", nic_switches=(0, 1))


def hgx_h100x8_gpu_missing(b: BundleBuilder) -> None:
    """GPU 7 fell off the bus (a dead riser or power cable): the PCI bus and the driver
    agree on 7 GPUs, so only a policy that pins the count sees one is missing."""
    gpu_server(b, "hgx-h100-19", gpus=7)


def hgx_h100x8_acs_redirect(b: BundleBuilder) -> None:
    """ACS redirect left on in the switches above the GPUs and NICs: NCCL hangs."""
    gpu_server(b, "hgx-h100-03", acs_redirect=True)


def hgx_h100x8_ram_512g(b: BundleBuilder) -> None:
    """512 GiB of RAM for 640 GiB of GPU memory: below the guide's 1.5x."""
    gpu_server(b, "hgx-h100-04", ram_gib=512)


def hgx_h100x8_memlock_64k(b: BundleBuilder) -> None:
    """An InfiniBand host whose limits.conf caps locked memory at 64 KiB."""
    gpu_server(b, "hgx-h100-05", memlock=64 * 1024)


def hgx_h100x8_default_limits(b: BundleBuilder) -> None:
    """A Kubernetes node left at systemd's default limits: logins get 1024 open files (soft,
    hard 524288) and containerd, whose children the containers are, 8 MiB of locked memory."""
    gpu_server(b, "hgx-h100-15", nofile=(1024, 524288), launchers=CONTAINERD_LAUNCHERS)


def hgx_h100x8_ib_init(b: BundleBuilder) -> None:
    """The second InfiniBand port came up, but no subnet manager brought it to ACTIVE."""
    gpu_server(b, "hgx-h100-06", ib_states=("4: ACTIVE", "2: INIT"))


def hgx_h100x8_roce_mtu1500(b: BundleBuilder) -> None:
    """A RoCE fabric whose NIC netdevs were left at MTU 1500 and have no IPv4 (no v2 GID)."""
    gpu_server(b, "hgx-h100-07", roce_mtu=1500)


def hgx_h100x8_mixed_firmware(b: BundleBuilder) -> None:
    """GPU 7 (a board swapped in) on an older VBIOS than its seven siblings, and the second
    ConnectX-7 missed by the last firmware update."""
    gpu_server(b, "hgx-h100-22", vbios={7: "96.00.61.00.01"}, hca_fw=("28.39.1002", "28.37.1014"))


def hgx_h100x8_gds_compat_mode(b: BundleBuilder) -> None:
    """GPUDirect Storage installed (NVIDIA's default /etc/cufile.json) but the nvidia_fs
    module not loaded: cuFile falls back to compatibility mode, POSIX through bounce buffers."""
    gpu_server(b, "hgx-h100-23")
    default = (FIXTURES / "gds/cufile-nvidia-default-gds_sandbox.json").read_text()
    b.file("/etc/cufile.json", default)
    b.command(list(GDSCHECK_ARGV), status="not_installed", returncode=-1)


# The 8 UUIDs the generated H100 hosts' GPUs report (fake_pynvml).
H100_UUIDS = [f"GPU-0000000{i}-aaaa-bbbb-cccc-000000000000" for i in range(8)]


def cdi_spec(devices: list[tuple[str, list[int]]]) -> str:
    """The CDI spec `nvidia-ctk cdi generate` writes, in the layout of its own test's output
    (fixtures/container), kind nvidia.com/gpu: one device per (name, the GPUs it holds)."""
    generated = (FIXTURES / "container/cdi-nvidia-ctk-generate-default.yaml").read_text()
    head, rest = generated.split("devices:\n", 1)
    common = rest[rest.index("containerEdits:\n    env:") :]
    node = "            - path: /dev/nvidia{0}\n              hostPath: /dev/nvidia{0}\n"
    items = "".join(
        f'    - name: "{name}"\n      containerEdits:\n        deviceNodes:\n'
        + "".join(node.format(i) for i in gpus)
        for name, gpus in devices
    )
    kind = head.replace("kind: example.com/device", "kind: nvidia.com/gpu")
    return kind + "devices:\n" + items + common


def hgx_h100x8_containerd_stale_cdi(b: BundleBuilder) -> None:
    """A Kubernetes node on containerd 2 (config schema 3, the nvidia runtimes in
    nvidia-ctk's drop-in) whose /etc/cdi/nvidia.yaml was generated before GPU 3 was
    swapped: the old board's UUID names no GPU of the host, and pods given GPU 3 by UUID
    get no device."""
    gpu_server(b, "hgx-h100-24")
    fixtures = FIXTURES / "container"
    b.file("/etc/containerd/config.toml",
           (fixtures / "containerd-v3-nvidia-ctk-main.toml").read_text())  # fmt: skip
    b.file("/etc/containerd/conf.d/99-nvidia.toml",
           (fixtures / "containerd-v3-nvidia-ctk-99-nvidia.toml").read_text())  # fmt: skip
    b.file("/etc/nvidia-container-runtime/config.toml",
           (fixtures / "nvidia-container-runtime-config-default.toml").read_text())  # fmt: skip
    for suffix in ("", ".cdi", ".legacy"):
        b.file(f"/usr/bin/nvidia-container-runtime{suffix}", b"\x7fELF")
    b.file("/sbin/ldconfig", b"\x7fELF")
    b.command(["containerd", "--version"], "containerd github.com/containerd/containerd/v2 "
              "v2.0.2 c507a0257ea6462fbd6f5ba4f5c74facb04021f4\n")  # fmt: skip
    b.command(["nvidia-ctk", "--version"], "NVIDIA Container Toolkit CLI version 1.17.8\n"
              "commit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d\n")  # fmt: skip
    before_swap = H100_UUIDS[:3] + ["GPU-7f3c2a91-5d0e-4b7a-9c1f-3e8d6b2a4c10"] + H100_UUIDS[4:]
    devices = [(name, [i]) for i, uuid in enumerate(before_swap) for name in (str(i), uuid)]
    b.file("/etc/cdi/nvidia.yaml", cdi_spec([*devices, ("all", list(range(8)))]))


def hgx_h100x8_roce_rail_down(b: BundleBuilder) -> None:
    """A RoCE fabric (MTU 9000, RoCE v2 GIDs) whose second rail, the NIC beside GPU 4, is
    DOWN (Disabled): GIDs and MTU are fine, the port is not."""
    gpu_server(b, "hgx-h100-21", roce_mtu=9000, ib_states=("4: ACTIVE", "1: DOWN"))


# The way an admin names the RoCE ports: one by its interface name, one by its MAC.
ROCE_NETPLAN = """\
network:
  version: 2
  renderer: networkd
  ethernets:
    eno1:
      dhcp4: true
    ens1f0np0:
      addresses: [10.10.10.11/24]
    roce1:
      match:
        macaddress: "b8:3f:d2:12:34:57"
      set-name: ens2f0np0
      addresses: [10.10.10.12/24]
"""


def hgx_h100x8_roce_mtu_unset(b: BundleBuilder) -> None:
    """RoCE ports addressed in netplan (RoCE v2 GIDs), but no `mtu:` there: 1500."""
    gpu_server(b, "hgx-h100-17", roce_mtu=1500, roce_addressed=True)
    b.file("/etc/netplan/01-netcfg.yaml", ROCE_NETPLAN)


def hgx_h100x8_no_peermem(b: BundleBuilder) -> None:
    """GPUs and InfiniBand, but nvidia_peermem is not loaded: GPUDirect RDMA is off."""
    gpu_server(b, "hgx-h100-08", peermem=False)


def hgx_h100x8_hw_slowdown(b: BundleBuilder) -> None:
    """GPU 6 is held in hardware slowdown and power brake: a power-supply problem."""
    gpu_server(b, "hgx-h100-09", slow_gpu=6)


def hgx_h100x8_raid_degraded(b: BundleBuilder) -> None:
    """The system mirror lost a disk and the RAID 0 under /data lost a member."""
    gpu_server(b, "hgx-h100-10", broken_raid=True)


def hgx_h100x8_checkpoints_full(b: BundleBuilder) -> None:
    """The checkpoint disk is 99.6% full: the next save fails."""
    gpu_server(b, "hgx-h100-11", ckpt_free_pct=0.4)


def hgx_h100x8_nvlink_down(b: BundleBuilder) -> None:
    """GPU 2 lost NVLinks 4 and 5 (a baseboard or NVSwitch-tray fault); GPU 6's link 9 has
    been replaying (NVML_NVLINK_ERROR_DL_REPLAY 0, DL_CRC_FLIT 2)."""
    gpu_server(
        b,
        "hgx-h100-12",
        links_down={2: (4, 5)},
        link_errors={6: {(9, 0): 1432, (9, 2): 87}},
    )


def hgx_h100x8_fabricmanager_down(b: BundleBuilder) -> None:
    """nvidia-fabricmanager failed to start: no NVLink trained on any of the eight GPUs."""
    gpu_server(
        b,
        "hgx-h100-13",
        links_down={i: tuple(range(18)) for i in range(8)},
        fabricmanager="failed",
    )


# NVSwitch SXid events as journalctl prints them, the driver's message bodies unchanged but
# for the switch: 22013 from NVIDIA/nvtrust issue #124 (an HGX H100 boot log), 20034 from
# the Red Hat capture in fixtures/corpus/dmesg-sxid (see fixtures/SOURCES.md).
SXID_JOURNAL = (
    "2026-11-29T08:00:25.948274+0000 hgx-h100-14 kernel: nvidia-nvswitch1: SXid "
    "(PCI:0000:c6:00.0): 22013, Non-fatal, Link 00 Minion Link DLREQ interrupt",
    "2026-11-29T08:00:25.950244+0000 hgx-h100-14 kernel: nvidia-nvswitch1: SXid "
    "(PCI:0000:c6:00.0): 22013, Severity 0 Engine instance 00 Sub-engine instance 00",
    "2026-11-29T08:00:25.952303+0000 hgx-h100-14 kernel: nvidia-nvswitch1: SXid "
    "(PCI:0000:c6:00.0): 22013, Data {0x00000000, 0x00000000, 0x00000000, 0x00000000, "
    "0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}",
    "2026-11-30T03:12:09.740743+0000 hgx-h100-14 kernel: nvidia-nvswitch2: SXid "
    "(PCI:0000:c7:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
    "2026-11-30T03:12:09.740754+0000 hgx-h100-14 kernel: nvidia-nvswitch2: SXid "
    "(PCI:0000:c7:00.0): 20034, Severity 1 Engine instance 30 Sub-engine instance 00",
    "2026-11-30T03:12:09.740758+0000 hgx-h100-14 kernel: nvidia-nvswitch2: SXid "
    "(PCI:0000:c7:00.0): 20034, Data {0x50610002, 0x10100030, 0x00000000, 0x10100030, "
    "0x00000000, 0x00000000, 0x00000000, 0x00000000}",
)


def hgx_h100x8_nvswitch_sxid(b: BundleBuilder) -> None:
    """NVSwitch 2 reported a fatal SXid (20034, a link went down) five hours ago; NVSwitch 1
    the Minion DLREQ interrupt at boot that NVIDIA says to ignore."""
    gpu_server(b, "hgx-h100-14", kernel_lines=SXID_JOURNAL)


def hgx_h100x8_numa_balancing(b: BundleBuilder) -> None:
    """Automatic NUMA balancing left on, as Ubuntu's and RHEL's kernels start it on any
    machine with more than one node."""
    gpu_server(b, "hgx-h100-16", numa_balancing=1)


# /etc/default/grub as Ubuntu 22.04's grub2-common installs it (the Debian package's
# debian/default/grub with Ubuntu's hidden menu); the command-line values are the scenario's.
UBUNTU_GRUB_DEFAULTS = """# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT_STYLE=hidden
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="{default}"
GRUB_CMDLINE_LINUX="{linux}"

# Uncomment to enable BadRAM filtering, modify to suit your needs
# This works with Linux (no patch required) and with any kernel that obtains
# the memory map information from GRUB (GNU Mach, kernel of FreeBSD ...)
#GRUB_BADRAM="0x01234567,0xfefefefe,0x89abcdef,0xefefefef"

# Uncomment to disable graphical terminal (grub-pc only)
#GRUB_TERMINAL=console

# The resolution used on graphical terminal
# note that you can use only modes which your graphic card supports via VBE
# you can see them in real GRUB with the command `vbeinfo'
#GRUB_GFXMODE=640x480

# Uncomment if you don't want GRUB to pass "root=UUID=xxx" parameter to Linux
#GRUB_DISABLE_LINUX_UUID=true

# Uncomment to disable generation of recovery mode menu entries
#GRUB_DISABLE_RECOVERY="true"

# Uncomment to get a beep at grub start
#GRUB_INIT_TUNE="480 440 1"
"""


def hgx_h100x8_iommu_translated(b: BundleBuilder) -> None:
    """The Intel IOMMU switched on (intel_iommu=on, for SR-IOV) without passthrough: the
    GPUs' and NICs' DMA is translated (default domain DMA-FQ), and peer-to-peer slows."""
    gpu_server(b, "hgx-h100-18")
    b.file("/sys/kernel/iommu_groups/0/type", "DMA-FQ\n")
    b.file(
        "/proc/cmdline",
        "BOOT_IMAGE=/vmlinuz-5.15.0-105-generic root=/dev/nvme0n1p2 ro intel_iommu=on\n",
    )
    b.file("/etc/default/grub", UBUNTU_GRUB_DEFAULTS.format(default="", linux="intel_iommu=on"))


def hgx_h100x8_driver535(b: BundleBuilder) -> None:
    """One node left on the R535 LTS driver when the rest of the rack moved to R550: within
    the policy, but not what its neighbours run (an odd one out of `fleet report`)."""
    gpu_server(b, "hgx-h100-20", driver=("535.161.08", 12020))


def hgx_h100x8_orphan_memory(b: BundleBuilder) -> None:
    """A job killed mid-teardown left 41 GiB on GPU 5 that no process owns (the driver lists
    none, nothing but nvidia-persistenced holds /dev/nvidia5), and a stray python process
    holds 1.2 GiB on GPU 2: what a Slurm prolog must catch before the next job."""
    held = 41_216 * 2**20
    gpu_server(b, "hgx-h100-23", gpu_overrides={
        5: {"nvmlDeviceGetMemoryInfo": MemoryInfo(81559 * 2**20, held)},
        2: {"nvmlDeviceGetMemoryInfo": MemoryInfo(81559 * 2**20, 1_753 * 2**20),
            "nvmlDeviceGetComputeRunningProcesses": [ProcessInfo(48213, 1_236 * 2**20)]},
    })  # fmt: skip
    for index in range(8):  # the driver's table: minor = index on this board
        bus = f"0000:{0x18 + 0x10 * index:02x}:00.0"
        b.file(f"/proc/driver/nvidia/gpus/{bus}/information",
               f"Model: \t\t NVIDIA H100 80GB HBM3\nBus Location: \t {bus}\n"
               f"Device Minor: \t {index}\n")  # fmt: skip
    every = [f"/dev/nvidia{i}" for i in range(8)]
    b.probe("gpu_users", {"users": [
        {"pid": 2210, "user": "root", "uid": 0, "name": "nvidia-persiste",
         "command": "/usr/bin/nvidia-persistenced --user nvidia-persistenced", "devices": every},
        {"pid": 48213, "user": "user1042", "uid": 1042, "name": "python",
         "command": "python train.py --config configs/llama-7b.yaml", "devices": ["/dev/nvidia2"]},
    ], "unseen": 0, "prefix": "/dev/nvidia"})  # fmt: skip


NODE_KERNEL = "5.15.0-105-generic"  # base_host's release


def hgx_h100x8_k8s_driver_conflict(b: BundleBuilder) -> None:
    """A Kubernetes GPU node under the GPU Operator, ready on every count but one: the
    operator's driver container runs beside the NVIDIA driver the host still has installed
    (DKMS modules for the running kernel), a node that breaks at its next reboot."""
    gpu_server(b, "hgx-h100-k8s-04")
    for name in ("config.yaml", "pods/.keep", "plugins_registry/.keep"):
        b.file(f"/var/lib/kubelet/{name}", "")
    for name in ("kubelet.sock", "nvidia-gpu.sock", "kubelet_internal_checkpoint"):
        b.file(f"/var/lib/kubelet/device-plugins/{name}", "")
    kube = FIXTURES / "kubernetes"
    # The main config imports conf.d (as nvidia-ctk's drop-in mode leaves it): containerd
    # reads no drop-in that `imports` does not name.
    b.file("/etc/containerd/config.toml",
           (FIXTURES / "container" / "containerd-v2-nvidia-ctk-main.toml").read_text())  # fmt: skip
    b.file("/etc/containerd/conf.d/99-nvidia.toml",
           (kube / "containerd-v2-nvidia-ctk-installer-cdi.toml").read_text())  # fmt: skip
    # The operator's toolkit container installs the runtimes on the host, where the
    # drop-in names them.
    for suffix in ("", ".cdi", ".legacy"):
        b.file(f"/usr/local/nvidia/toolkit/nvidia-container-runtime{suffix}", b"\x7fELF")
    b.file("/run/nvidia/validations/driver-ready",
           (kube / "driver-ready-driver-container").read_text())  # fmt: skip
    for name in ("toolkit-ready", "cuda-ready", "plugin-ready", ".driver-ctr-ready"):
        b.file(f"/run/nvidia/validations/{name}", "")
    b.file("/run/nvidia/driver/usr/bin/nvidia-smi", "")
    b.file(
        f"/lib/modules/{NODE_KERNEL}/modules.dep", (kube / "modules.dep-nvidia-dkms").read_text()
    )


def docker_h100_devshm_64m(b: BundleBuilder) -> None:
    """A training container started without --shm-size or --ipc=host: 64 MiB /dev/shm."""
    base_host(b, "7c1e2b9a4d10", 2048)
    platform(b, 2048, None, 64 * 2**20, in_container=True)
    b.file("/.dockerenv", "")
    b.file("/proc/1/cgroup", "0::/\n")
    b.file("/proc/self/cgroup", "0::/\n")
    pci_device(
        b,
        "0000:18:00.0",
        "10de",
        "2330",
        "030200",
        "nvidia",
        0,
        link=(IDLE, 16, GEN5, 16),
        cpulist=node_cpulist(0),
    )
    b.file("/proc/modules", proc_modules(["nvidia_uvm", "nvidia"]))
    nvml(b, FakeNvml([h100(0)]))
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
    script = h100(
        index,
        nvmlDeviceGetName="NVIDIA A100-SXM4-80GB",
        nvmlDeviceGetArchitecture=7,
        nvmlDeviceGetCudaComputeCapability=(8, 0),
        nvmlDeviceGetPciInfo=PciInfo(f"00000000:{0x07 + 0x10 * index:02X}:00.0"),
        nvmlDeviceGetNvLinkState=lambda link: 1 if link < 12 else Err(2),
    )
    script.update(overrides)
    return script


def a100_driver470_torch_cu121(b: BundleBuilder) -> None:
    """One A100 on an R470 driver (CUDA 11.4) under a PyTorch built for CUDA 12.1."""
    base_host(b, "train-a100-02", 512)
    pci_device(b, "0000:07:00.0", "10de", "20b2", "030200", "nvidia", 0)
    nvidia_driver(b, "470.82.01")
    fake = FakeNvml(
        [
            a100(
                0,
                nvmlDeviceGetTemperatureV=Err(13),
                nvmlDeviceGetTemperature=31,
                nvmlDeviceGetCurrentClocksEventReasons=Err(13),
                nvmlDeviceGetCurrentClocksThrottleReasons=0x1,
            )
        ],
        driver="470.82.01",
        cuda=11040,
    )
    nvml(b, fake)
    journal(b, QUIET_JOURNAL, NOW)
    torch_cu121(b)


def a100x8_remap_pending_xid79(b: BundleBuilder) -> None:
    """An 8x A100 node after a bad night: GPU 3 has a row remap pending, GPU 5 fell off."""
    base_host(b, "dgx-a100-11", 2048)
    for i in range(8):
        pci_device(
            b,
            f"0000:{0x07 + 0x10 * i:02x}:00.0",
            "10de",
            "20b2",
            "030200",
            "nvidia",
            0 if i < 4 else 1,
        )
    for i in range(6):
        pci_device(b, f"0000:{0xC4 + i:02x}:00.0", "10de", "1af1", "068000", "nvidia", 1)
    nvidia_driver(b, "535.154.05", ["nvidia_peermem"])
    gpus = [a100(i) for i in range(8)]
    gpus[3]["nvmlDeviceGetRemappedRows"] = (0, 1, 1, 0)  # corrected, uncorrected, pending, failure
    gpus[3]["nvmlDeviceGetTotalEccErrors"] = lambda err_type, counter: 1 if err_type == 1 else 0
    nvml(b, FakeNvml(gpus, driver="535.154.05", cuda=12020, lost=(5,)))
    b.command(["systemctl", "is-active", "nvidia-fabricmanager"], "active\n")
    # journalctl -o short-iso-precise lines, as the R535 driver writes them.
    journal(
        b,
        [
            *QUIET_JOURNAL,
            "2026-11-30T05:41:17.120331+0000 dgx-a100-11 kernel: NVRM: Xid (PCI:0000:37:00): 64, "
            "pid=20355, name=python, Row Remapper Error: (0x00000005ad3e0fc0) - All reserved rows "
            "for bank are remapped",
            "2026-11-30T06:02:44.871203+0000 dgx-a100-11 kernel: NVRM: Xid (PCI:0000:57:00): 79, "
            "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            "2026-11-30T06:02:44.871260+0000 dgx-a100-11 kernel: NVRM: GPU 0000:57:00.0: GPU has "
            "fallen off the bus.",
        ],
        NOW,
    )


def vm_a100_vgpu_guest(b: BundleBuilder) -> None:
    """A KVM guest given an A100-40C vGPU. NVML in a guest answers for the slice: temperature
    0 with no thresholds, no power, clocks or remapping; the ECC and persistence it shows are
    the hypervisor's business. None of it may pass as a reading of the physical GPU."""
    base_host(b, "vm-a100-vgpu-01", 128)
    b.file(
        "/proc/cpuinfo",
        cpuinfo(1, 8, "Intel Xeon Processor (Icelake)").replace(
            "flags\t\t: ", "flags\t\t: hypervisor "
        ),
    )
    b.file("/sys/class/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)\n")
    pci_device(b, "0000:06:00.0", "10de", "20b0", "030200", "nvidia", -1)
    nvidia_driver(b, "550.54.15")
    guest = a100(
        0,
        nvmlDeviceGetName="NVIDIA A100-40C",
        nvmlDeviceGetPciInfo=PciInfo("00000000:06:00.0"),
        nvmlDeviceGetMemoryInfo=MemoryInfo(40960 * 2**20),
        nvmlDeviceGetVirtualizationMode=2,  # NVML_GPU_VIRTUALIZATION_MODE_VGPU
        nvmlDeviceGetTemperatureV=0,
        nvmlDeviceGetTemperatureThreshold=Err(NOT_SUPPORTED),
        nvmlDeviceGetCurrentClocksEventReasons=Err(NOT_SUPPORTED),
        nvmlDeviceGetPowerUsage=Err(NOT_SUPPORTED),
        nvmlDeviceGetEnforcedPowerLimit=Err(NOT_SUPPORTED),
        nvmlDeviceGetPersistenceMode=Err(NOT_SUPPORTED),
        nvmlDeviceGetRemappedRows=Err(NOT_SUPPORTED),
        nvmlDeviceGetNumaNodeId=Err(NOT_SUPPORTED),
        nvmlDeviceGetNvLinkState=Err(NOT_SUPPORTED),
    )
    nvml(b, FakeNvml([guest]))
    journal(b, QUIET_JOURNAL, NOW)
    cuda_toolkit(b, "12.4.1")
    torch_cu121(b)


SCENARIOS = {
    "hgx-h100x8-healthy": hgx_h100x8_healthy,
    "hgx-h100x8-gpu3-x8": hgx_h100x8_gpu3_x8,
    "hgx-h100x8-nic-far-socket": hgx_h100x8_nic_far_socket,
    "hgx-h100x8-gpu-missing": hgx_h100x8_gpu_missing,
    "hgx-h100x8-acs-redirect": hgx_h100x8_acs_redirect,
    "hgx-h100x8-ram-512g": hgx_h100x8_ram_512g,
    "hgx-h100x8-memlock-64k": hgx_h100x8_memlock_64k,
    "hgx-h100x8-default-limits": hgx_h100x8_default_limits,
    "docker-h100-devshm-64m": docker_h100_devshm_64m,
    "hgx-h100x8-orphan-memory": hgx_h100x8_orphan_memory,
    "hgx-h100x8-k8s-driver-conflict": hgx_h100x8_k8s_driver_conflict,
    "hgx-h100x8-ib-init": hgx_h100x8_ib_init,
    "hgx-h100x8-roce-mtu1500": hgx_h100x8_roce_mtu1500,
    "hgx-h100x8-roce-mtu-unset": hgx_h100x8_roce_mtu_unset,
    "hgx-h100x8-roce-rail-down": hgx_h100x8_roce_rail_down,
    "hgx-h100x8-mixed-firmware": hgx_h100x8_mixed_firmware,
    "hgx-h100x8-gds-compat-mode": hgx_h100x8_gds_compat_mode,
    "hgx-h100x8-containerd-stale-cdi": hgx_h100x8_containerd_stale_cdi,
    "hgx-h100x8-no-peermem": hgx_h100x8_no_peermem,
    "hgx-h100x8-hw-slowdown": hgx_h100x8_hw_slowdown,
    "hgx-h100x8-raid-degraded": hgx_h100x8_raid_degraded,
    "hgx-h100x8-checkpoints-full": hgx_h100x8_checkpoints_full,
    "hgx-h100x8-nvlink-down": hgx_h100x8_nvlink_down,
    "hgx-h100x8-fabricmanager-down": hgx_h100x8_fabricmanager_down,
    "hgx-h100x8-nvswitch-sxid": hgx_h100x8_nvswitch_sxid,
    "hgx-h100x8-numa-balancing": hgx_h100x8_numa_balancing,
    "hgx-h100x8-iommu-translated": hgx_h100x8_iommu_translated,
    "hgx-h100x8-driver535": hgx_h100x8_driver535,
    "vm-a100-vgpu-guest": vm_a100_vgpu_guest,
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
