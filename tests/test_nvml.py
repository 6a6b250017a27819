"""The NVML probe against a fake pynvml that raises the binding's real error classes, and
the probe's JSON parsed into Gpu facts."""

from __future__ import annotations

import pytest

from dldoctor.facts import gpu as g
from dldoctor.facts.nvidia import parse_nvml_probe
from tests.support.fake_pynvml import (
    FUNCTION_NOT_FOUND,
    NOT_SUPPORTED,
    Err,
    FakeNvml,
    h100,
)
from tests.support.nvml import probe_and_parse


def test_eight_healthy_h100s():
    data, stack = probe_and_parse(FakeNvml([h100(i) for i in range(8)]))
    assert stack.usable and stack.source == "nvml"
    assert (stack.driver_version, stack.cuda_driver_version) == ("550.54.15", "12.4")
    assert len(stack.gpus) == 8 and stack.attached_gpus == 8
    gpu = stack.gpus[5]
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.pci_bus_id == "0000:68:00.0"
    assert gpu.memory_total_mib == 81559
    assert (gpu.architecture, gpu.compute_capability) == ("Hopper", "9.0")
    assert (gpu.persistence_mode, gpu.mig_current, gpu.ecc_current) == (True, False, True)
    assert (gpu.remap_pending, gpu.remap_failure, gpu.remap_uncorrected) == (False, False, 0)
    assert (gpu.temperature_c, gpu.temp_slowdown_c, gpu.temp_shutdown_c) == (34, 89, 92)
    assert gpu.clock_event_reasons == ("gpu_idle",)
    assert (gpu.power_draw_w, gpu.power_limit_w) == (71.0, 700.0)
    assert (gpu.pcie_gen_current, gpu.pcie_width_max) == (5, 16)
    assert (gpu.nvlink_active, gpu.nvlink_total) == (18, 18)
    assert gpu.numa_node == 1
    # Pre-Ampere page retirement answers NotSupported on Hopper: recorded, not an error.
    assert {"retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"} <= set(
        gpu.unsupported
    )
    assert gpu.retired_pages_pending is None and gpu.notes == ()
    assert data["topology"]["0,1"] == {"value": 10} and data["topology"]["3,4"] == {"value": 40}


def test_one_not_supported_field_does_not_blank_the_gpu():
    gpu_script = h100(0, nvmlDeviceGetRemappedRows=Err(NOT_SUPPORTED),
                      nvmlDeviceGetPowerUsage=Err(NOT_SUPPORTED))  # fmt: skip
    data, stack = probe_and_parse(FakeNvml([gpu_script]))
    gpu = stack.gpus[0]
    assert data["devices"][0]["fields"]["remapped_rows"]["error"] == "NotSupported"
    assert data["devices"][0]["fields"]["remapped_rows"]["code"] == NOT_SUPPORTED
    assert gpu.remap_pending is None and gpu.power_draw_w is None
    assert {"remap_pending", "power_draw_w"} <= set(gpu.unsupported)
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.temperature_c == 34


def test_function_not_found_falls_back_to_the_older_call():
    # An R470-era driver: no TemperatureV, no ClocksEventReasons, no CUDA _v2 query.
    script = h100(0, nvmlDeviceGetTemperatureV=Err(FUNCTION_NOT_FOUND),
                  nvmlDeviceGetTemperature=41,
                  nvmlDeviceGetCurrentClocksEventReasons=Err(FUNCTION_NOT_FOUND),
                  nvmlDeviceGetCurrentClocksThrottleReasons=0x8 | 0x40)  # fmt: skip
    fake = FakeNvml([script], absent=("nvmlSystemGetCudaDriverVersion_v2",))
    fake.nvmlSystemGetCudaDriverVersion = lambda: 11040
    data, stack = probe_and_parse(fake)
    fields = data["devices"][0]["fields"]
    assert fields["temperature"] == {"value": 41, "call": "nvmlDeviceGetTemperature"}
    assert fields["clock_event_reasons"]["call"] == "nvmlDeviceGetCurrentClocksThrottleReasons"
    assert stack.gpus[0].temperature_c == 41
    assert stack.gpus[0].clock_event_reasons == ("hw_slowdown", "hw_thermal_slowdown")
    assert stack.cuda_driver_version == "11.4"


