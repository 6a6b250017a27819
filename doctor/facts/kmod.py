"""Kernel modules: what is loaded, the NVIDIA module's version, and module blacklists."""

from __future__ import annotations

import re
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.system import kernel_cmdline
from dldoctor.host.base import AnswerStatus, ProbeFailed

MODPROBE_DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")


class Modules(NamedTuple):
    loaded: frozenset[str]
    readable: bool = True
    nvidia_version: str = ""  # version of the loaded nvidia.ko; "" when not loaded
    notes: tuple[str, ...] = ()
    nvidia_open: bool = False  # the open GPU kernel modules (they support DMA-BUF)


def parse_proc_modules(text: str) -> frozenset[str]:
    return frozenset(line.split()[0] for line in text.splitlines() if line.strip())


_DRIVER_VERSION = re.compile(r"\d{1,4}\.\d{1,4}(?:\.\d{1,4})?")


def parse_nvidia_proc_version(text: str) -> str:
    """`NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.154.05  Thu Dec 28 ...`; the
    open modules say `NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release ...`."""
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d{1,4}\.\d{1,4}(?:\.\d{1,4})?)\b", text)
    return m.group(1) if m else ""


@fact("kernel.modules")
def modules(ctx: FactContext) -> Modules:
    answer = ctx.host.read("/proc/modules").require()
    if not answer.ok:
        return Modules(frozenset(), False, notes=(f"/proc/modules: {answer.status}",))
    loaded = parse_proc_modules(answer.text)
    version, is_open, notes = "", False, []
    if "nvidia" in loaded:
        proc = ctx.host.read("/proc/driver/nvidia/version", max_bytes=4096).require()
        is_open = "Open Kernel Module" in proc.text
        sys_version = ctx.host.read("/sys/module/nvidia/version", max_bytes=256)
        if sys_version.require(uncaptured_ok=True).status == AnswerStatus.NOT_CAPTURED:
            ctx.replaced(sys_version)  # a bug report has /proc/driver/nvidia/version
        said = sys_version.text.strip()
        if said and not _DRIVER_VERSION.fullmatch(said):
            # Not a version: no verdict may compare it with the library's.
            notes.append(f"/sys/module/nvidia/version reads {said[:40]!r}, not a version")
        version = said if _DRIVER_VERSION.fullmatch(said) else ""
        version = version or parse_nvidia_proc_version(proc.text)
    return Modules(loaded, True, version, tuple(notes), nvidia_open=is_open)


class Blacklist(NamedTuple):
    """Where a module is kept from loading: modprobe.d lines and kernel command line."""

    files: tuple[str, ...] = ()  # "path: line" for each blacklisting line
    cmdline: tuple[str, ...] = ()  # the kernel parameters that do it

    @property
    def blacklisted(self) -> bool:
        return bool(self.files or self.cmdline)


def blacklist_lines(text: str, module: str) -> list[str]:
    """Lines of a modprobe.d file that stop `module` from loading."""
    found = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and words[1] == module and words[0] in ("blacklist", "install"):
            if words[0] == "blacklist" or words[2:3] in (["/bin/false"], ["/bin/true"]):
                found.append(line.strip())
    return found


def cmdline_blacklists(cmdline: str, module: str) -> list[str]:
    found = []
    for param in cmdline.split():
        key, _, value = param.partition("=")
        if key in ("modprobe.blacklist", "rd.driver.blacklist", "module_blacklist"):
            if module in value.split(","):
                found.append(param)
        elif key == f"{module}.modeset" and value == "0":
            found.append(param)
    return found


def blacklist_fact(module: str):
    @fact(f"kernel.blacklist.{module}")
    def blacklist(ctx: FactContext) -> Blacklist:
        files = []
        for folder in MODPROBE_DIRS:
            listing = ctx.host.listdir(folder)
            for name in listing.value if listing.ok else ():
                if name.endswith(".conf"):
                    path = f"{folder}/{name}"
                    text = ctx.host.read(path, max_bytes=1 << 20).text
                    files.extend(f"{path}: {line}" for line in blacklist_lines(text, module))
        try:
            cmdline = ctx.get(kernel_cmdline).text
        except ProbeFailed:
            if files:  # they keep it out, whatever the command line says
                return Blacklist(tuple(files))
            raise  # an unread command line is no "not blacklisted"
        return Blacklist(tuple(files), tuple(cmdline_blacklists(cmdline, module)))

    return blacklist


nouveau_blacklist = blacklist_fact("nouveau")
