"""`dldoctor fleet report` on generated node reports (tests/support/fleetgen.py: a real report of a
fixture host, varied as a rack's odd nodes are), on mixed inputs and on hostile files."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from dldoctor.fleet.nodes import MAX_REPORT_BYTES, parse
from dldoctor.fleet.report import fold
from tests.support import fleetgen
from tests.support.cli import run_dldoctor
from tests.support.opens import watch_opens
from tests.support.paths import HOSTS

NAMES = [f"node{i:03d}" for i in range(1, 41)]
ODD = {
    "node005": [fleetgen.older_driver("535.161.08", "12.2")],
    "node012": [fleetgen.missing_gpu(7)],
    "node023": [fleetgen.narrow_gpu(2, 8)],
    "node031": [fleetgen.old_nic_firmware("mlx5_1", "28.37.1014")],
    "node032": [fleetgen.old_nic_firmware("mlx5_1", "28.37.1014")],
}


@pytest.fixture(scope="module")
def base():
    return fleetgen.real_report()


@pytest.fixture(scope="module")
def fleet(base, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fleet")
    fleetgen.write_fleet(folder, base, NAMES, ODD)
    return folder


def fleet_json(*args):
    proc = run_dldoctor("fleet", "report", "--json", *map(str, args))
    return proc, json.loads(proc.stdout) if proc.stdout else None


def gpu_bus(base, index):
    return base["inventory"]["gpus"][index]["bus_id"]


def test_the_odd_ones_out_are_exactly_the_changed_nodes(fleet, base):
    proc, doc = fleet_json(fleet)
    assert proc.returncode == 1, proc.stderr  # node012 and node023 fail a check
    odd = {(o["fact"], o["item"], o["value"], o["nodes"]) for o in doc["odd_ones_out"]}
    gpu7, gpu2 = gpu_bus(base, 7), gpu_bus(base, 2)
    assert odd == {
        ("nvidia.driver", None, "535.161.08", "node005"),
        ("nvidia.cuda_driver", None, "12.2", "node005"),
        ("gpu.count", None, "7", "node012"),
        ("gpu.model", "GPU 7", "absent", "node012"),
        ("gpu.vbios", "GPU 7", "absent", "node012"),
        ("pcie.width", gpu7, "absent", "node012"),
        ("pcie.speed", gpu7, "absent", "node012"),
        ("pcie.width", gpu2, "x8", "node023"),
        ("nic.firmware", "mlx5_1", "28.37.1014", "node[031-032]"),
    }
    majority = {(o["fact"], o["item"]): o["majority"] for o in doc["odd_ones_out"]}
    assert majority[("nvidia.driver", None)] == base["inventory"]["driver"]["version"]
    assert majority[("pcie.width", gpu2)] == "x16"
    assert doc["summary"]["odd"]["nodes"] == "node[005,012,023,031-032]"
    checks = {c["id"]: c for c in doc["checks"]}
    assert checks["gpu.count"]["nodes"] == {"fail": "node012"}
    assert checks["gpu.count"]["counts"] == {
        "pass": 39,
        "warn": 0,
        "fail": 1,
        "error": 0,
        "skip": 0,
    }
    assert checks["pci.link.width"]["results"] == [
        {
            "status": "fail",
            "summary": "1 link(s) trained narrower than they can be",
            "count": 1,
            "nodes": "node023",
        }
    ]
    assert doc["summary"]["failing"]["nodes"] == "node[012,023]"
    assert doc["summary"]["nodes"] == {
        "total": 40,
        "reported": 40,
        "not_reported": 0,
        "nodeset": "node[001-040]",
    }


def test_the_text_names_them_folded(fleet, base):
    proc = run_dldoctor("fleet", "report", str(fleet))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    driver = base["inventory"]["driver"]["version"]
    assert f"  nvidia.driver: 535.161.08 on node005 (majority {driver})" in lines
    assert "  nic.firmware mlx5_1: 28.37.1014 on node[031-032] (majority 28.39.1002)" in lines
    assert f"  pcie.width {gpu_bus(base, 2)} (GPU 2): x8 on node023 (majority x16)" in lines
    assert "      fail node012: 7 GPU(s), the policy expects 8" in lines
    check_line = next(line for line in lines if line.startswith("  pci.link.width "))
    assert check_line.split()[1:] == ["39", "0", "1", "0", "0"]
    assert lines[-1].startswith("40 report(s); 2 node(s) with failing checks (node[012,023])")


def test_markdown_has_the_same_tables(fleet):
    proc = run_dldoctor("fleet", "report", "--md", str(fleet))
    assert proc.returncode == 1
    text = proc.stdout
    assert text.startswith("# dldoctor fleet report\n")
    assert (
        "| `gpu.count` | 39 | 0 | 1 | 0 | 0 | fail node012: 7 GPU(s), the policy expects 8 |"
        in text
    )
    assert "| nic.firmware mlx5_1 | 28.37.1014 | node[031-032] | 28.39.1002 |" in text


def test_a_healthy_fleet_is_alike_and_exits_0(tmp_path, base):
    fleetgen.write_fleet(tmp_path, base, NAMES[:5])
    proc, doc = fleet_json(tmp_path)
    assert proc.returncode == 0
    assert doc["odd_ones_out"] == [] and doc["summary"]["status"] == "pass"
    facts = {f["fact"]: f for f in doc["facts"]}
    assert facts["nvidia.driver"]["rows"][0]["majority"]["count"] == 5
    # Not known (null in every inventory) is said apart, never a value that differs.
    assert facts["firmware.bios"]["unknown"] == {"count": 5, "nodes": "node[001-005]"}


def test_warnings_and_odd_ones_fail_only_with_strict(tmp_path, base):
    fleetgen.write_fleet(tmp_path, base, NAMES[:4], {"node002": [fleetgen.older_driver()]})
    assert run_dldoctor("fleet", "report", str(tmp_path)).returncode == 0
    assert run_dldoctor("fleet", "report", "--strict", str(tmp_path)).returncode == 1


def test_a_null_inventory_is_not_known_not_odd(tmp_path, base):
    fleetgen.write_fleet(tmp_path, base, NAMES[:3])
    blind = dict(base, inventory={**base["inventory"], "driver": None, "gpus": None})
    (tmp_path / "node004.json").write_bytes(fleetgen.dump(blind))
    old = dict(base)
    del old["inventory"]  # a report from before the inventory existed
    (tmp_path / "node005.json").write_bytes(fleetgen.dump(old))
    proc, doc = fleet_json(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert doc["odd_ones_out"] == []
    facts = {f["fact"]: f for f in doc["facts"]}
    assert facts["nvidia.driver"]["unknown"]["nodes"] == "node[004-005]"
    assert facts["gpu.model"]["unknown"]["nodes"] == "node[004-005]"
    assert facts["kernel.release"]["unknown"]["nodes"] == "node005"
    text = run_dldoctor("fleet", "report", str(tmp_path)).stdout.splitlines()
    assert any(line.startswith("  not known on node[004-005]: nvidia.driver") for line in text)


def test_since_lists_the_nodes_that_changed(tmp_path, base):
    before, after = tmp_path / "before", tmp_path / "after"
    fleetgen.write_fleet(before, base, NAMES[:10], {"node004": [fleetgen.older_driver()]})
    later = [*NAMES[1:10], "node011"]  # node001 retired, node011 racked
    fleetgen.write_fleet(after, base, later, {"node007": [fleetgen.narrow_gpu(2, 8)]})
    (after / "node009.json").write_text("not json")
    proc, doc = fleet_json(after, "--since", before)
    assert proc.returncode == 1, proc.stderr
    since = doc["since"]
    assert since["new"]["nodes"] == "node011" and since["gone"]["nodes"] == "node001"
    changed = {row["node"]: row for row in since["changed"]}
    assert set(changed) == {"node004", "node007", "node009"}
    gpu2 = gpu_bus(base, 2)
    assert [(f["id"], f["a"]["status"], f["b"]["status"]) for f in
            changed["node007"]["findings"]["changed"]] == [("pci.link.width", "pass", "fail")]  # fmt: skip
    assert [(r["fact"], r["item"], r["a"], r["b"]) for r in changed["node007"]["facts"]] == [
        ("pcie.width", gpu2, "x16", "x8")
    ]
    assert changed["node007"]["facts"][0]["label"] == f"pcie.width {gpu2} (GPU 2)"
    assert [(r["fact"], r["b"]) for r in changed["node004"]["facts"]] == [
        ("nvidia.driver", base["inventory"]["driver"]["version"]),
        ("nvidia.cuda_driver", base["inventory"]["driver"]["cuda"]),
    ]
    assert (changed["node009"]["was"], changed["node009"]["now"]) == ("report", "not_a_report")
    text = run_dldoctor("fleet", "report", str(after), "--since", str(before)).stdout
    assert f"  node007: pci.link.width pass -> fail; pcie.width {gpu2} (GPU 2): x16 -> x8" in (
        text.splitlines()
    )
    assert "  node009: report -> not a report" in text.splitlines()


def test_mixed_inputs_report_json_bundle_dir_and_archive(tmp_path, base):
    report = tmp_path / "node1.json"
    report.write_bytes(fleetgen.dump(base))
    bundle = tmp_path / "node2"
    archive = tmp_path / "node3.tar.gz"
    for dest, flag in ((bundle, ["--dir"]), (archive, [])):
        snap = run_dldoctor(
            "snapshot", *flag, "--no-redact", "--from", str(HOSTS / "hgx-h100x8-gpu3-x8"),
            "-o", str(dest),
        )  # fmt: skip
        assert snap.returncode == 0, snap.stderr
    proc, doc = fleet_json(report, bundle, archive)
    assert proc.returncode == 1, proc.stderr
    assert doc["summary"]["nodes"]["nodeset"] == "node[1-3]"
    assert doc["summary"]["nodes"]["reported"] == 3
    checks = {c["id"]: c for c in doc["checks"]}
    assert checks["pci.link.width"]["nodes"] == {"fail": "node[2-3]"}


def test_a_missing_input_is_exit_4(tmp_path):
    proc = run_dldoctor("fleet", "report", str(tmp_path / "nope.json"))
    assert proc.returncode == 4 and "no such file" in proc.stderr


HOSTILE = {
    "garbage.json": b"<html>502</html>",
    "empty.json": b"",
    "list.json": b"[1, 2, 3]",
    "deep.json": b"[" * 100_000 + b"]" * 100_000,
    "wide.json": b"[" + b"0," * 1_200_000 + b"0]",
    "old-schema.json": b'{"schema_version": 99, "findings": []}',
    "bad-finding.json": b'{"schema_version": 1, "findings": [{"id": 1}]}',
    "binary.json": bytes(range(256)) * 10,
}


def test_hostile_files_are_not_reports_and_never_crash(tmp_path, base):
    for name, data in HOSTILE.items():
        (tmp_path / name).write_bytes(data)
    with open(tmp_path / "huge.json", "wb") as f:
        f.truncate(MAX_REPORT_BYTES + 1)  # sparse: no disk spent
    os.mkfifo(tmp_path / "fifo.json")  # would block a plain open
    (tmp_path / "good.json").write_bytes(fleetgen.dump(base))
    weird = dict(base, inventory={"gpus": "eight", "pcie": [1, None], "driver": [], "rdma": {}})
    (tmp_path / "weird.json").write_bytes(fleetgen.dump(weird))
    proc, doc = fleet_json(tmp_path)
    assert proc.returncode == 3, proc.stderr  # no check failed, but nodes not reported
    assert proc.stderr == ""
    details = doc["problems"]["not_a_report"]["details"]
    assert set(details) == {n.removesuffix(".json") for n in HOSTILE} | {"huge", "fifo"}
    assert details["huge"] == f"larger than {MAX_REPORT_BYTES >> 20} MiB"
    assert details["fifo"] == "not a regular file"
    assert details["empty"] == "empty"
    assert details["wide"] == "not JSON (more than 1000000 JSON values)"
    assert details["old-schema"] == "schema_version 99, not 1 or 2"
    assert doc["summary"]["nodes"]["reported"] == 2  # good, and weird: its facts not known
    facts = {f["fact"]: f for f in doc["facts"]}
    assert facts["gpu.count"]["unknown"]["nodes"] == "weird"


def test_the_fast_decoder_reads_what_json_reads(base):
    # msgspec reads the fields a fleet needs and skips the rest unbuilt, in any layout;
    # json reads whatever it refuses, and both give the same node.
    from dldoctor.fleet.nodes import _fast, _report

    data = fleetgen.dump(base)
    whole = _report(json.loads(data))
    indented = json.dumps(base, indent=2).encode()
    assert _fast(data) == _fast(indented) == whole
    assert len(whole.findings) == len(base["findings"])
    # Evidence stored once beside the findings (another layout of it) is skipped as well.
    shared = dict(base, evidence={"e1": {"kind": "command", "stdout": "x" * 1000}})
    assert _fast(fleetgen.dump(shared)) == whole
    # What msgspec refuses and json reads: a NaN in the evidence, text not in ASCII.
    odd = json.loads(data)
    odd["findings"][3]["evidence"] = [float("nan")]
    assert _fast(fleetgen.dump(odd)) is None
    assert parse(fleetgen.dump(odd)) == whole
    accented = json.dumps(dict(base, note="\u00e9t\u00e9"), ensure_ascii=False).encode()
    assert _fast(accented) is None
    assert parse(accented) == whole


def test_a_sweep_record_names_the_nodes_without_an_answer(tmp_path, base):
    fleetgen.write_fleet(tmp_path, base, ["n1"])
    record = {
        "format": "dldoctor-fleet-sweep",
        "format_version": 1,
        "nodes": {
            "n1": {"outcome": "answered", "file": "n1.json"},
            "n2": {"outcome": "timed_out", "file": None, "detail": "no answer within 5 s"},
            "n3": {"outcome": "unreachable", "file": None, "detail": "ssh: no route"},
            "n4": {"outcome": "answered", "file": "../../etc/passwd"},  # never read
        },
    }
    (tmp_path / "sweep.json").write_text(json.dumps(record))
    proc, doc = fleet_json(tmp_path)
    assert proc.returncode == 3
    found = {k: v["details"] for k, v in doc["problems"].items() if v["count"]}
    assert found == {
        "timed_out": {"n2": "no answer within 5 s"},
        "unreachable": {"n3": "ssh: no route"},
        "not_a_report": {"n4": "the sweep recorded no answer of it"},
    }


def test_fold_is_clustershell_node_set_syntax():
    assert fold(["node003", "node017", "node018", "node019"]) == "node[003,017-019]"
    assert fold(["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]) == "rack[1-2]-n[1-2]"
    # A name that is not a host name is listed as it is, never parsed as a node set.
    assert fold(["n1", "a,b", "@gpu"]) == "n1,@gpu,a,b"


def test_copies_of_one_node_are_one_node(tmp_path, base):
    fleetgen.write_fleet(tmp_path / "a", base, ["n1"])
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    proc, doc = fleet_json(tmp_path / "a", tmp_path / "b")
    assert doc["summary"]["nodes"]["total"] == 1
    assert "node n1 given twice" in proc.stderr


# --- hostile folders: links out, devices, names, manifest-less bundles ----------------------


def test_links_out_of_the_folder_are_never_followed(tmp_path, base):
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "canary.json"
    canary.write_bytes(fleetgen.dump(dict(base, host=dict(base["host"], hostname="CANARY"))))
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "good.json").write_bytes(fleetgen.dump(base))
    (fleet / "canary.json").symlink_to(canary)
    (fleet / "zero.json").symlink_to("/dev/zero")
    (fleet / "bundle.tar.gz").symlink_to(canary)
    (fleet / "gone.json").symlink_to(outside / "missing.json")
    sweep = {"format": "dldoctor-fleet-sweep", "nodes": {"viasweep": {"file": "canary.json"}}}
    (fleet / "sweep.json").write_text(json.dumps(sweep))
    proc, doc = fleet_json(fleet)
    assert proc.returncode == 3, proc.stderr
    assert "CANARY" not in proc.stdout
    details = doc["problems"]["not_a_report"]["details"]
    link = "a symbolic link: not followed"
    assert details == {n: link for n in ("canary", "zero", "bundle", "gone", "viasweep")}
    assert doc["summary"]["nodes"]["reported"] == 1


def test_a_link_named_on_the_command_line_is_read(tmp_path, base):
    (tmp_path / "real.json").write_bytes(fleetgen.dump(base))
    (tmp_path / "node7.json").symlink_to(tmp_path / "real.json")
    proc, doc = fleet_json(tmp_path / "node7.json")
    assert proc.returncode in (0, 1), proc.stderr
    assert doc["summary"]["nodes"]["reported"] == 1
    assert doc["summary"]["nodes"]["nodeset"] == "node7"


def test_a_device_or_fifo_is_never_opened(tmp_path, monkeypatch):
    # opening a device runs its driver: lstat says what it is first
    from dldoctor.fleet.nodes import load

    os.mkfifo(tmp_path / "fifo.json")
    opened = watch_opens(monkeypatch)
    for path in ("/dev/null", str(tmp_path / "fifo.json")):
        assert load(path).detail == "not a regular file"
    assert opened == []


def test_a_400_digit_node_number_is_listed_verbatim(tmp_path, base):
    # a file name holds 250 bytes; a name in sweep.json, 300 characters
    long_file, long_sweep = "node" + "9" * 240, "n" + "1" * 299
    for name in ("node001", "node002", long_file):
        (tmp_path / f"{name}.json").write_bytes(fleetgen.dump(base))
    sweep = {"format": "dldoctor-fleet-sweep", "nodes": {long_sweep: {"outcome": "unreachable"}}}
    (tmp_path / "sweep.json").write_text(json.dumps(sweep))
    proc, doc = fleet_json(tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert doc["summary"]["nodes"]["nodeset"] == f"node[001-002],{long_sweep},{long_file}"
    assert fold(["a1", "a2", "b" + "7" * 19]) == "a[1-2],b" + "7" * 19


def test_an_undecodable_node_name_is_printed(tmp_path, base):
    name = os.fsencode(tmp_path) + b"/\xff\xfe.json"
    with open(name, "wb") as f:
        f.write(fleetgen.dump(base))
    proc = run_dldoctor("fleet", "report", str(tmp_path))
    assert proc.returncode in (0, 1), proc.stderr
    assert "\ufffd\ufffd" in proc.stdout


def test_a_bundle_without_a_manifest_is_one_node(tmp_path):
    host = tmp_path / "hgx-h100x8-driver535"
    shutil.copytree(HOSTS / "hgx-h100x8-driver535", host, symlinks=True)
    proc, doc = fleet_json(tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert doc["problems"]["not_a_report"]["details"] == {
        "hgx-h100x8-driver535": "a bundle without report.json"
    }
    proc, doc = fleet_json(host)  # named on its own, the same one node
    assert doc["problems"]["not_a_report"]["details"] == {
        "hgx-h100x8-driver535": "a bundle without report.json"
    }


# --- the active tier's figures: the fleet's median and its stragglers -------------------

MEASURED = [f"node{i:03d}" for i in range(1, 21)]


def _measured_fleet(folder, base, **extra):
    # Every node measured, each a little off the next; node017's GPU 3 at 54 % of its HBM
    # (the judge fails it), node009's GPU 5 at 87 % of its GEMM (the judge warns: below
    # 0.90 of its siblings).
    odd = {n: [fleetgen.measured(jitter=1 - 0.002 * (i % 5))] for i, n in enumerate(MEASURED)}
    odd["node017"] = [fleetgen.measured(slow={("hbm_copy", 3): 0.54})]
    odd["node009"] = [fleetgen.measured(slow={("gemm_bf16", 5): 0.87})]
    odd.update(extra)
    fleetgen.write_fleet(folder, base, MEASURED, odd)
    return folder


def test_stragglers_are_named_by_their_distance_from_the_fleets_median_worst_first(tmp_path, base):
    folder = _measured_fleet(tmp_path / "f", base)
    proc, doc = fleet_json(folder)
    perf = doc["perf"]
    assert perf["straggler"] == 0.90
    slow = [(s["node"], s["subject"], s["what"], s["fraction"]) for s in perf["stragglers"]]
    assert [s[:3] for s in slow] == [("node017", "GPU 3", "hbm_copy"),
                                     ("node009", "GPU 5", "gemm_bf16")]  # fmt: skip
    assert 0.53 < slow[0][3] < 0.55 and 0.86 < slow[1][3] < 0.88
    hbm = next(r for r in perf["figures"] if r["what"] == "hbm_copy")
    assert hbm["parts"] == 160 and hbm["nodes"]["count"] == 20
    assert hbm["kind"] == base["inventory"]["gpus"][0]["model"]  # folded per GPU model
    assert 2580 < hbm["median"] < 2610 and hbm["min"] == 1409.4
    disk = next(r for r in perf["figures"] if r["what"] == "seq_read")
    assert disk["kind"] == "/data" and disk["parts"] == 20 and disk["stragglers"] == []  # per part
    assert doc["summary"]["straggling"] == {"count": 2, "nodes": "node[009,017]"}
    assert proc.returncode == 1  # node017's memory check failed
    text = run_dldoctor("fleet", "report", str(folder)).stdout
    lines = text.splitlines()
    first = lines.index("Stragglers (below 90 % of the fleet's median)") + 1
    assert lines[first].startswith(
        "  node017 GPU 3 hbm_copy 1409 GB/s, 54 % of the fleet median 2"
    ), lines[first]
    assert lines[first + 1].startswith("  node009 GPU 5 gemm_bf16 606 TFLOPS, 87 % of")
    assert "2 node(s) with stragglers (node[009,017])" in text
    md = run_dldoctor("fleet", "report", "--md", str(folder)).stdout
    assert "## Stragglers" in md and "- node017 GPU 3 hbm_copy 1409 GB/s" in md


def test_the_straggler_fraction_is_an_option_and_strict_fails_on_stragglers(tmp_path, base):
    odd = {n: [fleetgen.measured(jitter=1 - 0.002 * (i % 5))] for i, n in enumerate(MEASURED)}
    odd["node009"] = [fleetgen.measured(slow={("gemm_bf16", 5): 0.87})]  # a warning only
    fleetgen.write_fleet(tmp_path / "f", base, MEASURED, odd)
    proc, doc = fleet_json(tmp_path / "f")
    assert proc.returncode == 0 and doc["summary"]["status"] == "warn"
    assert [s["node"] for s in doc["perf"]["stragglers"]] == ["node009"]
    proc, doc = fleet_json("--strict", tmp_path / "f")
    assert proc.returncode == 1
    proc, doc = fleet_json("--straggler", "0.8", tmp_path / "f")
    assert doc["perf"]["straggler"] == 0.8 and doc["perf"]["stragglers"] == []
    assert doc["summary"]["straggling"]["count"] == 0
    bad = run_dldoctor("fleet", "report", "--straggler", "1.5", str(tmp_path / "f"))
    assert bad.returncode == 2 and "not a fraction" in bad.stderr


def test_a_fleet_without_figures_has_no_figure_section(fleet):
    proc, doc = fleet_json(fleet)
    assert doc["perf"] == {"straggler": 0.90, "figures": [], "stragglers": []}
    assert "Stragglers" not in run_dldoctor("fleet", "report", str(fleet)).stdout


def test_the_fast_decoder_reads_figures_as_json_does_and_a_bad_one_is_not_a_report(base):
    from dldoctor.fleet.nodes import NOT_A_REPORT, Problem, _fast, _report

    report = json.loads(fleetgen.dump(base))
    fleetgen.measured(slow={("hbm_copy", 3): 0.54})(report)
    data = fleetgen.dump(report)
    whole = _report(json.loads(data))
    assert _fast(data) == whole and len(whole.figures) == 17
    assert ("perf.gpu.memory", "GPU 3", "hbm_copy", "GB/s", 1409.4) in whole.figures
    for spoil in (
        lambda g: g.update(value="1409"),
        lambda g: g.update(value=True),
        lambda g: g.pop("unit"),
        lambda g: g.update(subject=3),
    ):
        broken = json.loads(data)
        spoil(next(f for f in broken["findings"] if f["id"] == "perf.gpu.memory")["figures"][0])
        assert _fast(fleetgen.dump(broken)) is None
        answer = parse(fleetgen.dump(broken))
        assert isinstance(answer, Problem) and answer.kind == NOT_A_REPORT, answer
    infinite = data.replace(b'"value":1409.4', b'"value":Infinity')
    assert isinstance(parse(infinite), Problem)


def test_since_names_a_figure_that_moved(tmp_path, base):
    old = _measured_fleet(tmp_path / "old", base)
    new = _measured_fleet(tmp_path / "new", base,
                          node004=[fleetgen.measured(disk_gbs=3.1)])  # fmt: skip
    proc, doc = fleet_json("--since", old, new)
    rows = {r["node"]: r for r in doc["since"]["changed"]}
    assert list(rows) == ["node004"]
    assert [(f["subject"], f["what"], f["change"]) for f in rows["node004"]["figures"]] == [
        ("/data", "seq_read", -0.5)
    ]
    text = run_dldoctor("fleet", "report", "--since", str(old), str(new)).stdout
    assert "  node004: perf.disk.read /data seq_read 6.20 GB/s -> 3.10 GB/s (-50 %)" in text


def test_a_latency_straggles_above_the_median_and_genconf_pins_none(tmp_path, base):
    from dldoctor.genconf import render
    from dldoctor.model import Report
    from tests.support.perffigures import latency_finding

    odd = {n: [fleetgen.latency(2.0 + 0.01 * (i % 3))] for i, n in enumerate(MEASURED)}
    odd["node004"] = [fleetgen.latency(3.5)]
    fleetgen.write_fleet(tmp_path / "f", base, MEASURED, odd)
    proc, doc = fleet_json(tmp_path / "f")
    assert [(s["node"], s["what"], s["fraction"]) for s in doc["perf"]["stragglers"]] == [
        ("node004", "p2p_latency", 1.7413)  # 3.5 us against a median of 2.01
    ]
    pinned = render(Report([latency_finding(2.0)]))
    assert "[[perf.references]]" not in pinned and "p2p_latency not pinned: a time (us)" in pinned
