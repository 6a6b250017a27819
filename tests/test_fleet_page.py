"""`dldoctor fleet report --html` on generated node reports (tests/support/fleetgen.py: a
real report of a fixture host, varied as a rack's odd nodes are), read back as a DOM: the
heatmap's rows folded by node set, worst first, its columns only the checks that differ,
each cell's link landing on its set's result. tests/test_fleet_page_browser.py opens a
1,000-node page in Chromium."""

from __future__ import annotations

import html.parser
import json

import pytest

from tests.support import fleetgen
from tests.support.cli import run_dldoctor
from tests.test_fleet_report import NAMES, ODD  # the same rack as the text and JSON's

# ODD: node005 an older driver and node[031-032] an older HCA firmware (key facts only),
# node012 a GPU missing (gpu.count fails), node023 a GPU at x8 (pci.link.width fails).

MAJORITY = "node[001-004,006-011,013-022,024-030,033-040]"


class Node:
    def __init__(self, tag: str, attrs: dict, parent: Node | None):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def all(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        found = []
        for c in self.children:
            if isinstance(c, Node):
                if (tag is None or c.tag == tag) and (cls is None or c.attrs.get("class") == cls):
                    found.append(c)
                found += c.all(tag, cls)
        return found


VOID = {"meta", "br", "wbr", "img", "hr", "input", "link"}


class Dom(html.parser.HTMLParser):
    """The page as a tree of elements, and every element by its id."""

    def __init__(self, page: str):
        super().__init__()
        self.root = self.at = Node("#document", {}, None)
        self.ids: dict[str, Node] = {}
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.at)
        self.at.children.append(node)
        if "id" in node.attrs:
            assert node.attrs["id"] not in self.ids, node.attrs["id"]  # each id once
            self.ids[node.attrs["id"]] = node
        if tag not in VOID:
            self.at = node

    def handle_endtag(self, tag):
        at = self.at
        while at is not None and at.tag != tag:
            at = at.parent
        if at is not None and at.parent is not None:
            self.at = at.parent

    def handle_data(self, data):
        self.at.children.append(data)


class Heatmap:
    def __init__(self, dom: Dom):
        table = dom.root.all("table", "heat")
        assert len(table) == 1
        self.heads = [th.text() for th in table[0].all("th", "v")]
        self.rows = []
        for tr in table[0].all("tbody")[0].all("tr"):
            label = tr.all("th")[0].text()
            count = int(tr.all("td", "n")[0].text())
            cells = [td for td in tr.all("td") if td.attrs.get("class") != "n"]
            self.rows.append((label, count, cells))

    def cell(self, label: str, column: str) -> Node:
        for name, _, cells in self.rows:
            if name == label:
                return cells[self.heads.index(column)]
        raise KeyError(label)


def page_of(folder, *args):
    proc = run_dldoctor("fleet", "report", "--html", *map(str, args), str(folder))
    assert proc.stdout.startswith("<!DOCTYPE html>"), proc.stderr
    return proc, Dom(proc.stdout)


def doc_of(folder):
    return json.loads(run_dldoctor("fleet", "report", "--json", str(folder)).stdout)


@pytest.fixture(scope="module")
def base():
    return fleetgen.real_report()


@pytest.fixture(scope="module")
def fleet(base, tmp_path_factory):
    return _written(tmp_path_factory.mktemp("fleet"), base, NAMES, ODD)


def _written(folder, base, names, odd):
    fleetgen.write_fleet(folder, base, names, odd)
    return folder


def target(dom: Dom, cell: Node) -> Node:
    link = cell.all("a")[0].attrs["href"]
    assert link.startswith("#")
    return dom.ids[link[1:]]


def test_alike_nodes_are_one_row_the_odd_ones_above_worst_first(fleet):
    proc, dom = page_of(fleet)
    assert proc.returncode == 1  # node012 and node023 fail a check
    heat = Heatmap(dom)
    # Fails first (the same size: by name), then the nodes off the majority in a key fact
    # (one row: their verdicts are alike, whichever fact it is), then the 35 nodes alike in
    # everything.
    assert [(label, n) for label, n, _ in heat.rows] == [
        ("node012", 1),
        ("node023", 1),
        ("node[005,031-032]", 3),
        (MAJORITY, 35),
    ]
    assert heat.cell("node012", "gpu.count").attrs["class"] == "f"
    assert heat.cell("node012", "gpu.count").text() == "F"
    assert heat.cell("node023", "pci.link.width").text() == "F"
    assert heat.cell("node023", "gpu.count").text() == "P"
    for label in ("node[005,031-032]", "node012"):  # odd in a key fact: a warning
        assert heat.cell(label, "key facts (odd one out)").attrs["class"] == "w"
    assert heat.cell(MAJORITY, "key facts (odd one out)").text() == "P"
    assert {c.text() for c in heat.rows[-1][2]} == {"P"}


def test_columns_are_only_the_checks_that_differ_the_rest_counted(fleet):
    _, dom = page_of(fleet)
    doc = doc_of(fleet)
    heat = Heatmap(dom)
    differ = {c["id"] for c in doc["checks"] if c["counts"]["pass"] + c["counts"]["skip"] < 40
              or 0 < c["counts"]["pass"] < 40}  # fmt: skip
    assert set(heat.heads) == differ | {"key facts (odd one out)"}
    assert "gpu.count" in heat.heads and "nvidia.driver" not in heat.heads
    uniform = doc["node_sets"]["uniform"]
    assert len(heat.heads) == len(doc["checks"]) - len(uniform["pass"]) - len(uniform["skip"]) + 1
    assert len(heat.heads) < len(doc["checks"])  # the table is narrower than every check
    folded = dom.root.all("details")[0]
    said = folded.all("summary")[0].text()
    assert f"{len(uniform['pass'])} pass on every node" in said
    for cid in uniform["pass"] + uniform["skip"]:
        assert cid in folded.text()


