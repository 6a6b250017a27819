"""Resource limits: the running process's, what pam_limits configures, what systemd sets.

Locked memory (RLIMIT_MEMLOCK) and open files (RLIMIT_NOFILE) are the two that break GPU
and RDMA jobs: NCCL over InfiniBand registers pinned memory, data loaders open many files.
Units differ by source: /proc/<pid>/limits and systemd speak bytes, limits.conf speaks KiB
for memlock. Throughout, a limit is `int` or `None` for unlimited (RLIM_INFINITY).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.reading import to_int
from dldoctor.host.base import AnswerStatus, ProbeFailed

# --- /proc/self/limits ----------------------------------------------------------------

# The row names of /proc/<pid>/limits (fs/proc/base.c) -> the item names of limits.conf.
PROC_LIMIT_NAMES = {
    "Max cpu time": "cpu",
    "Max file size": "fsize",
    "Max data size": "data",
    "Max stack size": "stack",
    "Max core file size": "core",
    "Max resident set": "rss",
    "Max processes": "nproc",
    "Max open files": "nofile",
    "Max locked memory": "memlock",
    "Max address space": "as",
    "Max file locks": "locks",
    "Max pending signals": "sigpending",
    "Max msgqueue size": "msgqueue",
    "Max nice priority": "nice",
    "Max realtime priority": "rtprio",
    "Max realtime timeout": "rttime",
}

Limit = int | None  # None: unlimited


def _counted(digits: str) -> tuple[bool, Limit]:
    value = to_int(digits)  # None past int()'s digit limit: not understood, not unlimited
    return value is not None, value


def _limit_value(token: str) -> tuple[bool, Limit]:
    if token in ("unlimited", "infinity"):
        return True, None
    if re.fullmatch(r"\d+", token):
        return _counted(token)
    return False, None


def parse_proc_limits(text: str) -> tuple[dict[str, tuple[Limit, Limit]], list[str]]:
    """/proc/<pid>/limits: `Max locked memory  8388608  8388608  bytes` rows.

    Returns item name (`memlock`, `nofile`, ... as limits.conf names them; an unknown row
    keeps its own name) -> (soft, hard), and notes on rows it did not understand.
    """
    limits: dict[str, tuple[Limit, Limit]] = {}
    notes: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if not words or (words[0] == "Limit" and "Soft" in words):
            continue  # blank, or the header row
        # The name is the words before the first value; values are numbers or "unlimited".
        at = next((i for i, w in enumerate(words) if _limit_value(w)[0]), None)
        if at is None or at == 0 or at + 1 >= len(words):
            notes.append(f"unparsed limits row: {line.strip()[:60]!r}")
            continue
        ok_soft, soft = _limit_value(words[at])
        ok_hard, hard = _limit_value(words[at + 1])
        if not (ok_soft and ok_hard):
            notes.append(f"unparsed limits row: {line.strip()[:60]!r}")
            continue
        name = " ".join(words[:at])
        limits[PROC_LIMIT_NAMES.get(name, name)] = (soft, hard)
    return limits, notes


class ProcessLimits(NamedTuple):
    limits: dict[str, tuple[Limit, Limit]]  # item -> (soft, hard), bytes for memlock
    notes: tuple[str, ...] = ()

    @property
    def memlock(self) -> tuple[Limit, Limit] | None:
        """(soft, hard) in bytes; None when unknown."""
        return self.limits.get("memlock")

    @property
    def nofile(self) -> tuple[Limit, Limit] | None:
        return self.limits.get("nofile")


@fact("limits.process")
def process_limits(ctx: FactContext) -> ProcessLimits:
    """The limits dldoctor itself runs under (inherited from the shell or the service)."""
    answer = ctx.host.read("/proc/self/limits", max_bytes=65536).require()
    if not answer.ok:
        return ProcessLimits({}, (answer.describe(),))
    limits, notes = parse_proc_limits(answer.text)
    for item in ("memlock", "nofile"):
        if item not in limits:
            notes.append(f"/proc/self/limits has no {item} row")
    return ProcessLimits(limits, tuple(notes))


# --- /etc/security/limits.conf --------------------------------------------------------

LIMITS_CONF = "/etc/security/limits.conf"
LIMITS_D = "/etc/security/limits.d"

# limits.conf(5) items.
CONF_ITEMS = frozenset(
    "core data fsize memlock nofile rss stack cpu nproc as maxlogins maxsyslogins "
    "nonewprivs priority locks sigpending msgqueue nice rtprio chroot".split()
)
CONF_TYPES = ("soft", "hard", "-")
KIB_ITEMS = frozenset(("memlock", "rss", "data", "stack", "core", "fsize", "as"))


class LimitsEntry(NamedTuple):
    domain: str  # "*", "user", "@group", "%group", "1000:", ...
    type: str  # "soft", "hard" or "-" (both)
    item: str  # "memlock", "nofile", ...
    value: Limit  # as written (KiB for memlock); None for unlimited/infinity/-1
    raw: str  # the value as written
    file: str
    line: int

    @property
    def value_bytes(self) -> Limit:
        """The value in bytes for the items limits.conf counts in KiB; None: unlimited."""
        if self.value is None or self.item not in KIB_ITEMS:
            return self.value
        return self.value * 1024


def parse_limits_conf(text: str, file: str = "") -> tuple[list[LimitsEntry], list[str]]:
    """limits.conf(5): `<domain> <type> <item> <value>` lines, `#` comments."""
    entries: list[LimitsEntry] = []
    notes: list[str] = []
    where = f"{file}:" if file else "line "
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 4:
            notes.append(f"{where}{number}: not `domain type item value`: {line.strip()[:60]!r}")
            continue
        domain, kind, item, raw = fields
        if kind not in CONF_TYPES:
            notes.append(f"{where}{number}: unknown type {kind!r}")
            continue
        if item not in CONF_ITEMS:
            notes.append(f"{where}{number}: unknown item {item!r}")
            continue
        value: Limit
        if raw.lower() in ("unlimited", "infinity"):
            value = None
        elif re.fullmatch(r"-?\d+", raw):
            value = to_int(raw)
            if value is None:
                notes.append(f"{where}{number}: value {raw[:30]!r} is not a number")
                continue
            # pam_limits reads -1 as unlimited except for the two items that may be negative.
            if value == -1 and item not in ("priority", "nice"):
                value = None
            elif value < 0 and item not in ("priority", "nice"):
                notes.append(f"{where}{number}: negative {item} value {raw!r}")
                continue
        else:
            notes.append(f"{where}{number}: value {raw[:30]!r} is not a number")
            continue
        entries.append(LimitsEntry(domain, kind, item, value, raw, file, number))
    return entries, notes


class ConfiguredLimits(NamedTuple):
    entries: tuple[LimitsEntry, ...]  # memlock and nofile entries, in the order pam reads
    files: tuple[str, ...]  # the files read, limits.conf first, then limits.d/*.conf
    notes: tuple[str, ...] = ()


@fact("limits.configured")
def configured_limits(ctx: FactContext) -> ConfiguredLimits:
    """pam_limits(8) reads limits.conf, then limits.d/*.conf in C-locale order."""
    host = ctx.host
    paths = [LIMITS_CONF]
    notes: list[str] = []
    listing = host.listdir(LIMITS_D).require()
    if listing.ok:
        paths += [f"{LIMITS_D}/{n}" for n in sorted(listing.value or ()) if n.endswith(".conf")]
    elif listing.status != AnswerStatus.MISSING:
        notes.append(listing.describe())
    entries: list[LimitsEntry] = []
    files: list[str] = []
    for path in paths:
        answer = host.read(path, max_bytes=1 << 20).require()
        if not answer.ok:
            if answer.status != AnswerStatus.MISSING:
                notes.append(answer.describe())
            continue
        files.append(path)
        found, file_notes = parse_limits_conf(answer.text, path)
        entries += [e for e in found if e.item in ("memlock", "nofile")]
        notes += file_notes
    return ConfiguredLimits(tuple(entries), tuple(files), tuple(notes))


# --- systemd --------------------------------------------------------------------------

SYSTEMD_DEFAULTS_ARGV = (
    "systemctl",
    "show",
    "--property=DefaultLimitMEMLOCK",
    "--property=DefaultLimitNOFILE",
)
LAUNCHER_UNITS = ("slurmd.service", "docker.service", "containerd.service", "kubelet.service")
SYSTEMD_UNITS_ARGV = (
    "systemctl",
    "show",
    *LAUNCHER_UNITS,
    "--property=Id,LoadState,LimitMEMLOCK,LimitNOFILE",
)
# systemd's LimitX properties are the hard limit (LimitXSoft, not asked, the soft one).
_SYSTEMD_ITEMS = {"MEMLOCK": "memlock", "NOFILE": "nofile"}


def parse_systemctl_show(text: str) -> tuple[list[dict[str, str]], list[str]]:
    """`systemctl show` output: `Key=value` lines, one block per unit, blank lines between."""
    blocks: list[dict[str, str]] = []
    notes: list[str] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key):
            notes.append(f"unparsed systemctl line: {line.strip()[:60]!r}")
            continue
        current[key] = value.strip()
    if current:
        blocks.append(current)
    return blocks, notes


def systemd_limit(raw: str) -> tuple[bool, Limit]:
    """`8388608`, `infinity` (or RLIM_INFINITY printed as a number) -> (understood, value)."""
    if raw == "infinity" or raw == str(2**64 - 1):
        return True, None
    if re.fullmatch(r"\d+", raw):
        return _counted(raw)
    return False, None


def _limits_of(block: dict[str, str], prefix: str, notes: list[str]) -> dict[str, Limit]:
    limits: dict[str, Limit] = {}
    for suffix, item in _SYSTEMD_ITEMS.items():
        key = prefix + suffix
        if key not in block:
            continue
        understood, value = systemd_limit(block[key])
        if understood:
            limits[item] = value
        else:
            notes.append(f"{key}={block[key][:30]!r} is not a limit")
    return limits


class UnitLimits(NamedTuple):
    unit: str  # "docker.service"
    limits: dict[str, Limit]  # "memlock"/"nofile" -> hard limit (bytes for memlock)


class SystemdLimits(NamedTuple):
    available: bool  # False: no systemctl, or systemd is not PID 1 (containers)
    defaults: dict[str, Limit]  # DefaultLimitMEMLOCK/NOFILE as "memlock"/"nofile"
    units: tuple[UnitLimits, ...]  # the launcher services that exist
    notes: tuple[str, ...] = ()


def job_launchers(systemd: SystemdLimits) -> tuple[UnitLimits, ...]:
    """The units whose limits jobs inherit: slurmd, and containerd (containers are its
    children, not dockerd's), or docker when it runs its own containerd. kubelet starts no
    job processes."""
    present = {u.unit for u in systemd.units}
    return tuple(
        u
        for u in systemd.units
        if u.unit in ("slurmd.service", "containerd.service")
        or (u.unit == "docker.service" and "containerd.service" not in present)
    )


def _systemctl(ctx: FactContext, argv: tuple[str, ...], notes: list[str]) -> str | None:
    answer = ctx.host.run(list(argv)).require()
    if answer.status == AnswerStatus.PERMISSION_DENIED:
        # Refused is not "no systemd here": limits.memlock must not pass on units unasked.
        raise ProbeFailed(answer)
    if not answer.ok:
        notes.append(answer.describe())
        return None
    if answer.value.returncode != 0:
        said = answer.value.stderr.decode("utf-8", "replace").strip().splitlines()
        notes.append(
            f"`systemctl show` exited with {answer.value.returncode}"
            + (f": {said[0][:100]}" if said else "")
        )
        return None
    return answer.text


@fact("limits.systemd")
def systemd_limits(ctx: FactContext) -> SystemdLimits:
    notes: list[str] = []
    text = _systemctl(ctx, SYSTEMD_DEFAULTS_ARGV, notes)
    if text is None:
        return SystemdLimits(False, {}, (), tuple(notes))
    blocks, parse_notes = parse_systemctl_show(text)
    notes += parse_notes
    merged = {k: v for b in blocks for k, v in b.items()}
    defaults = _limits_of(merged, "DefaultLimit", notes)
    for item in ("memlock", "nofile"):
        if item not in defaults and f"DefaultLimit{item.upper()}" not in merged:
            notes.append(f"systemctl show gave no DefaultLimit{item.upper()}")

    units: list[UnitLimits] = []
    text = _systemctl(ctx, SYSTEMD_UNITS_ARGV, notes)
    if text is not None:
        blocks, parse_notes = parse_systemctl_show(text)
        notes += parse_notes
        for block in blocks:
            unit = block.get("Id", "")
            if not unit:
                notes.append("a systemctl show block has no Id")
                continue
            if block.get("LoadState") == "not-found":
                continue  # systemctl answers for any name; this unit does not exist
            units.append(UnitLimits(unit, _limits_of(block, "Limit", notes)))
    return SystemdLimits(True, defaults, tuple(units), tuple(notes))
