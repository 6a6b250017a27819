"""Reading helpers shared by the facts: the one rule for a Host answer, the one integer
parser, and links followed through the Host (so a bundle replays them).

The rule (`read_text`, `read_listing`, `answer_text`), for the many attributes a fact
reads of many items (devices, ports, sensors, arrays):

- ok: the text, stripped (sysfs ends every attribute with a newline), or the names;
- missing: None and no note: absence has a meaning (no such device, no such attribute);
- permission denied, error (EIO from a dead device, EINVAL from a disconnected one, a
  folder where a file should be): None and a note naming the path and the answer, so
  one device's unreadable attribute never hides the rest;
- timeout: raises ProbeFailed: the doctor could not look, and every check that needs the
  fact ends as `error`, never a verdict.

`notes=None` keeps a failure out of the notes where the caller records it itself (a
sensor's `why_unreliable`) or where the kernel answers an error in normal operation (an
InfiniBand GID has no net device: ENODEV); a timeout raises all the same.

The one read a whole fact rests on (/proc/mdstat, the /sys/class/nvme listing) uses
`Answer.require()` instead: an error there leaves nothing to report on, so it fails the
fact too. Parsers stay pure functions of text; `to_int` is the integer one they share.
"""

from __future__ import annotations

import json
import posixpath
from typing import TYPE_CHECKING, Any, NamedTuple

from dldoctor.host.base import Answer, AnswerStatus, Host, Op, ProbeFailed, op_label

if TYPE_CHECKING:
    from dldoctor.facts import FactContext

LINK_HOPS = 8
SMALL = 4096  # bytes read of one sysfs attribute
# Hosts write numbers of at most 64 bits: wider is not a reading (and a check dividing it
# would overflow a float). 80 characters hold any of them in any base, sign and prefix.
INT_BITS = 64
MAX_INT_CHARS = 80


class FileRead(NamedTuple):
    """A file read once for every fact that parses it (/proc/cmdline, /proc/cpuinfo). A read
    that timed out, failed or was not captured raises instead (`read_once`): it is never an
    empty file."""

    text: str  # "" when not ok
    status: AnswerStatus = AnswerStatus.OK  # ok, missing or permission_denied
    why: str = ""  # what the read said when it is not ok

    @property
    def ok(self) -> bool:
        return self.status == AnswerStatus.OK


def read_once(ctx: FactContext, path: str, *, max_bytes: int) -> FileRead:
    """`path` as a FileRead; ProbeFailed (NotCaptured) when the read failed."""
    answer = ctx.host.read(path, max_bytes=max_bytes).require()
    return FileRead(answer.text, answer.status, "" if answer.ok else answer.describe())


def answer_text(answer: Answer, notes: list[str] | None) -> str | None:
    """The rule applied to one read answer: its stripped text, or None."""
    if not _checked(answer, notes):
        return None
    return answer.text.strip()


def read_text(
    host: Host, path: str, notes: list[str] | None, *, max_bytes: int = SMALL
) -> str | None:
    """The stripped text of `path`; None when missing, unreadable (noted) or broken
    (noted); a timeout raises ProbeFailed. See the module's rule."""
    return answer_text(host.read(path, max_bytes=max_bytes), notes)


def read_listing(host: Host, path: str, notes: list[str] | None) -> tuple[str, ...] | None:
    """The names in folder `path`, under the same rule as `read_text`."""
    answer = host.listdir(path)
    return tuple(answer.value) if _checked(answer, notes) else None


def _checked(answer: Answer, notes: list[str] | None) -> bool:
    if answer.status == AnswerStatus.TIMEOUT:
        raise ProbeFailed(answer)
    if notes is not None:
        note_unless_missing(notes, answer)
    return answer.ok


def note_unless_missing(notes: list[str], answer: Answer) -> None:
    """An answer that is neither ok nor missing becomes a note of the item it concerns."""
    if answer.status != AnswerStatus.MISSING and not answer.ok:
        notes.append(describe_in_full(answer))


def describe_in_full(answer: Answer) -> str:
    """`answer.describe()` with the whole path: a long sysfs path shortened to its first
    57 characters ("read /sys/class/infiniband/mlx5_0/ports/1/coun...") loses the
    attribute the note is about."""
    if answer.op == Op.RUN:  # a command line reads well shortened
        return answer.describe()
    short = op_label(answer.op, answer.key)
    return f"{answer.op} {answer.key}{answer.describe()[len(short) :]}"


