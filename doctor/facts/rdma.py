"""RDMA devices (InfiniBand, RoCE, Omni-Path) from /sys/class/infiniband, and GPUDirect RDMA.

Each port says its logical state (`4: ACTIVE`; `2: INIT` usually means no subnet
manager), its physical state (`5: LinkUp`; `2: Polling` means cable or peer), its rate
(`400 Gb/sec (4X NDR)`) and link layer. Error counters (`symbol_error`, `link_downed`,
...) tell a flapping or noisy link. A RoCE port also has a GID table: NCCL needs a
"RoCE v2" entry carrying a routable address, and the port's net interface needs an MTU
large enough for the active RDMA MTU.

GPUDirect RDMA needs `nvidia_peermem` (or the legacy `nv_peer_mem`) loaded; containers
need the /dev/infiniband nodes.

Reads are bounded: at most MAX_DEVICES devices, MAX_PORTS ports each, MAX_COUNTERS
counters per folder, and at most MAX_GIDS non-zero GIDs among the first MAX_GID_SLOTS
slots of a port's table. A timeout stops the fact (`ProbeFailed`); any other failed read
of one attribute is left empty and noted.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from dldoctor.facts import FactContext, fact
from dldoctor.facts.kmod import modules
from dldoctor.facts.reading import SMALL, answer_text, read_listing, read_text, to_int
from dldoctor.host.base import AnswerStatus, Host, ProbeFailed

IB_CLASS = "/sys/class/infiniband"
NET_CLASS = "/sys/class/net"
DEV_INFINIBAND = "/dev/infiniband"
NV_MEM_VERSION = "/sys/kernel/mm/memory_peers/nv_mem/version"

MAX_DEVICES = 64
UNREAD = "?"  # a port's link layer, or a GID's type, that could not be read
LINK_LAYERS = ("InfiniBand", "Ethernet", "Unknown")  # the kernel's words
GID_TYPES = ("IB/RoCE v1", "RoCE v2")
MAX_PORTS = 16
MAX_COUNTERS = 128
MAX_GIDS = 32  # non-zero GIDs kept per port
MAX_GID_SLOTS = 256  # GID table slots looked at per port (mlx5 RoCE tables hold 256)


# --- parsers --------------------------------------------------------------------------

# Values (and keys) are stripped in Python: a lazy group next to `\s*` is quadratic on a
# long run of blanks.
_STATE = re.compile(r"^\s*(\d{1,3})\s*:(.*)")
_RATE = re.compile(r"^\s*(\d{1,5}(?:\.\d{1,3})?)\s*Gb/sec\b")


def parse_state(text: str) -> tuple[int | None, str]:
    """A port's `state` or `phys_state`: "4: ACTIVE" -> (4, "ACTIVE"), "5: LinkUp" ->
    (5, "LinkUp"). Text without a number comes back as the name with code None."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    m = _STATE.match(first)
    if m is None:
        return None, first.strip()
    return int(m.group(1)), m.group(2).strip()


def parse_rate(text: str) -> float | None:
    """Gb/s of a port's `rate`: "100 Gb/sec (4X EDR)" -> 100.0, "2.5 Gb/sec (1X SDR)" ->
    2.5. None for "Unknown", "" and anything else."""
    m = _RATE.match(text)
    if m is None:
        return None
    value = float(m.group(1))
    return value if value > 0 else None


def is_zero_gid(gid: str) -> bool:
    """An unused slot of a GID table reads as all zeros (`0000:0000:...:0000`)."""
    digits = gid.strip().replace(":", "")
    return bool(digits) and set(digits) <= {"0"}


@dataclass(frozen=True)
class IbvPort:
    """One port of `ibv_devinfo` output."""

    hca_id: str
    port: int
    state: str = ""  # "ACTIVE" (from "PORT_ACTIVE (4)"), as sysfs names it
    state_code: int | None = None
    active_mtu: int | None = None  # bytes: "1024 (3)" -> 1024
    max_mtu: int | None = None
    link_layer: str = ""  # "InfiniBand" / "Ethernet"


