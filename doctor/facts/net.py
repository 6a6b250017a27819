"""Network devices by name: /sys/class/net interfaces and /sys/class/infiniband HCAs; the
driver and firmware of each physical interface (`ethtool -i`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.host.base import AnswerStatus


class Interfaces(NamedTuple):
    net: tuple[str, ...] = ()
    infiniband: tuple[str, ...] = ()


@fact("net.interfaces")
def interfaces(ctx: FactContext) -> Interfaces:
    net = ctx.host.listdir("/sys/class/net").require()
    ib = ctx.host.listdir("/sys/class/infiniband").require()
    return Interfaces(net.value if net.ok else (), ib.value if ib.ok else ())


# --- NIC driver and firmware (`ethtool -i`) --------------------------------------------

NET_CLASS = "/sys/class/net"
MAX_NICS = 32  # physical interfaces asked; a host with more names them in a note
_ETHTOOL_KEYS = {"driver": "driver", "firmware-version": "firmware", "bus-info": "bus_info"}
NO_FIRMWARE = ("", "N/A", "n/a")  # virtio_net, r8169 print nothing; a VF (iavf) "N/A"


@dataclass(frozen=True)
class NicFirmware:
    interface: str  # "enp59s0f0"
    driver: str = ""  # "ice", "mlx5_core"
    firmware: str = ""  # "4.22 0x80010446 1.3197.0"; "" when the driver reports none
    bus_info: str = ""  # "0000:3b:00.0" for a PCI NIC


@dataclass(frozen=True)
class NicFirmwares:
    nics: tuple[NicFirmware, ...] = ()
    asked: bool = False  # ethtool answered for at least one interface
    notes: tuple[str, ...] = ()
    unread: tuple[str, ...] = ()  # physical interfaces ethtool did not answer for


def parse_ethtool_info(text: str) -> dict[str, str]:
    """`ethtool -i IFACE`: "key: value" lines; the driver, firmware-version and bus-info
    are kept (as driver, firmware, bus_info), the rest (supports-*) is skipped."""
    found: dict[str, str] = {}
    for line in text.splitlines()[:64]:
        key, sep, value = line.partition(":")
        if sep and key.strip() in _ETHTOOL_KEYS:
            found[_ETHTOOL_KEYS[key.strip()]] = value.strip()[:200]
    return found


def physical_interfaces(ctx: FactContext, names: tuple[str, ...], notes: list[str]) -> list[str]:
    """The interfaces whose /sys/class/net link leads to a device, not to devices/virtual
    (lo, bridges, veths, bonds, tunnels have no firmware)."""
    found = []
    for name in sorted(n for n in names if not n.startswith(".")):
        answer = ctx.host.readlink(f"{NET_CLASS}/{name}")
        if answer.ok and isinstance(answer.value, str) and "/virtual/" not in answer.value:
            found.append(name)
    if len(found) > MAX_NICS:
        notes.append(f"{len(found)} physical interfaces; only the first {MAX_NICS} asked")
    return found[:MAX_NICS]


@fact("net.firmware")
def nic_firmware(ctx: FactContext) -> NicFirmwares:
    """Driver and firmware of each physical interface, as `ethtool -i` says them. An
    interface ethtool does not answer for (not installed, not captured, timed out) is
    noted, never guessed."""
    notes: list[str] = []
    listing = ctx.host.listdir(NET_CLASS)
    if not listing.ok:
        said = () if listing.status == AnswerStatus.MISSING else (listing.describe(),)
        return NicFirmwares(notes=said)
    nics, asked, unread = [], False, []
    physical = physical_interfaces(ctx, tuple(listing.value), notes)
    for i, name in enumerate(physical):
        answer = ctx.host.run(["ethtool", "-i", name])
        if answer.status in (AnswerStatus.NOT_INSTALLED, AnswerStatus.NOT_CAPTURED,
                             AnswerStatus.TIMEOUT):  # fmt: skip
            notes.append(answer.describe())
            unread.extend(physical[i:])
            break  # the same for every interface (one that hangs is not asked 32 times)
        if not answer.ok or answer.value.returncode != 0:
            notes.append(answer.describe() if not answer.ok else f"ethtool -i {name} failed")
            unread.append(name)
            continue
        asked = True
        info = parse_ethtool_info(answer.text)
        firmware = info.get("firmware", "")
        nics.append(
            NicFirmware(
                name,
                info.get("driver", ""),
                "" if firmware in NO_FIRMWARE else firmware,
                info.get("bus_info", "").lower(),
            )
        )
    return NicFirmwares(tuple(nics), asked, tuple(notes), tuple(unread))
