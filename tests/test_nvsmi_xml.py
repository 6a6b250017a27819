"""`nvidia-smi -q -x` parser on real captures (fixtures/corpus/nvidia-smi-xml, telegraf test
data; see fixtures/SOURCES.md) and on small hand-written documents for what the corpus lacks
(non-zero counters, row remapping, "Not Supported", broken output).

Every expected value below was read from the XML files by eye, not produced by the parser.
"""

from __future__ import annotations

import dataclasses

import pytest

from dldoctor.facts import nvsmi
from dldoctor.facts.gpu import PROBE_FAILED, Gpu, normalise_pci_bus_id
from dldoctor.facts.nvsmi import parse_nvidia_smi_xml
from tests.support.paths import FIXTURES

XML_DIR = FIXTURES / "corpus" / "nvidia-smi-xml"

# Every Gpu field except index, notes and unsupported, None/"" unless a case says otherwise.
# The memory in use and the process lists are held to these captures in
# tests/test_gpu_processes.py.
_FIELDS = [
    f.name
    for f in dataclasses.fields(Gpu)
    if f.name not in ("index", "notes", "unsupported", "memory_used_mib", "processes")
]
_EMPTY = {f.name: f.default for f in dataclasses.fields(Gpu) if f.name in _FIELDS}


def gpu(**fields) -> dict:
    unknown = set(fields) - set(_FIELDS)
    assert not unknown, unknown
    return {**_EMPTY, **fields}


# Cards without ECC, MIG, page retirement or row remapping (GeForce/Quadro) say N/A for all of
# them; these helpers keep the table to what differs.
NO_ECC = dict(
    ecc_current=None,
    ecc_pending=None,
    ecc_volatile_corrected=None,
    ecc_volatile_uncorrected=None,
    ecc_aggregate_corrected=None,
    ecc_aggregate_uncorrected=None,
)
ECC_ON_ZERO = dict(
    ecc_current=True,
    ecc_pending=True,
    ecc_volatile_corrected=0,
    ecc_volatile_uncorrected=0,
    ecc_aggregate_corrected=0,
    ecc_aggregate_uncorrected=0,
)

