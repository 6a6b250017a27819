"""AMD inventory from real `rocm-smi --json` captures (fixtures/corpus/rocm-smi-json)."""

from __future__ import annotations

from dldoctor.checks.amd import amd_inventory
from dldoctor.facts import Facts
from dldoctor.facts.amd import ROCM_SMI, parse_rocm_smi_json
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Status
from dldoctor.policy import Policy
from tests.support.bundlebuilder import BundleBuilder
from tests.support.hostgen import pci_device
from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "corpus/rocm-smi-json"


def test_rocm_602_four_mi100():
    gpus, driver, notes = parse_rocm_smi_json((CORPUS / "telegraf-mi100_rocm602.json").read_text())
    assert driver == "6.3.6" and notes == []
    assert [g.pci_bus_id for g in gpus] == ["0000:83:00.0", "0000:a3:00.0", "0000:c3:00.0",
                                            "0000:e3:00.0"]  # fmt: skip
    assert {g.series for g in gpus} == {"Arcturus GL-XL [Instinct MI100]"}
    assert gpus[0].sku == "D3431401"


def test_rocm_571_six_mi100():
    gpus, driver, _ = parse_rocm_smi_json((CORPUS / "telegraf-mi100_rocm571.json").read_text())
    assert (len(gpus), driver) == (6, "6.2.4")
    assert gpus[5].card == "card5" and gpus[5].pci_bus_id == "0000:49:00.0"


def test_garbage_is_a_note():
    assert parse_rocm_smi_json("ERROR: no GPUs")[2][0].startswith("rocm-smi printed no JSON")


def amd_host(tmp_path, driver="amdgpu", rocm="6.0.2-115"):
    b = BundleBuilder(tmp_path / "b")
    for card in ("83", "a3"):
        pci_device(b, f"0000:{card}:00.0", "1002", "738c", "038000", driver, 0)
    if rocm:
        b.file("/opt/rocm/.info/version", rocm + "\n")
    b.command(ROCM_SMI, (CORPUS / "telegraf-mi100_rocm602.json").read_text())
    return amd_inventory(Facts(ReplayHost(str(b.root))), Policy())


def test_amd_inventory_check(tmp_path):
    ok = amd_host(tmp_path / "ok")
    assert ok.status == Status.PASS
    assert ok.summary == ("2 AMD GPU(s) (Arcturus GL-XL [Instinct MI100]), amdgpu 6.3.6, "
                          "ROCm 6.0.2-115")  # fmt: skip
    assert amd_host(tmp_path / "unbound", driver="").status == Status.FAIL
    assert amd_host(tmp_path / "norocm", rocm="").status == Status.WARN
