#!/usr/bin/env python3
"""dldoctor's GPU measuring script, run by the host's own framework interpreter (the one
that imports torch with CUDA), never by dldoctor's: dldoctor does not depend on torch.

    python torch_measure.py --json [--tests gemm,memory,pcie,p2p,allreduce]

It prints one JSON document on stdout, also when it cannot measure ({"error": ...}, exit
status 2). Standalone: it imports nothing of dldoctor, and torch only inside `main` and
the workers, so that its arithmetic can be tested where torch is absent.

What it measures, each timed with CUDA events after a warm-up:
- gemm: an 8192-cube matmul in BF16 (FP16 before Ampere) and in TF32, 2 n^3 flops each;
- memory: a 1 GiB device-to-device `copy_`, read and written: 2 x bytes moved;
- pcie: a pinned 256 MiB host buffer copied to and from each GPU, one GPU at a time (GPUs
  behind one PCIe switch would share its uplink);
- p2p: 256 MiB from each GPU to each other, and a 4-byte copy's round trip (the latency,
  with the host's synchronisation);
- allreduce: 256 MiB of float32 summed over all GPUs by torch.distributed's NCCL backend,
  one process per GPU on 127.0.0.1 and a free port; bus bandwidth as nccl-tests reports it.

gemm and memory run on every GPU at once, one process each. Nothing here changes a clock,
a power limit or any other GPU setting.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

VERSION = 1
TESTS = ("gemm", "memory", "pcie", "p2p", "allreduce")
GEMM_N = 8192
WARMUP = 3
ITERS = 10
COPY_BYTES = 1 << 30
HOST_BYTES = 256 << 20
P2P_BYTES = 256 << 20
LATENCY_BYTES = 4
LATENCY_ITERS = 50
ALLREDUCE_BYTES = 256 << 20
# NVML and nvidia-smi number GPUs in PCI bus order; CUDA's default is fastest first.
DEVICE_ORDER = "PCI_BUS_ID"


# --- arithmetic (tested without torch) ------------------------------------------------


def gemm_tflops(n: int, seconds: float) -> float:
    """An n x n by n x n matmul does n^3 multiply-adds: 2 n^3 floating-point operations."""
    return 2 * n**3 / seconds / 1e12


def copy_gbps(nbytes: int, seconds: float) -> float:
    """A copy within one GPU's memory reads and writes every byte: 2 x nbytes of traffic."""
    return 2 * nbytes / seconds / 1e9


def transfer_gbps(nbytes: int, seconds: float) -> float:
    """A copy over a link (PCIe, NVLink) carries each byte once."""
    return nbytes / seconds / 1e9


