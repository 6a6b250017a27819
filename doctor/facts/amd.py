"""AMD Instinct GPUs: inventory from sysfs and `rocm-smi --json`, amdgpu and ROCm versions.

Health checks for AMD GPUs are later work; this says what is there and which stack
drives it.
"""

from __future__ import annotations

from typing import NamedTuple

from dldoctor.facts import FactContext, fact
from dldoctor.facts.gpu import normalise_pci_bus_id
from dldoctor.facts.reading import load_json

ROCM_SMI = ["rocm-smi", "--showproductname", "--showdriverversion", "--showbus", "--json"]


class AmdGpu(NamedTuple):
    card: str  # "card0"
    pci_bus_id: str
    series: str  # "Arcturus GL-XL [Instinct MI100]"
    sku: str = ""


class AmdStack(NamedTuple):
    gpus: tuple[AmdGpu, ...] = ()
    driver_version: str = ""  # amdgpu, as rocm-smi reports it
    rocm_version: str = ""  # /opt/rocm/.info/version
    source: str = ""  # "rocm-smi" when it answered
    notes: tuple[str, ...] = ()


def parse_rocm_smi_json(text: str) -> tuple[list[AmdGpu], str, list[str]]:
    """`rocm-smi ... --json`: {"card0": {"Card series": ..., "PCI Bus": ...}, "system": {...}}."""
    data, why = load_json(text)
    if why:
        return [], "", [f"rocm-smi printed no JSON ({why})"]
    if not isinstance(data, dict):
        return [], "", ["rocm-smi JSON is not an object"]
    gpus = []
    for key, card in sorted(data.items()):
        if key.startswith("card") and isinstance(card, dict):
            bus = normalise_pci_bus_id(str(card.get("PCI Bus", ""))) or ""
            gpus.append(
                AmdGpu(key, bus, str(card.get("Card series", "")), str(card.get("Card SKU", "")))
            )
    system = data.get("system") if isinstance(data.get("system"), dict) else {}
    return gpus, str(system.get("Driver version", "")), []


@fact("gpu.amd")
def amd(ctx: FactContext) -> AmdStack:
    rocm = ctx.host.read("/opt/rocm/.info/version", max_bytes=256).text.strip()
    answer = ctx.host.run(ROCM_SMI).require()
    if not answer.ok:
        return AmdStack(rocm_version=rocm, notes=(answer.describe(),))
    if answer.value.returncode != 0:
        said = (answer.value.stderr or answer.value.stdout).decode("utf-8", "replace").strip()
        first = said.splitlines()[0] if said else f"exit status {answer.value.returncode}"
        return AmdStack(rocm_version=rocm, notes=(f"rocm-smi: {first}",))
    gpus, driver, notes = parse_rocm_smi_json(answer.text)
    return AmdStack(tuple(gpus), driver, rocm, "rocm-smi", tuple(notes))
