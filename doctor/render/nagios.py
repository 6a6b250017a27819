"""`--format nagios`: the report as a Nagios / Icinga / Naemon plugin answers, after the
Monitoring Plugins Development Guidelines (https://www.monitoring-plugins.org/doc/
guidelines.html: "Plugin Return Codes", "Performance data"). One line on stdout,

    DLDOCTOR CRITICAL: 1 failed: pci.link.width; 1 warning: numa.balancing | 'pass'=51;;;0;60 ...

and the state as the exit code: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.

The state is the worst finding's, in the order of Monitoring::Plugin's `max_state_alt`
("should be used if the internal tests performed can return UNKNOWN"): CRITICAL, WARNING,
UNKNOWN, OK. A failed check is CRITICAL; a warning is WARNING, or CRITICAL under --strict
(which fails a run on warnings); checks that could not finish, with nothing failed or
warned, are UNKNOWN: the guidelines' state for a plugin that could not check. A warning
outranks an unfinished check here, unlike dldoctor's own exit code (3 over 0): in Nagios a
warning already alerts, and the text still names what could not finish.
"""

from __future__ import annotations

from dldoctor.figures import measured
from dldoctor.model import Report, Status, counts

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
STATES = ("OK", "WARNING", "CRITICAL", "UNKNOWN")
SERVICE = "DLDOCTOR"
NAMED = 3  # check ids named per status; the line stays short enough for a pager
# Nagios Core reads the first 4 KB of a plugin's output ("Plugin Output Length
# Restrictions"): the figures are listed while the line stays within it, and a count of the
# rest stands for them (a P2P matrix of 8 GPUs alone is 56 figures).
MAX_LINE = 4000


def nagios_state(report: Report) -> int:
    c = counts(report.findings)
    if c["fail"] or (report.strict and c["warn"]):
        return CRITICAL
    if c["warn"]:
        return WARNING
    if c["error"]:
        return UNKNOWN
    return OK


def render_nagios(report: Report) -> bytes:
    state = STATES[nagios_state(report)]
    line = f"{SERVICE} {state}: {_text(report)} | {_perfdata(report)}"
    return f"{line}{_figures(report, MAX_LINE - len(line.encode()))}\n".encode()


def nagios_failure(message: str) -> tuple[bytes, int]:
    """The doctor could not run at all (bad arguments, an unreadable bundle, a crash): the
    guidelines' UNKNOWN, never a CRITICAL a usage error's exit 2 would read as."""
    return f"{SERVICE} UNKNOWN: dldoctor could not run: {_clean(message)}\n".encode(), UNKNOWN


def _clean(text: str) -> str:
    # `|` starts the performance data and a newline ends the line Nagios reads.
    return " ".join(text.replace("|", "/").split())


def _ids(report: Report, status: Status) -> str:
    ids = [_clean(f.id) for f in report.findings if f.status == status]
    more = len(ids) - NAMED
    return ", ".join(ids[:NAMED]) + (f" +{more} more" if more > 0 else "")


def _text(report: Report) -> str:
    c = counts(report.findings)
    parts = []
    for status, one, many in (
        (Status.FAIL, "failed", "failed"),
        (Status.WARN, "warning", "warnings"),
        (Status.ERROR, "could not finish", "could not finish"),
    ):
        n = c[status.value]
        if n:
            parts.append(f"{n} {one if n == 1 else many}: {_ids(report, status)}")
    if parts:
        return "; ".join(parts)
    return f"{c['pass']} checks passed, {c['skip']} not applicable"


def _perfdata(report: Report) -> str:
    """'label'=value[UOM];[warn];[crit];[min];[max]: a count per status, the thresholds
    saying which counts alert (range "0": alert above 0), the run's time, the GPUs seen."""
    c = counts(report.findings)
    total = len(report.findings)
    thresholds = {"warn": ";0" if report.strict else "0;", "fail": ";0"}
    items = [
        f"'{s.value}'={c[s.value]};{thresholds.get(s.value, ';')};0;{total}"
        for s in (Status.PASS, Status.WARN, Status.FAIL, Status.SKIP, Status.ERROR)
    ]
    items.append(f"'time'={report.duration_s:.3f}s;;;0")
    gpus = (report.inventory or {}).get("gpus")
    if isinstance(gpus, list):  # null: the GPU facts were not computed, not "no GPU"
        items.append(f"'gpus'={len(gpus)};;;0")
    return " ".join(items)


def _figures(report: Report, room: int) -> str:
    """' 'GPU 3 hbm_copy GB/s'=1409.4;;;0 ...': each measured figure, its unit in the label
    (the guidelines' units are s, %, B and c only: "GB/s" or "TFLOPS" there would be
    refused). No warn or crit range: the floor a figure is held to is its reference's
    (datasheet or site), which the report does not keep, and the line's state is already
    CRITICAL when a figure is below it."""
    items, seen = [], set()
    for _, fig in measured(report.findings):
        label = _clean(f"{fig.subject} {fig.what} {fig.unit}").replace("=", ":").replace("'", "")
        if label not in seen:  # a label twice would make graphs of two figures one
            seen.add(label)
            items.append(f"'{label}'={_number(fig.value)};;;0")
    kept, used = [], 0
    for item in items:
        if used + len(item.encode()) + 1 > room - 40:  # room for the count of the rest
            break
        kept.append(item)
        used += len(item.encode()) + 1
    if len(kept) < len(items):
        kept.append(f"'figures_not_listed'={len(items) - len(kept)};;;0")
    return "".join(f" {item}" for item in kept)


def _number(value: float) -> str:
    # The guidelines' values are [-0-9.]: 1.5e+06 IOPS would be refused, 1500000 is not.
    return f"{value:.3f}".rstrip("0").rstrip(".")
