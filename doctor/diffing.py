"""`dldoctor diff A B`: what changed between two hosts, or one host at two moments.

A and B are bundle directories (replayed through the checks, so their facts are at hand)
or report JSON files (the `--check --json` document: findings only). Findings are matched
by id and compared by status; the key facts (KEY_FACTS) are read from each bundle's facts.
The JSON document is described in docs/diff.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from dldoctor.exitcodes import ExitCode
from dldoctor.facts import Facts
from dldoctor.policy import Policy

FORMAT = "dldoctor-diff"
FORMAT_VERSION = 1
UNKNOWN = "unknown"  # the fact raised, or its source could not be read
ABSENT = "absent"  # the item (a GPU, a port, a drive) is not there on that side
MAX_REPORT_BYTES = 64 * 1024 * 1024
NO_FACTS = "key facts were not compared: a report JSON holds no facts"


class DiffInputError(Exception):
    """An input that cannot be read: one line, exit 4."""


# --- key facts ------------------------------------------------------------------------
# Each reader asks a Facts object and returns one value, or {item: value} for facts that
# exist per GPU, port, drive or array. Values are text; "" and None read as UNKNOWN.

KeyValue = str | Mapping[str, str]


def _stack(facts: Facts):
    from dldoctor.facts.nvidia import nvidia

    stack = facts.get(nvidia)
    if not stack.usable:  # no driver, or the doctor could not look: nothing to compare
        raise LookupError(stack.error_message or stack.error)
    return stack


def _gpus(facts: Facts, value: Callable) -> dict[str, str]:
    return {f"GPU {g.index}": value(g) for g in _stack(facts).gpus}


def _links(facts: Facts, value: Callable) -> dict[str, str]:
    from dldoctor.facts.pcie import pcie_links

    links = facts.get(pcie_links)
    if not links.readable:
        raise LookupError("the PCI bus could not be listed")
    # The devices dldoctor checks the link of (GPUs, NICs, NVMe, NVSwitches), not the
    # switch and root ports above them.
    return {link.address: value(link) for link in links.links if not link.is_bridge}


def _rdma_ports(facts: Facts, value: Callable) -> dict[str, str]:
    from dldoctor.facts.rdma import rdma_devices

    return {f"{p.device} port {p.port}": value(p) for d in facts.get(rdma_devices) for p in d.ports}


def _number(x: float | None, unit: str) -> str:
    return "" if x is None else f"{x:g}{unit}"


def _driver(facts: Facts) -> str:
    return _stack(facts).driver_version


def _cuda_driver(facts: Facts) -> str:
    return _stack(facts).cuda_driver_version


def _gpu_count(facts: Facts) -> str:
    return str(len(_stack(facts).gpus))


def _gpu_models(facts: Facts) -> dict[str, str]:
    return _gpus(facts, lambda g: g.name)


def _vbios(facts: Facts) -> dict[str, str]:
    return _gpus(facts, lambda g: g.vbios)


def _pcie_width(facts: Facts) -> dict[str, str]:
    return _links(
        facts, lambda link: "" if link.current_width is None else f"x{link.current_width}"
    )


def _pcie_speed(facts: Facts) -> dict[str, str]:
    return _links(facts, lambda link: _number(link.current_gts, " GT/s"))


def _rdma_rate(facts: Facts) -> dict[str, str]:
    return _rdma_ports(facts, lambda p: p.rate_text or _number(p.rate_gbps, " Gb/sec"))


def _rdma_state(facts: Facts) -> dict[str, str]:
    return _rdma_ports(facts, lambda p: "/".join(s for s in (p.state, p.phys_state) if s))


def _nic_firmware(facts: Facts) -> dict[str, str]:
    from dldoctor.facts.rdma import rdma_devices

    return {d.name: d.fw_ver for d in facts.get(rdma_devices)}


def _nvme_firmware(facts: Facts) -> dict[str, str]:
    from dldoctor.facts.storage import nvme

    return {c.name: " ".join(s for s in (c.model, c.firmware) if s) for c in facts.get(nvme)}


def _kernel(facts: Facts) -> str:
    from dldoctor.facts.system import kernel

    return facts.get(kernel).release


def _raid(facts: Facts) -> dict[str, str]:
    from dldoctor.facts.mdraid import md_raid

    mdstat = facts.get(md_raid).mdstat
    if mdstat is None:
        return {}

    def state(a) -> str:
        words = [a.state, a.level, f"[{a.status_map}]" if a.status_map else ""]
        words += ["degraded" if a.degraded else "", a.sync.action if a.sync else ""]
        return " ".join(w for w in words if w)

    return {a.name: state(a) for a in mdstat.arrays}


def _toolkits(facts: Facts) -> dict[str, str]:
    from dldoctor.facts.toolkit import cuda_toolkits

    return {t.path: t.version for t in facts.get(cuda_toolkits).toolkits}


def _toolkit_selected(facts: Facts) -> str:
    from dldoctor.facts.toolkit import cuda_toolkits

    found = facts.get(cuda_toolkits)
    chosen = found.get(found.selected) if found.selected else None
    return f"{chosen.version} ({chosen.path})" if chosen else "none selected"


def _cudnn(facts: Facts) -> dict[str, str]:
    from dldoctor.facts.cudalibs import cudnn

    return {c.path: c.version for c in facts.get(cudnn)}


def _nccl(facts: Facts) -> dict[str, str]:
    from dldoctor.facts.cudalibs import nccl

    return {n.path: n.version for n in facts.get(nccl)}


def _frameworks(facts: Facts) -> dict[str, str]:
    from dldoctor.facts.frameworks import frameworks

    return {f"{fw.name} {fw.location}": fw.version for fw in facts.get(frameworks)}


# The facts `diff` compares, in the order it prints them: add a line to compare one more.
KEY_FACTS: dict[str, Callable[[Facts], KeyValue]] = {
    "nvidia.driver": _driver,
    "nvidia.cuda_driver": _cuda_driver,
    "gpu.count": _gpu_count,
    "gpu.model": _gpu_models,
    "gpu.vbios": _vbios,
    "pcie.width": _pcie_width,
    "pcie.speed": _pcie_speed,
    "rdma.rate": _rdma_rate,
    "rdma.state": _rdma_state,
    "nic.firmware": _nic_firmware,
    "nvme.firmware": _nvme_firmware,
    "kernel.release": _kernel,
    "raid.md": _raid,
    "cuda.toolkit": _toolkits,
    "cuda.toolkit.selected": _toolkit_selected,
    "cuda.cudnn": _cudnn,
    "cuda.nccl": _nccl,
    "python.frameworks": _frameworks,
}


def read_key_facts(facts: Facts) -> dict[str, KeyValue]:
    """Every key fact's value; one that raises is UNKNOWN, never a crash."""
    values: dict[str, KeyValue] = {}
    for name, read in KEY_FACTS.items():
        try:
            value = read(facts)
        except Exception:  # noqa: BLE001 - a failed fact is "unknown", the checks say why
            value = UNKNOWN
        if isinstance(value, Mapping):
            values[name] = {str(k): str(v) if v else UNKNOWN for k, v in value.items()}
        else:
            values[name] = str(value) if value else UNKNOWN
    return values


