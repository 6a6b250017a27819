"""`--prometheus FILE`: the report as a node_exporter textfile. Read back with prometheus-
client's own text parser, and served by a real `prometheus-node-exporter` started on
loopback: every check's status as a state set, the run's counts and time, the inventory's
GPU and RDMA gauges with its values (a null one absent, never 0), names that follow the
exposition conventions and are the ones docs/prometheus.md lists, and a file replaced whole
while the exporter reads it."""

from __future__ import annotations

import copy
import datetime as dt
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dldoctor.atomicfile import write_atomically
from dldoctor.model import Finding, Report, Status
from dldoctor.render.prometheus import render_prometheus
from tests.support.cli import report_of, run_dldoctor
from tests.support.paths import HOSTS

EXPORTER = "/usr/bin/prometheus-node-exporter"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "prometheus.md"
STATUSES = ("pass", "warn", "fail", "skip", "error")

# The documented contract (docs/prometheus.md), written out here on its own: metric ->
# (inventory field, the factor from the inventory's unit to the metric's base unit).
GPU_GAUGES = {
    "dldoctor_gpu_temperature_celsius": ("temperature_c", 1),
    "dldoctor_gpu_power_watts": ("power_draw_w", 1),
    "dldoctor_gpu_power_limit_watts": ("power_limit_w", 1),
    "dldoctor_gpu_memory_total_bytes": ("memory_mib", 2**20),
    "dldoctor_gpu_pcie_link_width": ("pcie_width", 1),
    "dldoctor_gpu_pcie_link_width_max": ("pcie_width_max", 1),
    "dldoctor_gpu_pcie_link_generation": ("pcie_gen", 1),
    "dldoctor_gpu_pcie_link_generation_max": ("pcie_gen_max", 1),
    "dldoctor_gpu_xid_events": ("xid_events", 1),
}
GPU_BY_LABEL = {
    ("dldoctor_gpu_ecc_errors", "type", "corrected"): "ecc_volatile_corrected",
    ("dldoctor_gpu_ecc_errors", "type", "uncorrected"): "ecc_volatile_uncorrected",
    ("dldoctor_gpu_remapped_rows", "type", "corrected"): "remapped_rows_corrected",
    ("dldoctor_gpu_remapped_rows", "type", "uncorrected"): "remapped_rows_uncorrected",
    ("dldoctor_gpu_retired_pages", "cause", "dbe"): "retired_pages_dbe",
}


