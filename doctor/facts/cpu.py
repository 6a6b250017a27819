"""CPU facts: model, vendor and counts from /proc/cpuinfo; cpufreq governors and SMT.

/proc/cpuinfo differs by architecture: x86 names the model, package ("physical id") and
core of every logical CPU; aarch64 gives only implementer and part numbers (no model name,
no physical id); POWER names the model in `cpu`. The parser takes what is there and notes
what it had to assume. py-cpuinfo is not used: it bypasses the Host and costs 1.3 s.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.reading import FileRead, read_once, to_int
from dldoctor.host.base import MAX_READ_BYTES

CPU_ROOT = "/sys/devices/system/cpu"
MAX_CPUS_READ = 1024
SMT_STATES = ("on", "off", "forceoff", "notsupported", "notimplemented")

# aarch64 "CPU implementer" codes and the parts that show up in GPU hosts (util-linux's
# lscpu-arm.c and the kernel's arch/arm64/include/asm/cputype.h name them).
ARM_IMPLEMENTERS = {
    0x41: "ARM",
    0x42: "Broadcom",
    0x43: "Cavium",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x50: "APM",
    0x51: "Qualcomm",
    0x53: "Samsung",
    0x56: "Marvell",
    0x61: "Apple",
    0x69: "Intel",
    0xC0: "Ampere",
}
ARM_PARTS = {
    (0x41, 0xD03): "Cortex-A53",
    (0x41, 0xD07): "Cortex-A57",
    (0x41, 0xD08): "Cortex-A72",
    (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD40): "Neoverse-V1",
    (0x41, 0xD49): "Neoverse-N2",
    (0x41, 0xD4F): "Neoverse-V2",
    (0x41, 0xD84): "Neoverse-V3",
    (0x41, 0xD8E): "Neoverse-N3",
    (0x46, 0x001): "A64FX",
    (0x48, 0xD01): "Kunpeng-920",
    (0x4E, 0x004): "Carmel",
    (0xC0, 0xAC3): "Ampere-1",
    (0xC0, 0xAC4): "Ampere-1a",
}

# --- /proc/cpuinfo --------------------------------------------------------------------


class CpuInfo(NamedTuple):
    model: str  # "" when cpuinfo names none
    vendor: str  # "GenuineIntel", "AuthenticAMD", "ARM", "NVIDIA", ...; "" when unknown
    sockets: int
    cores: int  # physical cores, all sockets
    threads: int  # logical CPUs listed
    flags: frozenset[str]  # x86 `flags`, aarch64 `Features`
    notes: tuple[str, ...] = ()


def _blocks(text: str, notes: list[str]) -> list[dict[str, str]]:
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    odd = 0
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            odd += 1
            if odd <= 3:
                notes.append(f"unparsed cpuinfo line: {line.strip()[:60]!r}")
            continue
        key = key.strip()
        if key == "processor" and "processor" in current:
            # Old aarch64 kernels list `processor : N` lines with no blank line between.
            blocks.append(current)
            current = {}
        current.setdefault(key, value.strip())
    if current:
        blocks.append(current)
    if odd > 3:
        notes.append(f"{odd - 3} more unparsed cpuinfo lines")
    return blocks


def parse_cpuinfo(text: str) -> CpuInfo:
    notes: list[str] = []
    blocks = _blocks(text, notes)
    cpus: list[dict[str, str]] = []
    # Entries outside any CPU: old ARM kernels' "Processor : AArch64 Processor rev 4"
    # header, the trailing "Hardware : ..." block.
    general: dict[str, str] = {}
    for b in blocks:
        if re.fullmatch(r"\d+", b.get("processor", "")):
            cpus.append(b)
        else:
            for key, value in b.items():
                general.setdefault(key, value)
    if not cpus:
        notes.append("no `processor : N` entries in /proc/cpuinfo")
    first = cpus[0] if cpus else {}

    def pick(*keys: str) -> str:
        for key in keys:
            value = first.get(key) or general.get(key)
            if value:
                return value
        for key in keys:  # old aarch64 kernels: Features and the like after the last CPU
            value = next((b[key] for b in cpus if b.get(key)), "")
            if value:
                return value
        return ""

    implementer = to_int(pick("CPU implementer"), base=0)  # "0x41"
    part = to_int(pick("CPU part"), base=0)
    vendor = pick("vendor_id")
    if not vendor and implementer is not None:
        vendor = ARM_IMPLEMENTERS.get(implementer, f"implementer {implementer:#x}")
    if not vendor:
        notes.append("cpuinfo names no vendor (no vendor_id or CPU implementer)")

    model = pick("model name", "cpu")  # x86 and 32-bit ARM; POWER
    if not model and implementer is not None and part is not None:
        model = ARM_PARTS.get((implementer, part), "")
        if not model:
            model = pick("Processor", "Hardware") or f"CPU part {part:#05x}"
            notes.append(
                f"unknown aarch64 part {part:#05x} of implementer {implementer:#x}: "
                f"model is {model!r}"
            )
    if not model:
        model = pick("Processor", "Hardware", "uarch")
    if not model:
        notes.append("cpuinfo names no model (no model name, cpu or CPU part)")

    threads = len(cpus)
    packages = {b["physical id"] for b in cpus if "physical id" in b}
    if packages:
        sockets = len(packages)
    elif cpus:
        sockets = 1
        notes.append("cpuinfo has no physical id (not x86?): one socket assumed")
    else:
        sockets = 0

    if cpus and all("core id" in b for b in cpus):
        cores = len({(b.get("physical id", ""), b["core id"]) for b in cpus})
    elif cpus and packages and all(to_int(b.get("cpu cores")) for b in cpus):
        per_package = {b.get("physical id", ""): to_int(b["cpu cores"]) or 0 for b in cpus}
        cores = sum(per_package.values())
    else:
        cores = threads
        if cpus:
            notes.append("cpuinfo has no core id: every logical CPU counted as a core")

    flags = frozenset(pick("flags", "Features", "features").split())
    return CpuInfo(model, vendor, sockets, cores, threads, flags, tuple(notes))


@fact("cpuinfo")
def cpuinfo(ctx: FactContext) -> FileRead:
    """/proc/cpuinfo, read once for `cpu.info` and the container fact's hypervisor flag."""
    return read_once(ctx, "/proc/cpuinfo", max_bytes=MAX_READ_BYTES)


