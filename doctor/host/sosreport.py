"""SosReportHost: the answers of a sos report (`sos report`, Red Hat's and Canonical's
support archive), read as one more Host (docs/foreign-inputs.md).

A sos report mirrors the files it copied at their host paths and keeps each command's
output under `sos_commands/<plugin>/<mangled command line>`, listed with its exit status in
`sos_reports/manifest.json` (sos >= 4.0). What the report holds is answered as a bundle's
replay would answer it. What it lacks is one of two things: absent on the host, when a
plugin that ran copies that path (sos looked, nothing was there: `missing`); or never
looked at (`not_captured`), which makes every check that needed it a `skip` naming the
plugin or command (doctor/runner.py). The second is the default: a path sos did not
collect must never read as a file the host lacks.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import threading
from collections.abc import Sequence
from typing import Any

from dldoctor import shellwords
from dldoctor.host.base import (
    MAX_READ_BYTES,
    Answer,
    AnswerStatus,
    CommandResult,
    Op,
    command_key,
    not_measured,
    stdout_cap,
)
from dldoctor.host.replay import ReplayHost
from dldoctor.snapshots.bundle import BundleError, BundleReader

COMMANDS_DIR = "sos_commands"
MANIFEST = "sos_reports/manifest.json"
VERSION = "version.txt"
# sos's own folders and files at the top of a report: not host paths.
OWN = (COMMANDS_DIR, "sos_logs", "sos_reports", "sos_strings", VERSION)

# What sos copies, by plugin, for the paths dldoctor reads: the copy specs of sos 4.0 that
# sos 4.12 still has (sos/report/plugins/<plugin>.py). A spec covers the paths it matches
# and everything under them. A path under one, of a plugin that ran, that the report lacks
# was absent on the host; a spec only some versions have stays out (its absence in an
# older report would read as absence on the host).
COPIED: tuple[tuple[str, str], ...] = (
    ("kernel", "/proc/modules"),
    ("kernel", "/proc/cmdline"),
    ("kernel", "/proc/driver"),
    ("kernel", "/proc/sys/kernel/tainted"),
    ("kernel", "/sys/module/*/parameters"),
    ("kernel", "/sys/module/*/version"),
    ("kernel", "/etc/modprobe.d"),
    ("kernel", "/etc/sysctl.conf"),
    ("kernel", "/etc/sysctl.d"),
    ("memory", "/proc/meminfo"),
    ("memory", "/sys/kernel/mm/transparent_hugepage/enabled"),
    ("memory", "/sys/kernel/mm/hugepages"),
    ("processor", "/proc/cpuinfo"),
    ("processor", "/sys/devices/system/cpu"),
    ("md", "/proc/mdstat"),
    ("md", "/sys/block/md*/md*"),
    ("filesys", "/proc/mounts"),
    ("filesys", "/proc/self/mountinfo"),
    ("filesys", "/etc/fstab"),
    ("numa", "/sys/devices/system/node/node*/meminfo"),
    ("numa", "/sys/devices/system/node/node*/cpulist"),
    ("numa", "/sys/devices/system/node/node*/distance"),
    ("networking", "/sys/class/net/*/flags"),
    ("networking", "/sys/class/net/*/statistics"),
    ("release", "/etc/*release"),
    ("pci", "/proc/bus/pci"),
    ("hardware", "/proc/interrupts"),
    ("hardware", "/sys/class/dmi/id/*"),
    ("block", "/sys/block/*/queue"),
)
# Folders whose listing a plugin's glob makes whole for what dldoctor looks for in them
# (every interface; every nodeN; every block device), though it copies part of each entry.
LISTED: tuple[tuple[str, str], ...] = (
    ("networking", "/sys/class/net"),
    ("numa", "/sys/devices/system/node"),
    ("block", "/sys/block"),
)
# /proc/sys/a/b is `a.b = value` in the kernel plugin's `sysctl -a` (a "." in a name is
# written "/" there).
SYSCTL_ARGV = ("sysctl", "-a")
# The plugin that runs each program (or an equivalent command line), for the reason a check
# is skipped; a program missing here is run by no plugin.
RUN_BY = {
    "nvidia-smi": "nvidia",
    "numactl": "numa",
    "mdadm": "md",
    "dmesg": "kernel",
    "sysctl": "kernel",
    "journalctl": "logs",
    "lspci": "pci",
    "ldconfig": "libraries",
    "systemctl": "systemd",
    "ibv_devinfo": "infiniband",
    "dmidecode": "hardware",
}
# sos >= 4.12 copies at most 64 cpuN folders (`-k processor.max_cpu_dirs`); `present`
# says how many the host had.
CPU_ROOT = "/sys/devices/system/cpu"
NAME_MAX = 255  # sos cuts a mangled command line to the archive's name length
_EXIT_NOT_FOUND = 127
_EXIT_TIMEOUT = 124  # sos's own timeout (coreutils `timeout`)


def is_sos_tree(path: str) -> bool:
    """The layout of a sos report: sos_commands/, and sos_reports/ or version.txt."""
    if not os.path.isdir(os.path.join(path, COMMANDS_DIR)):
        return False
    return os.path.isdir(os.path.join(path, "sos_reports")) or os.path.isfile(
        os.path.join(path, VERSION)
    )


def looks_like_sos(names: Sequence[str]) -> bool:
    """Member names of an archive (its first ones) that are a sos report's."""
    for name in names:
        parts = name.strip("/").split("/")
        if parts[0].startswith("sosreport-") or (len(parts) > 1 and parts[1] in OWN):
            return True
    return False


