"""Linux software RAID (md): /proc/mdstat, /sys/block/<md>/md/*, `mdadm --detail`.

/proc/mdstat is what the kernel prints in md_seq_show() (drivers/md/md.c): one header line
per array (`md0 : active raid1 sda1[0] sdb1[1](F)`), a status line (`N blocks ... [n/m]
[UU_]`), then an optional resync/recovery/check/reshape line and a bitmap line. The
parsers below read it by content, not by indentation, so odd spacing, trailing blanks, a
missing `unused devices` line or a file without its final newline change nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.reading import read_text, to_int
from dldoctor.host.base import AnswerStatus

MDSTAT = "/proc/mdstat"
SYSFS_ATTRS = ("degraded", "sync_action", "array_state", "raid_disks")

# Member flags the kernel prints after `name[n]`: (W) write-mostly, (J) journal,
# (F) faulty, (S) spare (no raid slot), (R) replacement.
_FLAG_ROLES = {"F": "failed", "S": "spare", "R": "replacement", "J": "journal", "W": "write-mostly"}
_ROLE_ORDER = ("F", "S", "R", "J", "W")  # a faulty write-mostly member is "failed"

_LEVEL = re.compile(r"(?:raid\d+|linear|multipath|faulty)", re.IGNORECASE)
_HEADER = re.compile(r"\s*(md[^\s:]*)\s*:(.*)")  # the state is stripped after: linear
_MEMBER = re.compile(r"(\S+?)\[(\d+)\]((?:\([A-Z]\))*)")
_SYNC = re.compile(
    r"(?P<action>recovery|resync|check|reshape|repair)\s*=\s*(?P<pct>\d+(?:\.\d+)?)%"
    r"(?:\s*\((?P<done>\d+)/(?P<total>\d+)\))?"
    r"(?:\s*finish\s*=\s*(?P<finish>\d+(?:\.\d+)?)min)?"
    r"(?:\s*speed\s*=\s*(?P<speed>\d+)K/sec)?"
)
# A number starts after a non-digit (lookbehind): searching from inside a run of digits
# would rescan the run once per starting position (quadratic on a line of 80k zeros).
_BLOCKS = re.compile(r"(?<!\d)(\d+)\s+blocks\b")
_CHUNK = re.compile(r"(?<!\d)(\d+[kKmM])\s+chunks?\b")
_BRACKETED = re.compile(r"\[([^\[\]\s]+)\]")  # no `[` inside: linear on "[[[["
_SYNC_WAITING = re.compile(
    r"(?P<action>recovery|resync|check|reshape|repair)\s*=\s*(DELAYED|PENDING)"
)


# --- /proc/mdstat ---------------------------------------------------------------------


class MdMember(NamedTuple):
    name: str  # "sda1", "nvme0n1"
    index: int | None  # the number in brackets (the member's slot in the superblock)
    role: str  # "active", "failed", "spare", "replacement", "journal", "write-mostly"
    flags: tuple[str, ...] = ()  # the letters the kernel printed: ("W", "F")


class SyncProgress(NamedTuple):
    action: str  # "recovery", "resync", "check", "reshape", "repair"
    percent: float | None = None
    done_blocks: int | None = None
    total_blocks: int | None = None
    finish_min: float | None = None
    speed_kps: int | None = None  # K/sec as the kernel prints it
    delayed: bool = False  # resync=DELAYED: waits for another array on the same disks
    pending: bool = False  # resync=PENDING: waits for the array to be written (auto-read-only)


class MdArray(NamedTuple):
    name: str  # "md0", "md_d0"
    state: str  # "active", "inactive", "active (auto-read-only)", "active (read-only)"
    level: str  # "raid1", "raid5", "linear", ...; "" when the kernel printed none (inactive)
    members: tuple[MdMember, ...] = ()
    blocks: int | None = None  # 1 KiB blocks
    raid_disks: int | None = None  # [n/m]: n, the disks the array should have
    active_disks: int | None = None  # [n/m]: m, the disks that are in sync
    status_map: str = ""  # "UU_U"
    degraded: bool = False
    sync: SyncProgress | None = None
    bitmap: str = ""  # "0/30 pages [0KB], 65536KB chunk"
    external: str = ""  # "imsm", "/md127/0" for `super external:...`; "" for native
    metadata: str = ""  # what follows `super`: "1.2", "external:imsm"; "" when not printed
    chunk: str = ""  # "64k"
    notes: tuple[str, ...] = ()

    @property
    def failed_members(self) -> tuple[MdMember, ...]:
        return tuple(m for m in self.members if m.role == "failed")

    @property
    def spare_members(self) -> tuple[MdMember, ...]:
        return tuple(m for m in self.members if m.role == "spare")


class Mdstat(NamedTuple):
    personalities: tuple[str, ...] = ()
    arrays: tuple[MdArray, ...] = ()
    notes: tuple[str, ...] = ()
    unused_devices: tuple[str, ...] = ()  # `unused devices: <none>` -> ()


def _member(word: str) -> MdMember | None:
    m = _MEMBER.fullmatch(word)
    slot = to_int(m.group(2)) if m else None
    if m is None or slot is None:
        return None
    flags = tuple(re.findall(r"\(([A-Z])\)", m.group(3)))
    role = next((_FLAG_ROLES[f] for f in _ROLE_ORDER if f in flags), "active")
    return MdMember(m.group(1), slot, role, flags)


class _Builder:
    """One array while its lines are read."""

    def __init__(self, name: str, rest: str):
        self.name = name
        self.notes: list[str] = []
        self.members: list[MdMember] = []
        self.level = ""
        self.blocks = self.raid_disks = self.active_disks = None
        self.status_map = self.bitmap = self.metadata = self.chunk = ""
        self.sync: SyncProgress | None = None
        words = rest.split()
        state = words.pop(0) if words else ""
        if state not in ("active", "inactive"):
            self.notes.append(f"unexpected array state {state!r}")
        while words and words[0].startswith("(") and "[" not in words[0]:
            state += " " + words.pop(0)  # (read-only), (auto-read-only)
        self.state = state
        if words and _LEVEL.fullmatch(words[0]):
            self.level = words.pop(0).lower()
        for word in words:
            member = _member(word)
            if member is None:
                self.notes.append(f"unparsed member {word!r}")
            else:
                self.members.append(member)

    def line(self, text: str) -> None:
        stripped = text.strip()
        if stripped.startswith("bitmap:"):
            self.bitmap = stripped[len("bitmap:") :].strip()
            return
        waiting = _SYNC_WAITING.search(stripped)
        if waiting:
            self.sync = SyncProgress(
                waiting.group("action"),
                delayed=waiting.group(2) == "DELAYED",
                pending=waiting.group(2) == "PENDING",
            )
            return
        sync = _SYNC.search(stripped)
        if sync:
            self.sync = SyncProgress(
                sync.group("action"),
                percent=float(sync.group("pct")),
                done_blocks=to_int(sync.group("done")),
                total_blocks=to_int(sync.group("total")),
                finish_min=float(sync.group("finish")) if sync.group("finish") else None,
                speed_kps=to_int(sync.group("speed")),
            )
            return
        m = _BLOCKS.search(stripped)
        if m:
            self.blocks = to_int(m.group(1))
            sup = re.search(r"\bsuper\s+(\S+)", stripped)
            if sup:
                self.metadata = sup.group(1)
            chunk = _CHUNK.search(stripped)
            if chunk:
                self.chunk = chunk.group(1).lower()
            counts = re.search(r"\[(\d+)/(\d+)\]", stripped)
            if counts:
                self.raid_disks, self.active_disks = (
                    to_int(counts.group(1)),
                    to_int(counts.group(2)),
                )
            status = re.search(r"\[([U_]+)\]", stripped)
            if status:
                self.status_map = status.group(1)
            return
        self.notes.append(f"unparsed line {stripped[:80]!r}")

    def build(self) -> MdArray:
        degraded = "_" in self.status_map or (
            self.raid_disks is not None
            and self.active_disks is not None
            and self.active_disks < self.raid_disks
        )
        external = ""
        if self.metadata.startswith("external:"):
            external = self.metadata[len("external:") :]
        return MdArray(
            name=self.name,
            state=self.state,
            level=self.level,
            members=tuple(self.members),
            blocks=self.blocks,
            raid_disks=self.raid_disks,
            active_disks=self.active_disks,
            status_map=self.status_map,
            degraded=degraded,
            sync=self.sync,
            bitmap=self.bitmap,
            external=external,
            metadata=self.metadata,
            chunk=self.chunk,
            notes=tuple(self.notes),
        )


def parse_mdstat(text: str) -> Mdstat:
    """/proc/mdstat to arrays; never raises. Lines it does not know become notes."""
    personalities: tuple[str, ...] = ()
    unused: tuple[str, ...] = ()
    notes: list[str] = []
    arrays: list[MdArray] = []
    current: _Builder | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Personalities"):
            personalities = tuple(_BRACKETED.findall(line))
            continue
        if line.startswith("unused devices"):
            value = line.partition(":")[2].strip()
            unused = () if value in ("", "<none>") else tuple(value.split())
            continue
        if line.startswith("read_ahead"):  # 2.4 and early 2.6 kernels
            continue
        header = _HEADER.fullmatch(raw)
        if header:
            if current is not None:
                arrays.append(current.build())
            current = _Builder(header.group(1), header.group(2).strip())
            continue
        if current is None:
            notes.append(f"line outside any array: {line[:80]!r}")
            continue
        current.line(line)
    if current is not None:
        arrays.append(current.build())
    return Mdstat(personalities, tuple(arrays), tuple(notes), unused)


# --- mdadm --detail -------------------------------------------------------------------


class MdadmMember(NamedTuple):
    number: int | None  # "Number" column; None for "-"
    raid_device: int | None  # "RaidDevice" column; None for "-" (spares, faulty)
    state: str  # "active sync", "spare", "faulty", "removed", "spare rebuilding"
    device: str  # "/dev/sda1"; "" for a removed slot


@dataclass(frozen=True)
class MdadmDetail:
    device: str = ""  # "/dev/md0"
    level: str = ""  # "raid5"
    state: str = ""  # "clean", "clean, degraded", "active, reshaping", ...
    raid_devices: int | None = None
    total_devices: int | None = None
    active: int | None = None
    working: int | None = None
    failed: int | None = None
    spare: int | None = None
    members: tuple[MdadmMember, ...] = ()
    rebuild_status: str = ""  # "12% complete"
    reshape_status: str = ""
    notes: tuple[str, ...] = ()
    fields: dict[str, str] = field(default_factory=dict)  # every `Key : value` line


# `Key : value` is split at the colon and stripped in Python: a lazy key or value next to
# `\s*` made one long line of spaces cost quadratic time (21 s on 100k).
_KEY = re.compile(r"[A-Z][A-Za-z /-]*")
_TABLE_HEADER = re.compile(r"\s*Number\s+Major\s+Minor\s+RaidDevice\s+State\s*")


def _table_row(line: str) -> MdadmMember | None:
    words = line.split()
    if len(words) < 5 or not all(re.fullmatch(r"-|\d+", w) for w in words[:4]):
        return None
    rest = words[4:]
    device = rest.pop() if rest and rest[-1].startswith("/") else ""
    return MdadmMember(to_int(words[0]), to_int(words[3]), " ".join(rest), device)


def parse_mdadm_detail(text: str) -> MdadmDetail:
    """`mdadm --detail /dev/mdX`; `mdadm --examine` output gives what it shares, noted."""
    device = ""
    fields: dict[str, str] = {}
    members: list[MdadmMember] = []
    notes: list[str] = []
    in_table = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if not device and not fields and re.fullmatch(r"/\S+:", line):
            device = line[:-1]
            continue
        if _TABLE_HEADER.fullmatch(line):
            in_table = True
            continue
        if in_table:
            row = _table_row(line)
            if row is not None:
                members.append(row)
                continue
        key, sep, value = line.partition(":")
        key = key.rstrip()
        if sep and not in_table and _KEY.fullmatch(key) and (not value or value[0].isspace()):
            fields[key] = value.strip()
            continue
        notes.append(f"unparsed line {line[:80]!r}")
    if "Device Role" in fields or "Magic" in fields:
        notes.append(
            "this is `mdadm --examine` output (one member's superblock): no member table; "
            "State and Array State describe that member's view"
        )
    elif not fields and not members:
        notes.append("no `Key : value` lines: not mdadm --detail output")

    def number(key: str) -> int | None:
        value = fields.get(key, "")
        m = re.match(r"\d+", value)
        if value and m is None:
            notes.append(f"{key} is not a number: {value[:40]!r}")
        return to_int(m.group(0)) if m else None

    return MdadmDetail(
        device=device,
        level=fields.get("Raid Level", ""),
        state=fields.get("State", ""),
        raid_devices=number("Raid Devices"),
        total_devices=number("Total Devices"),
        active=number("Active Devices"),
        working=number("Working Devices"),
        failed=number("Failed Devices"),
        spare=number("Spare Devices"),
        members=tuple(members),
        rebuild_status=fields.get("Rebuild Status", ""),
        reshape_status=fields.get("Reshape Status", ""),
        notes=tuple(notes),
        fields=fields,
    )


# --- the member map --------------------------------------------------------------------

# Roles that hold a raid slot: a member without (F), (S) or (J) is in the array; one that is
# not in sync yet is the target of a recovery (the kernel gives a spare its slot before the
# recovery starts, so a recovering member is never printed with (S)).
_IN_SLOT = ("active", "write-mostly", "replacement")


class MemberMap(NamedTuple):
    """What the members of one array say about its redundancy, from every source read.

    `missing` is what decides "degraded": a resync, check or reshape never fills a slot;
    only a recovery onto a member in a slot (`rebuilding`) does.
    """

    missing: int = 0  # slots without an in-sync member
    empty_slots: tuple[int, ...] = ()  # their numbers, where known ([U_U] position, mdadm)
    failed: tuple[str, ...] = ()  # faulty members ("sdb1")
    rebuilding: int = 0  # members in a slot that are not in sync yet
    rebuilding_names: tuple[str, ...] = ()  # which, where mdadm says ("spare rebuilding")
    spares: tuple[str, ...] = ()  # members outside the array, waiting for a slot

    @property
    def degraded(self) -> bool:
        return self.missing > 0

    @property
    def recovery_covers(self) -> bool:
        """Enough members are being rebuilt to fill every missing slot."""
        return self.rebuilding >= self.missing


def _dev(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def member_map(
    array: MdArray, sysfs: dict[str, str] | None = None, detail: MdadmDetail | None = None
) -> MemberMap:
    """The member map of `array` from /proc/mdstat, its sysfs `degraded` count and, when
    mdadm answered, its member table (which names the slots and the devices mdstat
    cannot: a removed slot, the member being rebuilt)."""
    counts: list[int] = []
    if array.raid_disks is not None and array.active_disks is not None:
        counts.append(max(array.raid_disks - array.active_disks, 0))
    elif array.status_map:
        counts.append(array.status_map.count("_"))
    degraded = to_int((sysfs or {}).get("degraded"), minimum=0)
    slots = array.raid_disks or to_int((sysfs or {}).get("raid_disks")) or len(array.members)
    # More missing members than the array has slots is not a count the kernel writes.
    if degraded is not None and degraded <= slots:
        counts.append(degraded)
    empty = [i for i, c in enumerate(array.status_map) if c == "_"]
    failed = [m.name for m in array.failed_members]
    rebuilding_names: list[str] = []
    if detail is not None:
        if detail.raid_devices is not None and detail.active is not None:
            counts.append(max(detail.raid_devices - detail.active, 0))
        for m in detail.members:
            state = m.state.lower()
            if "faulty" in state and m.device and _dev(m.device) not in failed:
                failed.append(_dev(m.device))
            elif "removed" in state and m.raid_device is not None and m.raid_device not in empty:
                empty.append(m.raid_device)
            elif "rebuilding" in state and m.device:
                rebuilding_names.append(_dev(m.device))
    rebuilding = len(rebuilding_names)
    if array.active_disks is not None:
        in_slot = sum(1 for m in array.members if m.role in _IN_SLOT)
        rebuilding = max(rebuilding, in_slot - array.active_disks)
    return MemberMap(
        missing=max(counts, default=0),
        empty_slots=tuple(sorted(empty)),
        failed=tuple(failed),
        rebuilding=rebuilding,
        rebuilding_names=tuple(rebuilding_names),
        spares=tuple(m.name for m in array.spare_members),
    )


# --- the fact -------------------------------------------------------------------------


@dataclass(frozen=True)
class MdRaid:
    mdstat: Mdstat | None  # None: no /proc/mdstat (the md driver is not loaded)
    sysfs: dict[str, dict[str, str]] = field(default_factory=dict)  # md0 -> {attr: value}
    details: dict[str, MdadmDetail] = field(default_factory=dict)  # md0 -> mdadm --detail
    notes: tuple[str, ...] = ()


def mdadm_detail_argv(name: str) -> list[str]:
    return ["mdadm", "--detail", f"/dev/{name}"]


@fact("raid.md")
def md_raid(ctx: FactContext) -> MdRaid:
    answer = ctx.host.read(MDSTAT, max_bytes=1 << 20).require()
    if answer.status == AnswerStatus.MISSING:
        return MdRaid(None, notes=(f"{MDSTAT} does not exist: the md driver is not loaded",))
    if not answer.ok:
        return MdRaid(None, notes=(answer.describe(),))
    mdstat = parse_mdstat(answer.text)
    notes: list[str] = []
    sysfs: dict[str, dict[str, str]] = {}
    details: dict[str, MdadmDetail] = {}
    mdadm_missing = False
    for array in mdstat.arrays:
        values: dict[str, str] = {}
        for attr in SYSFS_ATTRS:
            got = read_text(ctx.host, f"/sys/block/{array.name}/md/{attr}", notes)
            if got is not None:
                values[attr] = got
        sysfs[array.name] = values
        if mdadm_missing:
            continue
        run = ctx.host.run(mdadm_detail_argv(array.name))
        if run.status in (AnswerStatus.NOT_INSTALLED, AnswerStatus.MISSING):
            mdadm_missing = True
            notes.append(
                "mdadm is not installed (or not recorded): no `mdadm --detail`; "
                "install the mdadm package for member states"
            )
            continue
        if not run.ok:
            notes.append(run.describe())
            continue
        if run.value.returncode != 0 and not run.value.stdout.strip():
            err = run.value.stderr.decode("utf-8", "replace").strip().splitlines()
            notes.append(
                f"`{' '.join(mdadm_detail_argv(array.name))}` exited {run.value.returncode}"
                + (f": {err[0][:120]}" if err else "")
            )
            continue
        details[array.name] = parse_mdadm_detail(run.text)
    return MdRaid(mdstat, sysfs, details, tuple(notes))
