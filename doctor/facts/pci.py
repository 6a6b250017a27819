"""The PCI bus from sysfs: which devices exist and which driver each one is bound to.

sysfs is the one view that does not depend on the NVIDIA driver working, so it is how
"NVML sees 7 GPUs, the bus has 8" and "Nouveau holds the GPU" are found.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from dldoctor.facts import FactContext, fact
from dldoctor.facts.reading import read_text, to_int
from dldoctor.host.base import AnswerStatus

NVIDIA = "10de"
AMD = "1002"
DEVICES = "/sys/bus/pci/devices"


@dataclass(frozen=True)
class PciDevice:
    address: str  # "0000:3b:00.0"
    vendor: str  # "10de" (no 0x)
    device: str
    class_code: str  # "030200" (6 hex digits)
    driver: str = ""  # bound driver's name; "" when none
    numa_node: int | None = None

    @property
    def is_display(self) -> bool:
        """VGA (0300), 3D (0302) or other display (0380) controller: a GPU."""
        return self.class_code.startswith("03")

    @property
    def is_nvswitch(self) -> bool:
        # NVSwitches are NVIDIA "bridge, other" (0680) devices.
        return self.vendor == NVIDIA and self.class_code.startswith("0680")


@dataclass(frozen=True)
class PciBus:
    devices: tuple[PciDevice, ...] = ()
    readable: bool = True
    notes: tuple[str, ...] = ()
    source: str = "sysfs"  # or the lspci command lines of a capture without /sys

    def gpus(self, vendor: str) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.devices if d.vendor == vendor and d.is_display)

    @property
    def read_in_full(self) -> bool:
        """Every device answered: only then does an absent device rule anything out (one
        whose attributes did not answer may be the GPU)."""
        return self.readable and not self.notes

    def has_vendor(self, vendor: str) -> bool:
        return any(d.vendor == vendor for d in self.devices)

    @property
    def nvswitches(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.devices if d.is_nvswitch)


def _hex(text: str) -> str:
    return text.strip().lower().removeprefix("0x")


@fact("pci.devices")
def pci_devices(ctx: FactContext) -> PciBus:
    host = ctx.host
    listing = host.listdir(DEVICES).require(uncaptured_ok=True)
    if (
        listing.status == AnswerStatus.NOT_CAPTURED
    ):  # an nvidia-bug-report: its lspci sections instead
        ctx.replaced(listing)
        return _from_lspci(ctx)
    if not listing.ok:
        return PciBus(readable=False, notes=(f"{DEVICES}: {listing.status}",))
    devices, notes = [], []
    for address in listing.value:
        base = f"{DEVICES}/{address}"
        # One device's unreadable attribute (EIO from a dead card) is a note about that
        # device, never the loss of the whole bus (facts/reading.py's rule).
        vendor = read_text(host, f"{base}/vendor", notes, max_bytes=64)
        klass = read_text(host, f"{base}/class", notes, max_bytes=64)
        if vendor is None or klass is None:
            notes.append(f"{address}: no vendor or class: left out")
            continue
        vendor_id, class_code = _hex(vendor), _hex(klass)
        driver, numa = "", None
        # Only the devices dldoctor reasons about get the extra reads.
        if vendor_id in (NVIDIA, AMD) and class_code.startswith(("03", "0680")):
            link = host.readlink(f"{base}/driver")
            driver = posixpath.basename(link.value.rstrip("/")) if link.ok else ""
            numa_text = read_text(host, f"{base}/numa_node", notes, max_bytes=64)
            numa = to_int(numa_text, minimum=0)  # -1: the firmware did not say
        device = _hex(read_text(host, f"{base}/device", notes, max_bytes=64) or "")
        devices.append(PciDevice(address, vendor_id, device, class_code, driver, numa))
    return PciBus(tuple(devices), True, tuple(notes))


def _from_lspci(ctx: FactContext) -> PciBus:
    from dldoctor.facts.lspci import lspci_bus

    bus = ctx.get(lspci_bus)
    devices, notes = [], list(bus.notes)
    for d in bus.devices:
        if not (d.vendor and d.class_code):
            notes.append(f"{d.address}: no vendor or class in the lspci output: left out")
            continue
        devices.append(
            PciDevice(d.address, d.vendor, d.device, d.class_code, d.driver, d.numa_node)
        )
    return PciBus(tuple(devices), True, tuple(notes), source=bus.source)
