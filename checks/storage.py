"""Storage checks: software RAID, NVMe health, free space, data/checkpoint layout, network
and parallel filesystems, NVMe firmware."""

from __future__ import annotations

from collections.abc import Iterable

from dldoctor.checks.firmware import Part, judge
from dldoctor.facts import Facts
from dldoctor.facts.mdraid import MdadmDetail, MdArray, MemberMap, SyncProgress, md_raid, member_map
from dldoctor.facts.storage import Space, mounts, netfs, nvme, space, space_fact
from dldoctor.host.base import AnswerStatus
from dldoctor.model import Outcome, Status, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check

GIB = 1024**3
READ_ONLY_FS = ("squashfs", "erofs", "iso9660", "cramfs", "udf")


def where_mounted(facts: Facts, name: str) -> str:
    points = [m.mount_point for m in facts.get(mounts) if m.source == f"/dev/{name}"]
    return f" (mounted on {', '.join(points)})" if points else ""


def describe(a: MdArray) -> str:
    shape = f" [{a.raid_disks}/{a.active_disks}] [{a.status_map}]" if a.status_map else ""
    return f"{a.name}: {a.state} {a.level}{shape}".rstrip()


def progress(sync: SyncProgress) -> str:
    """ "recovery 12.6%, about 128 min left"; "resync waiting (DELAYED)" """
    if sync.percent is None:
        why = "DELAYED" if sync.delayed else "PENDING" if sync.pending else "not started"
        return f"{sync.action} waiting ({why})"
    left = ""
    if sync.finish_min is not None:
        minutes = sync.finish_min
        left = (
            ", under a minute left"
            if minutes < 1
            else f", about {minutes / 60:.0f} h left"
            if minutes >= 180
            else f", about {minutes:.0f} min left"
        )
    return f"{sync.action} {sync.percent:.1f}%{left}"


def empty_slots(a: MdArray, mm: MemberMap) -> tuple[dict[str, int], list[int], list[str]]:
    """(slot of each failed member, the slots no failed member held, the failed members
    whose slot is not known). A failed member whose number in mdstat is an empty slot
    held that slot: it is not a second hole."""
    held: dict[str, int] = {}
    for m in a.failed_members:
        if m.index in mm.empty_slots and m.index not in held.values():
            held[m.name] = m.index
    free = [i for i in mm.empty_slots if i not in held.values()]
    unplaced = [name for name in mm.failed if name not in held]
    if len(unplaced) >= len(free):
        free = []  # every empty slot is a failed member's
    return held, free, unplaced


def what_is_missing(a: MdArray, mm: MemberMap) -> str:
    """ "failed: sdc1 in slot 1"; "failed: sde1; empty slots 0, 5 (one of them sde1's)" """
    held, free, unplaced = empty_slots(a, mm)
    parts = []
    if mm.failed:
        named = [f"{n} in slot {held[n]}" if n in held else n for n in mm.failed]
        parts.append(f"failed: {', '.join(named)}")
    if free:
        whose = f" (one of them {', '.join(unplaced)}'s)" if unplaced else ""
        plural = "s" if len(free) > 1 else ""
        parts.append(f"empty slot{plural} {', '.join(str(i) for i in free)}{whose}")
    return "; ".join(parts) or f"{mm.missing} member(s) missing"


def replace_advice(a: MdArray, mm: MemberMap) -> str:
    dev = f"/dev/{a.name}"
    steps = []
    if mm.failed:
        bad = " ".join(f"/dev/{name}" for name in mm.failed)
        steps.append(
            f"replace failed member {', '.join(mm.failed)} (`mdadm {dev} --remove {bad}`, "
            "swap the disk)"
        )
    if mm.missing > len(mm.failed) and not mm.spares:
        slots = ", ".join(str(i) for i in empty_slots(a, mm)[1])
        steps.append(f"put a new disk in the empty slot(s){f' ({slots})' if slots else ''}")
    if mm.spares and a.sync is not None and a.sync.action == "reshape":
        steps.append(f"spare {', '.join(mm.spares)} is rebuilt onto once the reshape ends")
    elif mm.spares:
        steps.append(
            f"spare {', '.join(mm.spares)} is not being used: remove it and `mdadm {dev} "
            "--add` it again to start the recovery"
        )
    else:
        steps.append(f"`mdadm {dev} --add /dev/<new disk>` starts the recovery onto it")
    return f"{a.name}: " + "; ".join(steps)


