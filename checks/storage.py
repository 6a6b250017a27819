"""Storage checks: software RAID, NVMe health, free space, data/checkpoint layout, network
and parallel filesystems, GPUDirect Storage, NVMe firmware."""

from __future__ import annotations

from collections.abc import Iterable

from dldoctor.checks.firmware import Part, judge
from dldoctor.facts import Facts
from dldoctor.facts.gds import CUFILE_JSON, NVFS_STATS, CufileConfig, Gds, gds
from dldoctor.facts.mdraid import MdadmDetail, MdArray, MemberMap, SyncProgress, md_raid, member_map
from dldoctor.facts.storage import (
    Space,
    mounts,
    netfs,
    network_mounts,
    nvme,
    space,
    space_fact,
)
from dldoctor.host.base import AnswerStatus
from dldoctor.model import Outcome, Status, errored, failed, passed, skipped, warned
from dldoctor.policy import Policy
from dldoctor.registry import check
from dldoctor.versions import at_least

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


# cuFile's section of /etc/cufile.json for each filesystem type GDS reads directly.
GDS_FILESYSTEMS = {"lustre": "lustre", "wekafs": "weka", "gpfs": "gpfs", "beegfs": "beegfs",
                   "nfs": "nfs", "nfs4": "nfs"}  # fmt: skip


def gds_mounts(facts: Facts, cufile: CufileConfig) -> list[str]:
    """What keeps GDS off a mounted network filesystem it could read: cufile.json's
    denylist, NFS over TCP (GDS needs NFS over RDMA), Lustre over an LNet TCP network,
    writes left to POSIX by fs.weka / fs.gpfs."""
    denied_fs = cufile.get("denylist", "filesystems", [])
    denied_mounts = cufile.get("denylist", "mounts", [])
    said = []
    for m in network_mounts(facts.get(mounts)):
        section = GDS_FILESYSTEMS.get(m.fstype)
        if section is None:
            continue
        where = f"{m.mount_point} ({m.fstype} from {m.source})"
        if isinstance(denied_fs, list) and (m.fstype in denied_fs or section in denied_fs):
            said.append(f"{where}: cuFile skips it (denylist.filesystems)")
        elif isinstance(denied_mounts, list) and m.mount_point in denied_mounts:
            said.append(f"{where}: cuFile skips it (denylist.mounts)")
        elif section == "nfs" and "proto=rdma" not in f"{m.super_options},{m.options}":
            said.append(f"{where}: over TCP; GDS reads NFS only over RDMA (proto=rdma)")
        elif section == "lustre" and "@tcp" in m.source:
            said.append(f"{where}: LNet over TCP; GDS needs an o2ib network")
        elif section == "weka" and cufile.get("fs.weka", "rdma_write_support") is False:
            said.append(f"{where}: writes go through POSIX (fs.weka.rdma_write_support false)")
        elif section == "gpfs" and cufile.get("fs.gpfs", "gds_write_support") is False:
            said.append(f"{where}: writes go through POSIX (fs.gpfs.gds_write_support false)")
    return said


def gds_lines(found: Gds) -> list[str]:
    module = (
        f"nvidia_fs {found.nvidia_fs_version or '(version not read)'} loaded"
        if found.nvidia_fs
        else "nvidia_fs not loaded"
    )
    stats = f"; {NVFS_STATS} (GDS {found.stats_gds_version or '?'})" if found.stats else ""
    lines = [module + stats]
    if found.cufile is not None and found.cufile.settings is not None:
        compat = found.cufile.get("properties", "allow_compat_mode", True)
        lines.append(f"{CUFILE_JSON}: properties.allow_compat_mode {str(compat).lower()}")
    check_ = found.gdscheck
    if check_ is not None:
        supported = [name for name, ok in check_.drivers.items() if ok]
        lines.append(
            f"gdscheck -p: GDS {check_.release or '?'}, supported: {', '.join(supported) or 'none'}"
            + (f", platform verification {check_.platform}" if check_.platform else "")
        )
    elif found.gdscheck_said:
        lines.append(found.gdscheck_said)
    return lines


