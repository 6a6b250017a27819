"""Storage: NVMe controllers and their SMART health, mounts, free space, network and
parallel filesystems.

Everything goes through the Host. A statvfs of a hung NFS or Lustre mount is answered by
LiveHost as `timeout` after its filesystem timeout; the facts here keep that answer as a
result ("the filesystem on /mnt/lustre does not answer") and never raise on it. Several
mounts are asked at once, so N hung mounts cost about one timeout, not N.
"""

from __future__ import annotations

import functools
import posixpath
import queue
import re
import threading
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from dldoctor.facts import Fact, FactContext, fact
from dldoctor.facts.mountinfo import Mount, mount_table
from dldoctor.facts.reading import load_json, read_listing, read_text, statvfs_sizes, to_int
from dldoctor.host.base import Answer, AnswerStatus, Op

SYS_NVME = "/sys/class/nvme"
DOCKER_ROOT = "/var/lib/docker"
FIXED_SPACE_PATHS = ("/", "/tmp")
MAX_PARALLEL_STATVFS = 16
# What the kernel writes to /sys/class/nvme/*/state (nvme_sysfs_show_state in
# drivers/nvme/host/core.c).
NVME_STATES = frozenset(
    ("new", "live", "resetting", "connecting", "deleting", "deleting (no IO)", "dead")
)

# --- NVMe -----------------------------------------------------------------------------


class SmartHealth(NamedTuple):
    source: str  # "nvme-cli" or "smartctl"
    critical_warning: int | None = None  # NVMe critical-warning bit field; 0 is healthy
    media_errors: int | None = None
    percent_used: int | None = None  # endurance used; may exceed 100
    available_spare: int | None = None  # percent
    spare_threshold: int | None = None  # percent
    passed: bool | None = None  # smartctl's overall verdict; None from nvme-cli (it has none)
    temperature_c: int | None = None
    notes: tuple[str, ...] = ()

    @property
    def has_values(self) -> bool:
        return any(
            v is not None
            for v in (
                self.critical_warning,
                self.media_errors,
                self.percent_used,
                self.available_spare,
                self.spare_threshold,
                self.passed,
            )
        )


class NvmeController(NamedTuple):
    name: str  # "nvme0"
    model: str = ""
    serial: str = ""
    firmware: str = ""
    state: str = ""  # "live", "connecting", "resetting", "dead", "deleting", ...
    transport: str = ""  # "pcie", "tcp", "rdma", "fc", "loop"; "" when sysfs has none
    namespaces: tuple[str, ...] = ()  # "nvme0n1", or "nvme0c0n1" under native multipath
    smart: SmartHealth | None = None
    # Why the SMART read itself failed (timed out, broke): the doctor could not look. ""
    # when it answered, or when no tool is there to ask (a note, not a failure).
    smart_error: str = ""
    notes: tuple[str, ...] = ()


def nvme_smart_argv(ctrl: str) -> list[str]:
    return ["nvme", "smart-log", f"/dev/{ctrl}", "--output-format=json"]


def smartctl_argv(ctrl: str) -> list[str]:
    return ["smartctl", "-H", "-A", "-j", f"/dev/{ctrl}"]