def assemble_advice(a: MdArray, detail: MdadmDetail | None) -> str:
    """mdstat prints no level for an inactive array; mdadm --detail may know it."""
    level = a.level or (detail.level if detail is not None else "")
    if level in ("raid0", "linear"):
        return (
            f"{a.name}: `mdadm --assemble --scan`; {level} has no redundancy: if it does "
            "not assemble, restore its data"
        )
    if level:
        return f"{a.name}: `mdadm --assemble --scan` ({level})"
    return f"{a.name}: `mdadm --assemble --scan` (`mdadm --examine` of its members tells its level)"


def pinned_arrays(arrays: Iterable[MdArray], policy: Policy) -> list[str]:
    """The arrays of [storage] expected_raid that are missing or of another level."""
    by_name = {a.name: a for a in arrays}
    wrong = []
    for pin in policy.storage.expected_raid:
        name = pin.name.removeprefix("/dev/")
        a = by_name.get(name)
        if a is None:
            wrong.append(f"{name}: not in /proc/mdstat, the policy expects it")
        elif pin.level and a.level and a.level.lower() != pin.level.lower():
            wrong.append(f"{name}: {a.level}, the policy expects {pin.level}")
    return wrong


PINNED_RAID_REMEDIATION = (
    "An array the fleet's hosts have ([storage] expected_raid) is missing or of another "
    "level: assemble it (`mdadm --assemble --scan`, then check /etc/mdadm/mdadm.conf), or "
    "correct the policy."
)


@check(
    "storage.raid",
    "Software RAID",
    remediation="Replace the failed disk and add it back (`mdadm --manage /dev/mdX --add "
    "/dev/<new>`); an inactive array needs `mdadm --assemble` or, for RAID 0, restoring its "
    "data: RAID 0 has no redundancy.",
)
def raid(facts: Facts, policy: Policy) -> Outcome:
    """Judged by the member map: a degraded array stays degraded while it resyncs, checks or
    reshapes; only a recovery onto a member in a slot repairs it."""
    md = facts.get(md_raid)
    pinned = pinned_arrays(md.mdstat.arrays if md.mdstat else (), policy)
    if (md.mdstat is None or not md.mdstat.arrays) and pinned:
        return failed(
            f"no software RAID arrays; the policy expects {len(pinned)}",
            pinned + list(md.notes),
            remediation=PINNED_RAID_REMEDIATION,
        )
    if md.mdstat is None or not md.mdstat.arrays:
        return skipped("no software RAID arrays", md.notes)
    broken, recovering, lines, advice, busy, eta, names = [], [], [], [], [], [], []
    for a in md.mdstat.arrays:
        if a.metadata in ("external:imsm", "external:ddf"):
            # A firmware-RAID container (Intel VROC/RST, DDF) is always "inactive": the
            # volumes inside it (external:/mdN/...) are what holds data, and are judged.
            lines.append(f"{a.name}: {a.metadata.split(':')[1].upper()} container")
            continue
        sysfs = md.sysfs.get(a.name, {})
        detail = md.details.get(a.name)
        mm = member_map(a, sysfs, detail)
        line = describe(a) + where_mounted(facts, a.name)
        if mm.failed and not mm.degraded:  # a degraded array says it below
            line += f"; failed: {', '.join(mm.failed)}"
        if detail is not None and detail.state:
            line += f"; mdadm: {detail.state}"
        elif sysfs.get("array_state"):
            line += f"; array_state {sysfs['array_state']}"
        sync = a.sync
        if sync is None and sysfs.get("sync_action") == "recover":
            sync = SyncProgress("recovery")
        if a.state.startswith("inactive"):
            broken.append(f"{line} — its data is not available")
            advice.append(assemble_advice(a, detail))
            names.append(a.name)
        elif not mm.degraded:
            if sync is not None:
                line += f", {progress(sync)}"
                busy.append(a.name)
            lines.append(line)
        elif sync is not None and sync.action == "recovery" and mm.rebuilding:
            onto = f" onto {', '.join(mm.rebuilding_names)}" if mm.rebuilding_names else ""
            text = f"{line} — {progress(sync)}{onto}"
            if mm.recovery_covers:
                recovering.append(text)
                eta.append(f"{a.name} {progress(sync)}")
            else:
                left = mm.missing - mm.rebuilding
                broken.append(f"{text}; {left} slot(s) stay empty after it")
                advice.append(replace_advice(a, mm))
                names.append(a.name)
        else:
            doing = f"; {progress(sync)}: a {sync.action} does not repair it" if sync else ""
            if sync is not None and sync.action == "recovery":
                doing = f"; {progress(sync)}, but no member in a slot is being rebuilt"
            broken.append(f"{line} — degraded ({what_is_missing(a, mm)}){doing}")
            advice.append(replace_advice(a, mm))
            names.append(a.name)
    # What could not be read (mdadm timed out, a sysfs attribute unreadable) stays visible.
    notes = [*md.notes, *md.mdstat.notes]
    if broken:
        return failed(
            f"{len(broken)} array(s) degraded or inactive: {', '.join(names)}",
            broken + pinned + recovering + lines + notes,
            remediation=". ".join(advice) + ".",
        )
    if pinned:
        return failed(
            f"{len(pinned)} array(s) not as the policy expects",
            pinned + recovering + lines + notes,
            remediation=PINNED_RAID_REMEDIATION,
        )
    if recovering:
        return warned(
            f"{len(recovering)} degraded array(s) recovering: {'; '.join(eta)}",
            recovering + lines + notes,
            remediation="Wait for the recovery; do not reboot meanwhile, and keep heavy I/O "
            "off the array: it has no redundancy until the recovery ends.",
        )
    running = f"; {', '.join(busy)} busy (resync/check/reshape)" if busy else ""
    expected = policy.storage.expected_raid
    running += f"; {len(expected)} expected array(s) in place" if expected else ""
    return passed(f"{len(lines)} array(s) clean{running}", lines + notes)