def busbw_gbps(nbytes: int, seconds: float, world: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce: the algorithm bandwidth (bytes / time)
    times 2(n-1)/n, what each GPU's links carry in a ring (nccl-tests doc/PERFORMANCE.md)."""
    return nbytes / seconds / 1e9 * 2 * (world - 1) / world


def pairs(count: int) -> list[tuple[int, int]]:
    """Every ordered pair of distinct GPUs: each direction of a link is measured."""
    return [(src, dst) for src in range(count) for dst in range(count) if src != dst]


def chosen(tests: str) -> list[str]:
    """The tests of a comma-separated list, in the script's order; unknown ones refused."""
    asked = [t.strip() for t in tests.split(",") if t.strip()]
    unknown = [t for t in asked if t not in TESTS]
    if unknown:
        raise ValueError(f"unknown test(s) {', '.join(unknown)}; known: {', '.join(TESTS)}")
    return [t for t in TESTS if t in asked]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, for the NCCL rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def error_doc(message: str) -> dict:
    return {"tool": "torch_measure", "version": VERSION, "error": message}


# --- measuring (torch from here on) ---------------------------------------------------


def _timed(torch, device: int, run, iters: int) -> float:
    """Seconds per call of `run`, after the warm-up, by CUDA events on `device`."""
    with torch.cuda.device(device):
        for _ in range(WARMUP):
            run()
        torch.cuda.synchronize(device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000 / iters


def _gemm(torch, device: int) -> list[dict]:
    major, _ = torch.cuda.get_device_capability(device)
    out = []
    half = torch.bfloat16 if major >= 8 else torch.float16
    kinds = [("bf16" if major >= 8 else "fp16", half)]
    if major >= 8:
        kinds.append(("tf32", torch.float32))
    for name, dtype in kinds:
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        a = torch.randn(GEMM_N, GEMM_N, device=device, dtype=dtype)
        b = torch.randn(GEMM_N, GEMM_N, device=device, dtype=dtype)
        c = torch.empty(GEMM_N, GEMM_N, device=device, dtype=dtype)
        seconds = _timed(torch, device, lambda a=a, b=b, c=c: torch.matmul(a, b, out=c), ITERS)
        out.append(
            {"gpu": device, "dtype": name, "n": GEMM_N, "tflops": gemm_tflops(GEMM_N, seconds)}
        )
        del a, b, c
    return out


def _memory(torch, device: int) -> dict:
    free, _ = torch.cuda.mem_get_info(device)
    nbytes = min(COPY_BYTES, free // 4)
    x = torch.empty(nbytes, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    seconds = _timed(torch, device, lambda: y.copy_(x), ITERS)
    return {"gpu": device, "bytes": nbytes, "gbps": copy_gbps(nbytes, seconds)}


def per_gpu_worker(device: int, tests: list[str]) -> dict:
    """One GPU's gemm and memory tests, in a process of its own."""
    import torch

    found: dict = {"gemm": [], "memory": [], "errors": []}
    for test in tests:
        try:
            if test == "gemm":
                found["gemm"] = _gemm(torch, device)
            elif test == "memory":
                found["memory"] = [_memory(torch, device)]
        except Exception as e:  # one GPU's failure is a finding, not the script's end
            found["errors"].append({"test": test, "gpu": device, "error": str(e)[:500]})
    return found


def _pcie(torch, device: int) -> dict:
    host = torch.empty(HOST_BYTES, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(HOST_BYTES, dtype=torch.uint8, device=device)
    h2d = _timed(torch, device, lambda: dev.copy_(host, non_blocking=True), ITERS)
    d2h = _timed(torch, device, lambda: host.copy_(dev, non_blocking=True), ITERS)
    return {
        "gpu": device,
        "bytes": HOST_BYTES,
        "h2d_gbps": transfer_gbps(HOST_BYTES, h2d),
        "d2h_gbps": transfer_gbps(HOST_BYTES, d2h),
    }


def _p2p(torch, src: int, dst: int) -> dict:
    a = torch.empty(P2P_BYTES, dtype=torch.uint8, device=src)
    b = torch.empty(P2P_BYTES, dtype=torch.uint8, device=dst)
    seconds = _timed(torch, src, lambda: b.copy_(a, non_blocking=True), ITERS)
    small_a, small_b = a[:LATENCY_BYTES], b[:LATENCY_BYTES]
    began = time.perf_counter()
    for _ in range(LATENCY_ITERS):
        small_b.copy_(small_a)
        torch.cuda.synchronize(dst)
    latency = (time.perf_counter() - began) / LATENCY_ITERS
    return {
        "src": src,
        "dst": dst,
        "peer_access": torch.cuda.can_device_access_peer(src, dst),
        "bytes": P2P_BYTES,
        "gbps": transfer_gbps(P2P_BYTES, seconds),
        "latency_us": latency * 1e6,
    }


def allreduce_worker(rank: int, world: int, port: int, queue) -> None:
    """One rank of the all-reduce; rank 0 puts the result (or any rank its error)."""
    import torch
    import torch.distributed as dist

    try:
        torch.cuda.set_device(rank)
        dist.init_process_group(
            "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
        )
        t = torch.ones(ALLREDUCE_BYTES // 4, dtype=torch.float32, device=rank)
        dist.barrier()
        seconds = _timed(torch, rank, lambda: dist.all_reduce(t), ITERS)
        dist.destroy_process_group()
        if rank == 0:
            queue.put(
                {
                    "gpus": world,
                    "bytes": ALLREDUCE_BYTES,
                    "algbw_gbps": transfer_gbps(ALLREDUCE_BYTES, seconds),
                    "busbw_gbps": busbw_gbps(ALLREDUCE_BYTES, seconds, world),
                }
            )
    except Exception as e:
        queue.put({"error": f"rank {rank}: {str(e)[:500]}"})


def _allreduce(mp, world: int) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(target=allreduce_worker, args=(r, world, port, queue)) for r in range(world)
    ]
    for p in procs:
        p.start()
    try:
        answer = queue.get(timeout=120)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer


def _describe(torch, device: int) -> dict:
    props = torch.cuda.get_device_properties(device)
    return {
        "index": device,
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "memory_bytes": props.total_memory,
    }


def measure(torch, tests: list[str]) -> dict:
    import multiprocessing as mp

    count = torch.cuda.device_count()
    doc = {
        "tool": "torch_measure",
        "version": VERSION,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpus": [_describe(torch, i) for i in range(count)],
        "results": {},
        "errors": [],
    }
    results, errors = doc["results"], doc["errors"]
    per_gpu = [t for t in tests if t in ("gemm", "memory")]
    if per_gpu:
        with mp.get_context("spawn").Pool(count) as pool:
            found = pool.starmap(per_gpu_worker, [(i, per_gpu) for i in range(count)])
        for t in per_gpu:
            results[t] = [row for f in found for row in f[t]]
        errors += [e for f in found for e in f["errors"]]
    if "pcie" in tests:
        results["pcie"] = _each(errors, "pcie", [(_pcie, (torch, i)) for i in range(count)])
    if "p2p" in tests and count > 1:
        results["p2p"] = _each(errors, "p2p", [(_p2p, (torch, s, d)) for s, d in pairs(count)])
    if "allreduce" in tests and count > 1:
        try:
            results["allreduce"] = _allreduce(mp, count)
        except Exception as e:
            errors.append({"test": "allreduce", "error": str(e)[:500]})
    return doc


def _each(errors: list, test: str, calls: list) -> list[dict]:
    out = []
    for fn, args in calls:
        try:
            out.append(fn(*args))
        except Exception as e:
            errors.append({"test": test, "where": [a for a in args[1:]], "error": str(e)[:500]})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON (the only output)")
    parser.add_argument("--tests", default=",".join(TESTS))
    args = parser.parse_args(argv)
    try:
        tests = chosen(args.tests)
    except ValueError as e:
        print(json.dumps(error_doc(str(e))))
        return 2
    os.environ["CUDA_DEVICE_ORDER"] = DEVICE_ORDER  # before CUDA starts
    try:
        import torch
    except ImportError as e:
        print(json.dumps(error_doc(f"torch cannot be imported by {sys.executable}: {e}")))
        return 2
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        built = torch.version.cuda or "no CUDA"
        print(json.dumps(error_doc(f"torch {torch.__version__} ({built}) finds no CUDA GPU")))
        return 2
    print(json.dumps(measure(torch, tests)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