@dataclass(frozen=True)
class IbvDevinfo:
    ports: tuple[IbvPort, ...] = ()
    fw_ver: dict[str, str] = field(default_factory=dict)  # hca_id -> firmware
    notes: tuple[str, ...] = ()


_KV = re.compile(r"^\s*([A-Za-z_][\w \t]*):(.*)")
_WORD_CODE = re.compile(r"^(\S+)\s*\((\d+)\)$")
_INT_CODE = re.compile(r"^(\d+)(?:\s*\(\d+\))?$")


def _int_or_none(text: str) -> int | None:
    # "4096 (5)": ibv_devinfo prints a value with its enum code.
    m = _INT_CODE.match(text.strip())
    return to_int(m.group(1)) if m else None


def parse_ibv_devinfo(text: str) -> IbvDevinfo:
    """`ibv_devinfo` (also `-v`): `hca_id:` blocks, each with `port:` blocks whose
    `state`, `active_mtu`, `max_mtu` and `link_layer` lines are kept; the rest is skipped."""
    ports: list[IbvPort] = []
    fw: dict[str, str] = {}
    notes: list[str] = []
    hca = ""
    current: dict | None = None

    def flush() -> None:
        nonlocal current
        if current is not None:
            ports.append(IbvPort(**current))
        current = None

    for line in text.splitlines():
        m = _KV.match(line)
        if m is None:
            continue
        key, value = m.group(1).rstrip(), m.group(2).strip()
        if key == "hca_id":
            flush()
            hca = value
        elif key == "port":
            flush()
            if not hca:
                notes.append(f"port {value!r} before any hca_id")
            number = _int_or_none(value)
            if number is None:
                notes.append(f"{hca or '?'}: port {value!r} is not a number")
                continue
            current = {"hca_id": hca, "port": number}
        elif key == "fw_ver" and hca and current is None:
            fw[hca] = value
        elif current is not None and key == "state":
            w = _WORD_CODE.match(value)
            word = w.group(1) if w else value
            current["state"] = word.removeprefix("PORT_")
            current["state_code"] = to_int(w.group(2)) if w else None
        elif current is not None and key in ("active_mtu", "max_mtu"):
            current[key] = _int_or_none(value)
            if current[key] is None:
                notes.append(f"{hca} port {current['port']}: {key} {value!r} not understood")
        elif current is not None and key == "link_layer":
            current["link_layer"] = value
    flush()
    return IbvDevinfo(tuple(ports), fw, tuple(notes))


# --- facts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str  # as sysfs prints it: "0000:0000:0000:0000:0000:ffff:c0a8:6401"
    type: str = ""  # "IB/RoCE v1" or "RoCE v2"; "" before RoCE v2 kernels; UNREAD: not read
    ndev: str = ""  # net interface the entry belongs to (RoCE); "" on InfiniBand

    @property
    def ipv4(self) -> str:
        """The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d), else ""."""
        address = self._address()
        mapped = address.ipv4_mapped if address is not None else None
        return str(mapped) if mapped is not None else ""

    @property
    def link_local(self) -> bool:
        """fe80::/10: not routable; the default GID of every port."""
        address = self._address()
        return bool(address is not None and address.is_link_local)

    def _address(self) -> ipaddress.IPv6Address | None:
        try:
            return ipaddress.IPv6Address(self.gid.strip())
        except ValueError:
            return None


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    state: str = ""  # "ACTIVE", "INIT", "DOWN", "ARMED"
    state_code: int | None = None
    phys_state: str = ""  # "LinkUp", "Polling", "Disabled"
    phys_state_code: int | None = None
    rate_gbps: float | None = None
    rate_text: str = ""
    link_layer: str = ""  # "InfiniBand" or "Ethernet" (RoCE); UNREAD: not known
    netdev: str = ""  # the port's net interface (RoCE; the IPoIB one on InfiniBand)
    mtu: int | None = None  # that interface's MTU
    gids: tuple[Gid, ...] = ()  # non-zero entries only
    counters: dict[str, int] = field(default_factory=dict)  # ports/<p>/counters
    notes: tuple[str, ...] = ()

    @property
    def roce(self) -> bool:
        return self.link_layer == "Ethernet"

    @property
    def infiniband(self) -> bool:
        return self.link_layer in ("InfiniBand", "")  # "": a kernel older than link_layer


