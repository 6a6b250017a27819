"""`dldoctor diff A B` through the real CLI: bundles, report JSON files, bad input."""

from __future__ import annotations

import json
import os
import shutil

from dldoctor.diffing import UNKNOWN, read_key_facts
from dldoctor.facts import Facts
from dldoctor.inventory import Inventory
from dldoctor.keyfacts import KEY_FACTS, NAMES
from tests.support.cli import run_dldoctor
from tests.support.paths import HOSTS, TESTS

HEALTHY = HOSTS / "hgx-h100x8-healthy"
GPU3_X8 = HOSTS / "hgx-h100x8-gpu3-x8"
DRIVER535 = HOSTS / "hgx-h100x8-driver535"


def diff_json(a, b):
    proc = run_dldoctor("diff", "--json", str(a), str(b))
    return proc, json.loads(proc.stdout)


def changed_ids(doc) -> dict[str, tuple[str, str]]:
    return {f["id"]: (f["a"]["status"], f["b"]["status"]) for f in doc["findings"]["changed"]}


def test_one_gpu_at_x8_is_its_width_and_the_width_check(tmp_path):
    proc, doc = diff_json(HEALTHY, GPU3_X8)
    assert proc.returncode == 1, proc.stderr
    assert doc["format"] == "dldoctor-diff" and doc["equivalent"] is False
    assert doc["facts_compared"] is True
    assert changed_ids(doc)["pci.link.width"] == ("pass", "fail")
    # The one fact that differs between the two bundles is that GPU's trained width.
    assert [(r["fact"], r["item"], r["a"], r["b"]) for r in doc["facts"]] == [
        ("pcie.width", "0000:48:00.0", "x16", "x8")
    ]
    assert doc["facts"][0]["label"] == "pcie.width 0000:48:00.0 (GPU 3)"
    assert (doc["a"]["hostname"], doc["b"]["hostname"]) == ("hgx-h100-01", "hgx-h100-02")

    text = run_dldoctor("diff", str(HEALTHY), str(GPU3_X8))
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert "Findings" in lines and "Key facts" in lines
    assert "  pci.link.width: pass -> fail" in lines
    assert "  pcie.width 0000:48:00.0 (GPU 3): x16 -> x8" in lines


def _copy(host, tmp_path, name):
    dest = tmp_path / name
    shutil.copytree(host, dest, symlinks=True)
    return dest


def test_a_driver_upgrade_is_reported(tmp_path):
    newer = _copy(HEALTHY, tmp_path, "newer")
    nvml = newer / "nvml.json"
    data = json.loads(nvml.read_text())
    assert data["value"]["system"]["driver_version"]["value"] == "550.54.15"
    data["value"]["system"]["driver_version"]["value"] = "550.90.07"
    nvml.write_text(json.dumps(data))
    proc, doc = diff_json(HEALTHY, newer)
    assert proc.returncode == 1, proc.stderr
    rows = {(r["fact"], r["item"]): (r["a"], r["b"]) for r in doc["facts"]}
    assert rows[("nvidia.driver", None)] == ("550.54.15", "550.90.07")
    text = run_dldoctor("diff", str(HEALTHY), str(newer))
    assert "  nvidia.driver: 550.54.15 -> 550.90.07" in text.stdout.splitlines()


def test_an_nvme_firmware_update_is_reported(tmp_path):
    newer = _copy(HEALTHY, tmp_path, "newer")
    rev = newer / "files/sys/class/nvme/nvme0/firmware_rev"
    assert rev.read_text().strip() == "MPK7525Q"
    rev.write_text("MPK7525R\n")
    proc, doc = diff_json(HEALTHY, newer)
    assert proc.returncode == 1, proc.stderr
    rows = {(r["fact"], r["item"]): (r["a"], r["b"]) for r in doc["facts"]}
    model = "SAMSUNG MZWLR7T6HALA-00007"
    assert rows[("nvme.firmware", "nvme0")] == (f"{model} MPK7525Q", f"{model} MPK7525R")
    # The same difference between the two hosts' report JSON files, from their inventories.
    a = _report(HEALTHY, tmp_path / "a.json")
    b = _report(newer, tmp_path / "b.json")
    assert json.loads(b.read_text())["inventory"]["nvme"][0]["firmware"] == "MPK7525R"
    proc, doc = diff_json(a, b)
    assert proc.returncode == 1, proc.stderr
    assert [(r["fact"], r["item"]) for r in doc["facts"]] == [("nvme.firmware", "nvme0")]


