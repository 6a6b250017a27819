"""AMD GPUs: bound to amdgpu, with a ROCm installation."""

from __future__ import annotations

from dldoctor.checks.needs import gpus_on_bus, needs
from dldoctor.facts import Facts
from dldoctor.facts.amd import amd
from dldoctor.facts.pci import AMD, PciDevice
from dldoctor.model import Outcome, failed, passed, warned
from dldoctor.policy import Policy
from dldoctor.registry import check


@check(
    "gpu.amd.inventory",
    "AMD GPUs",
    remediation="Install the ROCm stack with its amdgpu-dkms driver (amdgpu-install "
    "--usecase=rocm), then reboot.",
)
@needs(gpus_on_bus(AMD, "AMD"))
def amd_inventory(facts: Facts, policy: Policy, on_bus: tuple[PciDevice, ...]) -> Outcome:
    stack = facts.get(amd)
    unbound = [f"{d.address}: driver {d.driver or 'none'}" for d in on_bus if d.driver != "amdgpu"]
    rocm = f", ROCm {stack.rocm_version}" if stack.rocm_version else ", ROCm not found"
    details = [f"{x.pci_bus_id or x.card}: {x.series}" for x in stack.gpus] + list(stack.notes)
    if unbound:
        summary = f"{len(unbound)} of {len(on_bus)} AMD GPU(s) not bound to amdgpu{rocm}"
        return failed(summary, unbound + details)
    series = sorted({x.series for x in stack.gpus if x.series})
    names = f" ({', '.join(series)})" if series else ""
    driver = f", amdgpu {stack.driver_version}" if stack.driver_version else ""
    if not stack.rocm_version:
        return warned(
            f"{len(on_bus)} AMD GPU(s){names}{driver}, but no ROCm installation found", details
        )
    return passed(f"{len(on_bus)} AMD GPU(s){names}{driver}{rocm}", details)
