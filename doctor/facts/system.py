"""System facts: OS release, kernel, memory, hostname, Python, C library, container.

Parsers are plain functions of text, tested on real captures; the facts around them only
decide which answers to ask for and what a missing answer means.
"""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

from dldoctor import shellwords

# The `python3` on PATH, started early. PATH_PYTHON_ARGV, the command through PATH, is the
# one every bundle without a pyenv answer holds (tests and bundle builders name it here).
from dldoctor.early import PATH_PYTHON_ARGV, path_python_argv  # noqa: F401
from dldoctor.facts import FactContext, fact
from dldoctor.facts.cpu import cpuinfo
from dldoctor.facts.mountinfo import MountTable, fstype_on, mount_table
from dldoctor.facts.reading import (
    SMALL,
    FileRead,
    load_json,
    note_unless_missing,
    read_once,
    to_int,
)
from dldoctor.host.base import AnswerStatus, ProbeFailed
from dldoctor.versions import version_tuple

# --- /etc/os-release ------------------------------------------------------------------


class OsRelease(NamedTuple):
    id: str = ""
    id_like: tuple[str, ...] = ()
    version_id: str = ""
    name: str = ""
    pretty_name: str = ""
    source: str = ""  # the file it came from; "" when none was readable
    notes: tuple[str, ...] = ()

    @property
    def display(self) -> str:
        plain = " ".join(p for p in (self.name or self.id, self.version_id) if p)
        # PRETTY_NAME is meant for people but is sometimes a SKU label without a version.
        if self.pretty_name and (not self.version_id or self.version_id in self.pretty_name):
            return self.pretty_name
        return f"{plain} ({self.pretty_name})" if self.pretty_name else plain


def parse_os_release(text: str, source: str = "") -> OsRelease:
    """os-release(5): KEY=value lines, values shell-quoted; unknown lines are noted."""
    values: dict[str, str] = {}
    notes: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, raw = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            notes.append(f"line {number} is not KEY=value: {line[:60]!r}")
            continue
        try:
            words = shellwords.split(raw)
        except ValueError:
            notes.append(f"line {number}: unbalanced quotes")
            words = [raw.strip("\"'")]
        values[key] = " ".join(words)
    return OsRelease(
        id=values.get("ID", "").lower(),
        id_like=tuple(values.get("ID_LIKE", "").lower().split()),
        version_id=values.get("VERSION_ID", ""),
        name=values.get("NAME", ""),
        pretty_name=values.get("PRETTY_NAME", ""),
        source=source,
        notes=tuple(notes),
    )


@fact("os.release")
def os_release(ctx: FactContext) -> OsRelease:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        answer = ctx.host.read(path).require()
        if answer.ok:
            return parse_os_release(answer.text, path)
    return OsRelease(notes=("neither /etc/os-release nor /usr/lib/os-release is readable",))


# --- kernel ---------------------------------------------------------------------------


class Kernel(NamedTuple):
    release: str  # as `uname -r` prints it; "" when unknown
    version: tuple[int, ...] | None

    @property
    def enterprise_el(self) -> bool:
        """A RHEL-family kernel (`4.18.0-513.el8`): its number hides years of backports."""
        return bool(re.search(r"\.el\d+", self.release))


@fact("kernel")
def kernel(ctx: FactContext) -> Kernel:
    answer = ctx.host.read("/proc/sys/kernel/osrelease", max_bytes=SMALL).require()
    release = answer.text.strip()
    return Kernel(release, version_tuple(release))


@fact("kernel.cmdline")
def kernel_cmdline(ctx: FactContext) -> FileRead:
    """The running kernel's command line, read once for the IOMMU, the module blacklists and
    the fixes that change boot arguments."""
    return read_once(ctx, "/proc/cmdline", max_bytes=1 << 16)


# --- /proc/meminfo --------------------------------------------------------------------


class Memory(NamedTuple):
    total_bytes: int | None
    available_bytes: int | None
    swap_total_bytes: int | None
    swap_free_bytes: int | None
    hugepages_total: int | None
    hugepage_size_bytes: int | None
    notes: tuple[str, ...] = ()


