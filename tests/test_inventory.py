"""The report's inventory: what a run learned of the host's parts, read off the fixture
hosts' replays — the values the fleet report, genconf and the Prometheus textfile use."""

from __future__ import annotations

import pytest

from dldoctor.diagnose import diagnose
from dldoctor.facts import Facts
from dldoctor.host.replay import ReplayHost
from dldoctor.inventory import Gpu, Inventory
from dldoctor.model import Report
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered, select
from tests.support.paths import HOSTS

SCENARIOS = sorted(p.name for p in HOSTS.iterdir() if p.is_dir())


def inventory(host: str, only: list[str] | None = None) -> dict:
    specs = ordered(builtin_checks())
    if only:
        specs = select(specs, only, [])
    return diagnose(ReplayHost(str(HOSTS / host)), Policy(), specs).inventory


@pytest.fixture(scope="module")
def healthy() -> dict:
    return inventory("hgx-h100x8-healthy")


def test_a_healthy_hgx_lists_its_eight_gpus_driver_stack_and_links(healthy):
    assert healthy["driver"]["version"] == "550.54.15"
    assert healthy["driver"]["cuda"] == "12.4"
    gpus = healthy["gpus"]
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["model"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert all(g["pcie_width"] == 16 and g["xid_events"] == 0 for g in gpus)
    assert healthy["kernel"] == "5.15.0-105-generic"
    gpu_links = [p for p in healthy["pcie"] if p["vendor"] == "10de"]
    assert {p["address"] for p in gpu_links} >= {g["bus_id"] for g in gpus}
    assert {(r["device"], r["state"]) for r in healthy["rdma"]} >= {("mlx5_0", "ACTIVE")}
    assert all(r["rate_gbps"] == 400.0 for r in healthy["rdma"])


def test_a_gpu_trained_down_shows_its_width_in_both_views():
    inv = inventory("hgx-h100x8-gpu3-x8")
    narrowed = [g for g in inv["gpus"] if g["pcie_width"] != 16]
    assert [(g["index"], g["pcie_width"], g["pcie_width_max"]) for g in narrowed] == [(3, 8, 16)]
    link = next(p for p in inv["pcie"] if p["address"] == narrowed[0]["bus_id"])
    assert (link["width"], link["width_max"]) == (8, 16)


def test_xid_events_are_counted_on_the_gpu_that_logged_them():
    inv = inventory("a100x8-remap-pending-xid79")
    counted = {g["bus_id"]: g["xid_events"] for g in inv["gpus"] if g["xid_events"]}
    assert counted and all(n > 0 for n in counted.values())
    assert len(counted) < len(inv["gpus"])  # the others logged none


def test_a_degraded_array_is_marked_so():
    raid = inventory("hgx-h100x8-raid-degraded")["raid"]
    assert any(a["degraded"] for a in raid)
    assert all(a["name"].startswith("md") for a in raid)


def test_what_the_run_did_not_look_at_is_null_not_empty():
    inv = inventory("hgx-h100x8-healthy", only=["system"])
    assert inv["gpus"] is None and inv["driver"] is None and inv["rdma"] is None
    assert inv["kernel"] == "5.15.0-105-generic"  # the host summary asks for it always


def test_a_host_without_a_driver_has_no_gpu_list_but_its_links():
    inv = inventory("workstation-rtx4090-nouveau")
    assert inv["gpus"] is None and inv["driver"] is None
    assert any(p["vendor"] == "10de" for p in inv["pcie"])


def test_the_inventory_survives_the_json_round_trip(healthy):
    report = diagnose(
        ReplayHost(str(HOSTS / "hgx-h100x8-healthy")), Policy(), ordered(builtin_checks())
    )
    again = Report.from_dict(report.to_dict())
    assert again.inventory == report.inventory
    assert Report.from_dict({**report.to_dict(), "inventory": None}).inventory == {}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_typed_inventory_round_trips_on_every_fixture_host(scenario):
    report = diagnose(ReplayHost(str(HOSTS / scenario)), Policy(), ordered(builtin_checks()))
    typed = Inventory.from_dict(report.inventory)
    assert typed.to_dict() == report.inventory
    assert list(typed.to_dict()) == list(report.inventory)  # the JSON's key order too
    assert Inventory.from_dict(typed.to_dict()) == typed
    if report.inventory["gpus"]:
        assert isinstance(typed.gpus[0], Gpu)
        assert typed.gpus[0].model == report.inventory["gpus"][0]["model"]


def test_an_inventory_of_nothing_computed_knows_nothing():
    nothing = Inventory.from_facts(Facts.given({}))
    assert nothing == Inventory() == Inventory.from_dict(None) == Inventory.from_dict([1])
    assert set(nothing.to_dict().values()) == {None}


def test_a_damaged_inventory_keeps_only_sections_of_the_right_kind():
    odd = Inventory.from_dict({"gpus": {"0": 1}, "pcie": [1, {"address": "0000:01:00.0"}]})
    assert odd.gpus is None
    assert [d.address for d in odd.pcie] == ["0000:01:00.0"] and odd.pcie[0].width is None