@check(
    "storage.nvme",
    "NVMe drives",
    remediation="A critical warning, media errors or spare below threshold: back up and replace "
    "the drive; a controller that is not `live` has dropped off (check power, slot, firmware).",
)
def nvme_health(facts: Facts, policy: Policy) -> Outcome:
    drives = facts.get(nvme)
    if not drives:
        return skipped("no NVMe drives")
    bad, worn, lines, unknown, unread = [], [], [], [], []
    for d in drives:
        lines.append(f"{d.name}: {d.model} firmware {d.firmware}, {d.state}")
        if d.state and d.state != "live":
            bad.append(f"{d.name}: controller state {d.state}")
        s = d.smart
        if d.smart_error:
            unread.append(f"{d.name}: {d.smart_error}")
        if s is None:
            unknown.extend(d.notes[:1])
            continue
        if s.critical_warning or s.passed is False:
            bad.append(f"{d.name}: critical warning {s.critical_warning} ({s.source})")
        if (
            s.available_spare is not None
            and s.spare_threshold is not None
            and s.available_spare < s.spare_threshold
        ):
            bad.append(f"{d.name}: spare {s.available_spare}% below {s.spare_threshold}%")
        if s.media_errors:
            worn.append(f"{d.name}: {s.media_errors} media errors")
        if s.percent_used is not None and s.percent_used >= 90:
            worn.append(f"{d.name}: {s.percent_used}% of rated endurance used")
    if bad:
        return failed(f"{len(bad)} NVMe problem(s)", bad + worn + unread + lines)
    if unread:
        # A SMART read that timed out or broke says nothing of the drive's health.
        return Outcome(
            Status.ERROR,
            f"SMART of {len(unread)} NVMe drive(s) could not be read: {unread[0]}",
            tuple(unread + worn + lines),
        )
    if worn:
        return warned(f"{len(worn)} NVMe drive(s) wearing out", worn + lines)
    note = [f"SMART not read: {unknown[0]}"] if unknown else []
    return passed(
        f"{len(drives)} NVMe drive(s) healthy"
        if not unknown
        else f"{len(drives)} NVMe drive(s) live; SMART unavailable",
        lines + note,
    )


