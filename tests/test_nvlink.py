"""NVLink: `nvidia-smi nvlink -s` parsed from real captures, NVML's link states and error
counters through the probe, the nvidia-smi fallback through a replayed bundle, and the
gpu.nvlink check on the cases the fixture hosts do not cover."""

from __future__ import annotations

import dataclasses

import pytest

from dldoctor.checks import nvlink as checks
from dldoctor.facts import Facts
from dldoctor.facts import gpu as g
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.nvlink import NVLINK_STATUS_ARGV, NvLinks, nvlinks, parse_nvlink_status
from dldoctor.facts.pci import PciBus, PciDevice, pci_devices
from dldoctor.host import ProbeFailed
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from dldoctor.registry import checks_in
from dldoctor.runner import Runner
from tests.support.bundlebuilder import BundleBuilder
from tests.support.fake_pynvml import INVALID_ARGUMENT, NOT_SUPPORTED, UNKNOWN, Err, FakeNvml, h100
from tests.support.nvml import probe_and_parse
from tests.support.paths import FIXTURES

CAPTURES = FIXTURES / "corpus" / "nvidia-smi-nvlink-s"
H100_S = "utkuozdemir-linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01-nvlink-s.txt"
A100_S = "azurehpc-A100-SXM4-80GB-nvlink-status-good.txt"
ZERO_UUID = "GPU-00000000-0000-0000-0000-000000000000"


def parse(name: str):
    return parse_nvlink_status((CAPTURES / name).read_text())


def test_h100_capture_has_eighteen_links_up():
    (status,), notes = parse(H100_S)
    assert (status.index, status.uuid, status.supported, status.said) == (0, ZERO_UUID, True, "")
    assert status.states == (True,) * 18 and notes == ()


def test_a100_capture_keeps_its_gpu_index_and_uuid():
    (status,), _ = parse(A100_S)
    assert (status.index, status.uuid) == (7, "GPU-c7e253b0-c227-6f10-e860-7482c85e7ce8")
    assert status.states == (True,) * 12


def test_pcie_cards_and_mig_say_a_sentence_instead_of_links():
    (l40s,), _ = parse("utkuozdemir-linux-x86_64__nvidia-l40s__595.80-nvlink-s.txt")
    assert (l40s.states, l40s.supported) == (None, False)
    # A card with an NVLink connector but no bridge: links exist, none is up, count unsaid.
    (rtx,), _ = parse("utkuozdemir-linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05-nvlink-s.txt")  # fmt: skip
    assert (rtx.states, rtx.supported) == ((), True)
    (mig,), _ = parse("utkuozdemir-linux-x86_64__nvidia-h100-mig__590.48.01-nvlink-s.txt")
    assert mig.states is None and mig.supported and "MIG mode" in mig.said


def test_inactive_links_and_odd_text():
    # The H100 capture with two links as nvidia-smi prints them when down.
    text = (CAPTURES / H100_S).read_text().replace("Link 4: 26.562 GB/s", "Link 4: <inactive>")
    text = text.replace("Link 17: 26.562 GB/s", "Link 17: <inactive>")
    (status,), _ = parse_nvlink_status("warning: something\n" + text)
    assert [i for i, up in enumerate(status.states) if not up] == [4, 17]
    statuses, notes = parse_nvlink_status("warning: something\n")
    assert statuses == () and "text before the first GPU" in notes[0]
    assert parse_nvlink_status("") == ((), ())


def test_probe_reads_error_counters_of_active_links_only():
    down = h100(0, nvmlDeviceGetNvLinkState=lambda link: int(link not in (4, 5)) if link < 18
                else Err(2),  # fmt: skip
                nvmlDeviceGetNvLinkErrorCounter=lambda link, kind: 7 if (link, kind) == (9, 3) else 0)  # fmt: skip
    data, stack = probe_and_parse(FakeNvml([down]))
    answers = data["devices"][0]["fields"]["nvlink_errors"]["value"]
    assert "4" not in answers and len(answers) == 16
    gpu = stack.gpus[0]
    assert (gpu.nvlink_active, gpu.nvlink_total) == (16, 18)
    assert (9, "crc_data", 7) in gpu.nvlink_errors and len(gpu.nvlink_errors) == 16 * 4


