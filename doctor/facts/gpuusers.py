"""Who uses the GPUs: what `gpu.processes` judges before a job, and what the active tier
asks before it loads one (dldoctor.active.gpus: no GPU another process uses is loaded,
unless `--force`).

The users are a Host answer (the `gpu_users` probe, dldoctor/probes.py: the processes with
a /dev/nvidia<minor> or /dev/nvidia-caps/* file open, as the fixes' interlocks find them),
so a bundle records them and its replay judges the same. A device file is tied to its GPU
by the driver's own table, /proc/driver/nvidia/gpus/<bus id>/information ("Device Minor:"),
read through the Host too: the minor is not NVML's index (on a host whose GPUs are
ordered otherwise, /dev/nvidia0 is GPU 3).

Some processes hold every GPU open to watch it, not to compute on it: they are not users
(WATCHERS).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dldoctor.facts import FactContext, fact
from dldoctor.facts import gpu as g
from dldoctor.facts.gpu import normalise_pci_bus_id
from dldoctor.facts.reading import read_listing, read_text
from dldoctor.host.base import AnswerStatus

PROBE = "gpu_users"
DRIVER_GPUS = "/proc/driver/nvidia/gpus"
# Daemons that keep the GPUs open to manage or watch them (by /proc/<pid>/comm, which the
# kernel cuts at 15 characters): persistence, DCGM and its exporter, Fabric Manager, the
# Kubernetes device plugin, nvidia-smi itself. They load nothing.
WATCHERS = tuple(
    name[:15]
    for name in (
        "nvidia-persistenced",
        "nv-hostengine",
        "dcgm-exporter",
        "nv-fabricmanager",
        "nvidia-device-plugin",
        "nvidia-smi",
    )
)
_MINOR = re.compile(r"^/dev/nvidia(\d+)$")
NAMED = 3  # users named in a summary; the details name all


@dataclass(frozen=True)
class GpuUser:
    pid: int
    user: str
    name: str  # the process's name (comm): "python"
    command: str  # its command line, cut
    devices: tuple[str, ...]  # "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21"

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.name or '?'}, user {self.user})"


@dataclass(frozen=True)
class GpuUsers:
    recorded: bool  # False: a bundle taken before the probe existed, or without --active
    users: tuple[GpuUser, ...] = ()
    minors: tuple[tuple[int, str], ...] = ()  # (device minor, PCI bus id) from the driver
    unseen: int = 0  # processes whose open files could not be read (not root)
    notes: tuple[str, ...] = ()
    # The WATCHERS among the holders: not users, but the driver lists some of them (DCGM's
    # profiling) and NVML's lists name no process: gpu.processes leaves these pids out.
    watchers: tuple[GpuUser, ...] = ()

    def of(self, gpu: g.Gpu) -> list[GpuUser]:
        """The processes using `gpu`: those holding its /dev/nvidia<minor>, and those
        holding a MIG instance's file (a /dev/nvidia-caps/ file names no GPU by itself:
        they count against every GPU). With no minor known for `gpu` (the driver's table
        unread, or without it), a process holding /dev/nvidia<index> is taken for it."""
        mine = {minor for minor, bus in self.minors if bus == gpu.pci_bus_id} or {gpu.index}
        found = []
        for user in self.users:
            minors = {int(m.group(1)) for d in user.devices if (m := _MINOR.match(d))}
            if minors & mine or any(d.startswith("/dev/nvidia-caps/") for d in user.devices):
                found.append(user)
        return found


@fact("gpu.users")
def gpu_users(ctx: FactContext) -> GpuUsers:
    answer = ctx.host.probe(PROBE)
    if answer.status == AnswerStatus.MISSING:
        return GpuUsers(recorded=False)
    if answer.require(uncaptured_ok=True).status == AnswerStatus.NOT_CAPTURED:
        # A foreign capture (a bug report) has no holders, but its nvidia-smi lists the
        # processes: gpu.processes judges from those, as from a bundle without the probe.
        ctx.replaced(answer)
        return GpuUsers(recorded=False)
    value = answer.value if isinstance(answer.value, dict) else {}
    notes: list[str] = []
    users = tuple(u for u in (_user(item, notes) for item in value.get("users") or ()) if u)
    unseen = value.get("unseen")
    return GpuUsers(
        recorded=True,
        users=tuple(u for u in users if u.name not in WATCHERS),
        watchers=tuple(u for u in users if u.name in WATCHERS),
        minors=_minors(ctx, notes),
        unseen=unseen if isinstance(unseen, int) and unseen > 0 else 0,
        notes=tuple(notes),
    )


def _user(item: object, notes: list[str]) -> GpuUser | None:
    """One process of the probe's answer; None (noted) for what is not one."""
    if not isinstance(item, dict) or not isinstance(item.get("pid"), int):
        notes.append(f"not a process in the probe's answer: {str(item)[:80]}")
        return None
    devices = item.get("devices")
    devices = tuple(d for d in devices if isinstance(d, str)) if isinstance(devices, list) else ()
    return GpuUser(
        pid=item["pid"],
        user=str(item.get("user") or "?"),
        name=str(item.get("name") or ""),
        command=str(item.get("command") or ""),
        devices=devices,
    )


def _minors(ctx: FactContext, notes: list[str]) -> tuple[tuple[int, str], ...]:
    """(device minor, bus id) of each GPU the driver lists."""
    found = []
    for folder in read_listing(ctx.host, DRIVER_GPUS, notes) or ():
        bus = normalise_pci_bus_id(folder)
        text = read_text(ctx.host, f"{DRIVER_GPUS}/{folder}/information", notes) or ""
        for line in text.splitlines() if bus else ():
            key, _, value = line.partition(":")
            if key.strip() == "Device Minor" and value.strip().isdigit():
                found.append((int(value.strip()), bus))
    return tuple(sorted(found))


def named_users(who: list[GpuUser]) -> str:
    """The first NAMED users, "and N more"."""
    more = f" and {len(who) - NAMED} more" if len(who) > NAMED else ""
    return ", ".join(map(str, who[:NAMED])) + more