def test_a_host_with_itself_is_equivalent():
    proc, doc = diff_json(HEALTHY, HEALTHY)
    assert proc.returncode == 0, proc.stderr
    assert doc["equivalent"] is True and doc["facts_compared"] is True
    assert doc["facts"] == [] and not any(doc["findings"].values())
    text = run_dldoctor("diff", str(HEALTHY), str(HEALTHY))
    assert text.returncode == 0
    assert text.stdout.splitlines() == [f"{HEALTHY} and {HEALTHY} are equivalent"]


def test_a_fact_that_cannot_be_read_is_unknown(tmp_path):
    blind = _copy(HEALTHY, tmp_path, "blind")
    (blind / "nvml.json").unlink()  # and no nvidia-smi recorded: no NVIDIA source at all
    assert not any(p.name.startswith("nvidia-smi") for p in (blind / "commands").iterdir())
    proc, doc = diff_json(HEALTHY, blind)
    assert proc.returncode == 1, proc.stderr
    rows = {(r["fact"], r["item"]): (r["a"], r["b"]) for r in doc["facts"]}
    assert rows[("nvidia.driver", None)] == ("550.54.15", UNKNOWN)
    assert rows[("gpu.model", "GPU 3")] == ("NVIDIA H100 80GB HBM3", UNKNOWN)
    assert ("pcie.width", "0000:48:00.0") not in rows  # sysfs still read alike


def test_every_key_fact_of_an_inventory_that_knows_nothing_reads_unknown():
    # No host and no values: no section of the inventory is known.
    assert read_key_facts(Inventory.from_facts(Facts.given({}))) == dict.fromkeys(NAMES, UNKNOWN)
    assert read_key_facts({"gpus": "not a list", "kernel": []}) == dict.fromkeys(NAMES, UNKNOWN)


def test_every_key_fact_is_in_the_docs_table():
    table = (TESTS.parent / "docs" / "diff.md").read_text()
    for f in KEY_FACTS:
        assert f"| `{f.name}` |" in table, f.name


def _report(host, path):
    proc = run_dldoctor("--from", str(host), "--check", "--json")
    path.write_text(proc.stdout)
    return path


def test_two_reports_with_different_drivers_differ(tmp_path):
    # Each report's inventory holds its driver: they were "equivalent" when a report's key
    # facts were not compared.
    a = _report(HEALTHY, tmp_path / "a.json")
    b = _report(DRIVER535, tmp_path / "b.json")
    proc, doc = diff_json(a, b)
    assert proc.returncode == 1, proc.stderr
    assert doc["equivalent"] is False
    assert doc["facts_compared"] is True and doc["facts_not_compared"] is None
    rows = {(r["fact"], r["item"]): (r["a"], r["b"]) for r in doc["facts"]}
    assert rows[("nvidia.driver", None)] == ("550.54.15", "535.161.08")
    text = run_dldoctor("diff", str(a), str(b))
    assert text.returncode == 1
    assert "  nvidia.driver: 550.54.15 -> 535.161.08" in text.stdout.splitlines()
    assert "not compared" not in text.stdout


def test_two_reports_compare_findings_and_key_facts(tmp_path):
    a = _report(HEALTHY, tmp_path / "a.json")
    b = _report(GPU3_X8, tmp_path / "b.json")
    proc, doc = diff_json(a, b)
    assert proc.returncode == 1, proc.stderr
    assert (doc["a"]["kind"], doc["b"]["kind"]) == ("report", "report")
    assert changed_ids(doc)["pci.link.width"] == ("pass", "fail")
    assert [(r["fact"], r["item"], r["a"], r["b"]) for r in doc["facts"]] == [
        ("pcie.width", "0000:48:00.0", "x16", "x8")
    ]
    assert doc["facts"][0]["label"] == "pcie.width 0000:48:00.0 (GPU 3)"

    same = run_dldoctor("diff", str(a), str(a))
    assert same.returncode == 0
    assert same.stdout.splitlines() == [f"{a} and {a} are equivalent"]