def _as_int(value: Any) -> int | None:
    """JSON numbers as printed by nvme-cli and smartctl: ints, integral floats (nvme-cli
    1.x prints 128-bit counters as long doubles), or digit strings (some nvme-cli 2.x)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d[\d,]*\s*", value):
        return to_int(value.replace(",", ""))
    if isinstance(value, dict) and "value" in value:  # {"value": 0, ...} bit-field objects
        return _as_int(value["value"])
    return None


def _first(data: dict, *keys: str) -> Any:
    for key in keys:
        if key in data:
            return data[key]
    return None


def _load_object(text: str, what: str) -> tuple[dict | None, list[str]]:
    data, why = load_json(text)
    if why:
        return None, [f"{what} printed no JSON ({why}): {text.strip()[:80]!r}"]
    if not isinstance(data, dict):
        return None, [f"{what} printed JSON that is not an object"]
    return data, []


def parse_nvme_smart_log(text: str) -> SmartHealth:
    """`nvme smart-log <dev> --output-format=json` (nvme-cli 1.x and 2.x key names)."""
    data, notes = _load_object(text, "nvme smart-log")
    if data is None:
        return SmartHealth("nvme-cli", notes=tuple(notes))
    values = {
        "critical_warning": _first(data, "critical_warning"),
        "media_errors": _first(data, "media_errors"),
        "percent_used": _first(data, "percent_used", "percentage_used"),
        "available_spare": _first(data, "avail_spare", "available_spare"),
        "spare_threshold": _first(data, "spare_thresh", "available_spare_threshold"),
    }
    parsed = {key: _as_int(value) for key, value in values.items()}
    for key, value in values.items():
        if value is None:
            notes.append(f"no {key} in the smart-log")
        elif parsed[key] is None:
            notes.append(f"{key} is not a number: {str(value)[:40]!r}")
    temperature = _as_int(data.get("temperature"))
    # nvme-cli prints the composite temperature in kelvins (the NVMe log's unit).
    temp_c = temperature - 273 if temperature is not None and temperature > 150 else temperature
    return SmartHealth("nvme-cli", passed=None, temperature_c=temp_c, notes=tuple(notes), **parsed)


def parse_smartctl_json(text: str) -> SmartHealth:
    """`smartctl -H -A -j <dev>` of an NVMe device (smartmontools 7.0+)."""
    data, notes = _load_object(text, "smartctl")
    if data is None:
        return SmartHealth("smartctl", notes=tuple(notes))
    meta = data.get("smartctl") if isinstance(data.get("smartctl"), dict) else {}
    for msg in meta.get("messages", []) if isinstance(meta.get("messages"), list) else []:
        if isinstance(msg, dict) and msg.get("string"):
            notes.append(f"smartctl: {str(msg['string'])[:160]}")
    status = data.get("smart_status")
    passed = status.get("passed") if isinstance(status, dict) else None
    log = data.get("nvme_smart_health_information_log")
    if not isinstance(log, dict):
        notes.append("no nvme_smart_health_information_log in smartctl's output")
        log = {}
    temperature = _as_int(log.get("temperature"))
    if temperature is None and isinstance(data.get("temperature"), dict):
        temperature = _as_int(data["temperature"].get("current"))
    return SmartHealth(
        "smartctl",
        critical_warning=_as_int(log.get("critical_warning")),
        media_errors=_as_int(log.get("media_errors")),
        percent_used=_as_int(log.get("percentage_used")),
        available_spare=_as_int(log.get("available_spare")),
        spare_threshold=_as_int(log.get("available_spare_threshold")),
        passed=passed if isinstance(passed, bool) else None,
        temperature_c=temperature,  # smartctl already converts to Celsius
        notes=tuple(notes),
    )


def _stderr_line(answer: Answer) -> str:
    lines = answer.value.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[0][:160] if lines else ""


class _SmartReader:
    """Asks nvme-cli, else smartctl; remembers which one is missing across controllers."""

    def __init__(self, ctx: FactContext):
        self.ctx = ctx
        self.nvme_cli = True
        self.smartctl = True

    def read(self, ctrl: str) -> tuple[SmartHealth | None, list[str], str]:
        """(health, notes, error): error names a read that timed out or broke."""
        notes: list[str] = []
        for tool, argv_of, parse in (
            ("nvme_cli", nvme_smart_argv, parse_nvme_smart_log),
            ("smartctl", smartctl_argv, parse_smartctl_json),
        ):
            if not getattr(self, tool):
                continue
            argv = argv_of(ctrl)
            answer = self.ctx.host.run(argv)
            if answer.status in (AnswerStatus.NOT_INSTALLED, AnswerStatus.MISSING):
                setattr(self, tool, False)
                continue
            if answer.status in (AnswerStatus.TIMEOUT, AnswerStatus.ERROR):
                return None, [answer.describe()], answer.describe()
            if not answer.ok:
                return None, [answer.describe()], ""
            out = answer.value
            if not out.stdout.strip():
                why = _stderr_line(answer)
                ran = f"`{' '.join(argv)}` exited {out.returncode}: {why or 'no output'}"
                return None, [ran], ""
            health = parse(answer.text)
            if out.returncode != 0:  # smartctl's exit status is a bit field; JSON still comes
                notes.append(f"`{' '.join(argv)}` exited {out.returncode}")
            if not health.has_values:
                return None, [*notes, *health.notes], ""
            return health, notes, ""
        no_tool = (
            "no SMART tool: neither nvme-cli (`nvme`) nor smartmontools (`smartctl`) is "
            "installed (or recorded); install nvme-cli or smartmontools to read NVMe health"
        )
        return None, [no_tool], ""


@fact("storage.nvme")
def nvme(ctx: FactContext) -> tuple[NvmeController, ...]:
    listing = ctx.host.listdir(SYS_NVME).require()
    if not listing.ok:
        return ()
    names = sorted(
        (n for n in listing.value if re.fullmatch(r"nvme\d+", n)), key=lambda n: to_int(n[4:]) or 0
    )
    smart = _SmartReader(ctx)
    controllers = []
    for name in names:
        notes: list[str] = []
        base = f"{SYS_NVME}/{name}"
        # A controller that does not answer in time fails the fact: the doctor could not
        # look, and "no NVMe problem" would be a verdict on what it did not see.
        attrs = {
            attr: read_text(ctx.host, f"{base}/{attr}", notes) or ""
            for attr in ("model", "serial", "firmware_rev", "state", "transport")
        }
        entries = read_listing(ctx.host, base, notes) or ()
        namespaces = tuple(sorted(e for e in entries if re.fullmatch(r"nvme\d+(?:c\d+)?n\d+", e)))
        health, smart_error = None, ""
        if attrs["state"] and attrs["state"] not in NVME_STATES:
            notes.append(f"controller state reads {attrs['state'][:40]!r}, not a state")
            attrs["state"] = ""
        if attrs["state"] and attrs["state"] != "live":
            notes.append(f"controller state is {attrs['state']!r}: SMART not asked")
        else:
            health, more, smart_error = smart.read(name)
            notes.extend(more)
        controllers.append(
            NvmeController(
                name=name,
                model=attrs["model"],
                serial=attrs["serial"],
                firmware=attrs["firmware_rev"],
                state=attrs["state"],
                transport=attrs["transport"],
                namespaces=namespaces,
                smart=health,
                smart_error=smart_error,
                notes=tuple(notes),
            )
        )
    return tuple(controllers)


# --- mounts ---------------------------------------------------------------------------


@fact("storage.mounts")
def mounts(ctx: FactContext) -> tuple[Mount, ...]:
    return ctx.get(mount_table).mounts


def mount_of(path: str, table: Iterable[Mount]) -> Mount | None:
    """The mount that holds `path`: the longest mount point above it; of several mounts
    on one point, the last (it hides the others)."""
    best: Mount | None = None
    for m in table:
        mp = m.mount_point
        if path == mp or mp == "/" or path.startswith(mp.rstrip("/") + "/"):
            if best is None or len(mp) >= len(best.mount_point):
                best = m
    return best


# --- statvfs, several at once ---------------------------------------------------------


def _statvfs_each(ctx: FactContext, paths: Sequence[str]) -> dict[str, Answer]:
    """statvfs of every path through the Host, up to MAX_PARALLEL_STATVFS at a time.

    Each answer comes back within the Host's filesystem timeout, so hung mounts cost one
    timeout together. A replay answers at once and is asked in order (stable evidence).
    """
    unique = list(dict.fromkeys(paths))
    answers: dict[str, Answer] = {}

    def ask(path: str) -> None:
        try:
            answers[path] = ctx.host.statvfs(path)
        except Exception as exc:  # noqa: BLE001 - a Host never raises; keep one that did
            answers[path] = Answer(
                Op.STATVFS, path, AnswerStatus.ERROR, error=f"{type(exc).__name__}: {exc}"
            )

    if len(unique) <= 1 or ctx.host.kind == "replay":
        for path in unique:
            ask(path)
        return answers
    work: queue.SimpleQueue[str] = queue.SimpleQueue()
    for path in unique:
        work.put(path)

    def worker() -> None:
        while True:
            try:
                path = work.get_nowait()
            except queue.Empty:
                return
            ask(path)

    threads = [
        threading.Thread(target=worker, name="dldoctor-statvfs", daemon=True)
        for _ in range(min(MAX_PARALLEL_STATVFS, len(unique)))
    ]
    for t in threads:
        t.start()
    with ctx.doing(f"statvfs of {len(unique)} mounts", ctx.host.limit(Op.STATVFS)):
        for t in threads:
            t.join()
    return answers


def _describe_mount(m: Mount | None) -> str:
    if m is None:
        return "no mount found for it in mountinfo"
    return f"the {m.fstype or '?'} filesystem mounted on {m.mount_point} from {m.source or '?'}"


def _stuck(answer: Answer, path: str, m: Mount | None) -> str:
    """A note for a statvfs that did not answer ok, naming the mount."""
    where = _describe_mount(m)
    if answer.status == AnswerStatus.TIMEOUT:
        limit = f" within {answer.timeout_s:g} s" if answer.timeout_s else ""
        return f"statvfs {path} did not answer{limit} (timed out): {where} hangs"
    return f"{answer.describe()} ({where})"


# --- free space -----------------------------------------------------------------------


class Space(NamedTuple):
    path: str
    mount_point: str  # "" when no mount was found for it
    fstype: str
    device: str  # major:minor of the mount
    size_bytes: int | None
    free_bytes: int | None  # available to unprivileged users (f_bavail)
    inodes: int | None  # None when the filesystem has no fixed inode count
    free_inodes: int | None
    answer_status: AnswerStatus  # the statvfs answer
    notes: tuple[str, ...] = ()
    source: str = ""  # what is mounted there: "/dev/nvme0n1p2", "server:/export"


def space_of(ctx: FactContext, paths: Sequence[str]) -> tuple[Space, ...]:
    """statvfs of each path and the mount it lies on; a hung mount is a result, not a raise."""
    table = ctx.get(mounts)
    where: dict[str, str] = {}
    notes: dict[str, list[str]] = {}
    for path in paths:
        notes[path] = []
        where[path] = posixpath.normpath(path) if path.startswith("/") else path
        if path in ("/", *FIXED_SPACE_PATHS):
            continue
        # /var/lib/docker -> /data/docker is common: the mount is the target's.
        link = ctx.host.readlink(path)
        if link.ok and isinstance(link.value, str) and link.value:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), link.value))
            where[path] = target
            notes[path].append(f"{path} is a link to {target}")
    answers = _statvfs_each(ctx, paths)
    result = []
    for path in paths:
        m = mount_of(where[path], table)
        answer = answers[path]
        size = free = inodes = free_inodes = None
        if answer.ok:
            size, free, inodes, free_inodes, more = statvfs_sizes(answer.value)
            notes[path].extend(more)
        elif answer.status == AnswerStatus.MISSING:
            notes[path].append(f"{path} does not exist")
        else:
            notes[path].append(_stuck(answer, path, m))
        result.append(
            Space(
                path=path,
                mount_point=m.mount_point if m else "",
                fstype=m.fstype if m else "",
                device=m.major_minor if m else "",
                size_bytes=size,
                free_bytes=free,
                inodes=inodes,
                free_inodes=free_inodes,
                answer_status=answer.status,
                notes=tuple(notes[path]),
                source=m.source if m else "",
            )
        )
    return tuple(result)


@fact("storage.space")
def space(ctx: FactContext) -> tuple[Space, ...]:
    """/, /tmp, and /var/lib/docker when it exists (Docker's images and containers)."""
    paths = list(FIXED_SPACE_PATHS)
    if ctx.host.listdir(DOCKER_ROOT).status != AnswerStatus.MISSING:
        paths.append(DOCKER_ROOT)
    return space_of(ctx, paths)


def space_fact(paths: Sequence[str]) -> Fact[tuple[Space, ...]]:
    """A fact for the paths a policy names (datasets, checkpoints): facts do not see the
    policy, so a check makes one with the paths it was given. The same paths give the same
    Fact object and name ("storage.space:/data,/ckpt"), so the store computes it once."""
    return _space_fact(tuple(paths))


@functools.cache
def _space_fact(paths: tuple[str, ...]) -> Fact[tuple[Space, ...]]:
    @fact("storage.space:" + ",".join(paths))
    def space_of_paths(ctx: FactContext) -> tuple[Space, ...]:
        return space_of(ctx, paths)

    return space_of_paths


# --- network and parallel filesystems -------------------------------------------------

# Filesystems whose data lives on other machines: a dead server or a partitioned network
# leaves statvfs (and every training job reading there) blocked, and their free space is
# shared with the cluster. Not here: 9p and virtiofs (a VM's or WSL2's share of its own
# host, no server to lose), autofs (a trigger: statvfs of it would mount it; the real
# mount shows up as its own nfs/cifs line once mounted), nfsd and rpc_pipefs (local).
NETWORK_FSTYPES = frozenset(
    {
        # NFS, SMB and AFS clients; hard NFS mounts block for as long as the server is gone
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "afs",
        # parallel and cluster filesystems of HPC and training clusters
        "lustre",
        "gpfs",  # IBM Storage Scale
        "beegfs",
        "wekafs",
        "ceph",  # the kernel CephFS client
        "glusterfs",
        "orangefs",
        "pvfs2",
        "panfs",
        "ocfs2",  # shared-block cluster filesystems: a lost lock manager stalls them too
        "gfs2",
        # FUSE clients of the same, and object stores mounted as folders (datasets)
        "fuse.ceph-fuse",
        "fuse.glusterfs",
        "fuse.sshfs",
        "fuse.s3fs",
        "fuse.gcsfuse",
        "fuse.juicefs",
        "fuse.rclone",
        "fuse.mountpoint-s3",
        "fuse.goofys",
        "fuse.blobfuse2",
        "fuse.daos",
        "fuse.dfuse",
    }
)


class NetFs(NamedTuple):
    mount_point: str
    fstype: str
    source: str  # "server:/export", "10.0.0.1@o2ib:/lustre"
    status: AnswerStatus  # the statvfs answer
    size_bytes: int | None
    free_bytes: int | None
    notes: tuple[str, ...] = ()


def network_mounts(table: Iterable[Mount]) -> list[Mount]:
    """The network and parallel mounts, one per mount point (the last one listed)."""
    chosen: dict[str, Mount] = {}
    for m in table:
        if m.fstype in NETWORK_FSTYPES:
            chosen.pop(m.mount_point, None)
            chosen[m.mount_point] = m
        elif m.mount_point in chosen:
            del chosen[m.mount_point]  # something local was mounted over it
    return list(chosen.values())


@fact("storage.netfs")
def netfs(ctx: FactContext) -> tuple[NetFs, ...]:
    found = network_mounts(ctx.get(mounts))
    answers = _statvfs_each(ctx, [m.mount_point for m in found])
    result = []
    for m in found:
        answer = answers[m.mount_point]
        size = free = None
        notes: list[str] = []
        if answer.ok:
            size, free, _, _, notes = statvfs_sizes(answer.value)
        else:
            notes.append(_stuck(answer, m.mount_point, m))
        result.append(NetFs(m.mount_point, m.fstype, m.source, answer.status, size, free,
                            tuple(notes)))  # fmt: skip
    return tuple(result)