def test_a_driver_without_error_counters_answers_once():
    no_counters = h100(0, nvmlDeviceGetNvLinkErrorCounter=Err(NOT_SUPPORTED))
    data, stack = probe_and_parse(FakeNvml([no_counters]))
    assert data["devices"][0]["fields"]["nvlink_errors"]["error"] == "NotSupported"
    gpu = stack.gpus[0]
    assert gpu.nvlink_errors is None and "nvlink_errors" in gpu.unsupported
    facts = Facts.given({nvidia: stack, nvlinks: NvLinks(stack.gpus, "nvml"),
                         pci_devices: PciBus(())})  # fmt: skip
    outcome = checks.nvlink(facts, Policy())
    assert outcome.status == Status.PASS
    assert "error counters not reported for 1 GPU(s)" in outcome.details


def a100_sxm4(index: int, **overrides):
    """An A100 SXM4: the same answers as the H100 but its name and 12 links."""
    return h100(index, nvmlDeviceGetName="NVIDIA A100-SXM4-80GB",
                nvmlDeviceGetArchitecture=7, **overrides)  # fmt: skip


def test_an_unknown_error_on_one_link_does_not_end_the_links():
    # Link 6 answers an unknown error; links 7-11 are still there and must be read.
    odd = a100_sxm4(0, nvmlDeviceGetNvLinkState=lambda link: Err(UNKNOWN) if link == 6
                    else 1 if link < 12 else Err(INVALID_ARGUMENT))  # fmt: skip
    data, stack = probe_and_parse(FakeNvml([odd]))
    answer = data["devices"][0]["fields"]["nvlink_states"]
    assert (
        answer["value"] == [1] * 6 + [None] + [1] * 5
        and answer["errors"]["6"]["error"] == "Unknown"
    )
    gpu = stack.gpus[0]
    assert gpu.nvlink_states == (True,) * 6 + (None,) + (True,) * 5
    assert (gpu.nvlink_active, gpu.nvlink_total) == (11, 12)
    assert any("link 6 could not be read (Unknown)" in n for n in gpu.notes)
    facts = Facts.given({nvidia: stack, nvlinks: NvLinks(stack.gpus, "nvml"),
                         pci_devices: PciBus(())})  # fmt: skip
    outcome = checks.nvlink(facts, Policy())
    assert outcome.status == Status.ERROR
    assert list(outcome.details[:2]) == [
        "GPU 0 NVIDIA A100-SXM4-80GB (0000:18:00.0): link 6 unread",
        "GPU 0 NVIDIA A100-SXM4-80GB (0000:18:00.0): nvlink_states: link 6 could not be read (Unknown)",
    ]


def test_every_link_failing_is_the_gpus_answer():
    lost = a100_sxm4(0, nvmlDeviceGetNvLinkState=Err(UNKNOWN))
    data, stack = probe_and_parse(FakeNvml([lost]))
    assert data["devices"][0]["fields"]["nvlink_states"]["error"] == "Unknown"
    assert stack.gpus[0].nvlink_states is None and "nvlink_states" not in stack.gpus[0].unsupported


def test_a_down_link_still_fails_beside_an_unread_one():
    mixed = dataclasses.replace(SXM, nvlink_states=(True,) * 3 + (None, False) + (True,) * 13)
    outcome = judge(mixed)
    assert outcome.status == Status.FAIL and "link 4 inactive (16 of 18 up)" in outcome.details[0]
    assert "link 3 unread" in outcome.details[1]


def test_pcie_only_gpus_skip():
    pcie = h100(0, nvmlDeviceGetNvLinkState=Err(NOT_SUPPORTED))
    _, stack = probe_and_parse(FakeNvml([pcie]))
    assert stack.gpus[0].nvlink_states is None and "nvlink_states" in stack.gpus[0].unsupported
    facts = Facts.given({nvidia: stack, nvlinks: NvLinks(stack.gpus, "nvml")})
    outcome = checks.nvlink(facts, Policy())
    assert outcome.status == Status.SKIP and "PCIe-only" in outcome.summary


def replay_smi(tmp_path, nvlink_text: str, *, mig: bool = True, **answer):
    """A host without pynvml: the GPU facts come from nvidia-smi -q -x (a real A100 SXM4, in
    MIG mode as captured; `mig=False`: the same GPU with MIG off)."""
    xml = (FIXTURES / "corpus/nvidia-smi-xml/telegraf-a100-sxm4-v12.xml").read_text()
    if not mig:
        xml = xml.replace("_mig>Enabled<", "_mig>Disabled<")
    b = BundleBuilder(tmp_path / "b").command(["nvidia-smi", "-q", "-x"], xml)
    b.command(list(NVLINK_STATUS_ARGV), nvlink_text, **answer)
    (b.root / "nvml.json").write_text('{"status": "not_installed"}')
    return Facts(ReplayHost(str(b.root)))


