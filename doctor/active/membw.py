"""Memory copy bandwidth per NUMA node, by dldoctor's standalone script
(`scripts/membw.py`, run by dldoctor's own interpreter), pinned to the node.

With numactl (the `numa.numactl` fact), `numactl --cpunodebind=N --membind=N` pins both the
CPUs and the memory; without it the script pins itself to the node's CPUs (from the
`numa.topology` fact) and the kernel's first-touch policy places its buffers there, which
holds unless the node is out of free memory (the details say which was used).
"""

from __future__ import annotations

from dataclasses import dataclass

from dldoctor.active import measure
from dldoctor.facts import FactContext, fact
from dldoctor.facts.numa import NumaNode, numa_topology, numactl
from dldoctor.facts.reading import load_json
from dldoctor.host.base import Answer

SECONDS = 2.0
# The script's start, its workers' buffers allocated and touched, its end: 7.5 s on the
# build VM under a load average of 19, more than a quiet node needs.
SLACK_S = 13.0
COST_S = SECONDS + SLACK_S
# The working set of all workers together: well past the last-level cache of a socket
# (Genoa-X has 1.1 GiB of L3 per socket), and a sixteenth of the node's memory at most.
MAX_BYTES = 2 << 30
MIN_BYTES = 64 << 20
UNKNOWN_NODE_BYTES = 512 << 20


@dataclass(frozen=True)
class NodeBandwidth:
    subject: str  # "NUMA node 1"; "host" where sysfs shows no node
    node: int | None
    gb_per_s: float | None = None
    workers: int = 0
    pinned: str = ""  # how the run was pinned
    error: str = ""


def working_set(node: NumaNode | None) -> int:
    """The bytes the script copies with, for this node: a multiple of 64 MiB."""
    total = node.memory_total_bytes if node else None
    if not total:
        return UNKNOWN_NODE_BYTES
    return max(MIN_BYTES, min(MAX_BYTES, total // 16) // MIN_BYTES * MIN_BYTES)


def script_argv(size: int, cpus: str = "") -> list[str]:
    argv = ["{python}", "{scripts}/membw.py", "--bytes", str(size), "--seconds", f"{SECONDS:g}"]
    return [*argv, "--cpus", cpus] if cpus else argv


def node_argv(node: NumaNode | None, numactl_path: str) -> tuple[list[str], str]:
    """(the command line, how it pins) for one node (None: no NUMA node known)."""
    size = working_set(node)
    if node is None:
        return script_argv(size), "not pinned: sysfs shows no NUMA node"
    if numactl_path:
        binds = [f"--cpunodebind={node.node}", f"--membind={node.node}"]
        return ["numactl", *binds, *script_argv(size)], "numactl --cpunodebind --membind"
    pinned = "sched_setaffinity to the node's CPUs (numactl absent); memory by first touch"
    return script_argv(size, node.cpulist), pinned


def parse_membw(answer: Answer) -> tuple[float | None, int, str]:
    """(GB/s, workers, error) from the script's answer."""
    if not answer.ok:
        return None, 0, f"the memory script: {answer.describe()}"
    data, why = load_json(answer.text.strip().splitlines()[-1] if answer.text.strip() else "")
    if why or not isinstance(data, dict):
        said = answer.value.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, 0, f"the memory script printed no JSON: {(said or [why])[-1][:200]}"
    if data.get("error"):
        return None, 0, f"the memory script: {str(data['error'])[:200]}"
    value = data.get("gb_per_s")
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return None, 0, "the memory script printed no gb_per_s"
    workers = data.get("workers")
    return float(value), workers if isinstance(workers, int) else 0, ""


@fact("perf.memory.bandwidth")
def memory_bandwidth(ctx: FactContext) -> tuple[NodeBandwidth, ...]:
    nodes: list[NumaNode | None] = list(ctx.get(numa_topology).cpu_nodes) or [None]
    path = ctx.get(numactl).path if nodes != [None] else ""
    result = []
    for node in nodes:
        subject = f"NUMA node {node.node}" if node else "host"
        argv, pinned = node_argv(node, path)
        answer = measure(ctx, argv, cost_s=COST_S, what=f"memory copy of {subject}")
        value, workers, error = parse_membw(answer)
        number = node.node if node else None
        result.append(NodeBandwidth(subject, number, value, workers, pinned, error))
    return tuple(result)