# file -> (driver_version, cuda_version, attached_gpus, [per-GPU expectations])
CORPUS = {
    "telegraf-a100-sxm4-v12.xml": ("535.54.03", "12.2", 4, [
        gpu(name="NVIDIA A100-SXM4-80GB", uuid="GPU-513536b6-7d19-9063-b049-1e69664bb298",
            serial="1650522003820", pci_bus_id="0000:01:00.0",
            memory_total_mib=81920,  # the GPU's, not a MIG slice's 19968 MiB
            vbios="92.00.36.00.02", architecture="Ampere", persistence_mode=False,
            compute_mode="Default", mig_current=True, mig_pending=True, **ECC_ON_ZERO,
            # retired_pages and remapped_rows are N/A in this capture
            temperature_c=27, temp_slowdown_c=89, temp_shutdown_c=92, clock_event_reasons=(),
            power_draw_w=67.03, power_limit_w=500.0, pcie_gen_current=4, pcie_gen_max=4,
            pcie_width_current=16, pcie_width_max=16, pcie_replay_counter=0,
            virtualization_mode="none"),
    ]),
    "telegraf-tesla-t4.xml": ("515.105.01", "11.7", 1, [
        gpu(name="Tesla T4", uuid="GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
            serial="0000000000000", pci_bus_id="0000:00:1e.0", memory_total_mib=15360,
            vbios="90.04.84.00.06", architecture="Turing", persistence_mode=False,
            compute_mode="Default", **ECC_ON_ZERO,
            retired_pages_sbe=0, retired_pages_dbe=0, retired_pages_pending=False,
            temperature_c=40, temp_slowdown_c=93, temp_shutdown_c=96, clock_event_reasons=(),
            power_draw_w=26.78, power_limit_w=70.0, pcie_gen_current=3, pcie_gen_max=3,
            pcie_width_current=8, pcie_width_max=16, pcie_replay_counter=0,
            virtualization_mode="passthrough"),
    ]),
    "telegraf-gtx-1070-ti.xml": ("", "", None, [
        # Minimal document: no driver/cuda version, no max link gen/width, power_draw N/A.
        gpu(name="GeForce GTX 1070 Ti", uuid="GPU-f9ba66fc-a7f5-94c5-da19-019ef2f9c665",
            pci_bus_id="0000:01:00.0", memory_total_mib=4096, compute_mode="Default",
            temperature_c=39, pcie_gen_current=1, pcie_width_current=16),
    ]),
    "telegraf-quadro-p400.xml": ("418.43", "10.1", 1, [
        # Old schema: clocks_throttle_reasons, single_bit/double_bit ECC (all N/A),
        # power_readings all N/A, no product_architecture, no mig_mode, no remapped_rows.
        gpu(name="Quadro P400", uuid="GPU-8f750be4-dfbc-23b9-b33f-da729a536494",
            serial="0424418054852", pci_bus_id="0000:43:00.0", memory_total_mib=1998,
            vbios="86.07.3B.00.4A", persistence_mode=False, compute_mode="Default", **NO_ECC,
            temperature_c=33, temp_slowdown_c=100, temp_shutdown_c=103,
            clock_event_reasons=("gpu_idle",), pcie_gen_current=1, pcie_gen_max=3,
            pcie_width_current=16, pcie_width_max=16, pcie_replay_counter=0,
            virtualization_mode="none"),
    ]),
    "telegraf-rtx-3080-v12.xml": ("536.40", "12.2", 1, [
        # Windows (WDDM): persistence mode N/A; gpu_power_readings/current_power_limit.
        gpu(name="NVIDIA GeForce RTX 3080", uuid="GPU-19d6d965-2acc-f646-00f8-4c76979aabb4",
            pci_bus_id="0000:04:00.0", memory_total_mib=10240, vbios="94.02.71.40.72",
            architecture="Ampere", compute_mode="Default", **NO_ECC,
            temperature_c=31, temp_slowdown_c=95, temp_shutdown_c=98,
            clock_event_reasons=("gpu_idle",), power_draw_w=22.78, power_limit_w=336.0,
            pcie_gen_current=4, pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16,
            pcie_replay_counter=0,
            virtualization_mode="passthrough"),
    ]),
    "telegraf-rtx-3080-v13.xml": ("595.58.03", "13.2", 1, [
        # v13: average_power_draw/instant_power_draw, split sram_uncorrectable (all N/A).
        gpu(name="NVIDIA GeForce RTX 3080", uuid="GPU-19d6d965-2acc-f646-00f8-4c76979aabb4",
            serial="REDACTED", pci_bus_id="0000:0c:00.0", memory_total_mib=10240,
            vbios="94.02.71.40.72", architecture="Ampere", persistence_mode=False,
            compute_mode="Default", **NO_ECC,
            temperature_c=27, temp_slowdown_c=95, temp_shutdown_c=98, clock_event_reasons=(),
            power_draw_w=139.62, power_limit_w=320.0, pcie_gen_current=4, pcie_gen_max=4,
            pcie_width_current=16, pcie_width_max=16, pcie_replay_counter=0,
            virtualization_mode="none"),
    ]),
    "telegraf-rtx-3090-v12.xml": ("525.147.05", "12.0", 1, [
        # power_readings: power_limit 200 W is what is enforced (default 350 W).
        gpu(name="NVIDIA GeForce RTX 3090", uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
            pci_bus_id="0000:00:10.0", memory_total_mib=24576, vbios="94.02.71.40.72",
            architecture="Ampere", persistence_mode=True, compute_mode="Default", **NO_ECC,
            temperature_c=37, temp_slowdown_c=95, temp_shutdown_c=98,
            clock_event_reasons=("gpu_idle",), power_draw_w=27.23, power_limit_w=200.0,
            pcie_gen_current=1, pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16,
            pcie_replay_counter=0,
            virtualization_mode="passthrough"),
    ]),
    "telegraf-3090-v13.xml": ("590.44.01", "13.1", 1, [
        # SW power cap active; average_power_draw 35.06 W preferred to instant 35.15 W.
        gpu(name="NVIDIA GeForce RTX 3090", uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
            pci_bus_id="0000:09:00.0", memory_total_mib=24576, vbios="94.02.26.48.1B",
            architecture="Ampere", persistence_mode=True, compute_mode="Default", **NO_ECC,
            temperature_c=32, temp_slowdown_c=95, temp_shutdown_c=98,
            clock_event_reasons=("sw_power_cap",), power_draw_w=35.06, power_limit_w=350.0,
            pcie_gen_current=1, pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16,
            pcie_replay_counter=0,
            virtualization_mode="none"),
    ]),
    "telegraf-dual_2070-v13.xml": ("590.44.01", "13.1", 2, [
        # average_power_draw N/A: instant_power_draw is used.
        gpu(name="NVIDIA GeForce RTX 2070", uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
            pci_bus_id="0000:01:00.0", memory_total_mib=8192, vbios="90.06.18.00.3A",
            architecture="Turing", persistence_mode=True, compute_mode="Default", **NO_ECC,
            temperature_c=14, temp_slowdown_c=91, temp_shutdown_c=94,
            clock_event_reasons=("gpu_idle",), power_draw_w=9.23, power_limit_w=175.0,
            pcie_gen_current=1, pcie_gen_max=3, pcie_width_current=8, pcie_width_max=16,
            pcie_replay_counter=0,
            virtualization_mode="none"),
        gpu(name="NVIDIA GeForce RTX 2070", uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789cd",
            pci_bus_id="0000:02:00.0", memory_total_mib=8192, vbios="90.06.18.00.3A",
            architecture="Turing", persistence_mode=True, compute_mode="Default", **NO_ECC,
            temperature_c=13, temp_slowdown_c=91, temp_shutdown_c=94,
            clock_event_reasons=("gpu_idle",), power_draw_w=11.82, power_limit_w=175.0,
            pcie_gen_current=1, pcie_gen_max=3, pcie_width_current=8, pcie_width_max=16,
            pcie_replay_counter=0,
            virtualization_mode="none"),
    ]),
}  # fmt: skip