def test_nvidia_smi_source_asks_nvlink_status(tmp_path):
    text = (CAPTURES / A100_S).read_text()
    # The two captures come from different machines: GPU 7 of one is not GPU 0 of the other.
    facts = replay_smi(tmp_path, text)
    links = facts.get(nvlinks)
    assert links.source == "nvidia-smi nvlink -s" and links.gpus[0].nvlink_states is None
    # The same capture as GPU 0 of the XML's machine joins by its UUID.
    uuid = facts.get(nvidia).gpus[0].uuid
    text = text.replace("GPU 7:", "GPU 3:").replace(
        "GPU-c7e253b0-c227-6f10-e860-7482c85e7ce8", uuid
    )
    links = replay_smi(tmp_path / "2", text).get(nvlinks)
    assert links.gpus[0].nvlink_states == (True,) * 12


def run_nvlink_check(facts: Facts):
    (spec,) = [s for s in checks_in(checks) if s.id == "gpu.nvlink"]
    (finding,) = Runner([spec], facts, Policy(), check_timeout=60).run()
    return finding


def test_a_hung_nvlink_status_is_an_error_not_pcie_only(tmp_path):
    facts = replay_smi(tmp_path, "", status="timeout", timeout_s=5)
    with pytest.raises(ProbeFailed, match="nvlink -s"):
        facts.get(nvlinks)
    finding = run_nvlink_check(replay_smi(tmp_path / "2", "", status="timeout", timeout_s=5))
    assert finding.status == Status.ERROR and "did not answer" in finding.summary


def test_a_failed_nvlink_status_on_an_sxm_board_is_an_error(tmp_path):
    # nvidia-smi answered, but with an exit status and no links: the A100 SXM4's 12 links are
    # still unknown, and an SXM board has them wired.
    failed = {"stderr": "Unable to determine the device handle\n", "returncode": 15}
    facts = replay_smi(tmp_path, "", mig=False, **failed)
    links = facts.get(nvlinks)
    assert links.gpus[0].nvlink_states is None and links.gpus[0].mig_current is False
    finding = run_nvlink_check(facts)
    assert finding.status == Status.ERROR
    assert finding.summary == "the state of NVLinks could not be read on 1 GPU(s)"
    assert "A100-SXM4" in finding.details[0] and "link states unknown" in finding.details[0]
    assert any("Unable to determine the device handle" in d for d in finding.details)
    # In MIG mode NVLink is not offered: the same answer stays a skip.
    finding = run_nvlink_check(replay_smi(tmp_path / "mig", "", **failed))
    assert finding.status == Status.SKIP


def test_nvidia_smi_mig_sentence_is_a_note(tmp_path):
    text = (CAPTURES / "utkuozdemir-linux-x86_64__nvidia-h100-mig__590.48.01-nvlink-s.txt").read_text()  # fmt: skip
    links = replay_smi(tmp_path, text).get(nvlinks)
    assert links.gpus[0].nvlink_states is None
    assert any("not supported for Devices in MIG mode" in n for n in links.notes)


def test_nvml_with_link_data_does_not_run_nvidia_smi(tmp_path):
    _, stack = probe_and_parse(FakeNvml([h100(0)]))
    facts = Facts.given({nvidia: stack})
    links = nvlinks.compute(_Ctx(facts))
    assert links.source == "nvml" and links.gpus[0].nvlink_states == (True,) * 18


class _Ctx:
    """A FactContext whose host must not be asked."""

    def __init__(self, facts: Facts):
        self.facts = facts

    def get(self, f):
        return self.facts.get(f)

    @property
    def host(self):
        raise AssertionError("nvidia-smi was run though NVML had the links")


# --- the check on hand-built facts ------------------------------------------------------

SXM = g.Gpu(0, name="NVIDIA H100 80GB HBM3", pci_bus_id="0000:18:00.0", architecture="Hopper",
            nvlink_states=(True,) * 18, nvlink_errors=((0, "replay", 0),))  # fmt: skip
