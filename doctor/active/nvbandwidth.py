"""NVIDIA's nvbandwidth: copy bandwidth host to GPU, GPU to host, GPU to GPU and within a
GPU, each a matrix of GB/s (its `-j` JSON; older builds print the same matrices as text).

One run measures what the GPU checks need, each GPU in turn as nvbandwidth does (two GPUs
behind one PCIe switch copying at once would halve each other):

- `host_to_device_memcpy_ce`, `device_to_host_memcpy_ce`: a 1 x N matrix, CPU row 0;
- `device_to_device_memcpy_read_ce`: N x N, row the GPU copied from... to the column, "N/A"
  on the diagonal and between GPUs that are no peers;
- `device_to_device_latency_sm`: N x N, ns;
- `device_local_copy`: 1 x N, a copy within each GPU (nvbandwidth 0.7 and later; an older
  one answers this test with an error and runs the others). The figure is the bytes
  copied over the time: the memory moved twice as many, read and written.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from dldoctor.active.output import json_document, tool_run
from dldoctor.facts import FactContext, fact

H2D = "host_to_device_memcpy_ce"
D2H = "device_to_host_memcpy_ce"
D2D = "device_to_device_memcpy_read_ce"
D2D_LATENCY = "device_to_device_latency_sm"
LOCAL = "device_local_copy"
TESTS = (H2D, D2H, D2D, D2D_LATENCY, LOCAL)
# Buffers of 512 MiB (its default), 3 samples each: 8 GPUs take ~20-30 s in all.
ARGV = ("nvbandwidth", "-j", "-t", *TESTS)
COST_S = 40.0


@dataclass(frozen=True)
class Matrix:
    """One testcase's matrix; None where nvbandwidth said "N/A"."""

    rows: tuple[tuple[float | None, ...], ...]
    description: str = ""

    def row0(self) -> dict[int, float]:
        """A 1 x N matrix (CPU or local) by GPU."""
        first = self.rows[0] if self.rows else ()
        return {gpu: v for gpu, v in enumerate(first) if v is not None}

    def pairs(self) -> dict[tuple[int, int], float]:
        """An N x N matrix by (row, column) GPU pair, the diagonal and N/A left out."""
        return {
            (r, c): v
            for r, row in enumerate(self.rows)
            for c, v in enumerate(row)
            if v is not None and r != c
        }


@dataclass(frozen=True)
class NvBandwidth:
    installed: bool = True
    matrices: dict[str, Matrix] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)  # testcase -> "Passed", "Waived", ...
    errors: dict[str, str] = field(default_factory=dict)  # testcase -> its error
    error: str = ""  # why nothing could be read ("" when something was)
    version: str = ""
    notes: tuple[str, ...] = ()

    def has(self, name: str) -> bool:
        return name in self.matrices

    @property
    def h2d(self) -> dict[int, float]:
        return self.matrices[H2D].row0() if self.has(H2D) else {}

    @property
    def d2h(self) -> dict[int, float]:
        return self.matrices[D2H].row0() if self.has(D2H) else {}

    @property
    def d2d(self) -> dict[tuple[int, int], float]:
        return self.matrices[D2D].pairs() if self.has(D2D) else {}

    @property
    def d2d_latency_ns(self) -> dict[tuple[int, int], float]:
        return self.matrices[D2D_LATENCY].pairs() if self.has(D2D_LATENCY) else {}

    @property
    def local_copy(self) -> dict[int, float]:
        """GB/s of memory traffic of a copy within each GPU: read and written."""
        return {g: 2 * v for g, v in self.matrices[LOCAL].row0().items()} if self.has(LOCAL) else {}


def _number(word: object) -> float | None:
    try:
        value = float(word)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _rows(raw: object) -> tuple[tuple[float | None, ...], ...] | None:
    if not isinstance(raw, list) or not all(isinstance(r, list) for r in raw):
        return None
    return tuple(tuple(_number(v) for v in row) for row in raw)


def parse_json(doc: object) -> NvBandwidth:
    """nvbandwidth's `-j` document (`{"nvbandwidth": {"testcases": [...]}}`)."""
    root = doc.get("nvbandwidth") if isinstance(doc, dict) else None
    if not isinstance(root, dict):
        return NvBandwidth(error="no nvbandwidth document in its output")
    matrices, statuses, errors, notes = {}, {}, {}, []
    for case in root.get("testcases") or []:
        if not isinstance(case, dict) or not isinstance(case.get("name"), str):
            notes.append("a testcase without a name was left out")
            continue
        name = case["name"]
        statuses[name] = str(case.get("status", ""))
        if case.get("error"):
            errors[name] = str(case["error"])
        rows = _rows(case.get("bandwidth_matrix"))
        if rows is not None and any(v is not None for row in rows for v in row):
            matrices[name] = Matrix(rows, str(case.get("bandwidth_description", "")).strip())
    error = str(root.get("error", "")) if not matrices else ""
    if not matrices and not error:
        error = "nvbandwidth measured nothing"
    return NvBandwidth(
        True, matrices, statuses, errors, error, str(root.get("version", "")), tuple(notes)
    )


_SUM = re.compile(r"^SUM (\w+) ")
_ROW = re.compile(r"^\s*\d+(\s+(\d+(\.\d+)?|N/A))+\s*$")


def parse_text(text: str) -> NvBandwidth:
    """nvbandwidth's plain output: per test a description ("memcpy CE CPU(row) -> GPU(column)
    bandwidth (GB/s)"), the column header, the rows, then "SUM <test> <total>" that names
    it ("Running <test>." before it may be cut from a pasted log)."""
    matrices: dict[str, Matrix] = {}
    description, rows, header = "", [], False
    for line in text.splitlines():
        if m := _SUM.match(line):
            if description and rows:
                matrices[m.group(1)] = Matrix(tuple(rows), description)
            description, rows = "", []
        elif "(column)" in line:
            description, rows, header = line.strip(), [], True
        elif description and _ROW.match(line):
            words = line.split()
            if header and all(w.isdigit() for w in words):  # "   0   1   2": the columns
                header = False
                continue
            rows.append(tuple(_number(w) for w in words[1:]))
    version = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in text.splitlines()
            if ln.startswith("nvbandwidth Version:")
        ),
        "",
    )
    error = "" if matrices else "no nvbandwidth results in its output"
    return NvBandwidth(True, matrices, {n: "Passed" for n in matrices}, {}, error, version)


def parse(text: str) -> NvBandwidth:
    doc = json_document(text)
    return parse_json(doc) if doc is not None else parse_text(text)


@fact("active.nvbandwidth")
def nvbandwidth(ctx: FactContext) -> NvBandwidth:
    return tool_run(ctx, ARGV, cost_s=COST_S, what="nvbandwidth's copies", parse=parse,
                    got=lambda found: bool(found.matrices), none=NvBandwidth)  # fmt: skip