def to_int(text: str | None, *, base: int = 10, minimum: int | None = None) -> int | None:
    """The integer `text` spells, else None; never raises.

    Whitespace around it is ignored and a sign is allowed. Digits must be ASCII:
    str.isdigit() accepts "²", which int() refuses, and int() accepts "٣" and "1_000",
    which no kernel writes. `base=0` reads 0x / 0o / 0b prefixes as int() does. A value
    of more than 64 bits is None (and never reaches int()'s 4,300-digit limit). A value
    below `minimum` is None: `minimum=0` where -1 means "unknown" (a device's numa_node).
    """
    if text is None:
        return None
    text = text.strip()
    if not text.isascii() or "_" in text or len(text) > MAX_INT_CHARS:
        return None
    try:
        value = int(text, base)
    except ValueError:
        return None
    if not -(2**INT_BITS) < value < 2**INT_BITS:
        return None
    return None if minimum is not None and value < minimum else value


def load_json(text: str) -> tuple[Any, str]:
    """(the data `text` holds, "") or (None, why not); never raises.

    json.loads raises more than JSONDecodeError: ValueError for an integer past int()'s
    digit limit (no `.msg` on it) and RecursionError for arrays nested ~1,000 deep.
    """
    try:
        return json.loads(text), ""
    except RecursionError:
        return None, "nested too deeply"
    except ValueError as exc:  # JSONDecodeError, and int()'s digit limit
        return None, str(exc)[:120]


# statvfs(3) fields are unsigned 64-bit: anything else came from a hand-made bundle.
_STATVFS_LIMIT = 2**64


def _statvfs_field(st: dict, *names: str) -> int | None:
    for name in names:
        value = st.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value:
            return value if 0 < value < _STATVFS_LIMIT else None
    return None


def statvfs_sizes(st: Any) -> tuple[int | None, int | None, int | None, int | None, list[str]]:
    """(size, free for unprivileged users, inodes, free inodes) in bytes and counts from
    a statvfs answer's dict, or Nones and a note; never raises."""
    if not isinstance(st, dict):
        return None, None, None, None, ["statvfs gave no values"]
    frsize = _statvfs_field(st, "f_frsize", "f_bsize")
    blocks = st.get("f_blocks")
    if frsize is None or not isinstance(blocks, int) or not 0 <= blocks < _STATVFS_LIMIT:
        return None, None, None, None, ["statvfs gave no block counts"]
    bavail = st.get("f_bavail")
    bavail = bavail if isinstance(bavail, int) and 0 <= bavail <= blocks else None
    # btrfs, vfat, some FUSE and network filesystems have no fixed inode count: 0 files.
    inodes = _statvfs_field(st, "f_files")
    ffree = st.get("f_ffree")
    free_inodes = (
        ffree if inodes is not None and isinstance(ffree, int) and 0 <= ffree <= inodes else None
    )
    return (blocks * frsize, bavail * frsize if bavail is not None else None, inodes,
            free_inodes, [])  # fmt: skip


def _link(ctx: FactContext, path: str) -> Answer:
    # The reading rule: "not a link" is an answer, a readlink that timed out is not.
    answer = ctx.host.readlink(path)
    if answer.status == AnswerStatus.TIMEOUT:
        raise ProbeFailed(answer)
    return answer


def follow(ctx: FactContext, path: str) -> str:
    """Follow symbolic links at the last component of `path` (alternatives chains too)."""
    path = posixpath.normpath(path)
    for _ in range(LINK_HOPS):
        answer = _link(ctx, path)
        if not answer.ok or not isinstance(answer.value, str) or not answer.value:
            break
        path = posixpath.normpath(posixpath.join(posixpath.dirname(path), answer.value))
    return path


def realpath(ctx: FactContext, path: str, cache: dict[str, str], depth: int = 0) -> str:
    """Every component's links resolved (`venv/lib64 -> lib`), via the Host's readlink.
    A relative path is returned as it is: it names nothing on the host."""
    if not path.startswith("/"):
        return path
    path = posixpath.normpath(path)
    if path in ("/", "//"):
        return "/"
    if path in cache:
        return cache[path]
    parent = realpath(ctx, posixpath.dirname(path), cache, depth)
    here = posixpath.join(parent, posixpath.basename(path))
    result = here
    if depth < 4 * LINK_HOPS:
        answer = _link(ctx, here)
        if answer.ok and isinstance(answer.value, str) and answer.value:
            result = realpath(ctx, posixpath.join(parent, answer.value), cache, depth + 1)
    cache[path] = result
    return result
