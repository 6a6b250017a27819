"""RDMA loopback bandwidth of each ACTIVE port through perftest's `ib_write_bw`: a server
and a client on the same device and port, one `sh -c` command line, so that the lane, the
limit and the recording see one measurement. The traffic leaves the HCA and comes back
through it: a port whose PCIe link or firmware holds it below its link rate shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dldoctor.active import measure
from dldoctor.facts import FactContext, fact
from dldoctor.facts.rdma import RdmaPort, rdma_devices
from dldoctor.host.base import AnswerStatus

DURATION_S = 2
MESSAGE_BYTES = 65536  # perftest's default for BW tests; near the link rate on HDR/NDR
# perftest's default, and one more for each port after the first: the lane runs one test
# at a time, but the last server's socket may linger a moment after it is ended.
TCP_PORT = 18515
# The server's start (1 s), its exchange with the client over TCP, both ends' teardown.
COST_S = DURATION_S + 8.0
MISSING = "perftest is not installed (apt install perftest)"

# The server runs in the background with its output dropped (both ends print the same
# table); the client connects to it through 127.0.0.1; the server is ended however the
# client ends. $1 device, $2 port, $3 GID index ("" on InfiniBand), $4 TCP port.
LOOPBACK = (
    'args="-d $1 -i $2 ${3:+-x $3} -D %(d)d -s %(s)d -F --report_gbits -p $4"; '  # noqa: UP031
    "ib_write_bw $args >/dev/null 2>&1 & server=$!; sleep 1; "
    "ib_write_bw $args 127.0.0.1; status=$?; "
    "kill $server 2>/dev/null; wait $server 2>/dev/null; exit $status"
) % {"d": DURATION_S, "s": MESSAGE_BYTES}

_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s*$")


@dataclass(frozen=True)
class BwResult:
    gbits: float | None  # BW average of the last row, Gb/s
    bytes: int = 0  # its message size
    notes: tuple[str, ...] = ()


def parse_ib_write_bw(text: str) -> BwResult:
    """The client's table: `#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]
    MsgRate[Mpps]` and a row per message size; the last row's average is the figure."""
    unit = ""
    rows: list[tuple[int, float]] = []
    for line in text.splitlines():
        if "BW average[" in line:
            unit = line.split("BW average[", 1)[1].split("]", 1)[0]
            continue
        m = _ROW.match(line) if unit else None
        if m:
            rows.append((int(m.group(1)), float(m.group(4))))
    if not unit:
        return BwResult(None, notes=("ib_write_bw printed no bandwidth table",))
    if unit != "Gb/sec":
        return BwResult(None, notes=(f"ib_write_bw reported {unit}, not Gb/sec",))
    if not rows:
        return BwResult(None, notes=("ib_write_bw printed its table's header but no row",))
    size, gbits = rows[-1]
    return BwResult(gbits, size)


def gid_index(port: RdmaPort) -> str:
    """The GID a RoCE port is tested through: a RoCE v2 entry with an IPv4 address first,
    then any RoCE v2 one; "" on InfiniBand (the LID is used) or when none is known."""
    if not port.roce:
        return ""
    v2 = [g for g in port.gids if g.type == "RoCE v2"]
    best = [g for g in v2 if g.ipv4] or v2
    return str(best[0].index) if best else ""


def loopback_argv(port: RdmaPort, nth: int = 0) -> list[str]:
    """The command line for the `nth` port measured (its TCP port)."""
    words = [port.device, str(port.port), gid_index(port), str(TCP_PORT + nth)]
    return ["sh", "-c", LOOPBACK, "dldoctor-loopback", *words]


@dataclass(frozen=True)
class PortBandwidth:
    port: RdmaPort
    gb_per_s: float | None = None
    error: str = ""


@dataclass(frozen=True)
class Loopback:
    ports: tuple[PortBandwidth, ...] = ()
    missing: str = ""  # perftest absent: nothing was run
    not_active: tuple[str, ...] = ()  # ports left out, "mlx5_1:1 (DOWN)"


def _port_name(port: RdmaPort) -> str:
    return f"{port.device}:{port.port}"


def _one(ctx: FactContext, port: RdmaPort, nth: int) -> PortBandwidth:
    answer = measure(ctx, loopback_argv(port, nth), cost_s=COST_S,
                     what=f"ib_write_bw loopback of {_port_name(port)}")  # fmt: skip
    if not answer.ok:
        return PortBandwidth(port, error=f"ib_write_bw: {answer.describe()}")
    result = parse_ib_write_bw(answer.text)
    if result.gbits is None:
        said = answer.value.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[-1].strip()[:200] if said else result.notes[0]
        return PortBandwidth(
            port, error=f"ib_write_bw exited with {answer.value.returncode}: {why}"
        )
    return PortBandwidth(port, result.gbits / 8)


@fact("perf.rdma.loopback")
def rdma_loopback(ctx: FactContext) -> Loopback:
    ports = [p for d in ctx.get(rdma_devices) if not d.iwarp for p in d.ports]
    active = [p for p in ports if p.state == "ACTIVE"]
    idle = tuple(f"{_port_name(p)} ({p.state or 'state unknown'})" for p in ports
                 if p.state != "ACTIVE")  # fmt: skip
    if not active:
        return Loopback(not_active=idle)
    present = ctx.host.run(["ib_write_bw", "--version"])
    if present.status in (AnswerStatus.NOT_INSTALLED, AnswerStatus.MISSING):
        return Loopback(missing=MISSING, not_active=idle)
    return Loopback(tuple(_one(ctx, p, n) for n, p in enumerate(active)), not_active=idle)