def test_an_older_binding_without_a_function_is_not_a_crash():
    fake = FakeNvml([h100(0)], absent=("nvmlDeviceGetRemappedRows", "nvmlDeviceGetNumaNodeId"))
    data, stack = probe_and_parse(fake)
    assert data["devices"][0]["fields"]["remapped_rows"]["error"] == "FunctionNotFound"
    assert stack.gpus[0].remap_pending is None and stack.gpus[0].numa_node is None
    assert stack.gpus[0].notes == ()  # missing calls are not problems of the GPU


@pytest.mark.parametrize("code, error", [
    (12, g.NO_DRIVER),          # NVML_ERROR_LIBRARY_NOT_FOUND
    (9, g.DRIVER_NOT_LOADED),   # NVML_ERROR_DRIVER_NOT_LOADED
    (18, g.VERSION_MISMATCH),   # NVML_ERROR_LIB_RM_VERSION_MISMATCH
    (4, g.NO_PERMISSION),       # NVML_ERROR_NO_PERMISSION
    (15, g.GPU_LOST),           # NVML_ERROR_GPU_IS_LOST
    (999, g.UNKNOWN),           # NVML_ERROR_UNKNOWN
])  # fmt: skip
def test_init_errors_become_precise_reasons(code, error):
    data, stack = probe_and_parse(FakeNvml([], init=Err(code)))
    assert data["init"]["code"] == code
    assert stack.error == error and not stack.usable
    assert stack.error_message.startswith(data["init"]["error"])


def test_a_lost_gpu_does_not_hide_the_others():
    data, stack = probe_and_parse(FakeNvml([h100(i) for i in range(3)], lost=(1,)))
    assert [bool(x.name) for x in stack.gpus] == [True, False, True]
    assert "GpuIsLost" in stack.gpus[1].notes[0]
    assert set(data["topology"]) == {"0,2"}


def test_real_binding_on_a_host_without_driver():
    # This very machine (and CI) has no NVIDIA driver: the real pynvml says so.
    import os

    if os.path.exists("/proc/driver/nvidia"):
        pytest.skip("an NVIDIA driver is loaded here")
    data, stack = probe_and_parse(__import__("pynvml"))
    assert data["init"]["error"] == "LibraryNotFound" and stack.error == g.NO_DRIVER


def test_malformed_probe_data_is_not_fatal():
    assert parse_nvml_probe("garbage").error == g.PROBE_FAILED
    stack = parse_nvml_probe({"init": {"value": None}, "devices": [{"index": 0, "fields": {
        "temperature": {"value": "hot"}, "name": "not a dict"}}]})  # fmt: skip
    assert stack.gpus[0].temperature_c is None
    assert any("unexpected value" in n for n in stack.gpus[0].notes)


def test_a_hung_nvml_is_the_finding_and_nvidia_smi_is_not_asked(tmp_path):
    from dldoctor.facts import Facts
    from dldoctor.facts.nvidia import nvidia
    from dldoctor.host.replay import ReplayHost
    from tests.support.bundlebuilder import BundleBuilder
    from tests.support.paths import FIXTURES

    # nvidia-smi links the same library on the same driver: after NVML hung, it could only
    # hang too (and the run's probe window is spent by then).
    xml = (FIXTURES / "corpus/nvidia-smi-xml/telegraf-tesla-t4.xml").read_text()
    b = BundleBuilder(tmp_path / "b").command(["nvidia-smi", "-q", "-x"], xml)
    (b.root / "nvml.json").write_text('{"status": "timeout", "timeout_s": 10}')
    facts = Facts(ReplayHost(str(b.root)))
    stack = facts.get(nvidia)
    assert stack.error == g.TIMED_OUT and "did not answer within 10 s" in stack.error_message
    assert [e.op for e in facts.evidence(nvidia)] == ["probe"]