@dataclass(frozen=True)
class RdmaDevice:
    name: str
    fw_ver: str = ""
    board_id: str = ""
    hca_type: str = ""
    node_guid: str = ""
    ports: tuple[RdmaPort, ...] = ()
    notes: tuple[str, ...] = ()
    node_type: str = ""  # "1: CA" (InfiniBand/RoCE adapter), "4: RNIC" (iWARP)
    pci_address: str = ""  # "0000:19:00.0", from the `device` link; "" when not known

    @property
    def iwarp(self) -> bool:
        return self.node_type.endswith("RNIC")


class RdmaDevices(tuple):
    """A tuple of RdmaDevice, with `notes` about the whole listing (caps, unreadable)."""

    notes: tuple[str, ...]

    def __new__(cls, devices=(), notes=()):
        self = super().__new__(cls, devices)
        self.notes = tuple(notes)
        return self


class _Reader:
    """facts/reading.py's rule, bound to one host."""

    def __init__(self, host: Host):
        self.host = host

    def text(self, path: str, notes: list[str], *, quiet: bool = False) -> str | None:
        """`quiet`: an error the kernel answers in normal operation, not noted."""
        return read_text(self.host, path, None if quiet else notes, max_bytes=SMALL)

    def listing(self, path: str, notes: list[str]) -> tuple[str, ...] | None:
        return read_listing(self.host, path, notes)


def _numbered(names, limit: int, what: str, notes: list[str]) -> list[int]:
    numbers = sorted(n for n in map(to_int, names) if n is not None and n >= 0)
    if len(numbers) > limit:
        notes.append(f"{len(numbers)} {what}; only the first {limit} read")
    return numbers[:limit]


def _counters(reader: _Reader, folder: str, notes: list[str]) -> dict[str, int]:
    names = reader.listing(folder, notes)
    if not names:
        return {}
    if len(names) > MAX_COUNTERS:
        notes.append(f"{folder}: {len(names)} counters; only the first {MAX_COUNTERS} read")
    found: dict[str, int] = {}
    for name in names[:MAX_COUNTERS]:
        text = reader.text(f"{folder}/{name}", notes)
        if text is None:
            continue
        # Base 0 only for 0x: some counters are written "0x10", others "0010".
        value = to_int(text, base=0 if text.startswith("0x") else 10)
        if value is None:
            notes.append(f"{folder}/{name}: {text[:40]!r} is not a number")
        else:
            found[name] = value
    return found


def _gids(reader: _Reader, base: str, notes: list[str]) -> tuple[Gid, ...]:
    names = reader.listing(f"{base}/gids", notes)
    if not names:
        return ()
    slots = sorted(n for n in map(to_int, names) if n is not None and n >= 0)
    if len(slots) > MAX_GID_SLOTS:
        notes.append(f"GID table of {len(slots)} slots; only the first {MAX_GID_SLOTS} read")
    found: list[Gid] = []
    for index in slots[:MAX_GID_SLOTS]:
        gid = reader.text(f"{base}/gids/{index}", notes, quiet=True)
        if not gid or is_zero_gid(gid):
            continue
        if len(found) == MAX_GIDS:
            notes.append(f"more than {MAX_GIDS} GIDs in use; only the first {MAX_GIDS} kept")
            break
        kind = _word(reader, f"{base}/gid_attrs/types/{index}", notes, GID_TYPES)
        # InfiniBand entries have no net device: the kernel answers ENODEV, not a note.
        ndev = reader.text(f"{base}/gid_attrs/ndevs/{index}", notes, quiet=True) or ""
        found.append(Gid(index, gid, kind, ndev))
    return tuple(found)