@fact("cpu.info")
def cpu_info(ctx: FactContext) -> CpuInfo:
    read = ctx.get(cpuinfo)
    if not read.ok:
        return CpuInfo("", "", 0, 0, 0, frozenset(), (read.why,))
    return parse_cpuinfo(read.text)


# --- cpufreq and SMT ------------------------------------------------------------------


class CpuFrequency(NamedTuple):
    governors: dict[str, int]  # governor -> how many CPUs use it; {} without cpufreq
    driver: str  # scaling_driver of the first CPU ("intel_pstate", "acpi-cpufreq", ...)
    smt: str  # /sys/devices/system/cpu/smt/control; "" when the kernel has none
    notes: tuple[str, ...] = ()


def _cpu_numbers(entries: tuple[str, ...]) -> list[int]:
    found = (to_int(e[3:]) for e in entries if re.fullmatch(r"cpu\d+", e))
    return sorted(n for n in found if n is not None)


@fact("cpu.frequency")
def cpu_frequency(ctx: FactContext) -> CpuFrequency:
    host = ctx.host
    notes: list[str] = []
    smt = ""
    answer = host.read(f"{CPU_ROOT}/smt/control", max_bytes=64).require()
    if answer.ok:
        smt = answer.text.strip()
        if smt not in SMT_STATES:
            notes.append(f"smt/control reads {smt[:30]!r}")

    listing = host.listdir(CPU_ROOT).require()
    if not listing.ok:
        notes.append(listing.describe())
        return CpuFrequency({}, "", smt, tuple(notes))
    cpus = _cpu_numbers(listing.value or ())
    if not cpus:
        notes.append(f"{CPU_ROOT} lists no cpuN folder")
        return CpuFrequency({}, "", smt, tuple(notes))

    def governor_of(number: int) -> str:
        path = f"{CPU_ROOT}/cpu{number}/cpufreq/scaling_governor"
        return host.read(path, max_bytes=64).require().text.strip()

    driver_path = f"{CPU_ROOT}/cpu{cpus[0]}/cpufreq/scaling_driver"
    driver = host.read(driver_path, max_bytes=256).require().text.strip()
    first = governor_of(cpus[0])
    if not driver and not first:
        # No cpufreq on the first CPU: look for any policy before reading every CPU (a VM
        # or container without cpufreq would otherwise cost one read per CPU for nothing).
        policies = host.listdir(f"{CPU_ROOT}/cpufreq").require()
        if not any(re.fullmatch(r"policy\d+", p) for p in (policies.value or ())):
            return CpuFrequency({}, "", smt, tuple(notes))

    if len(cpus) > MAX_CPUS_READ:
        notes.append(f"{len(cpus)} CPUs: governors read for the first {MAX_CPUS_READ} only")
    governors: Counter[str] = Counter()
    without = 0
    for number in cpus[:MAX_CPUS_READ]:
        governor = first if number == cpus[0] else governor_of(number)
        if governor:
            governors[governor] += 1
        else:
            without += 1
    if governors and without:
        notes.append(f"{without} CPUs have no cpufreq governor (offline?)")
    return CpuFrequency(dict(sorted(governors.items())), driver, smt, tuple(notes))
