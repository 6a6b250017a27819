"""The report as a Prometheus textfile, for node_exporter's textfile collector: each check's
status as a state set, the run's time and counts, and the inventory's GPU and RDMA
telemetry as gauges (docs/prometheus.md has the table and the reasons).

Rendered through prometheus-client (a private registry, `generate_latest`); `--prometheus
FILE` writes the bytes with dldoctor's atomic writer, which is what `write_to_textfile`
does plus an fsync. A value the inventory does not know (null) is left out, never 0.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric

from dldoctor.figures import measured
from dldoctor.model import Report, Status, counts

STATUSES = tuple(s.value for s in Status)
PERF_LABELS = ("check", "subject", "what", "unit")
GPU_LABELS = ("gpu", "bus_id")
MIB = 1024 * 1024

# (metric, help, inventory field, scale): one gauge per GPU each.
GPU_GAUGES = (
    ("temperature_celsius", "GPU core temperature.", "temperature_c", 1),
    ("power_watts", "GPU power draw.", "power_draw_w", 1),
    ("power_limit_watts", "GPU power limit in force.", "power_limit_w", 1),
    ("memory_total_bytes", "GPU memory the driver reports.", "memory_mib", MIB),
    ("pcie_link_width", "PCIe lanes the GPU's link runs at now.", "pcie_width", 1),
    ("pcie_link_width_max", "PCIe lanes the GPU's link can run at.", "pcie_width_max", 1),
    ("pcie_link_generation", "PCIe generation the link runs at now.", "pcie_gen", 1),
    ("pcie_link_generation_max", "PCIe generation the link can run at.", "pcie_gen_max", 1),
    ("xid_events", "Xid lines of this boot's kernel log naming the GPU.", "xid_events", 1),
)
# (metric, help, label, {label value: inventory field}): one gauge, a label telling which.
GPU_TYPED = (
    (
        "ecc_errors",
        "Volatile ECC errors (since the driver loaded), by type.",
        "type",
        {"corrected": "ecc_volatile_corrected", "uncorrected": "ecc_volatile_uncorrected"},
    ),
    (
        "remapped_rows",
        "Memory rows remapped, by the kind of error that caused it.",
        "type",
        {"corrected": "remapped_rows_corrected", "uncorrected": "remapped_rows_uncorrected"},
    ),
    ("retired_pages", "Memory pages retired, by cause.", "cause", {"dbe": "retired_pages_dbe"}),
)


def render_prometheus(report: Report) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    # A family without samples (a field no GPU reported) would be a HELP line for nothing.
    registry.register(_Collector([f for f in _families(report) if f.samples]))
    return generate_latest(registry)


class _Collector:
    def __init__(self, families: list[Metric]):
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def _families(report: Report) -> Iterator[Metric]:
    yield _info(
        "dldoctor",
        "The dldoctor that ran.",
        (),
        [([], {"version": _str(report.tool.get("version"))})],
    )
    started = _timestamp(report.started_at)
    yield _gauge(
        "dldoctor_last_run_timestamp_seconds", "When the last run started.", [], [([], started)]
    )
    yield _gauge(
        "dldoctor_run_duration_seconds",
        "Wall time of the last run.",
        [],
        [([], round(report.duration_s, 6))],
    )
    complete = all(f.status != Status.ERROR for f in report.findings)
    yield _gauge(
        "dldoctor_run_complete",
        "1 when every check reached a verdict, 0 when one crashed or timed out.",
        [],
        [([], int(complete))],
    )
    tally = counts(report.findings)
    yield _gauge(
        "dldoctor_checks",
        "Checks of the last run, by status.",
        ["status"],
        [([s], tally[s]) for s in STATUSES],
    )
    yield _gauge(
        "dldoctor_check_status",
        "Status of each check: 1 for the status it has, 0 for the others.",
        ["check", "category", "status"],
        [([f.id, f.category, s], int(f.status == s)) for f in report.findings for s in STATUSES],
    )
    inventory = report.inventory or {}
    driver = inventory.get("driver")
    if driver:
        yield _info(
            "dldoctor_gpu_driver",
            "The GPU driver and the highest CUDA it supports.",
            (),
            [([], {"version": _str(driver.get("version")), "cuda": _str(driver.get("cuda"))})],
        )
    yield from _gpu_families(inventory.get("gpus") or [])
    yield from _rdma_families(inventory.get("rdma") or [])
    yield from _perf_families(report)


def _gpu_families(gpus: list[dict[str, Any]]) -> Iterator[Metric]:
    yield _info(
        "dldoctor_gpu",
        "Each GPU's model and VBIOS.",
        GPU_LABELS,
        [(_gpu(g), {"model": _str(g.get("model")), "vbios": _str(g.get("vbios"))}) for g in gpus],
    )
    for name, doc, field, scale in GPU_GAUGES:
        rows = [(_gpu(g), _scaled(g.get(field), scale)) for g in gpus]
        yield _gauge(f"dldoctor_gpu_{name}", doc, GPU_LABELS, rows)
    for name, doc, label, fields in GPU_TYPED:
        rows = [([*_gpu(g), kind], g.get(field)) for g in gpus for kind, field in fields.items()]
        yield _gauge(f"dldoctor_gpu_{name}", doc, [*GPU_LABELS, label], rows)


def _rdma_families(ports: list[dict[str, Any]]) -> Iterator[Metric]:
    described = [
        (_port(p), {k: _str(p.get(k)) for k in ("state", "link_layer", "firmware")}) for p in ports
    ]
    yield _info(
        "dldoctor_rdma_port",
        "Each RDMA port's state, link layer and firmware.",
        ("device", "port"),
        described,
    )
    rate = [(_port(p), _scaled(p.get("rate_gbps"), 1e9 / 8)) for p in ports]
    yield _gauge(
        "dldoctor_rdma_port_rate_bytes_per_second", "RDMA port link rate.", ("device", "port"), rate
    )


def _perf_families(report: Report) -> Iterator[Metric]:
    """The active tier's figures: one series per part and figure, its unit a label (the
    units are the judge's own: value / reference is the fraction whatever the unit)."""
    rows = [([f.id, fig.subject, fig.what, fig.unit], fig) for f, fig in measured(report.findings)]
    yield _gauge(
        "dldoctor_perf_value",
        "A figure the active tier measured, in the unit its label says.",
        PERF_LABELS,
        [(labels, fig.value) for labels, fig in rows],
    )
    yield _gauge(
        "dldoctor_perf_reference",
        "The figure it was judged against, in the same unit (absent: no reference known).",
        PERF_LABELS,
        [(labels, fig.reference) for labels, fig in rows],
    )