def space_lines(
    spaces: tuple[Space, ...], policy: Policy
) -> tuple[list[str], list[str], list[str], list[str]]:
    """(full, low, unknown, all lines) for the given paths."""
    full, low, unknown, lines = [], [], [], []
    st = policy.storage
    for s in spaces:
        if s.fstype in READ_ONLY_FS:
            lines.append(
                f"{s.path} ({s.mount_point}, {s.fstype}): read-only image, no free space by design"
            )
            continue
        if s.answer_status != AnswerStatus.OK or not s.size_bytes:
            if s.answer_status in (AnswerStatus.TIMEOUT, AnswerStatus.ERROR):
                unknown.append(f"{s.path}: {', '.join(s.notes) or s.answer_status}")
            continue
        pct = 100 * (s.free_bytes or 0) / s.size_bytes
        ipct = 100 * s.free_inodes / s.inodes if s.inodes and s.free_inodes is not None else 100
        shown = f"{pct:.1f}%" if pct < 10 else f"{pct:.0f}%"
        line = (
            f"{s.path} ({s.mount_point}, {s.fstype}): {(s.free_bytes or 0) / GIB:.1f} of "
            f"{s.size_bytes / GIB:.1f} GiB free ({shown})"
        )
        if s.inodes:
            line += f", inodes {ipct:.0f}% free"
        lines.append(line)
        if min(pct, ipct) < st.fail_free_percent:
            full.append(line)
        elif min(pct, ipct) < st.warn_free_percent:
            low.append(line)
    return full, low, unknown, lines


def absent(spaces: tuple[Space, ...], policy: Policy) -> list[str]:
    """The policy's data and checkpoint paths that do not exist, each with its key: a node
    without its dataset or checkpoint mount fails the jobs sent to it."""
    st = policy.storage
    keys = {**{p: "checkpoint_paths" for p in st.checkpoint_paths},
            **{p: "data_paths" for p in st.data_paths}}  # fmt: skip
    named = [f"{s.path} ([storage] {keys[s.path]})" for s in spaces
             if s.path in keys and s.answer_status == AnswerStatus.MISSING]  # fmt: skip
    return list(dict.fromkeys(named))


MISSING_PATH_REMEDIATION = (
    "Mount or create the path (a dataset or checkpoint mount that did not come up?), or "
    "correct [storage] data_paths / checkpoint_paths in the policy."
)


def pinned_mounts(facts: Facts, policy: Policy) -> tuple[list[str], list[str]]:
    """Against [storage] expected_mounts: (those not mounted or of another type, what
    could not be judged)."""
    pins = policy.storage.expected_mounts
    table = facts.get(mounts) if pins else ()
    if pins and not table:
        return [], [f"the mount table could not be read: {len(pins)} expected mount(s) not judged"]
    wrong = []
    for pin in pins:
        point = pin.mount_point.rstrip("/") or "/"
        found = [m for m in table if m.mount_point == point]
        m = found[-1] if found else None  # the last mount on a point hides the others
        if m is None:
            wrong.append(f"{point} is not mounted ([storage] expected_mounts)")
        elif pin.fstype and m.fstype != pin.fstype:
            wrong.append(f"{point} is {m.fstype} from {m.source}, the policy expects {pin.fstype}")
    return wrong, []


MISSING_MOUNT_REMEDIATION = (
    "Mount it (`mount -a`; check /etc/fstab, the device or the server behind it), or "
    "correct [storage] expected_mounts in the policy."
)


