"""The host's topology as a picture: CPU sockets and NUMA nodes, PCIe root ports and
switches, GPUs, NICs/HCAs and NVMe drives with each link's trained and capable width and
speed, the NVLink band, and the findings drawn onto the parts they name.

Everything is drawn from facts (`pcie.links` and its upstream chains, `numa.topology`,
`cpu.info`, `gpu.nvidia` / `gpu.nvlink`, `rdma.devices`, `net.firmware`), so the picture
replays from any bundle, sos report or bug-report log that holds them; a part whose fact is
missing is said plainly in `Topology.missing`, never guessed. Findings are mapped to parts by
the machine-readable `Finding.subjects` the checks give ("pci:<address>", "gpu:<index>",
"rdma:<device>", "net:<interface>"), never by parsing their prose.

Two renderers, both pure Python: `render_tree` (plain text, width-bounded: `--check
--topology` and the app's `t` screen) and `render_svg` (inline SVG for report.html). No
graphviz: a bundle reader on a support engineer's laptop must not need a system package to
see the picture, and the layout (a tree per socket, one row a part) is simple enough to do
here (docs/topology.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple
from xml.sax.saxutils import escape, quoteattr

from dldoctor.facts import FactContext, fact
from dldoctor.model import Finding, Status

# --- the model ------------------------------------------------------------------------


class Link(NamedTuple):
    """The PCIe link above a part: what it trained at and the most it can do."""

    current_width: int | None
    max_width: int | None
    current_gts: float | None
    max_gts: float | None

    def text(self) -> str:
        """`x8/x16 · 2.5/32 GT/s` (trained/capable); `?` for what was not read."""

        def pair(a, b, unit=""):
            def one(v):
                return "?" if v is None else f"{v:g}"

            return f"{one(a)}/{one(b)}{unit}"

        width = "/".join(
            "x?" if w is None else f"x{w}" for w in (self.current_width, self.max_width)
        )
        if self.current_gts is None and self.max_gts is None:
            return width
        return f"{width} · {pair(self.current_gts, self.max_gts, ' GT/s')}"


class Part(NamedTuple):
    kind: str  # node, root, switch, gpu, nic, hca, nvme, nvswitch, device
    name: str  # "GPU 3", "root port", "PCIe switch", "HCA mlx5_0", "NUMA node 0"
    address: str = ""  # the PCI address ("" for a NUMA node)
    detail: str = ""  # "NVIDIA H100 80GB HBM3", "ib0", "CPUs 0-55"
    link: Link | None = None  # the link above it (a switch: its upstream port's)
    keys: tuple[str, ...] = ()  # the subjects that name it (Finding.subjects)
    children: tuple[Part, ...] = ()


class NvlinkGpu(NamedTuple):
    index: int
    address: str
    active: int | None  # links up; None: not read
    total: int | None


class Topology(NamedTuple):
    sockets: int | None  # None: cpu.info not read
    nodes: tuple[Part, ...] = ()  # NUMA nodes (kind "node") with their root ports
    nvlink: tuple[NvlinkGpu, ...] = ()
    nvswitches: tuple[str, ...] = ()  # PCI addresses of the NVSwitches
    source: str = ""  # where the links came from: sysfs, or the lspci of a capture
    missing: tuple[str, ...] = ()  # what could not be drawn, and why, in plain words
    notes: tuple[str, ...] = ()

    def parts(self) -> Iterable[Part]:
        stack = list(reversed(self.nodes))
        while stack:
            part = stack.pop()
            yield part
            stack.extend(reversed(part.children))


# --- building it from the facts -------------------------------------------------------

_KIND_NAMES = {"gpu": "GPU", "nic": "NIC", "hca": "HCA", "nvme": "NVMe", "nvswitch": "NVSwitch"}


def _kind(class_code: str, vendor: str) -> str:
    if class_code.startswith("03") and vendor in ("10de", "1002"):
        return "gpu"
    if class_code.startswith("0207"):
        return "hca"
    if class_code.startswith("02"):
        return "nic"
    if class_code.startswith("010802"):
        return "nvme"
    if class_code.startswith("0680") and vendor == "10de":
        return "nvswitch"
    return "device"


def _try(ctx: FactContext, what, missing: list[str], label: str):
    """The fact's value, or None with a plain line in `missing` (a capture that lacks it,
    a probe that failed): a picture is drawn from what there is."""
    try:
        return ctx.get(what)
    except Exception as exc:  # noqa: BLE001 - any failure of a fact is a part not drawn
        missing.append(f"{label}: {_one_line(exc)}")
        return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


@fact("topology")
def topology(ctx: FactContext) -> Topology:
    from dldoctor.facts.cpu import cpu_info
    from dldoctor.facts.net import nic_firmware
    from dldoctor.facts.numa import numa_topology
    from dldoctor.facts.nvidia import nvidia
    from dldoctor.facts.nvlink import nvlinks
    from dldoctor.facts.pcie import pcie_links
    from dldoctor.facts.rdma import rdma_devices

    missing: list[str] = []
    links = _try(ctx, pcie_links, missing, "PCIe links")
    numa = _try(ctx, numa_topology, missing, "NUMA nodes")
    cpu = _try(ctx, cpu_info, missing, "CPU sockets")
    stack = _try(ctx, nvidia, missing, "GPUs")
    # The link states have a source of their own (`nvidia-smi nvlink -s`), which a
    # capture may lack while it holds the GPUs.
    nv = _try(ctx, nvlinks, missing, "NVLink") if stack is not None else None
    if nv is None and stack is not None and stack.usable:
        nv = stack
    rdma = _try(ctx, rdma_devices, missing, "RDMA devices")
    nics = _try(ctx, nic_firmware, missing, "network interfaces")
    return build(links, numa, cpu, nv, rdma, nics, missing)


def build(links, numa, cpu, nv, rdma, nics, missing: Sequence[str] = ()) -> Topology:
    """The Topology of these fact values (any of them None: not known)."""
    missing = list(missing)
    notes: list[str] = []
    gpus = tuple(nv.gpus) if nv is not None else ()
    gpu_at = {g.pci_bus_id: g for g in gpus if g.pci_bus_id}
    hca_at: dict[str, tuple[str, tuple[str, ...]]] = {}
    for d in rdma or ():
        if d.pci_address:
            hca_at[d.pci_address] = (d.name, tuple(p.netdev for p in d.ports if p.netdev))
    net_at: dict[str, list[str]] = {}
    for n in nics.nics if nics is not None else ():
        if n.bus_info:
            net_at.setdefault(n.bus_info.lower(), []).append(n.interface)
    if cpu is not None and not cpu.sockets:
        missing.append(f"CPU sockets: {cpu.notes[0] if cpu.notes else 'none in /proc/cpuinfo'}")
    if links is not None and not links.readable:
        missing.append("PCIe links: the PCI bus could not be read")
        links = None
    if links is not None and not links.links:
        missing.append("PCIe links: no GPU, NIC or NVMe drive on the bus")
    by_address = {x.address: x for x in links.links} if links is not None else {}
    children: dict[str, list[str]] = {}
    tops: list[str] = []
    for x in by_address.values():
        parent = x.upstream[0] if x.upstream else ""
        if parent and parent in by_address:
            children.setdefault(parent, []).append(x.address)
        else:
            tops.append(x.address)
    if links is not None and links.unplaced:
        notes.append(f"{len(links.unplaced)} device(s) whose ports above could not be read")

    def part_of(address: str, depth: int = 0) -> Part:
        x = by_address[address]
        below = sorted(children.get(address, ()))
        if x.is_bridge:
            if depth > 32:  # a looping or absurd chain in a damaged tree
                return Part("device", "port", address)
            if not x.upstream:
                # A root port's own width is the link below it: drawn there, not twice.
                kids = tuple(part_of(c, depth + 1) for c in below)
                return Part("root", "root port", address, keys=(f"pci:{address}",), children=kids)
            # A switch's upstream port: its downstream ports are folded into it (their
            # marks too, ACS is set on them), their devices become the switch's children.
            keys = [f"pci:{address}"]
            kids: list[Part] = []
            for c in below:
                if by_address[c].is_bridge:  # a downstream port (a switch below: nested)
                    keys.append(f"pci:{c}")
                    kids.extend(part_of(g, depth + 2) for g in sorted(children.get(c, ())))
                else:
                    kids.append(part_of(c, depth + 1))
            return Part("switch", "PCIe switch", address, "", _link(x), tuple(keys), tuple(kids))
        return _endpoint(x, gpu_at, hca_at, net_at)

    by_node: dict[int | None, list[Part]] = {}
    for address in sorted(tops):
        part = part_of(address)
        by_node.setdefault(_node_of(part, by_address), []).append(part)
    nodes = []
    numa_nodes = {n.node: n for n in numa.nodes} if numa is not None else {}
    for number in sorted(set(numa_nodes) | {n for n in by_node if n is not None}):
        n = numa_nodes.get(number)
        detail = []
        if n is not None:
            detail.append(f"CPUs {n.cpulist or 'none'}")
            if n.memory_total_bytes:
                detail.append(f"{n.memory_total_bytes / 1024**3:.0f} GiB")
        parts = tuple(by_node.get(number, ()))
        nodes.append(Part("node", f"NUMA node {number}", "", ", ".join(detail),
                          keys=(f"node:{number}",), children=parts))  # fmt: skip
    if None in by_node:
        said = "no NUMA node said" if numa_nodes else "NUMA node not known"
        nodes.append(Part("node", said, "", "", keys=("node:?",), children=tuple(by_node[None])))
    if numa is not None and not numa.nodes:
        missing.append("NUMA nodes: none in sysfs (no NUMA support, or not captured)")
    nvlink = tuple(NvlinkGpu(g.index, g.pci_bus_id, g.nvlink_active, g.nvlink_total) for g in gpus)
    if nv is not None and not gpus:
        missing.append("GPUs: no NVIDIA GPU facts (no driver answered, or not captured)")
    nvswitches = tuple(
        a for a, x in sorted(by_address.items()) if _kind(x.class_code, x.vendor) == "nvswitch"
    )
    return Topology(
        sockets=cpu.sockets if cpu is not None and cpu.sockets else None,
        nodes=tuple(nodes),
        nvlink=nvlink,
        nvswitches=nvswitches,
        source=("sysfs" if links.source == "sysfs" else "lspci") if links is not None else "",
        missing=tuple(missing),
        notes=tuple(notes),
    )


def _link(x) -> Link | None:
    if x.current_width is None and x.max_width is None and x.current_gts is None:
        return None
    return Link(x.current_width, x.max_width, x.current_gts, x.max_gts)


def _endpoint(x, gpu_at, hca_at, net_at) -> Part:
    kind = _kind(x.class_code, x.vendor)
    keys = [f"pci:{x.address}"]
    name, detail = _KIND_NAMES.get(kind, "device"), ""
    gpu = gpu_at.get(x.address)
    if kind == "gpu" and gpu is not None:
        name, detail = f"GPU {gpu.index}", gpu.name
        keys.append(f"gpu:{gpu.index}")
    netdevs = list(net_at.get(x.address, ()))
    if x.address in hca_at:
        device, ports = hca_at[x.address]
        name = f"{name} {device}"
        keys.append(f"rdma:{device}")
        netdevs += [p for p in ports if p not in netdevs]
    keys += [f"net:{n}" for n in netdevs]
    if netdevs:
        detail = ", ".join(netdevs)
    if kind == "device":
        detail = f"class {x.class_code}"
    if not detail and x.driver:
        detail = f"driver {x.driver}"
    return Part(kind, name, x.address, detail, _link(x), tuple(keys))


def _node_of(part: Part, by_address) -> int | None:
    """The NUMA node of a root port: its devices' (a port's own node is not read)."""
    stack = [part]
    while stack:
        p = stack.pop()
        x = by_address.get(p.address)
        if x is not None and x.numa_node is not None:
            return x.numa_node
        stack.extend(p.children)
    return None


# --- findings onto parts --------------------------------------------------------------

_PROBLEMS = (Status.FAIL, Status.ERROR, Status.WARN)
# The checks whose verdict is about the link above a part (drawn on the line to it).
LINK_CHECKS = ("pci.link.width", "pci.link.speed", "pci.bandwidth_limited", "pci.aer")
MARKS = {Status.FAIL: "✗", Status.ERROR: "☠", Status.WARN: "!"}


def marks(part: Part, findings: Iterable[Finding]) -> list[tuple[str, Status]]:
    """(check id, status) of each problem finding that names this part, the worst first."""
    keys = set(part.keys)
    found = {
        f.id: f.status
        for f in findings
        if f.status in _PROBLEMS and keys.intersection(getattr(f, "subjects", ()) or ())
    }
    return sorted(found.items(), key=lambda kv: (kv[1].rank, kv[0]))


def status_of(found: list[tuple[str, Status]]) -> str:
    return found[0][1].value if found else "ok"


# --- the text tree --------------------------------------------------------------------


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(1, width - 1)] + "…"


def _clean(text: str) -> str:
    # A name from the host may hold control characters (a hostile bundle): never echoed.
    return "".join(c if c.isprintable() else "?" for c in str(text))[:120]


def _label(part: Part, found: list[tuple[str, Status]] = ()) -> str:
    # The marks before the model's name: a line cut to the width loses the name first.
    bits = [part.name]
    if part.address:
        bits.append(part.address)
    if part.link is not None:
        bits.append(part.link.text())
    bits += [f"{MARKS[s]} {i}" for i, s in found]
    if part.detail:
        bits.append(part.detail)
    return _clean("  ".join(bits))


def render_tree(topo: Topology, findings: Iterable[Finding] = (), *, width: int = 100) -> str:
    """The topology as a plain-text tree, one line a part, each cut to `width` characters,
    the problem findings that name a part after it (`✗ pci.link.width`)."""
    findings = list(findings)
    width = max(40, width)
    sockets = "CPU sockets not known" if topo.sockets is None else f"{topo.sockets} CPU socket(s)"
    head = (
        f"Topology: {sockets}, {sum(1 for n in topo.nodes if n.keys != ('node:?',))} NUMA node(s)"
    )
    if topo.source:
        head += f", PCIe links from {topo.source}"
    lines = [_cut(head, width)]

    def walk(part: Part, prefix: str, last: bool, top: bool) -> None:
        found = marks(part, findings)
        if top:
            lines.append(_cut(_label(part, found), width))
            child_prefix = ""
        else:
            lines.append(_cut(f"{prefix}{'└─ ' if last else '├─ '}{_label(part, found)}", width))
            child_prefix = prefix + ("   " if last else "│  ")
        for i, child in enumerate(part.children):
            walk(child, child_prefix, i == len(part.children) - 1, False)

    for node in topo.nodes:
        walk(node, "", True, True)
    if topo.nvlink and any(g.total for g in topo.nvlink):
        lines.append(
            "NVLink"
            + (f" (through {len(topo.nvswitches)} NVSwitch(es))" if topo.nvswitches else "")
        )
        for g in topo.nvlink:
            part = Part(
                "gpu", f"GPU {g.index}", g.address, keys=(f"gpu:{g.index}", f"pci:{g.address}")
            )
            found = [(i, s) for i, s in marks(part, findings) if i.startswith("gpu.nv")]
            state = "not read" if g.total is None else f"{g.active}/{g.total} links up"
            tail = "".join(f"  {MARKS[s]} {i}" for i, s in found)
            lines.append(_cut(_clean(f"  GPU {g.index}  {g.address}  {state}") + tail, width))
    for line in topo.missing:
        lines.append(_cut(_clean(f"not drawn: {line}"), width))
    for line in topo.notes:
        lines.append(_cut(_clean(f"note: {line}"), width))
    return "\n".join(lines) + "\n"


# --- the SVG picture ------------------------------------------------------------------

ROW = 24  # px a part
INDENT = 28  # px a level
SVG_WIDTH = 1280
# The columns right of the tree (monospace 12 px: about 7.2 px a character): the link's
# trained/capable figures (21 characters), the part's detail (30) and its findings (56).
LINK_X, DETAIL_X, CHECKS_X = 480, 650, 872
COLOURS = {"fail": "#c62828", "error": "#8e24aa", "warn": "#ef6c00", "ok": "#546e7a"}
FILLS = {
    "node": "#eceff1", "root": "#ffffff", "switch": "#e3f2fd", "gpu": "#e8f5e9",
    "nic": "#fff8e1", "hca": "#fff8e1", "nvme": "#f3e5f5", "nvswitch": "#e0f7fa",
    "device": "#fafafa",
}  # fmt: skip


def _attr(text: str) -> str:
    return quoteattr(_clean(text))


def _text(x: float, y: float, text: str, **kw) -> str:
    extra = "".join(f' {k.replace("_", "-")}={_attr(str(v))}' for k, v in kw.items())
    return f'<text x="{x:g}" y="{y:g}"{extra}>{escape(_clean(text))}</text>'


def _column(text: str, chars: int) -> str:
    text = _clean(text)
    return text if len(text) <= chars else text[: chars - 1] + "…"


def render_svg(topo: Topology, findings: Iterable[Finding] = ()) -> str:
    """The topology as one inline SVG document (no external reference, every host text
    escaped): a tree per NUMA node, one row a part, the link to each part drawn from its
    parent and coloured by the checks about that link, then the NVLink band. Every part
    and link carries `data-kind`, `data-addr` and `data-status` (tests read them)."""
    findings = list(findings)
    out: list[str] = []
    y = 40
    rows: list[str] = []

    def place(part: Part, depth: int, parent_xy: tuple[float, float] | None) -> None:
        nonlocal y
        x = 16 + depth * INDENT
        top = y
        found = marks(part, findings)
        status = status_of(found)
        link_found = [(i, s) for i, s in found if i in LINK_CHECKS]
        link_status = status_of(link_found)
        addr = _attr(part.address)
        kind = _attr(part.kind)
        if parent_xy is not None:
            px, py = parent_xy
            colour = COLOURS[link_status]
            wide = 3 if link_status != "ok" else 1.5
            rows.append(
                f'<path class="link" data-kind={kind} data-addr={addr} '
                f'data-status="{link_status}" d="M{px:g},{py:g} V{top + 9:g} H{x:g}" '
                f'fill="none" stroke="{colour}" stroke-width="{wide}"/>'
            )
            if part.link is not None:
                rows.append(_text(LINK_X, top + 13, part.link.text(), fill=colour,
                                  class_="linktext"))  # fmt: skip
        label = f"{part.name}  {part.address}".strip()
        w = min(LINK_X - 12 - x, 10 + 7.3 * len(_clean(label)))
        checks = "  ".join(f"{MARKS[s]} {i}" for i, s in found)
        # The whole of what a cut column holds, as the box's tooltip.
        title = f"<title>{escape(_clean(checks))}</title>" if found else ""
        rows.append(
            f'<g class="part" data-kind={kind} data-addr={addr} data-status="{status}" '
            f"data-checks={_attr(' '.join(i for i, _ in found))}>{title}"
            f'<rect x="{x:g}" y="{top:g}" width="{w:g}" height="18" rx="3" '
            f'fill="{FILLS.get(part.kind, "#fafafa")}" stroke="{COLOURS[status]}" '
            f'stroke-width="{2 if status != "ok" else 1}"/>'
            + _text(x + 5, top + 13, label)
            + "</g>"
        )
        if part.detail:
            rows.append(_text(DETAIL_X, top + 13, _column(part.detail, 30), fill="#37474f"))
        if found:
            rows.append(_text(CHECKS_X, top + 13, _column(checks, 56), fill=COLOURS[status]))
        y += ROW
        for child in part.children:
            place(child, depth + 1, (x + 8, top + 18))

    for node in topo.nodes:
        place(node, 0, None)
        y += 8
    # The NVLink band: one box a GPU, a bar for the NVSwitch fabric, a line each.
    band = []
    if topo.nvlink and any(g.total for g in topo.nvlink):
        y += 12
        band.append(_text(16, y + 4, "NVLink", font_weight="bold"))
        y += 16
        n = len(topo.nvlink)
        step = (SVG_WIDTH - 32) / max(n, 1)
        bar_y = y + 80
        for i, g in enumerate(topo.nvlink):
            part = Part(
                "gpu", f"GPU {g.index}", g.address, keys=(f"gpu:{g.index}", f"pci:{g.address}")
            )
            found = [(c, s) for c, s in marks(part, findings) if c.startswith("gpu.nv")]
            status = status_of(found)
            gx = 16 + i * step
            state = "not read" if g.total is None else f"{g.active}/{g.total} up"
            band.append(
                f'<g class="nvlink" data-kind="nvlink" data-addr={_attr(g.address)} '
                f'data-gpu="{g.index}" data-status="{status}">'
                f'<rect x="{gx + 4:g}" y="{y:g}" width="{step - 8:g}" height="36" rx="4" '
                f'fill="#e8f5e9" stroke="{COLOURS[status]}"/>'
                + _text(gx + 10, y + 15, f"GPU {g.index}")
                + _text(gx + 10, y + 30, state, fill=COLOURS[status])
                + (
                    f'<line x1="{gx + step / 2:g}" y1="{y + 36:g}" x2="{gx + step / 2:g}" '
                    f'y2="{bar_y:g}" stroke="{COLOURS[status]}" '
                    f'stroke-width="{3 if status != "ok" else 2}"/>'
                    if topo.nvswitches
                    else ""
                )
                + "</g>"
            )
        if topo.nvswitches:
            band.append(
                '<g class="nvswitch" data-kind="nvswitch-fabric" '
                f'data-count="{len(topo.nvswitches)}">'
                f'<rect x="16" y="{bar_y:g}" width="{SVG_WIDTH - 32}" height="24" rx="4" '
                f'fill="#e0f7fa" stroke="#00838f"/>'
                + _text(
                    24,
                    bar_y + 16,
                    f"NVSwitch fabric: {len(topo.nvswitches)} NVSwitch(es) "
                    + " ".join(topo.nvswitches[:8]),
                )  # fmt: skip
                + "</g>"
            )
            y = bar_y + 32
        else:
            y += 44
    tail = []
    for line in [*(f"not drawn: {m}" for m in topo.missing), *(f"note: {n}" for n in topo.notes)]:
        y += 18
        tail.append(_text(16, y, line[:170], fill="#37474f", class_="missing"))
    height = y + 16
    sockets = "CPU sockets not known" if topo.sockets is None else f"{topo.sockets} CPU socket(s)"
    out.append(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="topology" width="{SVG_WIDTH}" '
        f'height="{height}" viewBox="0 0 {SVG_WIDTH} {height}" '
        'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="12" '
        'role="img" aria-label="host topology">'
    )
    out.append(_text(16, 20, f"Topology: {sockets}; link x trained/capable, GT/s trained/capable",
                     font_weight="bold"))  # fmt: skip
    out.extend(rows)
    out.extend(band)
    out.extend(tail)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def topology_of(facts) -> Topology:
    """The run's topology; one that says why, when even it could not be made."""
    try:
        return facts.get(topology)
    except Exception as exc:  # noqa: BLE001 - a picture never fails a run
        return Topology(None, missing=(f"topology: {_one_line(exc)}",))


def picture_of(facts, findings: Iterable[Finding] = ()) -> str | None:
    """The SVG of a run's facts, or None when nothing could be drawn at all."""
    topo = topology_of(facts)
    if not topo.nodes and not topo.nvlink:
        return None
    return render_svg(topo, findings)
