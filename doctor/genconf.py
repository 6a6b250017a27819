"""`dldoctor genconf`: the expected state of a healthy host, written as a policy file.

    dldoctor genconf > policy.toml          # on a host known to be good
    dldoctor --check --policy policy.toml   # on every node of the fleet

It runs the diagnosis (this host, `--root`, or a bundle with `--from`), refuses a host
that fails a check (pinning a broken state would make it the fleet's expected one) unless
`--force`, and writes the report's inventory as policy keys, each with a comment saying
where its value came from. What the run did not learn (an inventory section that is null)
is left out, with a comment saying so: the defaults then change nothing. docs/genconf.md.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from typing import Any

from dldoctor.model import Report, Status
from dldoctor.tomllines import basic_string

# The check that reads each inventory section: when the section is null (not known), its
# finding says why (skipped, or its probe failed), or it did not run (`--only`).
WHY_UNKNOWN = {
    "gpus": "gpu.driver.loaded",
    "cuda": "cuda.toolkit",
    "rdma": "network.ib.state",
    "pcie": "pci.link.width",
    "raid": "storage.raid",
    "mounts": "storage.space",
}


def build_parser() -> argparse.ArgumentParser:
    from dldoctor.cli.shared import (
        Parser,
        add_active_arguments,
        add_request_arguments,
        add_selection_arguments,
    )

    p = Parser(
        prog="dldoctor genconf",
        description="Write the expected state of this healthy host as a policy file "
        "(GPU count and model, driver and CUDA versions, InfiniBand ports and rate, "
        "PCIe link widths, RAID arrays, mounts), for `dldoctor --check --policy FILE`.",
        epilog="Exit codes: 0 written, 1 the host fails a check (nothing written; "
        "--force writes it anyway), 2 usage error, 4 unreadable bundle or policy, "
        "6 the output could not be written.",
    )
    add_request_arguments(
        p, helps={"--policy": "the policy that judges whether the host is healthy"}
    )
    p.add_argument("--root", metavar="DIR", help="read files under DIR instead of /")
    # genconf's --force is its own (write anyway): the active tier's is left out.
    add_active_arguments(
        p,
        helps={"--active": "also run the measuring checks: a host that fails one is not "
               "healthy (docs/active.md)"},
        only=("--active",),
    )  # fmt: skip
    add_selection_arguments(p)
    p.add_argument(
        "--force",
        action="store_true",
        help="write the policy even if the host fails checks (the file names them)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--no-plugins", action="store_true")
    return p


def main(argv: Sequence[str]) -> int:
    """Called by dldoctor.cli.main, whose handlers turn UsageError, InputError and OutputError
    into their one line and exit code."""
    from dldoctor.cli.check import diagnose_for
    from dldoctor.cli.shared import write_file, write_output
    from dldoctor.request import request_from

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return int(exc.code or 0)
    request = request_from(args)
    with contextlib.ExitStack() as cleanup:  # an extracted --from archive, removed here
        report, host = diagnose_for(request, cleanup)
        manifest = getattr(getattr(host, "bundle", None), "manifest", None) or {}
    failing = [f for f in report.findings if f.status is Status.FAIL]
    if failing and not args.force:
        name = _one_line(report.host.get("hostname") or "the host")
        ids = ", ".join(f.id for f in failing[:5]) + (", ..." if len(failing) > 5 else "")
        print(
            f"dldoctor: genconf: {name} is not healthy: {len(failing)} check(s) fail ({ids}); "
            "a policy written from it would pin that state: fix it first, or pass --force",
            file=sys.stderr,
        )
        return 1
    # TOML is UTF-8 whatever the locale says.
    data = render(report, recorded=str(manifest.get("created") or "")).encode("utf-8")
    if args.output:
        write_file(args.output, data)
    else:
        write_output(lambda: (sys.stdout.buffer.write(data), sys.stdout.buffer.flush()))
    return 0


# --- the policy text --------------------------------------------------------------------


def render(report: Report, *, recorded: str = "") -> str:
    """The policy file for this report: valid TOML, loadable by `--policy` as it is."""
    inv = report.inventory or {}
    found = {f.id: f for f in report.findings}
    why = {}
    for section, check_id in WHY_UNKNOWN.items():
        f = found.get(check_id)
        why[section] = f"{f.id} {f.status}: {f.summary}" if f else f"{check_id} did not run"
    out = _header(report, recorded)
    for section in (_gpu, _cuda, _network, _pci, _raid, _mounts, _firmware):
        out += ["", *section(inv, why)]
    perf = _perf(report)
    if perf:  # only a run with --active measured anything
        out += ["", *perf]
    return "\n".join(out) + "\n"


def _perf(report: Report) -> list[str]:
    """The figures this host measured as `[[perf.references]]`: per figure name, the
    median of its parts with no subject, so that it holds on every node (GPU 3 here is
    not GPU 3 there, and a pin per part would hold each node to this one's noise); the
    floor, `perf.floor`, then fails a slow part. A volume is pinned by its mount point,
    the same path on every node, as volumes of one host are not alike (an NVMe RAID and
    an NFS home)."""
    from statistics import median

    from dldoctor.figures import LOWER_IS_BETTER

    parts: dict[tuple[str, str], list] = {}
    checks: dict[str, str] = {}
    for f in report.findings:
        for g in f.figures:
            subject = g.subject if g.subject.startswith("/") else ""
            parts.setdefault((g.what, subject), []).append(g)
            checks.setdefault(g.what, f.id)
    if not parts:
        return []
    lines = [
        "# What this host measured (--active), as the site's own references: each the",
        "# median of its parts; a part below perf.floor (default 0.85) of it fails, one",
        "# below perf.straggler (default 0.90) of its siblings' median warns.",
    ]
    for (what, subject), figures in parts.items():
        value = median(g.value for g in figures)
        unit = figures[0].unit
        if not value > 0 or any(g.unit != unit for g in figures):
            lines.append(_comment(f"{what} not pinned: its figures are not one positive unit"))
            continue
        if unit in LOWER_IS_BETTER:
            lines.append(
                _comment(f"{what} not pinned: a time ({unit}), and a reference is a floor")
            )
            continue
        low, high = min(g.value for g in figures), max(g.value for g in figures)
        of = f"{subject}" if subject else f"median of {len(figures)} part(s), {low:g}-{high:g}"
        lines += [
            "[[perf.references]]",
            f"what = {basic_string(what)}  " + _comment(f"{unit}, {of} ({checks[what]})"),
            f"value = {float(value)!r}",
        ]
        if subject:
            lines.append(f"subject = {basic_string(subject)}")
    return lines


def _header(report: Report, recorded: str) -> list[str]:
    host = report.host
    counts = {s: sum(f.status is s for f in report.findings) for s in Status}
    when = f" (recorded {recorded})" if recorded else ""
    lines = [
        f"# The expected state of {host.get('hostname') or 'an unnamed host'}, written by "
        f"`dldoctor genconf` at {report.started_at}",
        f"# from {host.get('source') or '?'}{when}.".replace("from live", "from this host, live"),
        "# Check a node against it: dldoctor --check --policy THIS_FILE",
        "# Every value is what this host had: review them before a fleet is pinned to them.",
        f"# Judged by the {host.get('policy') or 'built-in'} policy: {counts[Status.PASS]} "
        f"passed, {counts[Status.WARN]} warnings, {counts[Status.FAIL]} failed, "
        f"{counts[Status.SKIP]} skipped, {counts[Status.ERROR]} errors.",
    ]
    for f in report.findings:
        if f.status is Status.FAIL:  # only with --force
            lines.append(f"# --force: {f.id} FAILED on this host: {f.summary}")
    return [_comment(line) for line in lines]


def _gpu(inv: dict[str, Any], why: dict[str, str]) -> list[str]:
    gpus, driver = inv.get("gpus"), inv.get("driver") or {}
    if gpus is None:
        return [_comment(f"[gpu] not pinned: {why['gpus']}")]
    if not gpus:
        return ["# [gpu] not pinned: the driver reports no GPU"]
    lines = [
        "[gpu]",
        f"# {len(gpus)} GPU(s) reported by the driver (via {driver.get('source') or '?'})",
        f"expected_count = {len(gpus)}",
    ]
    models = sorted({g.get("model") or "" for g in gpus})
    if len(models) == 1 and models[0]:
        lines += ["# the model of every GPU", f"expected_model = {basic_string(models[0])}"]
    else:
        shown = ", ".join(m or "unknown" for m in models)
        lines.append(_comment(f"expected_model not pinned: the GPUs are {shown}"))
    if driver.get("version"):
        cuda = f", CUDA {driver['cuda']}" if driver.get("cuda") else ""
        lines += [
            _comment(f"the running driver{cuda}; min_driver still sets the floor"),
            f"expected_driver = {basic_string(driver['version'])}",
        ]
    else:
        lines.append("# expected_driver not pinned: the driver did not say its version")
    return lines


def _cuda(inv: dict[str, Any], why: dict[str, str]) -> list[str]:
    cuda = inv.get("cuda")
    if cuda is None:
        return [_comment(f"[cuda] not pinned: {why['cuda']}")]
    if not cuda.get("toolkit"):
        return ["# [cuda] not pinned: no CUDA toolkit is selected on this host"]
    return [
        "[cuda]",
        "# the toolkit /usr/local/cuda, CUDA_HOME or PATH selects",
        f"expected_toolkit = {basic_string(cuda['toolkit'])}",
    ]


def _network(inv: dict[str, Any], why: dict[str, str]) -> list[str]:
    ports = inv.get("rdma")
    if ports is None:
        return [_comment(f"[network] not pinned: {why['rdma']}")]
    ib = [p for p in ports if p.get("link_layer") == "InfiniBand" and p.get("state") == "ACTIVE"]
    other = [_port(p) for p in ports if p not in ib]
    note = f"not pinned: {', '.join(other)} (RoCE, or not ACTIVE; ib_ports lists ACTIVE InfiniBand)"
    skipped = [_comment(note)] if other else []
    if not ib:
        return ["# [network] not pinned: no ACTIVE InfiniBand port", *skipped]
    lines = [
        "[network]",
        f"# the {len(ib)} ACTIVE InfiniBand port(s): each must be found and ACTIVE",
        f"ib_ports = [{', '.join(basic_string(_port(p)) for p in ib)}]",
    ]
    rates = [p.get("rate_gbps") for p in ib]
    if all(isinstance(r, int | float) for r in rates):
        lines += [
            "# the slowest of them; a port that trains lower fails",
            f"min_rate_gbps = {float(min(rates))!r}",
        ]
    else:
        lines.append("# min_rate_gbps not pinned: a port's rate was not read")
    return lines + skipped


def _port(p: dict[str, Any]) -> str:
    return f"{p.get('device')}:{p.get('port')}"


def _pci(inv: dict[str, Any], why: dict[str, str]) -> list[str]:
    from dldoctor.checks.pci import kind_of
    from dldoctor.keyfacts import gpus_by_link

    devices = inv.get("pcie")
    if devices is None:
        return [_comment(f"[pci] not pinned: {why['pcie']}")]
    gpus = gpus_by_link(inv)
    lines = ["# Each device's link width now: a link that trains narrower fails."]
    for d in devices:
        if not isinstance(d.get("width"), int):
            continue  # NVSwitches and virtual devices have no link width to pin
        what = kind_of(d.get("class") or "", d.get("vendor") or "")
        gpu = gpus.get(d.get("address"))
        if gpu is not None:
            what = f"GPU {gpu.index}, {gpu.model or '?'}"
        elif d.get("driver"):
            what += f" ({d['driver']})"
        lines += [
            "[[pci.expected_links]]",
            f"address = {basic_string(d['address'])}  " + _comment(what),
            f"width = {d['width']}",
        ]
    return lines if len(lines) > 1 else ["# [pci] not pinned: no device reports a link width"]


def _raid(inv: dict[str, Any], why: dict[str, str]) -> list[str]:
    arrays = inv.get("raid")
    if arrays is None:
        return [_comment(f"[storage] expected_raid not pinned: {why['raid']}")]
    if not arrays:
        return ["# [storage] expected_raid not pinned: no md array on this host"]
    lines = ["# The md arrays of /proc/mdstat, each by name and level."]
    for a in arrays:
        lines += ["[[storage.expected_raid]]", f"name = {basic_string(a['name'])}"]
        if a.get("level"):
            lines.append(f"level = {basic_string(a['level'])}")
    return lines


def _mounts(inv: dict[str, Any], why: dict[str, str]) -> list[str]:
    mounts = inv.get("mounts")
    if mounts is None:
        return [_comment(f"[storage] expected_mounts not pinned: {why['mounts']}")]
    if not mounts:
        return ["# [storage] expected_mounts not pinned: no local or network filesystem"]
    lines = ["# Local and network filesystems, each by mount point and type."]
    for m in mounts:
        lines += [
            "[[storage.expected_mounts]]",
            f"mount_point = {basic_string(m['mount_point'])}  "
            + _comment(f"from {m.get('source')}"),
            f"fstype = {basic_string(m['fstype'])}",
        ]
    return lines


def _firmware_parts(inv: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(what, model, version) of every GPU, RDMA device and NVMe drive the inventory knows:
    the models a [firmware] minimum is matched against (a device's board_id, not its
    hca_type: one ConnectX model serves boards of other firmware lines)."""
    parts = [("GPU", g.get("model"), g.get("vbios")) for g in inv.get("gpus") or ()]
    hcas = {p.get("device"): p for p in inv.get("rdma") or ()}
    parts += [("NIC", p.get("board_id"), p.get("firmware")) for p in hcas.values()]
    parts += [("NVMe drive", d.get("model"), d.get("firmware")) for d in inv.get("nvme") or ()]
    return [(w, m, v) for w, m, v in parts if isinstance(m, str) and m and isinstance(v, str) and v]


def _firmware(inv: dict[str, Any], why: dict[str, str]) -> list[str]:
    from dldoctor.checks.firmware import firmware_at_least
    from dldoctor.versions import version_tuple

    by_model: dict[tuple[str, str], list[str]] = {}
    for what, model, version in _firmware_parts(inv):
        by_model.setdefault((what, model), []).append(version)
    lines = ["# Each model's firmware now (the oldest of its parts): an older one warns."]
    for (what, model), versions in by_model.items():
        oldest = versions[0]
        for v in versions[1:]:
            if firmware_at_least(v, oldest) is False:
                oldest = v
        if version_tuple(oldest) is None:  # the policy takes only a version with a number
            lines.append(_comment(f"{model}: firmware {oldest} not pinned (no number in it)"))
            continue
        mixed = sorted(set(versions))
        note = f"{len(versions)} {what}(s)" + (f", mixed: {', '.join(mixed)}" if len(mixed) > 1
                                              else "")  # fmt: skip
        lines += [
            "[[firmware.minimums]]",
            f"match = {basic_string(model)}  " + _comment(note),
            f"min_version = {basic_string(oldest)}",
        ]
    if len(lines) == 1:
        return [
            "# [firmware] minimums not pinned: no GPU, RDMA device or NVMe drive says its firmware"
        ]
    return lines


def _comment(text: str) -> str:
    """A comment line of any text: a host name or model read from a bundle is untrusted,
    and a line end in it would end the comment."""
    clean = _one_line(text)
    return clean if clean.startswith("#") else f"# {clean}"


def _one_line(text: str) -> str:
    return "".join(" " if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)