@check(
    "storage.space",
    "Free space",
    remediation="Free space (old checkpoints, Docker images: `docker system prune`, /tmp), or "
    "grow the volume: a full checkpoint disk loses the next save, a full / stops services.",
)
def free_space(facts: Facts, policy: Policy) -> Outcome:
    paths = (*policy.storage.data_paths, *policy.storage.checkpoint_paths)
    configured = facts.get(space_fact(paths)) if paths else ()
    full, low, unknown, lines = space_lines(facts.get(space) + configured, policy)
    missing = [f"{path} does not exist" for path in absent(configured, policy)]
    unmounted, unread = pinned_mounts(facts, policy)
    if unknown or unread:
        return Outcome(
            Status.ERROR,
            f"no answer for {len(unknown)} path(s)" if unknown else unread[0],
            tuple(unknown + unread + missing + unmounted + full + low + lines),
        )
    if full:
        return failed(
            f"{len(full)} filesystem(s) below {policy.storage.fail_free_percent:g}% free",
            full + missing + unmounted + low,
        )
    if missing or unmounted:
        problems = missing + unmounted
        many = (
            f"{len(problems)} policy paths and mounts are missing"
            if unmounted
            else f"{len(missing)} policy paths do not exist"
        )
        return failed(
            problems[0] if len(problems) == 1 else many,
            problems + low,
            remediation=MISSING_MOUNT_REMEDIATION if unmounted else MISSING_PATH_REMEDIATION,
        )
    if low:
        return warned(
            f"{len(low)} filesystem(s) below {policy.storage.warn_free_percent:g}% free", low
        )
    if not lines:
        return skipped("no filesystem answered")
    pins = policy.storage.expected_mounts
    mounted = f"; {len(pins)} expected mount(s) in place" if pins else ""
    return passed(f"{len(lines)} path(s) with enough free space{mounted}", lines)


@check("storage.layout", "Datasets and checkpoints")
def layout(facts: Facts, policy: Policy) -> Outcome:
    st = policy.storage
    if not st.data_paths or not st.checkpoint_paths:
        return skipped("the policy names no data and checkpoint paths ([storage])")
    data = facts.get(space_fact(st.data_paths))
    ckpt = facts.get(space_fact(st.checkpoint_paths))
    missing = absent(data + ckpt, policy)
    if missing:
        # mount_of() would place a path that does not exist on `/`: no layout to judge.
        return warned(
            f"cannot judge the layout: {', '.join(missing)} does not exist"
            if len(missing) == 1
            else f"cannot judge the layout: {len(missing)} policy paths do not exist",
            [f"{m} does not exist" for m in missing],
            remediation=MISSING_PATH_REMEDIATION,
        )
    shared = sorted({d.device for d in data if d.device} & {c.device for c in ckpt if c.device})
    lines = [f"{s.path}: device {s.device or '?'} ({s.mount_point})" for s in (*data, *ckpt)]
    if shared:
        return passed(
            "datasets and checkpoints share one device: saving a checkpoint "
            "competes with data loading (the guide advises a separate disk)",
            lines,
        )
    return passed("datasets and checkpoints on separate devices", lines)


@check(
    "storage.netfs",
    "Network filesystems",
    remediation="A network or parallel filesystem that does not answer hangs every job that "
    "touches it: check the server and network, then `umount -l` and remount.",
)
def network_filesystems(facts: Facts, policy: Policy) -> Outcome:
    found = facts.get(netfs)
    if not found:
        return skipped("no network or parallel filesystems mounted")
    # Permission denied (a user's FUSE mount, Kerberos NFS without a ticket) is an answer.
    hung = [
        f"{f.mount_point} ({f.fstype} from {f.source}): {f.status}"
        for f in found
        if f.status in (AnswerStatus.TIMEOUT, AnswerStatus.ERROR)
    ]
    lines = [
        f"{f.mount_point} ({f.fstype} from {f.source})"
        + (
            f": {(f.free_bytes or 0) / GIB:.0f} of {f.size_bytes / GIB:.0f} GiB free"
            if f.size_bytes
            else ""
        )
        for f in found
        if f.status == AnswerStatus.OK
    ]
    if hung:
        # The doctor could not look (the mount hangs): an error naming it, not a verdict.
        return Outcome(
            Status.ERROR, f"{len(hung)} mount(s) did not answer: {hung[0]}", tuple(hung + lines)
        )
    return passed(f"{len(found)} mount(s) answer", lines)


@check(
    "storage.firmware",
    "NVMe firmware",
    remediation="Update the drive's firmware to the version named (the vendor's tool, or "
    "`nvme fw-download` then `nvme fw-commit`; a reset or reboot activates it).",
)
def firmware(facts: Facts, policy: Policy) -> Outcome:
    """NVMe drives against [firmware] minimums, and drives of one model on other versions.
    (RDMA NICs, judged here before, are `network.firmware`'s.)"""
    parts = [Part(d.name, d.model, d.firmware) for d in facts.get(nvme)]
    return judge(parts, policy, what="NVMe drive(s)", none="no NVMe drive")