def _series(text: str) -> dict[str, dict[frozenset, float]]:
    """{metric name: {frozenset of label pairs: value}}, by prometheus-client's parser."""
    out: dict[str, dict[frozenset, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = frozenset(sample.labels.items())
            assert labels not in out.setdefault(sample.name, {}), ("repeated", sample)
            out[sample.name][labels] = sample.value
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """host -> (the JSON report, the textfile) of one run as a user makes it, the report on
    stdout and the textfile beside it; each host run once for the module's tests."""
    done: dict[str, tuple[dict, str]] = {}

    def run(host: str) -> tuple[dict, str]:
        if host not in done:
            out = tmp_path_factory.mktemp("textfile") / "dldoctor.prom"
            argv = ("--check", "--json", "--from", str(HOSTS / host), "--prometheus", str(out))
            proc = run_dldoctor(*argv)
            assert proc.returncode in (0, 1), proc.stderr
            done[host] = (report_of(proc), out.read_text(encoding="utf-8"))
        report, text = done[host]
        return copy.deepcopy(report), text

    return run


def _gpu_labels(gpu: dict) -> frozenset:
    return frozenset({"gpu": str(gpu["index"]), "bus_id": gpu["bus_id"] or ""}.items())


def _assert_matches_report(report: dict, series: dict[str, dict[frozenset, float]]) -> None:
    """Every series the contract promises, with the report's value; nothing for a null."""
    statuses = series["dldoctor_check_status"]
    assert len(statuses) == len(STATUSES) * len(report["findings"])
    for f in report["findings"]:
        for s in STATUSES:
            key = frozenset({"check": f["id"], "category": f["category"], "status": s}.items())
            assert statuses[key] == (1.0 if f["status"] == s else 0.0), (f["id"], s)
    counts = {dict(k)["status"]: v for k, v in series["dldoctor_checks"].items()}
    assert counts == {s: float(n) for s, n in report["summary"]["counts"].items()}
    started = dt.datetime.fromisoformat(report["started_at"].replace("Z", "+00:00"))
    assert series["dldoctor_last_run_timestamp_seconds"] == {frozenset(): started.timestamp()}
    assert series["dldoctor_run_duration_seconds"] == {frozenset(): report["duration_s"]}
    complete = report["summary"]["counts"]["error"] == 0
    assert series["dldoctor_run_complete"] == {frozenset(): float(complete)}
    assert series["dldoctor_info"] == {
        frozenset({"version": report["tool"]["version"]}.items()): 1.0
    }
    driver = report["inventory"]["driver"]
    assert series.get("dldoctor_gpu_driver_info", {}) == (
        {frozenset({"version": driver["version"], "cuda": driver["cuda"]}.items()): 1.0}
        if driver
        else {}
    )
    gpus = report["inventory"]["gpus"] or []
    assert series.get("dldoctor_gpu_info", {}) == {
        _gpu_labels(g) | {("model", g["model"] or ""), ("vbios", g["vbios"] or "")}: 1.0
        for g in gpus
    }
    for name, (field, scale) in GPU_GAUGES.items():
        expected = {_gpu_labels(g): float(g[field] * scale) for g in gpus if g[field] is not None}
        assert series.get(name, {}) == expected, name
    for (name, label, kind), field in GPU_BY_LABEL.items():
        got = {
            k - {(label, kind)}: v for k, v in series.get(name, {}).items() if (label, kind) in k
        }
        expected = {_gpu_labels(g): float(g[field]) for g in gpus if g[field] is not None}
        assert got == expected, (name, kind)
    ports = report["inventory"]["rdma"] or []
    rates = series.get("dldoctor_rdma_port_rate_bytes_per_second", {})
    assert rates == {
        frozenset({"device": p["device"], "port": str(p["port"])}.items()): p["rate_gbps"] * 1.25e8
        for p in ports
        if p["rate_gbps"] is not None
    }
    states = {
        (dict(k)["device"], dict(k)["port"]): dict(k)["state"]
        for k in series.get("dldoctor_rdma_port_info", {})
    }
    assert states == {(p["device"], str(p["port"])): p["state"] or "" for p in ports}


@pytest.mark.parametrize(
    "host",
    [
        "hgx-h100x8-gpu3-x8",
        "a100x8-remap-pending-xid79",
        "hgx-h100x8-ib-init",
        "ubuntu2204-healthy",
        "workstation-rtx4090-nouveau",
    ],
)
def test_the_textfile_says_what_the_report_says(run, host):
    report, text = run(host)
    series = _series(text)
    _assert_matches_report(report, series)


def test_a_gpu_at_x8_shows_in_the_width_gauges(run):
    _, text = run("hgx-h100x8-gpu3-x8")
    series = _series(text)
    widths = {dict(k)["gpu"]: v for k, v in series["dldoctor_gpu_pcie_link_width"].items()}
    assert widths["3"] == 8 and {v for g, v in widths.items() if g != "3"} == {16}
    assert set(series["dldoctor_gpu_pcie_link_width_max"].values()) == {16}
    failing = {dict(k)["check"] for k, v in series["dldoctor_check_status"].items()
               if v == 1 and dict(k)["status"] == "fail"}  # fmt: skip
    assert "pci.link.width" in failing


def test_remapped_rows_and_xids_show_and_an_unknown_value_is_absent(run):
    report, text = run("a100x8-remap-pending-xid79")
    series = _series(text)
    remap = series["dldoctor_gpu_remapped_rows"]
    bus = {str(g["index"]): g["bus_id"] for g in report["inventory"]["gpus"]}
    key = frozenset({"gpu": "3", "bus_id": bus["3"], "type": "uncorrected"}.items())
    assert remap[key] == 1
    xids = {dict(k)["gpu"]: v for k, v in series["dldoctor_gpu_xid_events"].items()}
    assert xids["3"] == 1
    # GPU 5 answered NVML with no telemetry: its temperature is unknown, so no series,
    # never a 0 °C that an alert on "too hot" would read as fine.
    temps = {dict(k)["gpu"] for k in series["dldoctor_gpu_temperature_celsius"]}
    assert "5" not in temps and len(temps) == 7
    assert sum(1 for k in series["dldoctor_gpu_info"] if dict(k)["gpu"] == "5") == 1


@pytest.mark.parametrize("host", ["ubuntu2204-healthy", "workstation-rtx4090-nouveau"])
def test_a_host_without_a_usable_driver_has_no_gpu_series(run, host):
    report, text = run(host)
    series = _series(text)
    assert not report["inventory"]["gpus"]
    assert not [name for name in series if name.startswith("dldoctor_gpu")]
    assert series["dldoctor_check_status"]  # the checks are still there


def test_names_follow_the_exposition_conventions_and_the_docs_list_them(run):
    hosts = ("a100x8-remap-pending-xid79", "hgx-h100x8-ib-init", "ubuntu2204-healthy")
    runs = [run(host) for host in hosts]
    texts = [text for _, text in runs]
    # No fixture GPU reports retired pages (A100 and later remap rows instead): one that does.
    assert "dldoctor_gpu_retired_pages" not in "".join(texts)
    report = runs[0][0]
    report["inventory"]["gpus"] = [{**report["inventory"]["gpus"][0], "retired_pages_dbe": 2}]
    texts.append(render_prometheus(Report.from_dict(report)).decode())
    _assert_matches_report(report, _series(texts[-1]))
    texts.append(render_prometheus(_measured()).decode())  # the active tier's figures
    names: set[str] = set()
    for text in texts:
        for family in text_string_to_metric_families(text):
            assert family.type == "gauge", family.name  # snapshots of counts: see the docs
            names.add(family.name)
            for sample in family.samples:
                assert all(re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", k) for k in sample.labels)
    assert all(re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", n) for n in names)
    assert all(n.startswith("dldoctor_") and not n.endswith("_total") for n in names)
    # Base units as suffixes: never MiB, Gb/s, milliseconds or a bare "_c" / "_w".
    assert not [n for n in names if re.search(r"_(mib|gib|gbps|ms|c|w|percent)(_|$)", n)]
    assert {n for n in names if "temperature" in n} <= {n for n in names if n.endswith("_celsius")}
    assert {n for n in names if "power" in n} <= {n for n in names if n.endswith("_watts")}
    documented = set(re.findall(r"^\| `(dldoctor_[a-z_]+)`", DOCS.read_text(), re.MULTILINE))
    assert names == documented


def test_null_values_an_empty_start_and_repeated_ids_still_make_a_valid_file():
    finding = Finding("x.y", "X", "x", Status.WARN, "odd")
    report = Report(
        findings=[finding, finding],  # two plugins' findings of one id
        started_at="",
        inventory={"gpus": [{"index": 0, "bus_id": None, "temperature_c": None}], "rdma": []},
    )
    series = _series(render_prometheus(report).decode())
    assert "dldoctor_last_run_timestamp_seconds" not in series
    assert "dldoctor_gpu_temperature_celsius" not in series  # no family of no samples
    assert len(series["dldoctor_check_status"]) == len(STATUSES)
    assert series["dldoctor_checks"][frozenset({("status", "warn")})] == 2


def test_the_file_is_replaced_whole_and_an_unwritable_one_is_exit_6(tmp_path):
    out = tmp_path / "dldoctor.prom"
    out.write_text("# a textfile the exporter may be reading\n")
    inode = out.stat().st_ino
    proc = run_dldoctor(
        "--check", "--from", str(HOSTS / "hgx-h100x8-healthy"), "--prometheus", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_ino != inode and os.listdir(tmp_path) == ["dldoctor.prom"]
    assert _series(out.read_text())["dldoctor_checks"]
    nowhere = tmp_path / "missing" / "dldoctor.prom"
    failed = run_dldoctor(
        "--check", "--from", str(HOSTS / "hgx-h100x8-healthy"), "--prometheus", str(nowhere)
    )
    assert failed.returncode == 6 and f"cannot write {nowhere}" in failed.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


@pytest.fixture
def exporter(tmp_path):
    """node_exporter with only its textfile collector, reading a fresh folder: (folder, port)."""
    if not shutil.which(EXPORTER):
        pytest.skip(
            f"{EXPORTER} is not installed (Debian: apt-get install prometheus-node-exporter)"
        )
    folder = tmp_path / "textfile"
    folder.mkdir()
    port = _free_port()
    log = (tmp_path / "exporter.log").open("wb")
    proc = subprocess.Popen(
        [
            EXPORTER,
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={folder}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        until = time.monotonic() + 15
        while True:
            try:
                _scrape(port)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > until:
                    raise AssertionError(
                        "node_exporter did not answer: " + (tmp_path / "exporter.log").read_text()
                    ) from None
                time.sleep(0.05)
        yield folder, port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.exporter
def test_node_exporter_serves_the_textfile(exporter):
    folder, port = exporter
    out = folder / "dldoctor.prom"
    host = str(HOSTS / "a100x8-remap-pending-xid79")
    proc = run_dldoctor("--check", "--json", "--from", host, "--prometheus", str(out))
    report = report_of(proc)
    series = _series(_scrape(port))
    assert series["node_textfile_scrape_error"] == {frozenset(): 0.0}
    assert list(series["node_textfile_mtime_seconds"]) == [frozenset({("file", str(out))})]
    _assert_matches_report(report, series)

    # Replaced while the exporter reads it: each scrape sees one whole file or the other
    # (the first of them is what the run above wrote: the same report).
    other = run_dldoctor("--check", "--json", "--from", str(HOSTS / "hgx-h100x8-gpu3-x8"))
    reports = [report, report_of(other)]
    files = [render_prometheus(Report.from_dict(r)) for r in reports]
    wanted = [_series(f.decode()) for f in files]
    assert wanted[0] != wanted[1]
    done = threading.Event()

    def rewrite():
        for i in range(300):
            write_atomically(str(out), files[i % 2], make_parents=False)
        done.set()

    writer = threading.Thread(target=rewrite)
    writer.start()
    scrapes = 0
    try:
        while not done.is_set() or scrapes < 5:
            series = _series(_scrape(port))
            scrapes += 1
            assert series["node_textfile_scrape_error"] == {frozenset(): 0.0}
            assert {n: v for n, v in series.items() if n.startswith("dldoctor_")} in wanted
    finally:
        writer.join()
    assert sorted(os.listdir(folder)) == ["dldoctor.prom"]  # no temporary left behind


# --- the active tier's figures ----------------------------------------------------------


def _measured() -> Report:
    from tests.support.perffigures import measured_report

    return measured_report("hgx-h100x8-healthy", slow={("hbm_copy", 3): 0.54})


def _assert_figures(report: Report, series: dict[str, dict[frozenset, float]]) -> None:
    """One value series per figure, and a reference series exactly where one is known."""
    expected_values, expected_refs = {}, {}
    for f in report.findings:
        for fig in f.figures:
            labels = frozenset(
                {"check": f.id, "subject": fig.subject, "what": fig.what, "unit": fig.unit}.items()
            )
            expected_values[labels] = fig.value
            if fig.reference is not None:
                expected_refs[labels] = fig.reference
    assert len(expected_values) == 17 and len(expected_refs) == 16
    assert series["dldoctor_perf_value"] == expected_values
    assert series["dldoctor_perf_reference"] == expected_refs


def test_each_figure_is_a_gauge_with_its_reference_and_a_plain_report_has_none(run):
    report = _measured()
    series = _series(render_prometheus(report).decode())
    _assert_figures(report, series)
    gpu3 = frozenset(
        {"check": "perf.gpu.memory", "subject": "GPU 3", "what": "hbm_copy", "unit": "GB/s"}.items()
    )
    assert series["dldoctor_perf_value"][gpu3] == 1409.4
    _, plain = run("hgx-h100x8-healthy")
    assert "dldoctor_perf" not in plain


@pytest.mark.exporter
def test_node_exporter_serves_the_figures(exporter):
    folder, port = exporter
    report = _measured()
    write_atomically(str(folder / "dldoctor.prom"), render_prometheus(report), make_parents=False)
    series = _series(_scrape(port))
    assert series["node_textfile_scrape_error"] == {frozenset(): 0.0}
    _assert_figures(report, series)