def _gpu(g: dict[str, Any]) -> list[str]:
    return [_str(g.get("index")), _str(g.get("bus_id"))]


def _port(p: dict[str, Any]) -> list[str]:
    return [_str(p.get("device")), _str(p.get("port"))]


def _gauge(name: str, doc: str, labels, rows: Iterable[tuple[list[str], Any]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    for values, value in _unique(rows):
        if isinstance(value, int | float) and not isinstance(value, bool):
            family.add_metric(values, value)
    return family


def _info(name: str, doc: str, labels, rows: Iterable[tuple[list[str], dict[str, str]]]) -> Metric:
    family = InfoMetricFamily(name, doc, labels=list(labels))
    for values, value in _unique(rows):
        family.add_metric(values, value)
    return family


def _unique(rows: Iterable[tuple[list[str], Any]]) -> Iterator[tuple[list[str], Any]]:
    # node_exporter rejects a textfile that repeats a series (the whole file is lost), so
    # a repeated label set (two plugins' findings of one id) keeps its first value.
    seen: set[tuple[str, ...]] = set()
    for values, value in rows:
        if tuple(values) not in seen:
            seen.add(tuple(values))
            yield values, value


def _scaled(value: Any, scale: float) -> Any:
    return value * scale if isinstance(value, int | float) and scale != 1 else value


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def _timestamp(started_at: str) -> float | None:
    try:
        when = _dt.datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return (when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)).timestamp()