def gpu_labels(facts: Facts) -> dict[str, str]:
    """PCI address -> "GPU <index>", so a link row names its GPU."""
    try:
        return {g.pci_bus_id: f"GPU {g.index}" for g in _stack(facts).gpus if g.pci_bus_id}
    except Exception:  # noqa: BLE001 - rows are then named by address alone
        return {}


# --- the two sides --------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    path: str
    kind: str  # "bundle", "sosreport", "nvidia-bug-report" (all replayed) or "report"
    host: dict
    findings: dict[str, dict]  # id -> {"id", "title", "status", "summary"}
    facts: dict[str, KeyValue] | None  # None: a report, which holds none
    labels: dict[str, str]


def finding_table(findings: Sequence[dict]) -> dict[str, dict]:
    table: dict[str, dict] = {}
    for f in findings:
        key, n = f["id"], 1
        while key in table:  # the same id twice (plugins.load): keep both, in order
            n += 1
            key = f"{f['id']}#{n}"
        table[key] = {k: f[k] for k in ("id", "title", "status", "summary")}
    return table


def _host_side(path: str, host, policy: Policy) -> Side:
    from dldoctor.diagnose import diagnose
    from dldoctor.registry import builtin_checks, ordered

    # Built-in checks only, under the built-in policy unless --policy names the site's:
    # a diff compares hosts, not settings.
    facts = Facts(host)  # the checks' facts, asked again for the key facts at no cost
    report = diagnose(host, policy, ordered(builtin_checks()), facts=facts)
    return Side(
        path,
        "bundle" if host.kind == "replay" else host.kind,  # or "sosreport", "nvidia-bug-report"
        report.host,
        finding_table([f.to_dict() for f in report.findings]),
        read_key_facts(facts),
        gpu_labels(facts),
    )


