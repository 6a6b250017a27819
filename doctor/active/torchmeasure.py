"""The measuring script `scripts/torch_measure.py`, run by the interpreter that has the
host's PyTorch with CUDA (the `python.frameworks` fact finds it), for what no field tool
measured: always the GEMMs; the copies when nvbandwidth is absent; the all-reduce when
nccl-tests' all_reduce_perf is.

Its JSON (the script's docstring) becomes TorchMeasure; a script that could not measure
(no torch, no GPU, a CUDA error) says why in `error`, which the checks report as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dldoctor.active import measure
from dldoctor.active.nccltests import nccl_tests
from dldoctor.active.nvbandwidth import D2D, D2H, H2D, LOCAL, nvbandwidth
from dldoctor.active.output import json_document, said, unanswered
from dldoctor.facts import FactContext, fact
from dldoctor.facts.frameworks import Framework, frameworks
from dldoctor.facts.nvidia import nvidia

SCRIPT = "{scripts}/torch_measure.py"
# Starting torch and CUDA in a process per GPU takes 5-15 s; each test's own share after.
BASE_COST_S = 20.0
TEST_COST_S = {"gemm": 10.0, "memory": 5.0, "pcie": 5.0, "p2p": 10.0, "allreduce": 25.0}


@dataclass(frozen=True)
class TorchMeasure:
    python: str = ""  # the interpreter that ran it; "" when none has torch with CUDA
    tests: tuple[str, ...] = ()  # what it was asked to measure
    gemm: tuple[dict, ...] = ()  # {"gpu", "dtype", "n", "tflops"}
    memory: tuple[dict, ...] = ()  # {"gpu", "bytes", "gbps"}
    pcie: tuple[dict, ...] = ()  # {"gpu", "bytes", "h2d_gbps", "d2h_gbps"}
    p2p: tuple[dict, ...] = ()  # {"src", "dst", "peer_access", "gbps", "latency_us"}
    allreduce: dict = field(default_factory=dict)  # {"gpus", "bytes", "busbw_gbps", ...}
    errors: tuple[str, ...] = ()  # a test's failure on a GPU, as the script said it
    error: str = ""  # why nothing was measured
    torch: str = ""


def torch_python(found: tuple[Framework, ...]) -> str:
    """The first interpreter that imports a CUDA build of torch (a CPU-only build cannot
    measure a GPU; a build whose CUDA is unknown may)."""
    for fw in found:
        if fw.name == "torch" and fw.cuda != "" and fw.environments:
            return fw.environments[0]
    return ""


def _rows(value: object, *keys: str) -> tuple[dict, ...]:
    """The script's rows that hold numbers under `keys` (anything else is left out)."""
    if not isinstance(value, list):
        return ()
    return tuple(
        row
        for row in value
        if isinstance(row, dict)
        and all(
            isinstance(row.get(k), int | float) and not isinstance(row.get(k), bool) for k in keys
        )
    )


def _error_line(e: object) -> str:
    if not isinstance(e, dict):
        return str(e)
    where = e.get("gpu", e.get("where", ""))
    return f"{e.get('test', '?')}{f' {where}' if where != '' else ''}: {e.get('error', '')}"


def parse(doc: object, python: str = "", tests: tuple[str, ...] = ()) -> TorchMeasure:
    if not isinstance(doc, dict) or doc.get("tool") != "torch_measure":
        return TorchMeasure(python, tests, error="the measuring script printed no result")
    if doc.get("error"):
        return TorchMeasure(python, tests, error=str(doc["error"]))
    res = doc.get("results") if isinstance(doc.get("results"), dict) else {}
    allreduce = res.get("allreduce")
    busbw = allreduce.get("busbw_gbps") if isinstance(allreduce, dict) else None
    ok_allreduce = isinstance(busbw, int | float) and not isinstance(busbw, bool)
    return TorchMeasure(
        python,
        tests,
        _rows(res.get("gemm"), "gpu", "tflops"),
        _rows(res.get("memory"), "gpu", "gbps"),
        _rows(res.get("pcie"), "gpu", "h2d_gbps", "d2h_gbps"),
        _rows(res.get("p2p"), "src", "dst", "gbps"),
        allreduce if ok_allreduce else {},
        tuple(_error_line(e) for e in doc.get("errors") or []),
        "",
        str(doc.get("torch", "")),
    )


def tests_left(ctx: FactContext) -> tuple[str, ...]:
    """What the field tools did not measure here (their facts run first, in the lane)."""
    tests = ["gemm"]
    bw = ctx.get(nvbandwidth)
    if not bw.has(LOCAL):
        tests.append("memory")
    if not (bw.has(H2D) and bw.has(D2H)):
        tests.append("pcie")
    if len(ctx.get(nvidia).gpus) > 1:
        if not bw.has(D2D):
            tests.append("p2p")
        if not ctx.get(nccl_tests).rows:
            tests.append("allreduce")
    return tuple(tests)


@fact("active.torch_measure")
def torch_measure(ctx: FactContext) -> TorchMeasure:
    python = torch_python(ctx.get(frameworks))
    tests = tests_left(ctx)
    if not python:
        return TorchMeasure("", tests, error="no Python environment has PyTorch with CUDA")
    cost = BASE_COST_S + sum(TEST_COST_S[t] for t in tests)
    argv = (python, SCRIPT, "--json", "--tests", ",".join(tests))
    answer = measure(ctx, argv, cost_s=cost, what="the PyTorch measurements").require()
    why = unanswered(answer, python)
    if why:
        return TorchMeasure(python, tests, error=why)
    doc = json_document(answer.text)
    if doc is None:
        return TorchMeasure(python, tests, error=f"the measuring script failed: {said(answer)}")
    return parse(doc, python, tests)