def mangle(command: str) -> str:
    """The file name sos gives a command's output (sos/report/plugins/__init__.py,
    `_mangle_command`)."""
    name = re.sub(r"^/(usr/|)(bin|sbin)/", "", command)
    name = re.sub(r"[^\w\-\.\/]+", "_", name)
    return name.replace("/", ".").strip(" ._-")[:NAME_MAX]


def _program(argv: Sequence[str]) -> str:
    return posixpath.basename(argv[0]) if argv else ""


def _sos_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A command line as sos's manifest would spell it: the program without its folder."""
    return (_program(argv), *argv[1:]) if argv else ()


def _equivalents(argv: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
    """(command line sos may have run, the mdadm device to cut its output to or ""): the
    line itself first, then the spellings of the same command the plugins use."""
    found = [(argv, "")]
    if argv in (("numactl", "-H"), ("numactl", "--hardware")):
        found += [(("numactl", "--hardware"), ""), (("numactl", "-H"), "")]
    elif argv == ("ldconfig", "-p"):
        found.append((("ldconfig", "-p", "-N", "-X"), ""))  # -N -X: do not rebuild, with -p
    elif argv[:2] in (("mdadm", "--detail"), ("mdadm", "-D")) and len(argv) == 3:
        found += [(("mdadm", "-D", argv[2]), ""), (("mdadm", "-D", "/dev/md*"), argv[2])]
    return found


def _reason(what: str, plugin: str = "") -> str:
    if plugin:
        return f"not in this sos report (plugin {plugin}, {what}, not captured)"
    return f"not in this sos report ({what}, not captured by any sos plugin)"


def _covers(spec: str, path: str) -> bool:
    """`path` is what `spec` matches or lies under it (fnmatch, one part at a time)."""
    want = [p for p in spec.split("/") if p]
    have = [p for p in path.split("/") if p]
    return len(have) >= len(want) and all(map(fnmatch.fnmatchcase, have, want))


def mdadm_section(text: str, device: str) -> str | None:
    """The part of `mdadm -D dev1 dev2 ...` about `device`: each starts with a line
    `/dev/mdN:`, the next such line ends it."""
    lines = text.splitlines(keepends=True)
    heads = [i for i, line in enumerate(lines) if _heads_section(line.rstrip("\n"))]
    for i, start in enumerate(heads):
        if lines[start].rstrip("\n") == f"{device}:":
            end = heads[i + 1] if i + 1 < len(heads) else len(lines)
            return "".join(lines[start:end])
    return None


def _heads_section(line: str) -> bool:
    return line.startswith("/dev/") and line.endswith(":") and not any(c.isspace() for c in line)


class SosReportHost(ReplayHost):
    kind = "sosreport"

    def __init__(self, root: str, *, label: str = ""):
        super().__init__(BundleReader.of_tree(root))
        self.label = label or root
        manifest = self._manifest()
        self.version = str(manifest.get("version") or self._version_txt().get("sosreport", ""))
        self.started = str(manifest.get("start_time") or "")
        self.plugins = self._plugins(manifest)
        self.commands = self._command_index(manifest)
        self.files = self._command_files()
        self._sysctl: dict[str, str] | None = None
        self._cpu_cut: str | None = None
        self._lock = threading.Lock()

    # --- what the report says about itself ----------------------------------------------

    def _manifest(self) -> dict[str, Any]:
        try:
            manifest = self.bundle.json(MANIFEST)
        except (BundleError, OSError):  # bad JSON, a link loop
            return {}
        return manifest if isinstance(manifest, dict) else {}

    def _own_file(self, rel: str, limit: int) -> bytes:
        """A file of sos's own (version.txt, an output), b"" when it cannot be read."""
        try:
            return self.bundle.read_bytes(rel, limit) or b""
        except OSError:
            return b""

    def _version_txt(self) -> dict[str, str]:
        """version.txt: `sosreport: 4.0`, then `plugin: version` lines."""
        data = self._own_file(VERSION, 1 << 20)
        found = {}
        for line in data.decode("utf-8", "replace").splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() and " " not in key.strip():
                found[key.strip()] = value.strip()
        return found

    def _report_plugins(self, manifest: dict[str, Any]) -> dict[str, Any]:
        report = manifest.get("components", {})
        report = report.get("report", {}) if isinstance(report, dict) else {}
        plugins = report.get("plugins", {}) if isinstance(report, dict) else {}
        return plugins if isinstance(plugins, dict) else {}

    def _plugins(self, manifest: dict[str, Any]) -> frozenset[str]:
        """The plugins that ran: the manifest's, else version.txt's, else sos_commands/."""
        names = set(self._report_plugins(manifest))
        if not names:
            names = set(self._version_txt()) - {"sosreport", "sos"}
        if not names:
            names = set(self._entries(COMMANDS_DIR))
        return frozenset(names)

    def _entries(self, rel: str) -> list[str]:
        try:
            real = self.bundle.inside(rel)
            return sorted(os.listdir(real)) if os.path.isdir(real) else []
        except OSError:
            return []

    def _command_index(self, manifest: dict[str, Any]) -> dict[tuple[str, ...], dict]:
        """Command line -> {plugin, file (report-relative, "" when none was kept), exit}, as
        the manifest records them."""
        index: dict[tuple[str, ...], dict] = {}
        for plugin, record in self._report_plugins(manifest).items():
            commands = record.get("commands", []) if isinstance(record, dict) else []
            for c in commands if isinstance(commands, list) else []:
                if not isinstance(c, dict) or not isinstance(c.get("exec"), str):
                    continue
                try:
                    argv = _sos_argv(shellwords.split(c["exec"]))
                except ValueError:  # unbalanced quotes: not a command line we ask for
                    continue
                path = c.get("filepath")
                code = c.get("return_code")
                index.setdefault(argv, {
                    "plugin": str(plugin),
                    "exec": c["exec"],
                    "file": path if isinstance(path, str) else "",
                    "exit": code if isinstance(code, int) and not isinstance(code, bool) else 0,
                })  # fmt: skip
        return index

    def _command_files(self) -> dict[str, tuple[str, str]]:
        """Mangled name -> (plugin, report-relative path) of every output file: how a
        report without a manifest (sos < 4.0) is read, and a command it does not list."""
        files: dict[str, tuple[str, str]] = {}
        for plugin in self._entries(COMMANDS_DIR):
            for name in self._entries(f"{COMMANDS_DIR}/{plugin}"):
                files.setdefault(name, (plugin, f"{COMMANDS_DIR}/{plugin}/{name}"))
        return files

    def describe(self) -> str:
        version = f" {self.version}" if self.version else ""
        when = f", collected {self.started[:16]}" if self.started else ""
        return f"sos report{version} of {self._host_name()}{when}"

    def _host_name(self) -> str:
        """The name the report gives its host (a pseudonym, after `sos clean`): the host
        plugin's `hostname`, else the report's folder, sosreport-NAME-DATE-ID."""
        said = self._own_file(f"{COMMANDS_DIR}/host/hostname", 256)
        name = said.decode("utf-8", "replace").strip().splitlines()[:1]
        if name and name[0]:
            return name[0]
        base = os.path.basename(self.bundle.path)
        parts = base.split("-")
        if base.startswith("sosreport-") and len(parts) >= 6:
            return "-".join(parts[1:-4])
        return "an unnamed host"

    # --- the Host operations ------------------------------------------------------------

    def _own(self, path: str) -> bool:
        parts = [p for p in path.split("/") if p]
        return bool(parts) and parts[0] in OWN

    def _copied_by(self, path: str) -> str:
        """The plugin whose copy spec covers `path`, "" when none does."""
        return next((plugin for plugin, spec in COPIED if _covers(spec, path)), "")

    def _absent(self, op: Op, path: str, *, listing: bool = False) -> Answer:
        """What the report's lack of `path` means: missing when a plugin that ran copies
        it (or, for a listing, lists it whole), else not captured."""
        plugin = self._lister(path) if listing else self._copied_by(path)
        folder = "/".join(path.split("/")[:6])  # /sys/devices/system/cpu/cpuN
        in_cpu = folder[len(CPU_ROOT) + 1 :][:3] == "cpu" and folder[len(CPU_ROOT) + 4 :].isdigit()
        if (
            in_cpu
            and self._cpu_folders_cut()
            and ReplayHost.listdir(self, folder).status == AnswerStatus.MISSING
        ):
            return Answer(op, path, AnswerStatus.NOT_CAPTURED, error=self._cpu_folders_cut())
        if plugin and plugin in self.plugins:
            return Answer(op, path, AnswerStatus.MISSING)
        return Answer(op, path, AnswerStatus.NOT_CAPTURED, error=_reason(path, plugin))

    def read(self, path: str, *, max_bytes: int = MAX_READ_BYTES) -> Answer:
        if self._own(path):
            return Answer(Op.READ, path, AnswerStatus.NOT_CAPTURED, error=_reason(path))
        answer = super().read(path, max_bytes=max_bytes)
        if answer.status != AnswerStatus.MISSING:
            return answer
        if path.startswith("/proc/sys/"):
            return self._sysctl_read(path, max_bytes)
        return self._absent(Op.READ, path)

    def _sysctl_read(self, path: str, max_bytes: int) -> Answer:
        values = self._sysctl_values()
        if values is None:
            return Answer(Op.READ, path, AnswerStatus.NOT_CAPTURED, error=_reason(path, "kernel"))
        name = ".".join(p.replace(".", "/") for p in path[len("/proc/sys/") :].split("/") if p)
        if name not in values:
            return Answer(
                Op.READ, path, AnswerStatus.MISSING
            )  # `sysctl -a` prints every readable key
        return Answer(Op.READ, path, AnswerStatus.OK, (values[name] + "\n").encode()[:max_bytes])

    def _sysctl_values(self) -> dict[str, str] | None:
        with self._lock:
            if self._sysctl is None:
                answer = self.run(list(SYSCTL_ARGV))
                if not answer.ok or answer.value.returncode != 0:
                    return None
                values = {}
                for line in answer.text.splitlines():
                    key, sep, value = line.partition(" =")
                    if sep and key and " " not in key:
                        values[key] = value[1:] if value.startswith(" ") else value
                self._sysctl = values
            return self._sysctl

    def listdir(self, path: str) -> Answer:
        if self._own(path) or path.rstrip("/") == "":
            return Answer(Op.LIST, path, AnswerStatus.NOT_CAPTURED, error=_reason(path))
        answer = super().listdir(path)
        if answer.status == AnswerStatus.MISSING:
            return self._absent(Op.LIST, path, listing=True)
        plugin = self._lister(path)
        if answer.ok and path.rstrip("/") == CPU_ROOT and self._cpu_folders_cut():
            return Answer(Op.LIST, path, AnswerStatus.NOT_CAPTURED, error=self._cpu_folders_cut())
        if answer.ok and plugin not in self.plugins:  # sos copied some of what is in it
            why = f"{path}: only some of its entries were captured"
            error = _reason(path, plugin) if plugin else f"not in this sos report ({why})"
            return Answer(Op.LIST, path, AnswerStatus.NOT_CAPTURED, error=error)
        return answer

    def _lister(self, path: str) -> str:
        """The plugin that copies folder `path` whole, or lists it whole; "" for none."""
        return self._copied_by(path) or next((p for p, f in LISTED if f == path), "")

    def _cpu_folders_cut(self) -> str:
        """Why the report holds fewer cpuN folders than the host's `present` CPUs; ""
        when it holds them all."""
        from dldoctor.facts.numa import parse_cpulist

        with self._lock:
            if self._cpu_cut is None:
                listing = ReplayHost.listdir(self, CPU_ROOT)
                held = sum(n[:3] == "cpu" and n[3:].isdigit() for n in listing.value or ())
                present = len(parse_cpulist(ReplayHost.read(self, f"{CPU_ROOT}/present").text))
                self._cpu_cut = ""
                if listing.ok and held != present:
                    self._cpu_cut = (
                        f"not in this sos report (plugin processor, {held} of the {present} "
                        f"{CPU_ROOT}/cpuN folders: its max_cpu_dirs option, not captured)"
                    )
            return self._cpu_cut

    def readlink(self, path: str) -> Answer:
        if self._own(path):
            return Answer(Op.LINK, path, AnswerStatus.NOT_CAPTURED, error=_reason(path))
        answer = super().readlink(path)
        return self._absent(Op.LINK, path) if answer.status == AnswerStatus.MISSING else answer

    def statvfs(self, path: str) -> Answer:
        why = (
            f"not in this sos report (statvfs of {path}, not captured: sos keeps `df` output only)"
        )
        return Answer(Op.STATVFS, path, AnswerStatus.NOT_CAPTURED, error=why)

    def probe(self, name: str) -> Answer:
        what = "NVML" if name == "nvml" else f"the {name} probe"
        return Answer(Op.PROBE, name, AnswerStatus.NOT_CAPTURED, error=_reason(what))

    def measure(
        self, argv: Sequence[str], *, timeout: float, scratch_in: str | None = None
    ) -> Answer:
        return not_measured(command_key(argv), "a sos report")

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Answer:
        key = command_key(argv)
        return self._guard(Op.RUN, key, lambda: self._run(tuple(argv), key))

    def _run(self, argv: tuple[str, ...], key: str) -> Answer:
        for candidate, device in _equivalents(_sos_argv(argv)):
            record = self.commands.get(candidate)
            found = self.files.get(mangle(record["exec"] if record else " ".join(candidate)))
            if record is None and found is None:
                continue
            if record is None:
                record = {"plugin": found[0], "file": found[1], "exit": 0}
            elif (
                record["file"] and found and not os.path.isfile(self.bundle.inside(record["file"]))
            ):
                # sos clean 4.0 rewrites some of the manifest's paths (dumpe2fs_-h_.dev.vda
                # became dumpe2fs_-hdev.vda), never the files' names.
                record = {**record, "file": found[1]}
            if not record["file"]:
                if record["exit"] == _EXIT_NOT_FOUND:
                    why = f"not installed when sos ran (plugin {record['plugin']})"
                    return Answer(Op.RUN, key, AnswerStatus.NOT_INSTALLED, error=why)
                why = f"sos kept no output (plugin {record['plugin']}, exit {record['exit']})"
                return Answer(Op.RUN, key, AnswerStatus.ERROR, error=why)
            return self._output(key, record, device, stdout_cap(argv))
        why = _reason(f"command `{key}`", RUN_BY.get(_program(argv), ""))
        return Answer(Op.RUN, key, AnswerStatus.NOT_CAPTURED, error=why)

    def _output(self, key: str, record: dict, device: str, cap: int) -> Answer:
        data = self.bundle.read_bytes(record["file"], cap + 1)
        if data is None:
            why = f"{record['file']} is listed in the manifest but not a file in the report"
            return Answer(Op.RUN, key, AnswerStatus.ERROR, error=why)
        if len(data) > cap:
            why = f"{record['file']} is larger than {cap} bytes, the most kept of its command"
            return Answer(Op.RUN, key, AnswerStatus.ERROR, error=why)
        if record["exit"] == _EXIT_TIMEOUT:
            why = f"sos's run of it timed out (plugin {record['plugin']})"
            return Answer(Op.RUN, key, AnswerStatus.TIMEOUT, error=why)
        if device:
            section = mdadm_section(data.decode("utf-8", "replace"), device)
            if section is None:
                why = f"sos's `mdadm -D /dev/md*` has no section for {device}"
                return Answer(
                    Op.RUN, key, AnswerStatus.NOT_CAPTURED, error=_reason(why, record["plugin"])
                )
            # mdadm printed this array's details: another array's failure set the status.
            return Answer(Op.RUN, key, AnswerStatus.OK, CommandResult(0, section.encode(), b""))
        # sos keeps stderr in the same file as stdout.
        return Answer(Op.RUN, key, AnswerStatus.OK, CommandResult(record["exit"], data, b""))