def _report_side(path: str) -> Side:
    from dldoctor.model import Report

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_REPORT_BYTES + 1)
        if len(data) > MAX_REPORT_BYTES:
            raise ValueError(f"larger than {MAX_REPORT_BYTES >> 20} MiB")
        report = Report.from_dict(json.loads(data))
    except OSError as exc:
        raise DiffInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        why = f"{type(exc).__name__}: {exc}" if isinstance(exc, KeyError) else str(exc)
        raise DiffInputError(
            f"{path} is neither a bundle directory nor a dldoctor report JSON ({why[:200]})"
        ) from None
    findings = [f.to_dict() for f in report.findings]
    for f in findings:  # the report's own shape (docs/report-schema.md), not only JSON
        if not all(isinstance(f.get(k), str) for k in ("id", "title", "status", "summary")):
            raise DiffInputError(
                f"{path} is not a dldoctor report: a finding's id, title, status or summary "
                "is not text"
            )
    if not isinstance(report.host, dict):
        raise DiffInputError(f"{path} is not a dldoctor report: its host is not an object")
    return Side(path, "report", report.host, finding_table(findings), None, {})


@contextlib.contextmanager
def opened(path: str, policy: Policy | None = None) -> Iterator[Side]:
    """One input, read: a report JSON file, or anything `--from` reads (a bundle directory
    or `.tar.gz`, a sos report, an nvidia-bug-report log), opened by `--from`'s own opener
    and diagnosed under `policy` (default: the built-in one). The one place that tells the
    kinds apart."""
    from dldoctor.host.foreign import open_input
    from dldoctor.snapshots.bundle import BundleError

    if _is_report_json(path):
        yield _report_side(path)
    elif os.path.isdir(path) or os.path.isfile(path):
        with contextlib.ExitStack() as cleanup:
            try:
                make_host, _folder = open_input(path, cleanup)
            except BundleError as exc:
                raise DiffInputError(str(exc)) from None
            yield _host_side(path, make_host(), policy or Policy())
    elif os.path.exists(path):  # a FIFO or a device would block the read, or never end
        raise DiffInputError(f"{path}: not a bundle directory nor a regular file")
    else:
        raise DiffInputError(f"{path}: no such file or directory")