def _device_netdev(reader: _Reader, device: str, port: int, notes: list[str]) -> str:
    """The interface of `port` among /sys/class/infiniband/<dev>/device/net/*: the only
    one, else the one whose `dev_port` (0-based; mlx4 uses `dev_id`) names the port."""
    folder = f"{IB_CLASS}/{device}/device/net"
    names = reader.listing(folder, notes) or ()
    names = tuple(n for n in names if not n.startswith("."))
    if len(names) <= 1:
        return names[0] if names else ""
    for attr in ("dev_port", "dev_id"):
        matches = []
        for name in names[:MAX_PORTS]:
            text = reader.text(f"{folder}/{name}/{attr}", notes, quiet=True)
            if to_int(text, base=0) == port - 1:
                matches.append(name)
        if len(matches) == 1:
            return matches[0]
    notes.append(f"{folder} holds {', '.join(names[:8])}: none is clearly port {port}")
    return ""


def _word(reader: _Reader, path: str, notes: list[str], words: tuple[str, ...]) -> str:
    """One of the kernel's `words` for an attribute: a link layer (InfiniBand, Ethernet, or
    Unknown for usNIC and the like: neither), a GID type. "" when the kernel has no such
    attribute (link_layer before 2.6.37: only InfiniBand; GID types before RoCE v2);
    UNREAD when it could not be read or says something else, so that no check takes it
    for any of them."""
    answer = reader.host.read(path, max_bytes=SMALL)
    text = answer_text(answer, notes)
    if text is None:
        return "" if answer.status == AnswerStatus.MISSING else UNREAD
    if text not in words:
        notes.append(f"{path} reads {text[:40]!r}")
        return UNREAD
    return text


def _port(reader: _Reader, device: str, port: int) -> RdmaPort:
    base = f"{IB_CLASS}/{device}/ports/{port}"
    notes: list[str] = []
    state_code, state = parse_state(reader.text(f"{base}/state", notes) or "")
    phys_code, phys = parse_state(reader.text(f"{base}/phys_state", notes) or "")
    rate_text = reader.text(f"{base}/rate", notes) or ""
    rate = parse_rate(rate_text)
    if rate_text and rate is None:
        notes.append(f"rate {rate_text[:60]!r} not understood")
    link_layer = _word(reader, f"{base}/link_layer", notes, LINK_LAYERS)
    gids = _gids(reader, base, notes)
    netdev = next((g.ndev for g in gids if g.ndev), "")
    if not netdev:
        netdev = _device_netdev(reader, device, port, notes)
    mtu = None
    if netdev:
        mtu_text = reader.text(f"{NET_CLASS}/{netdev}/mtu", notes)
        mtu = to_int(mtu_text)
        if mtu_text is not None and mtu is None:
            notes.append(f"{NET_CLASS}/{netdev}/mtu: {mtu_text[:40]!r} is not a number")
    return RdmaPort(
        device=device,
        port=port,
        state=state,
        state_code=state_code,
        phys_state=phys,
        phys_state_code=phys_code,
        rate_gbps=rate,
        rate_text=rate_text,
        link_layer=link_layer,
        netdev=netdev,
        mtu=mtu,
        gids=gids,
        counters=_counters(reader, f"{base}/counters", notes),
        notes=tuple(notes),
    )


_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def _pci_address(reader: _Reader, base: str) -> str:
    """The PCI function behind the device (`device -> ../../../0000:19:00.0`): what places
    it beside a GPU. A software device (rxe, siw) has no PCI parent: ""."""
    answer = reader.host.readlink(f"{base}/device")
    if answer.status == AnswerStatus.TIMEOUT:
        raise ProbeFailed(answer)
    if not answer.ok or not isinstance(answer.value, str):
        return ""
    last = answer.value.rstrip("/").rsplit("/", 1)[-1].lower()
    return last if _PCI_ADDRESS.match(last) else ""