def test_every_corpus_file_has_expectations():
    assert sorted(p.name for p in XML_DIR.glob("*.xml")) == sorted(CORPUS)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus(name):
    driver, cuda, attached, expected_gpus = CORPUS[name]
    stack = parse_nvidia_smi_xml((XML_DIR / name).read_text())
    assert (stack.source, stack.error, stack.error_message) == ("nvidia-smi", "", "")
    assert stack.usable
    assert (stack.driver_version, stack.cuda_driver_version) == (driver, cuda)
    assert stack.attached_gpus == attached
    assert len(stack.gpus) == len(expected_gpus)
    for index, (got, want) in enumerate(zip(stack.gpus, expected_gpus, strict=True)):
        assert got.index == index
        assert {f: getattr(got, f) for f in _FIELDS} == want, f"GPU {index}"
        # Nothing in these captures says "Not Supported", and nothing in them is odd.
        assert got.unsupported == ()
        assert got.notes == (), got.notes


def test_corpus_stack_notes():
    notes = {name: parse_nvidia_smi_xml((XML_DIR / name).read_text()).notes for name in CORPUS}
    # The A100 capture kept one <gpu> of the four attached; the GTX one has no driver.
    assert notes.pop("telegraf-a100-sxm4-v12.xml") == (
        "attached_gpus is 4 but the document describes 1 GPU(s)",
    )
    assert notes.pop("telegraf-gtx-1070-ti.xml") == ("the document has no <driver_version>",)
    assert all(n == () for n in notes.values()), notes


def test_corpus_bytes_input_is_accepted():
    stack = parse_nvidia_smi_xml((XML_DIR / "telegraf-tesla-t4.xml").read_bytes())  # type: ignore[arg-type]
    assert stack.driver_version == "515.105.01" and len(stack.gpus) == 1


# --- broken output ----------------------------------------------------------------------

T4 = (XML_DIR / "telegraf-tesla-t4.xml").read_text()


