"""The PCI bus from `lspci -v` text, for a capture that holds no /sys (an nvidia-bug-report).

`pci.devices` and `pcie.links` read sysfs; when a capture did not record it, they fall back
on the lspci sections it did record (`pci.lspci` below). The script has printed two forms:
since 2023 `lspci -nnDvvvxxxx` (every device, numeric ids, the link in words, the whole
config space in hex); before that `lspci -nn` for the bus and `lspci -d "10de:*" -v -xxx`
(NVIDIA devices; `10b5:*`, PLX switches, too), whose `-v` prints no link: the link is read
from the hex dump of the device's PCI Express capability instead, as lspci itself does.
Never raises: what a block does not say stays None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dldoctor.facts import FactContext, fact
from dldoctor.host.base import Answer, AnswerStatus, NotCaptured, Op

# The forms nvidia-bug-report.sh has run, newest first: (the bus in full, details).
FULL_ARGV = ("lspci", "-nnDvvvxxxx")
LIST_ARGV = ("lspci", "-nn")
# What sos report's pci plugin keeps: every device and its link lines, no hex dump.
SOS_ARGV = ("lspci", "-nnvv")
DETAIL_ARGVS = (("lspci", "-d", "10de:*", "-v", "-xxx"), ("lspci", "-d", "10b5:*", "-v", "-xxx"))

_HEADER = re.compile(  # "0000:19:00.0 3D controller [0302]: ..." (-D and -nn optional)
    r"((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) "
    r"([^:\[]{1,80})(?:\[([0-9a-fA-F]{4})\])?:"
)
_IDS = re.compile(r"\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]")
_PROG_IF = re.compile(r"\(prog-if ([0-9a-fA-F]{2})")
_HEX = re.compile(r"([0-9a-f]{2,3}):((?: [0-9a-f]{2}){1,16})\s*")
_SPEED = re.compile(r"Speed (\d{1,3}(?:\.\d{1,3})?)GT/s")
_WIDTH = re.compile(r"Width x(\d{1,2})\b")
_SECONDARY = re.compile(r"secondary=([0-9a-fA-F]{2})")

# lspci's names (pci.ids) of the classes dldoctor looks at, for output printed without -nn.
CLASS_NAMES = {
    "VGA compatible controller": "0300",
    "3D controller": "0302",
    "Display controller": "0380",
    "Ethernet controller": "0200",
    "Infiniband controller": "0207",
    "Network controller": "0280",
    "Non-Volatile memory controller": "0108",
    "PCI bridge": "0604",
    "Bridge": "0680",
    "Processing accelerators": "1200",
}
VENDOR_NAMES = {
    "NVIDIA Corporation": "10de",
    "Advanced Micro Devices, Inc. [AMD/ATI]": "1002",
    "Mellanox Technologies": "15b3",
    "Intel Corporation": "8086",
}
# PCI Express Link Capabilities / Status, "Supported Link Speeds" encoding (PCIe spec 7.5.3.6).
LINK_SPEEDS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


@dataclass(frozen=True)
class LspciDevice:
    address: str  # "0000:06:00.0"
    vendor: str = ""  # "10de"; "" when the block does not say
    device: str = ""
    class_code: str = ""  # 6 hex digits with the prog-if, 4 when that is not printed
    driver: str = ""  # "Kernel driver in use"
    numa_node: int | None = None
    max_gts: float | None = None  # LnkCap
    max_width: int | None = None
    current_gts: float | None = None  # LnkSta
    current_width: int | None = None
    secondary_bus: str = ""  # a bridge's secondary bus ("01"), for the ports above a device
    link_from: str = ""  # "text" (LnkCap/LnkSta lines) or "config space" (the hex dump)

    @property
    def bus(self) -> str:
        return self.address.rsplit(":", 2)[-2] if self.address.count(":") == 2 else ""

    @property
    def domain(self) -> str:
        return self.address.split(":", 1)[0]


def _address(raw: str) -> str:
    raw = raw.lower()
    return raw if raw.count(":") == 2 else f"0000:{raw}"


def _config_space(lines: list[str]) -> bytes:
    data = bytearray()
    for line in lines:
        m = _HEX.fullmatch(line)
        if m is None:
            continue
        offset = int(m.group(1), 16)
        if offset != len(data):  # a gap or a repeat: what follows cannot be placed
            break
        data.extend(bytes.fromhex(m.group(2)))
    return bytes(data)


def _link_from_config(cfg: bytes) -> tuple[float | None, int | None, float | None, int | None]:
    """LnkCap and LnkSta from the PCI Express capability, walked to as lspci walks it."""
    if len(cfg) < 0x40 or not cfg[0x06] & 0x10:  # no capability list
        return None, None, None, None
    at, seen = cfg[0x34] & 0xFC, set()
    while at and at not in seen and at + 0x14 <= len(cfg):
        seen.add(at)
        if cfg[at] == 0x10:
            cap = int.from_bytes(cfg[at + 0x0C : at + 0x10], "little")
            sta = int.from_bytes(cfg[at + 0x12 : at + 0x14], "little")
            return (LINK_SPEEDS.get(cap & 0xF), (cap >> 4) & 0x3F,
                    LINK_SPEEDS.get(sta & 0xF), (sta >> 4) & 0x3F)  # fmt: skip
        at = cfg[at + 1] & 0xFC
    return None, None, None, None


def _speed_width(line: str) -> tuple[float | None, int | None]:
    speed, width = _SPEED.search(line), _WIDTH.search(line)
    return (float(speed.group(1)) if speed else None, int(width.group(1)) if width else None)


def _device(header: re.Match, first: str, lines: list[str]) -> LspciDevice:
    address, class_name, class_hex = (
        _address(header.group(1)),
        header.group(2).strip(),
        header.group(3),
    )
    ids = _IDS.findall(first)
    vendor, device = (ids[-1][0].lower(), ids[-1][1].lower()) if ids else ("", "")
    if not vendor:
        after = first[header.end() :].strip()
        vendor = next((v for name, v in VENDOR_NAMES.items() if after.startswith(name)), "")
    klass = (class_hex or CLASS_NAMES.get(class_name, "")).lower()
    prog_if = _PROG_IF.search(first)
    if klass and prog_if:
        klass += prog_if.group(1).lower()
    fields: dict[str, object] = {}
    for line in lines:
        text = line.strip()
        if text.startswith("Kernel driver in use:"):
            fields["driver"] = text.partition(":")[2].strip()
        elif text.startswith("NUMA node:"):
            value = text.partition(":")[2].strip()
            fields["numa_node"] = int(value) if value.isdigit() else None
        elif text.startswith("LnkCap:"):
            fields["max_gts"], fields["max_width"] = _speed_width(text)
            fields["link_from"] = "text"
        elif text.startswith("LnkSta:"):
            fields["current_gts"], fields["current_width"] = _speed_width(text)
        elif text.startswith("Bus: primary="):
            m = _SECONDARY.search(text)
            fields["secondary_bus"] = m.group(1).lower() if m else ""
    cfg = _config_space(lines)
    if len(cfg) >= 0x0C:
        vendor = vendor or f"{cfg[1]:02x}{cfg[0]:02x}"
        device = device or f"{cfg[3]:02x}{cfg[2]:02x}"
        klass = f"{cfg[0x0B]:02x}{cfg[0x0A]:02x}{cfg[0x09]:02x}"  # class, subclass, prog-if
    if "link_from" not in fields:
        link = _link_from_config(cfg)
        if link != (None, None, None, None):
            fields.update(max_gts=link[0], max_width=link[1], current_gts=link[2],
                          current_width=link[3], link_from="config space")  # fmt: skip
    return LspciDevice(address, vendor, device, klass, **fields)  # type: ignore[arg-type]


def parse_lspci(text: str) -> tuple[list[LspciDevice], list[str]]:
    """Every device block of `lspci [-nnD] -v[vv] [-x...]` output, and notes; never raises."""
    devices: list[LspciDevice] = []
    notes: list[str] = []
    header: re.Match | None = None
    first, lines = "", []

    def close() -> None:
        if header is None:
            return
        try:
            devices.append(_device(header, first, lines))
        except (ValueError, IndexError) as exc:  # an odd block costs that block only
            notes.append(f"{header.group(1)}: not read ({exc})")

    for line in text.replace("\r", "").split("\n"):
        m = _HEADER.match(line) if line[:1] not in ("\t", " ", "") else None
        if m is not None and not _HEX.fullmatch(line):
            close()
            header, first, lines = m, line, []
        elif header is not None:
            lines.append(line)
    close()
    return devices, notes


@dataclass(frozen=True)
class LspciBus:
    devices: tuple[LspciDevice, ...]
    source: str  # the command lines read
    complete: bool  # every device of the bus is listed (not only NVIDIA's)
    notes: tuple[str, ...] = ()

    def upstream(self, device: LspciDevice) -> tuple[str, ...] | None:
        """The bridges above `device`, nearest first, found by their secondary bus numbers;
        None when the listing cannot tell: not the whole bus, or a bridge in it whose
        buses were not printed (the older form details NVIDIA and PLX devices only)."""
        known = {(d.domain, d.secondary_bus): d for d in self.devices if d.secondary_bus}
        bridges = [d for d in self.devices if d.class_code.startswith("0604")]
        if not self.complete or len(known) < len(bridges):
            return None
        chain: list[str] = []
        here = device
        while (here.domain, here.bus) in known:
            here = known[(here.domain, here.bus)]
            if here.address in chain or here.address == device.address:
                return None  # a loop: odd output
            chain.append(here.address)
        return tuple(chain)  # the top bus has no bridge above it: a root bus


def _merge(found: dict[str, LspciDevice], new: list[LspciDevice]) -> None:
    """`lspci -nn` names every device; a `-v -xxx` block of one says the rest."""
    for dev in new:
        old = found.get(dev.address)
        if old is None:
            found[dev.address] = dev
            continue
        base, other = (dev, old) if dev.link_from or dev.driver else (old, dev)
        found[dev.address] = replace(
            base,
            vendor=base.vendor or other.vendor,
            device=base.device or other.device,
            class_code=max((base.class_code, other.class_code), key=len),
        )


@fact("pci.lspci")
def lspci_bus(ctx: FactContext) -> LspciBus:
    """The lspci sections a capture recorded, newest form first; NotCaptured when it has
    none. Each form not captured is replaced by the others (FactContext.replaced)."""
    found: dict[str, LspciDevice] = {}
    notes: list[str] = []
    used: list[tuple[str, ...]] = []
    first: Answer | None = None
    for argv in (FULL_ARGV, SOS_ARGV, LIST_ARGV, *DETAIL_ARGVS):
        answer = ctx.host.run(list(argv)).require(uncaptured_ok=True)
        first = first or answer
        if answer.status == AnswerStatus.NOT_CAPTURED:
            ctx.replaced(answer)
            continue
        parsed, parse_notes = parse_lspci(answer.text)
        _merge(found, parsed)
        notes += parse_notes
        used.append(argv)
        if argv in (FULL_ARGV, SOS_ARGV):
            break  # every device, with everything the other forms add
    if not used:  # the checks say that lspci was not captured, in none of its forms
        raise NotCaptured(
            Answer(Op.RUN, "lspci", AnswerStatus.NOT_CAPTURED, error=first.error if first else "")
        )
    complete = used[0] in (FULL_ARGV, SOS_ARGV, LIST_ARGV)
    if not complete:
        notes.append("only NVIDIA and PLX devices were listed (no `lspci -nn` section)")
    source = "; ".join(" ".join(argv) for argv in used)
    return LspciBus(tuple(found[a] for a in sorted(found)), source, complete, tuple(notes))
