"""Virtual GPUs: the virtualization mode from NVML and from nvidia-smi's XML, and the GPU
checks in a vGPU guest (what it cannot read is a skip, never a pass on a bogus reading)."""

from __future__ import annotations

import dataclasses

import pytest

from dldoctor.checks import driver, gpu_memory, thermal
from dldoctor.facts import Facts
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.nvsmi import parse_nvidia_smi_xml
from dldoctor.facts.pci import PciBus, pci_devices
from dldoctor.model import Status
from dldoctor.policy import Policy
from tests.support.fake_pynvml import FakeNvml, h100
from tests.support.nvml import probe_and_parse
from tests.support.paths import FIXTURES

T4 = (FIXTURES / "corpus/nvidia-smi-xml/telegraf-tesla-t4.xml").read_text()
GUEST_SKIPS = [
    (driver.persistence, "persistence mode"),
    (gpu_memory.ecc_mode, "the ECC mode"),
    (gpu_memory.ecc_errors, "the ECC error counters"),
    (gpu_memory.remapped_rows, "row remapping"),
    (driver.mig_pending, "the GPU's MIG mode"),
    (thermal.gpu_temperature, "its temperature"),
    (thermal.gpu_clocks, "its clocks or their slowdown reasons"),
    (thermal.gpu_power, "its power draw"),
]


def guest_xml(license_status: str = "Licensed (Expiry: 2026-7-7 16:1:44 GMT)") -> str:
    """The real T4 capture (an AWS passthrough GPU) as a vGPU guest would show it: the mode
    says VGPU, the name is the profile, and the licence element a guest has (its shape as in
    a real guest's `nvidia-smi -q -x`: licensed_product_name, license_status)."""
    licence = (
        "<vgpu_software_licensed_product><licensed_product_name>NVIDIA Virtual Compute Server"
        f"</licensed_product_name><license_status>{license_status}</license_status>"
        "</vgpu_software_licensed_product>"
    )
    text = T4.replace(
        "<virtualization_mode>Pass-Through</virtualization_mode>",
        "<virtualization_mode>VGPU</virtualization_mode>",
    ).replace("<product_name>Tesla T4</product_name>", "<product_name>NVIDIA T4-16C</product_name>")
    text = text.replace("<gpu_virtualization_mode>", licence + "<gpu_virtualization_mode>")
    assert text.count("VGPU<") == 1 and "T4-16C" in text
    return text


def facts_of(stack) -> Facts:
    return Facts.given({nvidia: stack, pci_devices: PciBus(())})


def test_real_passthrough_capture_is_a_normal_gpu():
    stack = parse_nvidia_smi_xml(T4)
    gpu = stack.gpus[0]
    assert gpu.virtualization_mode == "passthrough" and not gpu.vgpu_guest
    facts = facts_of(stack)
    assert gpu_memory.ecc_mode(facts, Policy()).status == Status.PASS
    assert thermal.gpu_temperature(facts, Policy()).summary.startswith("hottest GPU 40 °C")
    assert "vGPU" not in driver.driver_loaded(facts, Policy()).summary


def test_xml_guest_is_recognised_with_profile_and_licence():
    stack = parse_nvidia_smi_xml(guest_xml())
    gpu = stack.gpus[0]
    assert gpu.virtualization_mode == "vgpu" and gpu.vgpu_guest and gpu.notes == ()
    assert gpu.vgpu_license == (
        "NVIDIA Virtual Compute Server: Licensed (Expiry: 2026-7-7 16:1:44 GMT)"
    )
    outcome = driver.driver_loaded(facts_of(stack), Policy())
    assert outcome.status == Status.PASS
    assert outcome.summary.endswith("; vGPU guest (profile NVIDIA T4-16C)")
    assert any("vGPU licence NVIDIA Virtual Compute Server: Licensed" in d for d in outcome.details)


def test_unlicensed_guest_warns():
    stack = parse_nvidia_smi_xml(guest_xml("Unlicensed (Restricted)"))
    outcome = driver.driver_loaded(facts_of(stack), Policy())
    assert outcome.status == Status.WARN and outcome.summary.endswith(", unlicensed")


def test_unknown_virtualization_word_is_noted():
    text = T4.replace("Pass-Through</virtualization_mode>", "Hyper-Space</virtualization_mode>")
    gpu = parse_nvidia_smi_xml(text).gpus[0]
    assert gpu.virtualization_mode == ""
    assert any("virtualization_mode: unexpected value 'Hyper-Space'" in n for n in gpu.notes)


@pytest.mark.parametrize(("check", "what"), GUEST_SKIPS)
def test_guest_readings_are_skipped_with_the_reason(check, what):
    # The T4 guest document still holds values (40 °C, ECC on): a guest's are not the GPU's.
    outcome = check(facts_of(parse_nvidia_smi_xml(guest_xml())), Policy())
    assert outcome.status == Status.SKIP
    assert outcome.summary == f"a vGPU guest cannot read {what}; check it on the hypervisor host"


def test_nvml_virtualization_modes():
    modes = [0, 1, 2, 3, 4]
    fake = FakeNvml([h100(i, nvmlDeviceGetVirtualizationMode=m) for i, m in enumerate(modes)])
    _, stack = probe_and_parse(fake)
    assert [x.virtualization_mode for x in stack.gpus] == [
        "none",
        "passthrough",
        "vgpu",
        "host_vgpu",
        "host_vsga",
    ]
    # A host with one guest GPU among normal ones judges the normal ones only.
    temperature = thermal.gpu_temperature(facts_of(stack), Policy())
    assert temperature.status == Status.PASS
    assert not any("GPU 2 " in line for line in temperature.details)
    assert len(temperature.details) == 4


def test_nvml_guest_temperature_zero_is_not_a_pass():
    guest = h100(0, nvmlDeviceGetVirtualizationMode=2, nvmlDeviceGetTemperatureV=0)
    _, stack = probe_and_parse(FakeNvml([guest]))
    assert stack.gpus[0].temperature_c == 0
    assert thermal.gpu_temperature(facts_of(stack), Policy()).status == Status.SKIP
    # The same GPU bare metal is judged.
    bare = dataclasses.replace(stack, gpus=(dataclasses.replace(stack.gpus[0], virtualization_mode="none"),))  # fmt: skip
    assert thermal.gpu_temperature(facts_of(bare), Policy()).status == Status.PASS
