"""DCGM's own diagnostic, `dcgmi diag -r 1 -j`: DCGM's verdict of each of its tests, per
GPU, with its warnings (what failed and why) and its info lines.

Level 1 (deployment: libraries, permissions, persistence, page retirement, inforom; a few
seconds) fits the active budget beside the measurements; level 2 adds DCGM's PCIe and
memory tests and takes a minute or two per host, more than the 120 s budget holds beside
the others. Both levels answer the same JSON: DCGM 3 under "DCGM GPU Diagnostic", each
result with `gpu_id` (older: `gpu_ids`, "0,1,2,3"), DCGM 4 under "DCGM Diagnostic" with
`entity_id`; statuses "Pass", "Fail", "Warn", "Skip" (any case).
"""

from __future__ import annotations

from dataclasses import dataclass

from dldoctor.active.output import json_document, tool_run
from dldoctor.facts import FactContext, fact

LEVEL = "1"
ARGV = ("dcgmi", "diag", "-r", LEVEL, "-j")
COST_S = 25.0


@dataclass(frozen=True)
class DcgmResult:
    test: str  # "PCIe", "Memory Bandwidth", "Persistence Mode"
    category: str  # "Deployment", "Integration", "Hardware", "Stress", ...
    gpus: str  # "0", "0,1,2,3", "" for the whole host
    status: str  # "pass", "fail", "warn", "skip", or what DCGM said, lower case
    warnings: tuple[str, ...] = ()
    info: tuple[str, ...] = ()

    @property
    def who(self) -> str:
        if not self.gpus:
            return "all GPUs"
        return f"GPU {self.gpus}" if "," not in self.gpus else f"GPUs {self.gpus}"


@dataclass(frozen=True)
class DcgmDiag:
    installed: bool = True
    results: tuple[DcgmResult, ...] = ()
    version: str = ""
    error: str = ""
    notes: tuple[str, ...] = ()

    def with_status(self, *statuses: str) -> list[DcgmResult]:
        return [r for r in self.results if r.status in statuses]


def _texts(raw: object) -> tuple[str, ...]:
    """Warnings and info: strings, or objects `{"warning": ..., "error_id": ...}`."""
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        return ()
    out = []
    for item in raw:
        if isinstance(item, dict):
            item = item.get("warning") or item.get("message") or item.get("info")
        if isinstance(item, str) and item.strip():
            out.append(" ".join(item.split()))
    return tuple(out)


def _gpus(result: dict) -> str:
    for key in ("gpu_id", "gpu_ids", "entity_id"):
        if key in result and result[key] not in (None, ""):
            return str(result[key]).replace(" ", "")
    return ""


def _results(category: str, test: dict) -> list[DcgmResult]:
    name = str(test.get("name", "")) or "unnamed test"
    found = []
    for r in test.get("results") or []:
        if isinstance(r, dict) and r.get("entity_group", "GPU") in ("GPU", None):
            found.append(
                DcgmResult(
                    name,
                    category,
                    _gpus(r),
                    str(r.get("status", "")).lower(),
                    _texts(r.get("warnings")),
                    _texts(r.get("info")),
                )
            )
    summary = test.get("test_summary")
    if not found and isinstance(summary, dict):  # DCGM 4: a test with only its summary
        found.append(DcgmResult(name, category, "", str(summary.get("status", "")).lower()))
    return found


def parse(doc: object) -> DcgmDiag:
    root = None
    if isinstance(doc, dict):
        root = doc.get("DCGM GPU Diagnostic") or doc.get("DCGM Diagnostic")
    if not isinstance(root, dict):
        return DcgmDiag(error="no DCGM diagnostic document in dcgmi's output")
    results: list[DcgmResult] = []
    for cat in root.get("test_categories") or []:
        if not isinstance(cat, dict):
            continue
        for test in cat.get("tests") or []:
            if isinstance(test, dict):
                results.extend(_results(str(cat.get("category", "")), test))
    said = root.get("runtime_error")  # DCGM 4: why it could not run ("... is busy")
    error = "" if results else f"dcgmi diag: {said}" if said else "dcgmi ran no test"
    return DcgmDiag(True, tuple(results), str(root.get("version", "")), error)


@fact("active.dcgm")
def dcgm_diag(ctx: FactContext) -> DcgmDiag:
    # No host engine, an unsupported GPU: dcgmi says so in a line, not in JSON, and fails.
    return tool_run(ctx, ARGV, cost_s=COST_S, what=f"DCGM's level-{LEVEL} diagnostic",
                    parse=lambda text: parse(json_document(text)),
                    got=lambda found: bool(found.results), none=DcgmDiag)  # fmt: skip