def test_a_report_without_an_inventory_compares_findings_only(tmp_path):
    a = _report(HEALTHY, tmp_path / "a.json")
    data = json.loads(_report(DRIVER535, tmp_path / "b.json").read_text())
    del data["inventory"]  # as a dldoctor from before the inventory wrote it
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    proc, doc = diff_json(a, old)
    assert doc["facts_compared"] is False and doc["facts"] == []
    assert doc["facts_not_compared"] == (
        f"key facts were not compared: {old} holds no inventory (a report from an older dldoctor)"
    )
    same = run_dldoctor("diff", str(old), str(old))
    assert same.returncode == 0
    assert same.stdout.splitlines() == [
        f"{old} and {old} are equivalent (key facts were not compared: {old} holds no "
        "inventory (a report from an older dldoctor))"
    ]


def test_a_report_against_its_bundle_is_equivalent(tmp_path):
    # One table read from one inventory: the bundle's replay and its report agree.
    report = _report(GPU3_X8, tmp_path / "r.json")
    proc, doc = diff_json(GPU3_X8, report)
    assert proc.returncode == 0, proc.stdout
    assert doc["equivalent"] is True and doc["facts_compared"] is True


def test_findings_only_on_one_side(tmp_path):
    a = _report(HEALTHY, tmp_path / "a.json")
    data = json.loads(a.read_text())
    gone = data["findings"].pop(0)
    (tmp_path / "b.json").write_text(json.dumps(data))
    proc, doc = diff_json(a, tmp_path / "b.json")
    assert proc.returncode == 1
    assert [f["id"] for f in doc["findings"]["only_in_a"]] == [gone["id"]]
    assert doc["findings"]["only_in_b"] == [] and doc["findings"]["changed"] == []
    text = run_dldoctor("diff", str(tmp_path / "b.json"), str(a))
    assert f"  {gone['id']}: only in B ({gone['status']}: {gone['summary']})" in text.stdout


def test_unreadable_inputs_are_one_line_and_exit_4(tmp_path):
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    not_a_report = tmp_path / "list.json"
    not_a_report.write_text("[1, 2]")
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    for bad in (tmp_path / "nowhere", garbage, not_a_report, empty_dir, fifo):
        for args in ((str(HEALTHY), str(bad)), (str(bad), str(HEALTHY))):
            proc = run_dldoctor("diff", *args)
            assert proc.returncode == 4, (bad, proc.stderr)
            assert proc.stdout == ""
            assert len(proc.stderr.splitlines()) == 1, proc.stderr
            assert proc.stderr.startswith("dldoctor: ") and "Traceback" not in proc.stderr
            assert str(bad) in proc.stderr


def test_usage_errors_exit_2_and_help_names_diff():
    proc = run_dldoctor("diff", str(HEALTHY))
    assert proc.returncode == 2
    assert proc.stderr.startswith("dldoctor diff: ") and len(proc.stderr.splitlines()) == 1
    assert run_dldoctor("diff", "--nope", "a", "b").returncode == 2
    helped = run_dldoctor("diff", "--help")
    assert helped.returncode == 0 and "--json" in helped.stdout
    # argparse wraps the epilog at the terminal's width.
    assert "dldoctor diff [--json] A B" in " ".join(run_dldoctor("--help").stdout.split())


SOS = HOSTS.parent / "foreign" / "sos" / "sosreport-host0-2026-12-01-hsxafrq.tar.xz"
BUG_REPORT = HOSTS.parent / "bugreports" / "maz906-caffe-gtx-titan-x-352.63.log.gz"