def _device(reader: _Reader, name: str) -> RdmaDevice:
    base = f"{IB_CLASS}/{name}"
    notes: list[str] = []
    attrs = {
        attr: reader.text(f"{base}/{attr}", notes) or ""
        for attr in ("fw_ver", "board_id", "hca_type", "node_guid", "node_type")
    }
    port_names = reader.listing(f"{base}/ports", notes)
    if port_names is None:
        notes.append(f"{base}/ports: missing")
    numbers = _numbered(port_names or (), MAX_PORTS, "ports", notes)
    ports = tuple(_port(reader, name, p) for p in numbers)
    address = _pci_address(reader, base)
    return RdmaDevice(name, ports=ports, notes=tuple(notes), pci_address=address, **attrs)


@fact("rdma.devices")
def rdma_devices(ctx: FactContext) -> RdmaDevices:
    """Every RDMA device under /sys/class/infiniband; empty when there is none."""
    listing = ctx.host.listdir(IB_CLASS).require()
    if not listing.ok:
        notes = () if listing.status == AnswerStatus.MISSING else (f"{IB_CLASS}: {listing.status}",)
        return RdmaDevices((), notes)
    names = [n for n in listing.value if not n.startswith(".")]
    notes = []
    if len(names) > MAX_DEVICES:
        notes.append(f"{len(names)} RDMA devices; only the first {MAX_DEVICES} read")
    reader = _Reader(ctx.host)
    return RdmaDevices(tuple(_device(reader, n) for n in names[:MAX_DEVICES]), notes)


@dataclass(frozen=True)
class GpuDirect:
    peermem: str = ""  # "nvidia_peermem", "nv_peer_mem", or "" when neither is loaded
    nvidia_fs: bool = False  # GPUDirect Storage module loaded
    dev_infiniband: tuple[str, ...] = ()  # /dev/infiniband entries: uverbs0, rdma_cm, ...
    nv_mem_version: str = ""  # legacy nv_peer_mem's /sys/kernel/mm/memory_peers/nv_mem/version
    modules_readable: bool = True
    notes: tuple[str, ...] = ()

    @property
    def uverbs(self) -> tuple[str, ...]:
        return tuple(n for n in self.dev_infiniband if n.startswith("uverbs"))


@fact("rdma.gpudirect")
def gpudirect(ctx: FactContext) -> GpuDirect:
    """Whether GPUDirect RDMA can work: the peer-memory module and the verbs devices."""
    notes: list[str] = []
    mods = ctx.get(modules)
    notes.extend(mods.notes)
    loaded = mods.loaded
    version_answer = ctx.host.read(NV_MEM_VERSION, max_bytes=256).require()
    nv_mem_version = version_answer.text.strip() if version_answer.ok else ""
    if version_answer.status not in (AnswerStatus.OK, AnswerStatus.MISSING):
        notes.append(f"{NV_MEM_VERSION}: {version_answer.status}")
    if "nvidia_peermem" in loaded:
        peermem = "nvidia_peermem"
    elif "nv_peer_mem" in loaded or nv_mem_version:
        peermem = "nv_peer_mem"
    else:
        peermem = ""
    dev = ctx.host.listdir(DEV_INFINIBAND).require()
    if dev.status not in (AnswerStatus.OK, AnswerStatus.MISSING):
        notes.append(f"{DEV_INFINIBAND}: {dev.status}")
    return GpuDirect(
        peermem=peermem,
        nvidia_fs="nvidia_fs" in loaded,
        dev_infiniband=tuple(dev.value) if dev.ok else (),
        nv_mem_version=nv_mem_version,
        modules_readable=mods.readable,
        notes=tuple(notes),
    )