BRIDGE_CARD = g.Gpu(1, name="NVIDIA RTX A6000", pci_bus_id="0000:65:00.0", nvlink_states=(False,) * 4)  # fmt: skip
NO_SWITCH = PciBus(())
NVSWITCH = PciBus((PciDevice("0000:c5:00.0", "10de", "22a3", "068000", "nvidia"),))


def judge(*gpus: g.Gpu, bus: PciBus = NO_SWITCH):
    stack = g.NvidiaStack("nvml", driver_version="550.54.15", gpus=gpus)
    facts = {nvidia: stack, nvlinks: NvLinks(gpus, "nvml"), pci_devices: bus}
    return checks.nvlink(Facts.given(facts), Policy())


def test_a_pcie_card_without_a_bridge_is_not_a_fault():
    outcome = judge(BRIDGE_CARD)
    assert outcome.status == Status.SKIP and "no NVLink bridge" in outcome.summary
    # Beside a healthy SXM GPU it is only mentioned.
    outcome = judge(SXM, BRIDGE_CARD)
    assert outcome.status == Status.PASS
    assert any("GPU 1" in d and "no NVLink bridge" in d for d in outcome.details)
    # With one link of the bridge up, the others being down is a fault.
    half = dataclasses.replace(BRIDGE_CARD, nvlink_states=(True, True, False, False))
    outcome = judge(half)
    assert outcome.status == Status.FAIL
    assert outcome.details[0] == "GPU 1 NVIDIA RTX A6000 (0000:65:00.0): links 2, 3 inactive (2 of 4 up)"  # fmt: skip


def test_expected_link_counts_come_from_the_part_name():
    h800 = dataclasses.replace(SXM, name="NVIDIA H800", nvlink_states=(True,) * 8)
    assert judge(h800).status == Status.PASS and judge(h800).summary == "all 8 links up on 1 GPU(s)"
    a100 = dataclasses.replace(SXM, name="NVIDIA A100-SXM4-80GB", architecture="Ampere",
                               nvlink_states=(True,) * 6)  # fmt: skip
    outcome = judge(a100)
    assert (
        outcome.status == Status.FAIL
        and "6 links reported, an A100 SXM4 has 12" in outcome.details[0]
    )
    assert judge(dataclasses.replace(a100, nvlink_states=(True,) * 12)).status == Status.PASS
    # A Hopper SXM part not in the table is not compared against any count.
    h20 = dataclasses.replace(SXM, name="NVIDIA H20", nvlink_states=(True,) * 6)
    assert judge(h20).status == Status.PASS
    assert checks.expected_links(dataclasses.replace(SXM, name="NVIDIA H800 PCIe")) is None
    assert checks.expected_links(dataclasses.replace(SXM, name="NVIDIA GH200 480GB")) == (
        "a GH200",
        18,
    )
    assert checks.expected_links(dataclasses.replace(SXM, name="NVIDIA H200")) == ("an H200", 18)


def test_an_h100_sxm_reporting_fewer_than_eighteen_links_fails():
    short = dataclasses.replace(SXM, nvlink_states=(True,) * 16)
    outcome = judge(short)
    assert outcome.status == Status.FAIL and outcome.summary == "inactive NVLinks on GPU 0"
    assert "16 links reported, an H100 SXM has 18" in outcome.details[0]


def test_all_links_down_on_an_nvswitch_system_points_at_fabric_manager():
    dead = dataclasses.replace(SXM, nvlink_states=(False,) * 18)
    outcome = judge(dead, dataclasses.replace(dead, index=1), bus=NVSWITCH)
    assert outcome.status == Status.FAIL and "Fabric Manager" in outcome.summary
    assert outcome.summary.startswith("inactive NVLinks on GPUs 0, 1")
    # One GPU still up: not the Fabric Manager pattern.
    outcome = judge(dead, dataclasses.replace(SXM, index=1), bus=NVSWITCH)
    assert outcome.status == Status.FAIL and "Fabric Manager" not in outcome.summary


def test_error_counters_warn():
    noisy = dataclasses.replace(SXM, nvlink_errors=((3, "replay", 12), (3, "recovery", 0)))
    outcome = judge(noisy)
    assert outcome.status == Status.WARN
    assert outcome.details[0] == "GPU 0 NVIDIA H100 80GB HBM3 (0000:18:00.0): link 3 replay 12"
    assert judge(SXM).summary == "all 18 links up on 1 GPU(s)"


def test_numbers_are_ranges():
    assert checks.numbers([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7, 8"
    assert checks.numbers([]) == ""