def _is_report_json(path: str) -> bool:
    """A regular file whose first non-blank byte opens a JSON object: no archive, log or
    sos report starts so."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return True  # _report_side says why it cannot be read
    return head.lstrip()[:1] == b"{"


# --- comparing ------------------------------------------------------------------------


def compare(a: Side, b: Side) -> dict:
    """The diff document (docs/diff.md)."""
    changed, only_a = [], []
    for key, fa in a.findings.items():
        fb = b.findings.get(key)
        if fb is None:
            only_a.append(fa)
        elif fa["status"] != fb["status"]:
            changed.append(
                {
                    "id": fa["id"],
                    "title": fa["title"],
                    "a": {"status": fa["status"], "summary": fa["summary"]},
                    "b": {"status": fb["status"], "summary": fb["summary"]},
                }
            )
    only_b = [fb for key, fb in b.findings.items() if key not in a.findings]
    compared = a.facts is not None and b.facts is not None
    facts = _fact_changes(a, b) if compared else []
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "equivalent": not (changed or only_a or only_b or facts),
        "a": _side_summary(a),
        "b": _side_summary(b),
        "facts_compared": compared,
        "facts_not_compared": None if compared else NO_FACTS,
        "findings": {"changed": changed, "only_in_a": only_a, "only_in_b": only_b},
        "facts": facts,
    }


def _side_summary(side: Side) -> dict:
    host = {k: side.host.get(k) for k in ("hostname", "os", "kernel")}
    return {"path": side.path, "kind": side.kind, **host}


def _fact_changes(a: Side, b: Side) -> list[dict]:
    assert a.facts is not None and b.facts is not None
    labels = {**b.labels, **a.labels}
    rows = []
    for name in a.facts:  # KEY_FACTS in a diff; `fleet report --since` brings its own
        va, vb = a.facts[name], b.facts.get(name, UNKNOWN)
        if isinstance(va, str) and isinstance(vb, str):
            if va != vb:
                rows.append({"fact": name, "item": None, "label": name, "a": va, "b": vb})
            continue
        # One side per item and the other UNKNOWN as a whole: each item is unknown there.
        ia = va if isinstance(va, Mapping) else dict.fromkeys(vb, va)
        ib = vb if isinstance(vb, Mapping) else dict.fromkeys(va, vb)
        for item in sorted(ia.keys() | ib.keys(), key=_natural):
            x, y = ia.get(item, ABSENT), ib.get(item, ABSENT)
            if x != y:
                label = f"{name} {item}" + (f" ({labels[item]})" if item in labels else "")
                rows.append({"fact": name, "item": item, "label": label, "a": x, "b": y})
    return rows


def _natural(text: str) -> tuple:
    # "GPU 10" after "GPU 9"; "nvme10" after "nvme2".
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


# --- output ---------------------------------------------------------------------------


def _named(side: dict) -> str:
    return side["path"] + (f" ({side['hostname']})" if side.get("hostname") else "")


def render_text(doc: dict) -> str:
    if doc["equivalent"]:
        note = "" if doc["facts_compared"] else f" ({doc['facts_not_compared']})"
        return f"{doc['a']['path']} and {doc['b']['path']} are equivalent{note}\n"
    lines = [f"A: {_named(doc['a'])}", f"B: {_named(doc['b'])}"]
    found = doc["findings"]
    if any(found.values()):
        lines += ["", "Findings"]
        for f in found["changed"]:
            lines.append(f"  {f['id']}: {f['a']['status']} -> {f['b']['status']}")
            lines.append(f"    A: {f['a']['summary']}")
            lines.append(f"    B: {f['b']['summary']}")
        for side, key in (("A", "only_in_a"), ("B", "only_in_b")):
            for f in found[key]:
                lines.append(f"  {f['id']}: only in {side} ({f['status']}: {f['summary']})")
    if doc["facts"]:
        lines += ["", "Key facts"]
        lines += [f"  {r['label']}: {r['a']} -> {r['b']}" for r in doc["facts"]]
    if not doc["facts_compared"]:
        lines += ["", doc["facts_not_compared"][0].upper() + doc["facts_not_compared"][1:]]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    from dldoctor.cli.shared import Parser, add_request_arguments

    p = Parser(
        prog="dldoctor diff",
        description="Compare two hosts, or one host at two moments: the findings whose "
        "status changed, the findings only in one, and the key facts that changed.",
        epilog="Exit codes: 0 equivalent, 1 they differ, 2 usage error, 4 an input could "
        "not be read, 6 the output could not be written.",
    )
    p.add_argument(
        "a", metavar="A", help="a bundle (a directory or a .tar.gz) or a report JSON file"
    )
    p.add_argument("b", metavar="B", help="the same, to compare with A")
    p.add_argument("--json", action="store_true", help="print the diff as JSON on stdout")
    add_request_arguments(
        p,
        helps={
            "--policy": "judge the bundles A and B under this policy (default: built-in; "
            "a report JSON keeps the verdicts it was written with)",
            "--timeout": "time limit of each probe of a bundle's diagnosis",
            "--deadline": "each bundle's diagnosis ends by then (default 20)",
        },
        refused={"--from": "the inputs of a diff are A and B"},
    )
    return p


def main(argv: Sequence[str]) -> int:
    from dldoctor.cli.shared import OutputError, write_output
    from dldoctor.request import request_from

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return int(exc.code or 0)
    request = request_from(args)
    try:
        with opened(args.a, request.policy) as a, opened(args.b, request.policy) as b:
            doc = compare(a, b)
    except DiffInputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if args.json:
        text = json.dumps(doc, indent=2, ensure_ascii=True) + "\n"
    else:
        text = render_text(doc)
    try:
        write_output(lambda: sys.stdout.write(text))
    except OutputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.OUTPUT
    return ExitCode.OK if doc["equivalent"] else ExitCode.PROBLEMS
