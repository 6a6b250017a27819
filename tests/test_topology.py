"""The topology picture (doctor/topology.py): built from the facts of fixture hosts, a sos
report and a bug-report log, the findings drawn on the parts their subjects name; the SVG
read back as XML (DOM-style), the text tree, `--check --topology`, report.html in a
snapshot, and hostile or broken input that never gives a traceback."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from dldoctor.diagnose import diagnose
from dldoctor.facts import Facts
from dldoctor.host.replay import ReplayHost
from dldoctor.model import Finding, Report, Status
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered
from dldoctor.topology import (
    Link,
    Part,
    Topology,
    render_svg,
    render_tree,
    topology,
    topology_of,
)
from tests.support.cli import report_of, run_dldoctor
from tests.support.faults import FaultyHost
from tests.support.paths import FIXTURES, HOSTS

SVG = "{http://www.w3.org/2000/svg}"
SOS = FIXTURES / "foreign" / "sos" / "sosreport-host0-2026-12-01-hsxafrq.tar.xz"
BUG_REPORT = FIXTURES / "bugreports" / "maz906-caffe-gtx-titan-x-352.63.log.gz"


def picture(scenario: str, host=None):
    """(topology, findings, SVG root element, text tree) of one replayed fixture host."""
    host = host or ReplayHost(str(HOSTS / scenario))
    facts = Facts(host)
    report = diagnose(host, Policy(), ordered(builtin_checks()), facts=facts)
    topo = facts.get(topology)
    svg = render_svg(topo, report.findings)
    return topo, report.findings, ET.fromstring(svg), render_tree(topo, report.findings)


def parts(root, kind: str | None = None) -> list[ET.Element]:
    return [
        g
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "part" and (kind is None or g.get("data-kind") == kind)
    ]


def links(root) -> dict[str, ET.Element]:
    return {p.get("data-addr"): p for p in root.iter(f"{SVG}path") if p.get("class") == "link"}


def test_the_gpu_trained_at_x8_is_drawn_red_on_its_link():
    topo, findings, root, tree = picture("hgx-h100x8-gpu3-x8")
    gpus = parts(root, "gpu")
    assert len(gpus) == 8
    by_addr = {g.get("data-addr"): g for g in gpus}
    gpu3 = by_addr["0000:48:00.0"]
    assert gpu3.get("data-status") == "fail" and "pci.link.width" in gpu3.get("data-checks")
    drawn = links(root)
    assert drawn["0000:48:00.0"].get("data-status") == "fail"
    assert drawn["0000:48:00.0"].get("stroke") == "#c62828"
    others = [a for a in by_addr if a != "0000:48:00.0"]
    assert {drawn[a].get("data-status") for a in others} == {"ok"}
    # The trained/capable width is written beside the link.
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "x8/x16 · 2.5/32 GT/s" in texts
    line = next(x for x in tree.splitlines() if "GPU 3 " in x and "0000:48:00.0" in x)
    assert "x8/x16" in line and "✗ pci.link.width" in line
    # Two sockets, each its NUMA node; the NVLink band holds every GPU.
    assert topo.sockets == 2 and [n.name for n in topo.nodes] == ["NUMA node 0", "NUMA node 1"]
    band = [g for g in root.iter(f"{SVG}g") if g.get("class") == "nvlink"]
    assert sorted(int(g.get("data-gpu")) for g in band) == list(range(8))
    fabric = [g for g in root.iter(f"{SVG}g") if g.get("data-kind") == "nvswitch-fabric"]
    assert fabric and fabric[0].get("data-count") == "4"


def test_the_switch_with_acs_redirect_in_the_p2p_path_is_marked():
    _, _, root, tree = picture("hgx-h100x8-acs-redirect")
    switches = {g.get("data-addr"): g for g in parts(root, "switch")}
    marked = {a for a, g in switches.items() if g.get("data-status") == "fail"}
    assert marked == {"0000:16:00.0", "0000:56:00.0"}  # their downstream ports redirect
    assert all("pci.acs" in switches[a].get("data-checks") for a in marked)
    assert all(g.get("data-status") == "ok" for a, g in switches.items() if a not in marked)
    assert "PCIe switch  0000:16:00.0  x16/x16 · 32/32 GT/s  ✗ pci.acs" in tree
    # ACS is no link fault: the links to the switches stay as they are.
    assert links(root)["0000:16:00.0"].get("data-status") == "ok"


def test_the_gpus_on_the_socket_without_a_nic_are_marked_with_the_far_nics():
    # Both ConnectX-7s under the first socket: GPUs 4-7 reach the fabric across it.
    _, findings, root, tree = picture("hgx-h100x8-nic-far-socket")
    locality = next(f for f in findings if f.id == "numa.locality")
    assert locality.status == Status.WARN and locality.summary.startswith("4 GPU(s) with no RDMA")
    gpus = {g.get("data-addr"): g.get("data-status") for g in parts(root, "gpu")}
    far = {"0000:58:00.0", "0000:68:00.0", "0000:78:00.0", "0000:88:00.0"}
    assert {a for a, status in gpus.items() if status == "warn"} == far
    nics = {g.get("data-addr"): g.get("data-status") for g in parts(root) if
            g.get("data-addr") in ("0000:19:00.0", "0000:29:00.0")}  # fmt: skip
    assert nics == {"0000:19:00.0": "warn", "0000:29:00.0": "warn"}
    assert "GPU 4  0000:58:00.0" in tree and "! numa.locality" in tree
    # The same GPUs with a NIC on each socket (the healthy board) are not marked.
    _, findings, _, _ = picture("hgx-h100x8-healthy")
    assert next(f for f in findings if f.id == "numa.locality").status == Status.PASS


def test_a_healthy_hgx_has_nothing_marked_and_fits_1280_px():
    topo, _, root, tree = picture("hgx-h100x8-healthy")
    assert {g.get("data-status") for g in parts(root)} == {"ok"}
    assert root.get("width") == "1280" and root.get("viewBox").startswith("0 0 1280 ")
    for t in root.iter(f"{SVG}text"):  # every text starts inside the picture
        assert 0 <= float(t.get("x")) < 1280
    kinds = {p.kind for p in topo.parts()}
    assert {"node", "root", "switch", "gpu", "hca", "nvswitch"} <= kinds
    assert "✗" not in tree and "!" not in tree.replace("not drawn", "")
    assert all(len(line) <= 100 for line in tree.splitlines())


def test_the_workstation_without_nvidia_driver_shows_its_gpu_held_by_nouveau():
    topo, _, root, tree = picture("workstation-rtx4090-nouveau")
    (gpu,) = parts(root, "gpu")
    assert gpu.get("data-addr") == "0000:01:00.0" and gpu.get("data-status") == "fail"
    assert "gpu.nouveau" in gpu.get("data-checks")
    assert "driver nouveau" in tree
    assert any(m.startswith("GPUs: no NVIDIA GPU facts") for m in topo.missing)
    assert any(m.startswith("NUMA nodes:") for m in topo.missing)


@pytest.mark.parametrize(
    ("capture", "said"),
    [
        (BUG_REPORT, "not in this nvidia-bug-report"),
        (SOS, "not in this sos report"),
    ],
)
def test_a_foreign_capture_draws_what_it_holds_and_says_what_it_lacks(capture, said):
    proc = run_dldoctor("--check", "--topology", "--from", str(capture))
    assert proc.returncode in (0, 1) and proc.stderr == "", proc.stderr
    out = proc.stdout
    assert out.startswith("Topology: ") and "PCIe links from lspci" in out.splitlines()[0]
    missing = [line for line in out.splitlines() if line.startswith("not drawn: ")]
    assert missing and any(said in line for line in missing)
    if capture == BUG_REPORT:  # its lspci and nvidia-smi -q hold the GPU, at Gen3 x16
        assert "GPU 0  0000:06:00.0  x16/x16 · 2.5/8 GT/s" in out
        assert "not drawn: NUMA nodes:" in out


def test_check_topology_prints_the_tree_with_the_run_exit_code():
    proc = run_dldoctor("--check", "--topology", "--from", str(HOSTS / "hgx-h100x8-gpu3-x8"))
    assert proc.returncode == 1 and proc.stderr == ""
    assert "GPU 3  0000:48:00.0  x8/x16 · 2.5/32 GT/s  ✗ pci.link.width" in proc.stdout
    assert "dldoctor 0.1.0" not in proc.stdout  # the tree, not the checklist
    refused = run_dldoctor(
        "--check", "--topology", "--json", "--from", str(HOSTS / "hgx-h100x8-healthy")
    )
    assert refused.returncode == 2 and "--topology" in refused.stderr


def test_the_subjects_travel_in_the_report_and_back():
    proc = run_dldoctor("--check", "--json", "--from", str(HOSTS / "hgx-h100x8-gpu3-x8"))
    doc = report_of(proc)
    found = {f["id"]: f for f in doc["findings"]}
    assert found["pci.link.width"]["subjects"] == ["pci:0000:48:00.0"]
    assert "subjects" not in found["pci.aer"]  # only where a check names its parts
    again = Report.from_dict(json.loads(json.dumps(doc)))
    width = next(f for f in again.findings if f.id == "pci.link.width")
    assert width.subjects == ("pci:0000:48:00.0",)


def test_a_snapshots_report_html_holds_the_picture(tmp_path):
    dest = tmp_path / "snap"
    proc = run_dldoctor(
        "snapshot", "--dir", "-o", str(dest), "--from", str(HOSTS / "hgx-h100x8-gpu3-x8")
    )
    assert proc.returncode == 0, proc.stderr
    page = (dest / "report.html").read_text()
    start, end = page.index("<svg"), page.index("</svg>") + len("</svg>")
    root = ET.fromstring(page[start:end])
    assert len(parts(root, "gpu")) == 8
    assert links(root)["0000:48:00.0"].get("data-status") == "fail"
    # After the problems, before the passes: the picture is of what is wrong.
    assert page.index("<section id=problems>") < start < page.index("<section id=passes>")
    assert len(page.encode()) <= 300_000
    # The picture is a small part of the page (report.html's cap is the pages' concern).
    assert end - start < 30_000
    manifest = json.loads((dest / "manifest.json").read_text())
    assert "report.html" in manifest["files"]


HOSTILE_NAME = '<script>alert("x")</script>&\x1b[31m\x00]]><!--'


def test_hostile_names_are_escaped_and_the_svg_stays_one_xml_document():
    gpu = Part("gpu", HOSTILE_NAME, "0000:01:00.0", HOSTILE_NAME,
               Link(8, 16, 2.5, 32.0), ("pci:0000:01:00.0",))  # fmt: skip
    node = Part("node", "NUMA node 0", "", HOSTILE_NAME, keys=("node:0",), children=(gpu,))
    topo = Topology(2, (node,), missing=(HOSTILE_NAME,), notes=(HOSTILE_NAME,))
    finding = Finding(
        "pci.link.width", "t", "pci", Status.FAIL, "s", subjects=("pci:0000:01:00.0",)
    )
    svg = render_svg(topo, [finding])
    root = ET.fromstring(svg)  # raises on a markup break
    assert not list(root.iter(f"{SVG}script")) and not list(root.iter("script"))
    assert "\x1b" not in svg and "\x00" not in svg
    assert not any(c in svg for c in ("href", "xlink", "url(", "<image", "<foreignObject"))
    tree = render_tree(topo, [finding])
    assert "\x1b" not in tree and "\x00" not in tree
    assert "✗ pci.link.width" in tree


@pytest.mark.parametrize("fault", ["garbage", "huge", "error", "timeout", "permission_denied"])
def test_broken_probes_give_a_picture_that_says_so_never_a_traceback(fault):
    inner = ReplayHost(str(HOSTS / "hgx-h100x8-gpu3-x8"))
    # A megabyte for every sysfs read would take minutes to parse: one family of them.
    if fault == "huge":
        host = FaultyHost(inner, fault, lambda op, key: key.endswith("_link_width"))
    else:
        host = FaultyHost(inner, fault, lambda op, key: "/sys/" in key or key.startswith("nvml"))
    facts = Facts(host)
    topo = topology_of(facts)
    tree = render_tree(topo, [])
    ET.fromstring(render_svg(topo, []))
    assert tree.startswith("Topology: ")
    if fault in ("error", "timeout", "permission_denied"):
        assert topo.missing or topo.notes, tree


def test_a_garbage_bundle_gives_a_tree_and_no_traceback(tmp_path):
    bundle = tmp_path / "bundle"
    sysfs = bundle / "files" / "sys" / "bus" / "pci" / "devices" / "0000:01:00.0"
    sysfs.mkdir(parents=True)
    for name, text in {
        "vendor": "0x10de\n",
        "class": "0x030200\n",
        "device": "\x00\xff garbage",
        "current_link_width": "63\n",  # a device that no longer answers
        "max_link_width": "banana",
        "current_link_speed": "Unknown",
        "numa_node": "-1",
    }.items():
        (sysfs / name).write_text(text)
    (bundle / "files" / "sys" / "devices" / "system" / "node").mkdir(parents=True)
    (bundle / "files" / "proc").mkdir()
    (bundle / "files" / "proc" / "cpuinfo").write_bytes(b"\xff\xfe" * 500)
    proc = run_dldoctor("--check", "--topology", "--from", str(bundle))
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1, 3), proc.stderr
    assert proc.stdout.startswith("Topology: ")


def test_t_on_the_results_screen_opens_the_topology_and_escape_closes_it():
    from textual.widgets import Static

    from tests.support.tui import bundle_session, drive, on_screen, until

    session = bundle_session("hgx-h100x8-gpu3-x8")

    async def steps(pilot):
        await pilot.press("t")
        await until(pilot, on_screen(pilot, "TopologyScreen"))
        tree = pilot.app.screen.query_one("#topology-tree", Static)
        await until(pilot, lambda: "NUMA node 1" in str(tree.content))
        shown = str(tree.content)
        assert "GPU 3  0000:48:00.0  x8/x16 · 2.5/32 GT/s  ✗ pci.link.width" in shown
        assert all(len(line) <= 118 for line in shown.splitlines())  # the screen's width
        await pilot.press("escape")
        await until(pilot, on_screen(pilot, "ResultsScreen"))

    drive(session, steps)


def test_an_rdma_port_stuck_in_init_marks_its_hca():
    proc = run_dldoctor("--check", "--topology", "--from", str(HOSTS / "hgx-h100x8-ib-init"))
    hcas = [line for line in proc.stdout.splitlines() if "HCA mlx5_" in line]
    assert len(hcas) == 2
    assert [("✗ network.ib.state" in line) for line in hcas] == [False, True]


def test_gpus_with_nvlinks_down_are_marked_in_the_nvlink_band():
    _, _, root, tree = picture("hgx-h100x8-nvlink-down")
    band = {int(g.get("data-gpu")): g for g in root.iter(f"{SVG}g") if g.get("class") == "nvlink"}
    assert {i for i, g in band.items() if g.get("data-status") == "fail"} == {2, 6}
    assert "GPU 2  0000:38:00.0  16/18 links up  ✗ gpu.nvlink" in tree
