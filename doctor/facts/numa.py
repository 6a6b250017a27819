"""NUMA facts: nodes, their CPUs and memory (sysfs), automatic NUMA balancing, numactl.

Read from /sys/devices/system/node through the Host; `numactl --show` is run only to learn
whether numactl is installed (the topology itself never depends on it).
"""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.reading import to_int
from dldoctor.facts.system import environ
from dldoctor.host.base import AnswerStatus

NODE_ROOT = "/sys/devices/system/node"
NUMACTL_ARGV = ("numactl", "--show")

# The kernel's CONFIG_NR_CPUS tops out at 8192; a cpulist naming more is not a real one.
MAX_CPUS = 65536

# --- cpulist --------------------------------------------------------------------------


def parse_cpulist_notes(text: str) -> tuple[tuple[int, ...], list[str]]:
    """`0-3,8-11` (sysfs cpulist, the kernel's bitmap list format) to sorted CPU numbers.

    Pieces it does not understand are noted and skipped; an empty list is `()`.
    """
    cpus: set[int] = set()
    notes: list[str] = []
    for piece in text.strip().split(","):
        piece = piece.strip()
        if not piece:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", piece)
        if m is None:
            notes.append(f"cpulist piece not understood: {piece[:40]!r}")
            continue
        first = to_int(m.group(1))
        last = to_int(m.group(2)) if m.group(2) is not None else first
        if first is None or last is None:
            notes.append(f"cpulist number too long: {piece[:40]!r}")
            continue
        if last < first:
            notes.append(f"cpulist range runs backwards: {piece!r}")
            continue
        if last - first + 1 + len(cpus) > MAX_CPUS:
            notes.append(f"cpulist names more than {MAX_CPUS} CPUs: {piece!r} skipped")
            continue
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus)), notes


def parse_cpulist(text: str) -> tuple[int, ...]:
    """`parse_cpulist("0-3,8-11") == (0, 1, 2, 3, 8, 9, 10, 11)`; odd pieces are skipped."""
    return parse_cpulist_notes(text)[0]


# --- node meminfo ---------------------------------------------------------------------

_NODE_MEMINFO = re.compile(r"\s*Node\s+(\d+)\s+([^:\s]+):\s+(\d+)(?:\s+(kB))?\s*")


def parse_node_meminfo(text: str) -> tuple[dict[str, int], list[str]]:
    """`Node 0 MemTotal:  16271232 kB` lines to bytes (plain counts stay counts)."""
    values: dict[str, int] = {}
    notes: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _NODE_MEMINFO.fullmatch(line)
        if m is None:
            notes.append(f"unparsed node meminfo line: {line.strip()[:60]!r}")
            continue
        number = to_int(m.group(3))
        if number is None:  # past int()'s digit limit
            notes.append(f"unparsed node meminfo line: {line.strip()[:60]!r}")
            continue
        values[m.group(2)] = number * (1024 if m.group(4) else 1)
    return values, notes


# --- the fact -------------------------------------------------------------------------


class NumaNode(NamedTuple):
    node: int
    cpus: tuple[int, ...]
    cpulist: str  # as sysfs wrote it, stripped ("0-3,8-11"; "" for a memory-only node)
    memory_total_bytes: int | None  # None when the node's meminfo said nothing


class NumaTopology(NamedTuple):
    nodes: tuple[NumaNode, ...]  # in node order; () when sysfs has no node folder
    balancing: int | None  # /proc/sys/kernel/numa_balancing (0 off, 1 on, 2 tiering)
    notes: tuple[str, ...] = ()
    unread: tuple[int, ...] = ()  # nodes whose cpulist could not be read: CPUs not known

    @property
    def cpu_nodes(self) -> tuple[NumaNode, ...]:
        """Nodes with CPUs (GPU or CXL memory can show up as CPU-less nodes)."""
        return tuple(n for n in self.nodes if n.cpus)


def _node_numbers(entries: tuple[str, ...]) -> list[int]:
    found = (to_int(e[4:]) for e in entries if re.fullmatch(r"node\d+", e))
    return sorted(n for n in found if n is not None)


@fact("numa.topology")
def numa_topology(ctx: FactContext) -> NumaTopology:
    host = ctx.host
    notes: list[str] = []
    nodes: list[NumaNode] = []
    unread: list[int] = []
    listing = host.listdir(NODE_ROOT).require()
    if listing.ok:
        for number in _node_numbers(listing.value or ()):
            folder = f"{NODE_ROOT}/node{number}"
            cpulist_answer = host.read(f"{folder}/cpulist", max_bytes=65536).require()
            cpulist = cpulist_answer.text.strip()
            cpus, cpu_notes = parse_cpulist_notes(cpulist)
            notes.extend(f"node{number}: {n}" for n in cpu_notes)
            if not cpulist_answer.ok:
                notes.append(f"node{number}: {cpulist_answer.describe()}")
                unread.append(number)
            meminfo = host.read(f"{folder}/meminfo", max_bytes=65536).require()
            total = None
            if meminfo.ok:
                values, mem_notes = parse_node_meminfo(meminfo.text)
                total = values.get("MemTotal")
                notes.extend(f"node{number}: {n}" for n in mem_notes[:3])
                if total is None:
                    notes.append(f"node{number}: meminfo has no MemTotal")
            else:
                notes.append(f"node{number}: {meminfo.describe()}")
            nodes.append(NumaNode(number, cpus, cpulist, total))
        if not nodes:
            notes.append(f"{NODE_ROOT} lists no nodeN folder")
    else:
        notes.append(f"{listing.describe()} (kernel without NUMA support, or sysfs hidden)")

    balancing = None
    answer = host.read("/proc/sys/kernel/numa_balancing", max_bytes=64).require()
    if answer.ok:
        text = answer.text.strip()
        if re.fullmatch(r"-?\d+", text):
            balancing = to_int(text)
        else:
            notes.append(f"numa_balancing reads {text[:20]!r}")

    return NumaTopology(tuple(nodes), balancing, tuple(notes), tuple(unread))


class Numactl(NamedTuple):
    """Where numactl is ("numactl" when it runs but PATH did not show it); "" if absent."""

    path: str
    notes: tuple[str, ...] = ()


# Its own fact, apart from the topology (sysfs): a hung `numactl` must not take the
# topology, and every check that reads it, down with it.
@fact("numa.numactl")
def numactl(ctx: FactContext) -> Numactl:
    notes: list[str] = []
    return Numactl(_numactl_path(ctx, notes), tuple(notes))


def _numactl_path(ctx: FactContext, notes: list[str]) -> str:
    answer = ctx.host.run(list(NUMACTL_ARGV)).require()
    if answer.status in (AnswerStatus.NOT_INSTALLED, AnswerStatus.MISSING):
        return ""
    if not answer.ok:  # permission denied
        notes.append(answer.describe())
        return ""
    if answer.value.returncode != 0:
        notes.append(f"`numactl --show` exited with {answer.value.returncode}")
    path = ctx.get(environ).get("PATH", "")
    for folder in dict.fromkeys(path.split(":")):
        if not folder.startswith("/"):
            continue  # relative PATH entries depend on the working directory
        candidate = posixpath.join(folder, "numactl")
        if ctx.host.read(candidate, max_bytes=4).ok:
            return candidate
    return "numactl"