def test_diff_reads_what_from_reads_sos_and_bug_reports():
    # the opener of `--from` serves diff: a .tar.xz was a raw decode error, exit 4
    proc, doc = diff_json(SOS, BUG_REPORT)
    assert proc.returncode in (0, 1), proc.stderr
    assert (doc["a"]["kind"], doc["b"]["kind"]) == ("sosreport", "nvidia-bug-report")
    assert doc["a"]["path"] == str(SOS) and doc["findings"]["changed"]


def test_a_report_whose_finding_id_is_a_list_is_one_line_exit_4(tmp_path):
    proc = run_dldoctor("--check", "--json", "--from", str(HEALTHY))
    report = json.loads(proc.stdout)
    report["findings"][0]["id"] = []
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(report))
    proc = run_dldoctor("diff", str(odd), str(HEALTHY))
    assert proc.returncode == 4 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "is not a dldoctor report" in proc.stderr


def test_a_report_replayed_from_an_archive_names_the_archive(tmp_path):
    archive = tmp_path / "healthy.tar.gz"
    proc = run_dldoctor("snapshot", "--from", str(HEALTHY), "-o", str(archive), "--no-redact")
    assert proc.returncode in (0, 1), proc.stderr
    proc = run_dldoctor("--check", "--json", "--from", str(archive))
    assert json.loads(proc.stdout)["host"]["source"] == f"replay of {archive}"


# --- the active tier's figures (docs/diff.md, "Figures") ------------------------------


def _measured(path, **kwargs):
    from tests.support.perffigures import measured_report

    path.write_text(json.dumps(measured_report("hgx-h100x8-healthy", **kwargs).to_dict()))
    return path


def test_a_figure_that_moved_by_more_than_a_tenth_is_a_difference(tmp_path):
    a = _measured(tmp_path / "a.json")
    # GPU 3's HBM at 54 %: a fail (its status changed); GPU 5's GEMM 8 % down: noise, the
    # judge still passes it and so does the diff; the volume 30 % faster: a change too.
    b = _measured(tmp_path / "b.json", slow={("hbm_copy", 3): 0.54, ("gemm_bf16", 5): 0.92},
                  disk_gbs=8.1)  # fmt: skip
    proc, doc = diff_json(a, b)
    assert proc.returncode == 1 and doc["equivalent"] is False
    assert doc["figure_change"] == 0.10
    rows = [
        (r["check"], r["subject"], r["what"], r["a"], r["b"], r["change"]) for r in doc["figures"]
    ]
    assert rows == [
        ("perf.gpu.memory", "GPU 3", "hbm_copy", 2610.0, 1409.4, -0.46),
        ("perf.disk.read", "/data", "seq_read", 6.2, 8.1, 0.3065),
    ]
    assert changed_ids(doc) == {"perf.gpu.memory": ("pass", "fail")}
    text = run_dldoctor("diff", str(a), str(b)).stdout
    assert "Figures (changed by more than 10 %)" in text
    assert "  perf.gpu.memory GPU 3 hbm_copy 2610 GB/s -> 1409 GB/s (-46 %)" in text.splitlines()
    assert "  perf.disk.read /data seq_read 6.20 GB/s -> 8.10 GB/s (+31 %)" in text.splitlines()


def test_figures_within_a_tenth_and_a_passive_bundle_against_its_report_are_equivalent(tmp_path):
    a = _measured(tmp_path / "a.json")
    b = _measured(tmp_path / "b.json", slow={("gemm_bf16", 5): 0.92})
    proc, doc = diff_json(a, b)
    assert proc.returncode == 0 and doc["equivalent"] is True and doc["figures"] == []
    # A bundle without measurements replays no measuring check: no "only in" of each.
    report = _report(HEALTHY, tmp_path / "r.json")
    proc, doc = diff_json(HEALTHY, report)
    assert doc["equivalent"] is True and doc["findings"]["only_in_a"] == []
    proc, doc = diff_json(HEALTHY, a)  # the same host measured: only its perf findings
    ids = sorted(f["id"] for f in doc["findings"]["only_in_b"])
    assert ids == ["perf.disk.read", "perf.gpu.gemm", "perf.gpu.memory"] and doc["figures"] == []