@check(
    "storage.gds",
    "GPUDirect Storage",
    remediation="Load nvidia-fs (`modprobe nvidia-fs`; it comes with the nvidia-fs / "
    "nvidia-gds packages, built for the running kernel and driver), keep /etc/cufile.json "
    "valid JSON (NVIDIA's default is a good start), and read `gdscheck -p` for the storage "
    "drivers GDS can use: local NVMe needs nvidia-fs registered with the NVMe driver (MLNX_OFED "
    "or a kernel with PCI P2PDMA).",
)
def gpudirect_storage(facts: Facts, policy: Policy) -> Outcome:
    """Judged only where GDS is set up (nvidia_fs loaded, or /etc/cufile.json there): the
    module and its stats, cuFile's configuration against it and the mounted filesystems,
    and `gdscheck -p` where the tool is installed. No table of nvidia-fs versions per
    driver branch is published; gdscheck's own minimum (GDS 1.16 prints it) is the one
    version judged."""
    found = facts.get(gds)
    if not found.in_use and not found.modules_readable:
        return skipped("the loaded modules are not readable", found.notes)
    if not found.in_use:
        return skipped("GPUDirect Storage is not set up: no nvidia_fs module, no " + CUFILE_JSON)
    lines = gds_lines(found)
    bad, odd = [], []
    cufile = found.cufile or CufileConfig({})
    if found.cufile is not None and found.cufile.settings is None:
        # A warning: what the file holds is judged, and garbage is no proof of a fault.
        odd.append(f"{CUFILE_JSON} is not valid JSON ({found.cufile.error[:80]}): cuFile "
                   "cannot read its settings")  # fmt: skip
    compat = cufile.get("properties", "allow_compat_mode", True)
    if not found.nvidia_fs and compat is False:
        bad.append("nvidia_fs is not loaded and properties.allow_compat_mode is false: "
                   "every cuFile read and write fails")  # fmt: skip
    elif not found.nvidia_fs and found.modules_readable:
        odd.append("nvidia_fs is not loaded: cuFile runs in compatibility mode (POSIX I/O "
                   "through host bounce buffers), no direct path to the GPUs")  # fmt: skip
    elif found.nvidia_fs and not found.stats:
        odd.append(f"nvidia_fs is loaded but {NVFS_STATS} does not answer")
    checked = found.gdscheck
    if checked is not None:
        floor = checked.nvidia_fs_minimum
        if floor and at_least(checked.nvidia_fs, floor) is False:
            release = f"GDS {checked.release}" if checked.release else "cuFile"
            bad.append(f"nvidia_fs {checked.nvidia_fs} is older than the {floor} {release} "
                       "needs (gdscheck -p)")  # fmt: skip
        if checked.platform == "error":
            odd.append("gdscheck -p: platform verification error")
        if found.nvidia_fs and checked.drivers.get("NVMe") is False and facts.get(nvme):
            odd.append("gdscheck -p: NVMe Unsupported: GDS cannot reach the local NVMe drives")
    notes = gds_mounts(facts, cufile) + list(found.notes)
    if not found.modules_readable and not bad:
        # Whether nvidia_fs is loaded is the first thing to know: no verdict without it.
        return errored(
            "the loaded modules could not be read: whether nvidia_fs is loaded is unknown",
            odd + lines[1:] + notes,
        )
    if bad:
        return failed(bad[0] if len(bad) == 1 else f"{len(bad)} GPUDirect Storage faults",
                      bad + odd + lines + notes)  # fmt: skip
    if odd:
        return warned(odd[0] if len(odd) == 1 else f"{len(odd)} GPUDirect Storage problems",
                      odd + lines + notes)  # fmt: skip
    return passed(lines[0], lines[1:] + notes)


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