_UNITS = {"": 1, "b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3}


def parse_meminfo(text: str) -> tuple[dict[str, int], list[str]]:
    """`Key:   value [kB]` lines to bytes (or plain counts); odd lines are noted, not fatal."""
    values: dict[str, int] = {}
    notes: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = re.fullmatch(r"\s*([^:\s]+):\s+(\d+)(?:\s+(\w+))?\s*", line)
        if m is None or (m.group(3) or "").lower() not in _UNITS:
            notes.append(f"unparsed line: {line.strip()[:60]!r}")
            continue
        number = to_int(m.group(2))
        if number is None:  # past int()'s digit limit
            notes.append(f"unparsed line: {line.strip()[:60]!r}")
            continue
        values[m.group(1)] = number * _UNITS[(m.group(3) or "").lower()]
    return values, notes


@fact("memory")
def memory(ctx: FactContext) -> Memory:
    answer = ctx.host.read("/proc/meminfo").require()
    if not answer.ok:
        return Memory(None, None, None, None, None, None, (f"/proc/meminfo: {answer.status}",))
    values, notes = parse_meminfo(answer.text)
    available = values.get("MemAvailable")
    if available is None and "MemFree" in values:
        # What `free` reported before kernel 3.14 added MemAvailable.
        available = sum(values.get(k, 0) for k in ("MemFree", "Buffers", "Cached"))
        notes.append(
            "no MemAvailable (kernel older than 3.14): estimated as free + buffers + cache"
        )
    return Memory(
        total_bytes=values.get("MemTotal"),
        available_bytes=available,
        swap_total_bytes=values.get("SwapTotal"),
        swap_free_bytes=values.get("SwapFree"),
        hugepages_total=values.get("HugePages_Total"),
        hugepage_size_bytes=values.get("Hugepagesize"),
        notes=tuple(notes),
    )


# The firmware and the model a fleet compares (serials are left out: root-only, and private).
DMI_FIELDS = (
    "sys_vendor",
    "product_name",
    "board_name",
    "bios_vendor",
    "bios_version",
    "bios_date",
)


@fact("system.dmi")
def dmi(ctx: FactContext) -> dict[str, str]:
    """/sys/class/dmi/id: what the firmware says of the machine; {} on a host without DMI
    (most ARM servers, containers that hide /sys)."""
    found = {}
    for name in DMI_FIELDS:
        answer = ctx.host.read(f"/sys/class/dmi/id/{name}", max_bytes=256)
        if answer.ok and answer.text.strip():
            found[name] = answer.text.strip()
    return found


@fact("hostname")
def hostname(ctx: FactContext) -> str:
    return ctx.host.read("/proc/sys/kernel/hostname", max_bytes=SMALL).text.strip()


# --- Python ---------------------------------------------------------------------------


class Python(NamedTuple):
    version: str  # of the interpreter running dldoctor
    executable: str
    in_venv: bool
    path_python3: str | None  # what `python3` resolves to on PATH
    path_version: str | None  # its `--version`; None when absent or unknown
    notes: tuple[str, ...] = ()


class PathPython(NamedTuple):
    """The `python3` a user gets from PATH: what it is and where its packages are."""

    executable: str
    version: str
    sys_path: tuple[str, ...]
    notes: tuple[str, ...] = ()


def _shim_target(ctx: FactContext) -> str | None:
    """The interpreter that PATH's pyenv shim runs, as the `python` probe found it (bundles
    made before it looked, and hand-made ones, have none: the command goes through PATH)."""
    info = ctx.host.probe("python")
    data = info.value if info.ok and isinstance(info.value, dict) else {}
    target = data.get("path_python3_exec")
    return target if isinstance(target, str) and target else None


@fact("python.path")
def path_python(ctx: FactContext) -> PathPython | None:
    """None when there is no python3 on PATH (or the bundle has no answer for it)."""
    answer = ctx.host.run(list(path_python_argv(_shim_target(ctx)))).require()
    if answer.status in (AnswerStatus.MISSING, AnswerStatus.NOT_INSTALLED):
        return None
    if not answer.ok:
        return PathPython("", "", (), (answer.describe(),))
    if answer.value.returncode != 0:
        err = answer.value.stderr.decode("utf-8", "replace").strip().splitlines()
        tail = f": {err[-1][:80]}" if err else ""
        return PathPython(
            "", "", (), (f"python3 on PATH exited with {answer.value.returncode}{tail}",)
        )
    lines = answer.text.strip().splitlines()  # a shim may print before the script
    data = load_json(lines[-1])[0] if lines else None
    if not isinstance(data, dict):
        return PathPython("", "", (), (f"python3 on PATH printed {answer.text.strip()[:80]!r}",))
    paths = data.get("sys_path")
    sys_path = (
        [posixpath.normpath(p) for p in paths if isinstance(p, str) and p]
        if isinstance(paths, list)
        else []
    )
    return PathPython(
        str(data.get("executable", "")),
        str(data.get("version", "")),
        tuple(dict.fromkeys(sys_path)),
    )


@fact("python")
def python(ctx: FactContext) -> Python:
    info = ctx.host.probe("python").require()
    data = info.value if info.ok and isinstance(info.value, dict) else {}
    notes = [] if info.ok else [f"interpreter probe: {info.status}"]
    path = ctx.get(path_python)
    if path is not None:
        notes.extend(path.notes)
    return Python(
        version=str(data.get("version", "")),
        executable=str(data.get("executable", "")),
        in_venv=bool(data.get("in_venv", False)),
        path_python3=data.get("path_python3") or (path.executable if path else None) or None,
        path_version=(path.version or None) if path else None,
        notes=tuple(notes),
    )


# --- C library ------------------------------------------------------------------------


class Libc(NamedTuple):
    name: str  # "glibc", or "" when the C library did not say (musl answers nothing)
    version: str
    notes: tuple[str, ...] = ()
    answered: bool = True  # False: getconf could not be asked (not installed, not recorded)


def parse_getconf_libc(text: str) -> Libc:
    m = re.fullmatch(r"\s*(\S+)\s+(\d+(?:\.\d+)+)\s*", text)
    if m is None:
        return Libc("", "", (f"unrecognised GNU_LIBC_VERSION {text.strip()[:60]!r}",))
    return Libc(m.group(1), m.group(2))


@fact("libc")
def libc(ctx: FactContext) -> Libc:
    answer = ctx.host.run(["getconf", "GNU_LIBC_VERSION"]).require()
    if not answer.ok:
        return Libc("", "", (answer.describe(),), answered=False)
    if answer.value.returncode != 0:
        return Libc("", "", ("getconf knows no GNU_LIBC_VERSION (not glibc, e.g. musl)",))
    return parse_getconf_libc(answer.text)


# --- container and virtualisation -----------------------------------------------------

_CGROUP_RUNTIMES = (
    ("kubepods", "kubernetes"),
    ("docker", "docker"),
    ("libpod", "podman"),
    ("crio", "cri-o"),
    ("containerd", "containerd"),
    ("lxc", "lxc"),
)


class Container(NamedTuple):
    in_container: bool | None  # None: signs point both ways
    runtime: str  # "" when not in a container or unknown
    signs: tuple[str, ...] = ()  # what was seen, for the finding's details
    virtualization: str = ""  # "virtual machine (KVM)" and the like; "" on bare metal
    root_fstype: str = ""
    unread: tuple[str, ...] = ()  # the places no sign was seen in because they were unreadable

    @property
    def blind(self) -> bool:
        """Not one sign either way, and the usual places could not be read."""
        return self.in_container is None and bool(self.unread) and not self.signs


def runtime_from_cgroup(text: str) -> str:
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        for marker, runtime in _CGROUP_RUNTIMES:
            if marker in path:
                return runtime
    return ""


@fact("container")
def container(ctx: FactContext) -> Container:
    host = ctx.host
    strong: list[tuple[str, str]] = []  # (runtime, what was seen): any one settles it
    if host.read("/run/.containerenv", max_bytes=4096).status == AnswerStatus.OK:
        strong.append(("podman", "/run/.containerenv exists"))
    if host.read("/var/run/secrets/kubernetes.io/serviceaccount/namespace", max_bytes=256).ok:
        strong.append(("kubernetes", "a Kubernetes service-account token is mounted"))
    environ = host.read("/proc/1/environ", max_bytes=65536)
    for var in environ.value.split(b"\0") if environ.ok else ():
        if var.startswith(b"container="):
            name = var.split(b"=", 1)[1].decode("utf-8", "replace")
            strong.append((name, f"PID 1 has container={name}"))
    unread: list[str] = []  # the signs that could not be looked at
    for path in ("/proc/1/cgroup", "/proc/self/cgroup"):
        answer = host.read(path)
        note_unless_missing(unread, answer)
        runtime = runtime_from_cgroup(answer.text)
        if runtime:
            strong.append((runtime, f"{path} names {runtime}"))
            break
    # Weak signs: /.dockerenv stays in any root filesystem built from a Docker image (VMs
    # and bare-metal images too), and overlay roots exist outside containers.
    dockerenv = host.read("/.dockerenv", max_bytes=4096).ok
    try:
        mountinfo = ctx.get(mount_table)
    except ProbeFailed as failed:  # timed out or not captured: a sign not looked at
        note_unless_missing(unread, failed.answer)
        mountinfo = MountTable(())
    if mountinfo.status != AnswerStatus.MISSING and mountinfo.why:
        unread.append(mountinfo.why)
    root_fstype = fstype_on(mountinfo.mounts, "/") or ""
    overlay_root = root_fstype in ("overlay", "fuse-overlayfs", "aufs")
    signs = [sign for _, sign in strong]
    if dockerenv:
        signs.append("/.dockerenv exists")
    if root_fstype:
        signs.append(f"the root filesystem is {root_fstype}")
    if strong:
        in_container, runtime = True, strong[0][0]
    elif dockerenv and overlay_root:
        in_container, runtime = True, "docker"
    elif overlay_root or (dockerenv and not root_fstype):
        in_container, runtime = None, ""
    elif unread and not signs:
        # No sign seen, but the places they are seen in could not be read: unknown.
        in_container, runtime = None, ""
    else:
        in_container, runtime = False, ""
    return Container(
        in_container=in_container,
        runtime=runtime,
        signs=tuple(signs),
        virtualization=_virtualization(ctx, unread),
        root_fstype=root_fstype,
        unread=tuple(unread),
    )


def _virtualization(ctx: FactContext, unread: list[str]) -> str:
    """ "virtual machine (...)" when the CPU says a hypervisor runs it; "" otherwise, and when
    /proc/cpuinfo could not be read (noted in `unread`: not a sign of bare metal)."""
    try:
        read = ctx.get(cpuinfo)
    except ProbeFailed as failed:
        note_unless_missing(unread, failed.answer)
        return ""
    if read.status != AnswerStatus.MISSING and read.why:
        unread.append(read.why)
    flags = next((ln for ln in read.text.splitlines() if ln.startswith("flags")), "")
    if "hypervisor" not in flags.split():
        return ""
    product = ctx.host.read("/sys/class/dmi/id/product_name", max_bytes=256).text.strip()
    return f"virtual machine ({product})" if product else "virtual machine"


# --- environment ----------------------------------------------------------------------


def parse_environ(data: bytes) -> dict[str, str]:
    """/proc/<pid>/environ: NUL-separated KEY=value."""
    env = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


@fact("process.environ")
def environ(ctx: FactContext) -> dict[str, str]:
    """dldoctor's own environment, read through the Host so that a bundle replays it."""
    return parse_environ(
        ctx.host.read("/proc/self/environ", max_bytes=1 << 20).require().value or b""
    )


@fact("memory.cgroup_limit")
def cgroup_memory_limit(ctx: FactContext) -> int | None:
    """This process's cgroup memory limit in bytes; None when unlimited or unknown.

    cgroup v2 writes "max" for no limit; v1 writes a number near 2**63 instead.
    """
    v2 = ctx.host.read("/sys/fs/cgroup/memory.max", max_bytes=64).require()
    if v2.ok:
        return to_int(v2.text, minimum=0)  # "max": no limit
    v1 = ctx.host.read("/sys/fs/cgroup/memory/memory.limit_in_bytes", max_bytes=64).require()
    limit = to_int(v1.text, minimum=0) if v1.ok else None
    return limit if limit is not None and limit < 2**60 else None