def test_each_cell_lands_on_its_sets_result(fleet):
    _, dom = page_of(fleet)
    heat = Heatmap(dom)
    failed = target(dom, heat.cell("node012", "gpu.count"))
    assert failed.tag == "li"
    assert "gpu.count" in failed.text() and "7 GPU(s), the policy expects 8" in failed.text()
    assert "node012" in failed.parent.parent.all("h3")[0].text()  # under its set's heading
    odd = target(dom, heat.cell("node[005,031-032]", "key facts (odd one out)")).text()
    assert "nvidia.driver 535.161.08 on node005 (majority 550.54.15)" in odd
    assert "nic.firmware mlx5_1 28.37.1014 on node[031-032]" in odd
    passed = target(dom, heat.cell(MAJORITY, "gpu.count"))
    assert passed.text() == "gpu.count" and passed.parent.text().startswith("pass: ")
    # Every cell links, and every link lands on an element of this page; nothing else.
    for _, _, cells in heat.rows:
        for cell in cells:
            assert target(dom, cell) is not None
    for a in dom.root.all("a"):
        assert a.attrs["href"][1:] in dom.ids, a.attrs


def test_a_set_is_its_statuses_its_nodes_summaries_listed_apart(base, tmp_path):
    """Two nodes failing the same check, saying different things, are one row: the
    vector is of verdicts; the cell's anchor says which node said what."""
    odd = {
        "node002": [lambda r: fleetgen.finding(r, "pci.aer", "fail", "3 fatal AER error(s)")],
        "node003": [lambda r: fleetgen.finding(r, "pci.aer", "fail", "1 fatal AER error(s)")],
    }
    fleetgen.write_fleet(tmp_path, base, [f"node{i:03d}" for i in range(1, 6)], odd)
    _, dom = page_of(tmp_path)
    heat = Heatmap(dom)
    assert [(label, n) for label, n, _ in heat.rows] == [("node[002-003]", 2),
                                                         ("node[001,004-005]", 3)]  # fmt: skip
    said = target(dom, heat.cell("node[002-003]", "pci.aer")).text()
    assert "3 fatal AER error(s) (node002)" in said and "1 fatal AER error(s) (node003)" in said


def test_not_reported_nodes_are_said_not_rows_and_text_is_escaped(base, tmp_path):
    odd = {"node002": [lambda r: fleetgen.finding(r, "pci.aer", "warn", "<b>AER</b> & more")]}
    fleetgen.write_fleet(tmp_path, base, ["node001", "node002"], odd)
    (tmp_path / "node003.json").write_text("not json")
    proc, dom = page_of(tmp_path)
    assert proc.returncode == 3  # a node not reported, nothing failed
    assert "<b>AER</b>" not in proc.stdout and "&lt;b&gt;AER&lt;/b&gt; &amp; more" in proc.stdout
    assert "node003" in dom.ids["unreported"].text()
    assert [label for label, _, _ in Heatmap(dom).rows] == ["node002", "node001"]
    assert "default-src 'none'" in proc.stdout and "<script" not in proc.stdout
    assert not [n for n in dom.root.all() if n.attrs.get("src")]


def test_stragglers_are_a_column_and_a_table(base, tmp_path):
    names = [f"node{i:03d}" for i in range(1, 7)]
    odd = {n: [fleetgen.measured()] for n in names}
    odd["node004"] = [fleetgen.measured(slow={("hbm_copy", 3): 0.54})]
    fleetgen.write_fleet(tmp_path, base, names, odd)
    _, dom = page_of(tmp_path)
    heat = Heatmap(dom)
    assert heat.rows[0][0] == "node004"
    said = target(dom, heat.cell("node004", "stragglers")).text()
    assert "node004 GPU 3 hbm_copy" in said
    table = dom.ids["stragglers"].all("table")[0]
    first = [td.text() for td in table.all("tr")[1].all("td")]
    assert first[:3] == ["node004", "GPU 3", "hbm_copy"]


def test_a_check_missing_from_a_report_is_not_run_there_never_a_verdict(base, tmp_path):
    def without_aer(report):  # an older dldoctor, or a run with --only
        report["findings"] = [f for f in report["findings"] if f["id"] != "pci.aer"]

    _written(tmp_path, base, ["node001", "node002", "node003"], {"node003": [without_aer]})
    proc, dom = page_of(tmp_path)
    assert proc.returncode == 0
    heat = Heatmap(dom)
    # Not run ranks below a pass: the set that ran every check heads the table.
    assert [(label, n) for label, n, _ in heat.rows] == [("node[001-002]", 2), ("node003", 1)]
    cell = heat.cell("node003", "pci.aer")
    assert cell.attrs["class"] == "nr" and cell.text() == "–"
    assert target(dom, cell).parent.text().startswith("not run: pci.aer")
    assert heat.cell("node[001-002]", "pci.aer").text() == "P"


def test_since_lists_the_changed_nodes(base, tmp_path):
    _written(tmp_path / "old", base, NAMES[:4], {})
    _written(tmp_path / "new", base, NAMES[:4], {"node003": [fleetgen.missing_gpu(7)]})
    proc, dom = page_of(tmp_path / "new", "--since", tmp_path / "old")
    assert proc.returncode == 1
    changed = dom.ids["since"].text()
    assert "node003: gpu.count pass -> fail" in changed, changed