@pytest.mark.parametrize("text, why", [
    ("", "empty"),
    ("   \n\t\n", "empty"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "not XML"),
    ("\x00\x01\x02garbage\xff", "not XML"),
    ("<nvidia_smi_log><driver_version>535", "no element found"),
    (T4[: len(T4) // 2], "not parseable"),
    ("<nvidia_smi_log><gpu></nvidia_smi_log>", "mismatched tag"),
    ('<?xml version="1.0"?><rocm_smi><card0/></rocm_smi>', "<rocm_smi>"),
    ("<html><body>502 Bad Gateway</body></html>", "<html>"),
    ('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>',
     "entities"),
])  # fmt: skip
def test_unparseable(text, why):
    stack = parse_nvidia_smi_xml(text)
    assert stack.source == "nvidia-smi"
    assert stack.error == PROBE_FAILED and not stack.usable
    assert stack.error_message.startswith("nvidia-smi XML is not parseable: ")
    assert why in stack.error_message
    assert "\n" not in stack.error_message
    assert stack.gpus == () and stack.driver_version == ""


@pytest.mark.parametrize("value", [None, 42, ["<nvidia_smi_log/>"]])
def test_not_text_does_not_raise(value):
    stack = parse_nvidia_smi_xml(value)  # type: ignore[arg-type]
    assert stack.error == PROBE_FAILED and "expected text" in stack.error_message


def test_text_around_the_document_is_noted():
    text = "WARNING: infoROM is corrupted at gpu 0000:00:1E.0\n" + T4 + "\ntrailing junk\n"
    stack = parse_nvidia_smi_xml(text)
    assert stack.error == "" and len(stack.gpus) == 1
    assert stack.gpus[0].name == "Tesla T4"
    assert len(stack.notes) == 2
    assert "before" in stack.notes[0] and "infoROM is corrupted" in stack.notes[0]
    assert "after" in stack.notes[1] and "trailing junk" in stack.notes[1]


def test_no_gpus():
    stack = parse_nvidia_smi_xml(
        "<nvidia_smi_log><driver_version>550.54.15</driver_version>"
        "<cuda_version>12.4</cuda_version><attached_gpus>0</attached_gpus></nvidia_smi_log>"
    )
    assert stack.usable and stack.gpus == () and stack.attached_gpus == 0
    assert (stack.driver_version, stack.cuda_driver_version) == ("550.54.15", "12.4")
    assert stack.notes == ()


def test_one_unreadable_gpu_does_not_hide_the_others(monkeypatch):
    real = nvsmi._gpu

    def flaky(index, element):
        if index == 0:
            raise RuntimeError("boom")
        return real(index, element)

    monkeypatch.setattr(nvsmi, "_gpu", flaky)
    stack = parse_nvidia_smi_xml((XML_DIR / "telegraf-dual_2070-v13.xml").read_text())
    assert stack.error == ""
    first, second = stack.gpus
    assert first.pci_bus_id == "0000:01:00.0" and first.name == "" and first.notes
    assert second.name == "NVIDIA GeForce RTX 2070" and second.temperature_c == 13
    assert any("GPU 0" in n for n in stack.notes)


# --- hand-written documents for what the corpus lacks ----------------------------------


def doc(gpu_body: str, gpu_id: str = "00000000:3B:00.0") -> str:
    return (
        '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        "<nvidia_smi_log><driver_version>535.104.05</driver_version>"
        "<cuda_version>12.2</cuda_version><attached_gpus>1</attached_gpus>"
        f'<gpu id="{gpu_id}">{gpu_body}</gpu></nvidia_smi_log>'
    )


def one_gpu(gpu_body: str, **kw) -> Gpu:
    stack = parse_nvidia_smi_xml(doc(gpu_body, **kw))
    assert stack.error == "" and len(stack.gpus) == 1
    return stack.gpus[0]


def test_not_supported_values_are_none_and_named():
    g = one_gpu(
        "<persistence_mode>[Not Supported]</persistence_mode>"
        "<compute_mode>Not Supported</compute_mode>"
        "<mig_mode><current_mig>[N/A]</current_mig><pending_mig>N/A</pending_mig></mig_mode>"
        "<ecc_mode><current_ecc>Not Supported</current_ecc>"
        "<pending_ecc>Not Supported</pending_ecc></ecc_mode>"
        "<ecc_errors><volatile><sram_correctable>Not Supported</sram_correctable>"
        "<dram_correctable>Not Supported</dram_correctable></volatile></ecc_errors>"
        "<remapped_rows>Not Supported</remapped_rows>"
        "<temperature><gpu_temp>Unknown</gpu_temp>"
        "<gpu_temp_slow_threshold>[Not Supported]</gpu_temp_slow_threshold></temperature>"
        "<power_readings><power_draw>[Not Supported]</power_draw>"
        "<enforced_power_limit>250.00 W</enforced_power_limit></power_readings>"
    )
    assert g.persistence_mode is None and g.compute_mode == ""
    assert (g.mig_current, g.mig_pending, g.ecc_current, g.ecc_pending) == (None,) * 4
    assert g.ecc_volatile_corrected is None
    assert (g.remap_corrected, g.remap_uncorrected, g.remap_pending, g.remap_failure) == (
        (None,) * 4
    )
    assert (g.temperature_c, g.temp_slowdown_c) == (None, None)
    assert (g.power_draw_w, g.power_limit_w) == (None, 250.0)
    assert set(g.unsupported) == {
        "persistence_mode",
        "compute_mode",
        "ecc_current",
        "ecc_pending",
        "ecc_volatile_corrected",
        "remap_corrected",
        "remap_uncorrected",
        "remap_pending",
        "remap_failure",
        "temp_slowdown_c",
        "power_draw_w",
    }
    # N/A and Unknown mean "no value", not "not supported", and are not odd either.
    assert "mig_current" not in g.unsupported and "temperature_c" not in g.unsupported
    assert g.notes == ()


def test_bracketed_errors_are_noted():
    g = one_gpu(
        "<persistence_mode>[Unknown Error]</persistence_mode>"
        "<temperature><gpu_temp>[GPU requires reset]</gpu_temp></temperature>"
    )
    assert g.persistence_mode is None and g.temperature_c is None
    assert g.unsupported == ()
    assert any("persistence_mode" in n and "Unknown Error" in n for n in g.notes)
    assert any("temperature_c" in n and "GPU requires reset" in n for n in g.notes)


def test_odd_values_are_noted_not_raised():
    g = one_gpu(
        "<persistence_mode>Sometimes</persistence_mode>"
        "<fb_memory_usage><total>lots</total></fb_memory_usage>"
        "<temperature><gpu_temp>45 F</gpu_temp><gpu_temp_max_threshold>9.5 C"
        "</gpu_temp_max_threshold></temperature>"
        "<pci><pci_gpu_link_info><link_widths><current_link_width>sixteen</current_link_width>"
        "</link_widths></pci_gpu_link_info></pci>"
        "<remapped_rows>garbage</remapped_rows>",
        gpu_id="not-a-bus-id",
    )
    assert g.persistence_mode is None and g.memory_total_mib is None
    assert g.temperature_c is None and g.temp_shutdown_c is None
    assert g.pcie_width_current is None and g.remap_corrected is None
    assert g.pci_bus_id == "not-a-bus-id"
    assert len(g.notes) == 7, g.notes


def test_remapped_rows():
    # The layout NVIDIA's A100/H100 drivers print when row remapping is supported.
    g = one_gpu(
        "<remapped_rows><remapped_row_corr>2</remapped_row_corr>"
        "<remapped_row_unc>1</remapped_row_unc><remapped_row_pending>Yes</remapped_row_pending>"
        "<remapped_row_failure>No</remapped_row_failure><row_remapper_histogram>"
        "<row_remapper_histogram_max>639 bank(s)</row_remapper_histogram_max>"
        "<row_remapper_histogram_high>0 bank(s)</row_remapper_histogram_high>"
        "</row_remapper_histogram></remapped_rows>"
    )
    assert (g.remap_corrected, g.remap_uncorrected, g.remap_pending, g.remap_failure) == (
        2,
        1,
        True,
        False,
    )
    assert g.notes == ()


def test_retired_pages_with_counts_and_pending():
    g = one_gpu(
        "<retired_pages><multiple_single_bit_retirement><retired_count>3</retired_count>"
        "<retired_pagelist><retired_page_address>0x123</retired_page_address>"
        "</retired_pagelist></multiple_single_bit_retirement>"
        "<double_bit_retirement><retired_count>1</retired_count></double_bit_retirement>"
        "<pending_blacklist>No</pending_blacklist><pending_retirement>Yes</pending_retirement>"
        "</retired_pages>"
    )
    assert (g.retired_pages_sbe, g.retired_pages_dbe, g.retired_pages_pending) == (3, 1, True)


def test_retired_pages_old_driver_pending_blacklist_only():
    g = one_gpu("<retired_pages><pending_blacklist>No</pending_blacklist></retired_pages>")
    assert g.retired_pages_pending is False and g.retired_pages_sbe is None


def test_ecc_old_schema_uses_total():
    counts = (
        "<single_bit><device_memory>5</device_memory><register_file>2</register_file>"
        "<total>7</total></single_bit>"
        "<double_bit><device_memory>1</device_memory><register_file>N/A</register_file>"
        "<total>1</total></double_bit>"
    )
    g = one_gpu(
        "<ecc_mode><current_ecc>Enabled</current_ecc><pending_ecc>Disabled</pending_ecc></ecc_mode>"
        f"<ecc_errors><volatile>{counts}</volatile><aggregate>{counts.replace('7', '70')}"
        "</aggregate></ecc_errors>"
    )
    assert (g.ecc_current, g.ecc_pending) == (True, False)
    assert (g.ecc_volatile_corrected, g.ecc_volatile_uncorrected) == (7, 1)
    assert (g.ecc_aggregate_corrected, g.ecc_aggregate_uncorrected) == (70, 1)


def test_ecc_old_schema_without_total_sums_locations():
    g = one_gpu(
        "<ecc_errors><volatile><single_bit><device_memory>5</device_memory>"
        "<l2_cache>2</l2_cache><texture_memory>N/A</texture_memory><total>N/A</total>"
        "</single_bit></volatile></ecc_errors>"
    )
    assert g.ecc_volatile_corrected == 7
    assert g.ecc_volatile_uncorrected is None and g.ecc_aggregate_corrected is None


def test_ecc_new_schema_sums_sram_and_dram():
    g = one_gpu(
        "<ecc_errors><volatile><sram_correctable>4</sram_correctable>"
        "<sram_uncorrectable>1</sram_uncorrectable><dram_correctable>10</dram_correctable>"
        "<dram_uncorrectable>2</dram_uncorrectable></volatile>"
        "<aggregate><sram_correctable>N/A</sram_correctable>"
        "<sram_uncorrectable>N/A</sram_uncorrectable><dram_correctable>100</dram_correctable>"
        "<dram_uncorrectable>N/A</dram_uncorrectable></aggregate></ecc_errors>"
    )
    assert (g.ecc_volatile_corrected, g.ecc_volatile_uncorrected) == (14, 3)
    assert (g.ecc_aggregate_corrected, g.ecc_aggregate_uncorrected) == (100, None)


def test_ecc_v13_split_sram_uncorrectable():
    # v13 (595.x) replaces sram_uncorrectable with a parity/SEC-DED pair.
    g = one_gpu(
        "<ecc_errors><aggregate><sram_correctable>0</sram_correctable>"
        "<sram_uncorrectable_parity>1</sram_uncorrectable_parity>"
        "<sram_uncorrectable_secded>2</sram_uncorrectable_secded>"
        "<dram_correctable>0</dram_correctable><dram_uncorrectable>4</dram_uncorrectable>"
        "<sram_threshold_exceeded>No</sram_threshold_exceeded></aggregate>"
        "<aggregate_uncorrectable_sram_sources><sram_l2>1</sram_l2><sram_sm>2</sram_sm>"
        "</aggregate_uncorrectable_sram_sources></ecc_errors>"
    )
    assert (g.ecc_aggregate_corrected, g.ecc_aggregate_uncorrected) == (0, 7)
    assert g.notes == ()


def test_clock_event_reasons_spellings():
    g = one_gpu(
        "<clocks_throttle_reasons>"
        "<clocks_throttle_reason_gpu_idle>Not Active</clocks_throttle_reason_gpu_idle>"
        "<clocks_throttle_reason_hw_thermal_slowdown>Active"
        "</clocks_throttle_reason_hw_thermal_slowdown>"
        "<clocks_throttle_reason_display_clock_setting>Active"
        "</clocks_throttle_reason_display_clock_setting>"
        "<clocks_throttle_reason_sw_power_cap>Active</clocks_throttle_reason_sw_power_cap>"
        "<clocks_throttle_reason_unknown>Not Active</clocks_throttle_reason_unknown>"
        "</clocks_throttle_reasons>"
    )
    # In CLOCK_EVENT_REASONS (bit) order, the singular "display_clock" mapped.
    assert g.clock_event_reasons == (
        "sw_power_cap",
        "hw_thermal_slowdown",
        "display_clocks_setting",
    )
    assert g.notes == ()


def test_clock_event_reasons_unknown_active_reason_is_noted():
    g = one_gpu(
        "<clocks_event_reasons>"
        "<clocks_event_reason_gpu_idle>Active</clocks_event_reason_gpu_idle>"
        "<clocks_event_reason_sw_future_cap>Active</clocks_event_reason_sw_future_cap>"
        "</clocks_event_reasons>"
    )
    assert g.clock_event_reasons == ("gpu_idle",)
    assert len(g.notes) == 1 and "sw_future_cap" in g.notes[0]


def test_clock_event_reasons_not_supported():
    g = one_gpu("<clocks_event_reasons>[Not Supported]</clocks_event_reasons>")
    assert g.clock_event_reasons is None and g.unsupported == ("clock_event_reasons",)
    g = one_gpu(
        "<clocks_event_reasons>"
        "<clocks_event_reason_gpu_idle>N/A</clocks_event_reason_gpu_idle>"
        "</clocks_event_reasons>"
    )
    assert g.clock_event_reasons is None and g.unsupported == ()


def test_compute_capability_when_present():
    assert one_gpu("<compute_cap>9.0</compute_cap>").compute_capability == "9.0"
    assert one_gpu("").compute_capability == ""


def test_bus_id_from_pci_when_gpu_has_no_id_and_mismatch_noted():
    stack = parse_nvidia_smi_xml(
        "<nvidia_smi_log><gpu><pci><pci_bus_id>00000001:C1:00.0</pci_bus_id></pci></gpu>"
        '<gpu id="00000000:41:00.0"><pci><pci_bus_id>00000000:42:00.0</pci_bus_id></pci></gpu>'
        "</nvidia_smi_log>"
    )
    first, second = stack.gpus
    assert first.pci_bus_id == "0001:c1:00.0" and first.notes == ()
    assert second.pci_bus_id == "0000:41:00.0" and len(second.notes) == 1


@pytest.mark.parametrize("raw, bus", [
    ("00000000:01:00.0", "0000:01:00.0"),
    ("00000000:3B:00.0", "0000:3b:00.0"),
    ("0000:3b:00.0", "0000:3b:00.0"),
    ("00000001:00:1E.0", "0001:00:1e.0"),
    ("  00000000:C1:00.7 ", "0000:c1:00.7"),
    ("3b:00.0", "0000:3b:00.0"),
    ("GPU-513536b6", None),
    ("", None),
    ("0000:01:00.8", None),
])  # fmt: skip
def test_normalise_pci_bus_id(raw, bus):
    assert normalise_pci_bus_id(raw) == bus


def test_mig_devices_do_not_leak_into_the_gpu():
    # The A100's MIG slices carry their own fb_memory_usage and ecc_error_count.
    g = parse_nvidia_smi_xml((XML_DIR / "telegraf-a100-sxm4-v12.xml").read_text()).gpus[0]
    assert g.memory_total_mib == 81920 and g.ecc_volatile_uncorrected == 0
