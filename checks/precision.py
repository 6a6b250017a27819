"""Mixed precision: what the GPUs' tensor cores run natively, from their compute capability."""

from __future__ import annotations

from dldoctor.checks.needs import (
    label,
    nvidia_gpus,
)
from dldoctor.facts import Facts
from dldoctor.facts.nvidia import nvidia
from dldoctor.model import Outcome, passed, skipped
from dldoctor.policy import Policy
from dldoctor.registry import check
from dldoctor.versions import at_least

# Compute capability -> the precisions its tensor cores run natively.
PRECISIONS = (("7.0", "FP16"), ("8.0", "BF16"), ("8.0", "TF32"), ("8.9", "FP8"))
# When only the architecture is known (nvidia-smi's XML): its lowest compute capability.
ARCH_CC = {
    "Pascal": "6.0",
    "Volta": "7.0",
    "Turing": "7.5",
    "Ampere": "8.0",
    "Ada": "8.9",
    "Ada Lovelace": "8.9",
    "Hopper": "9.0",
    "Blackwell": "10.0",
}


def precisions(cc: str) -> list[str]:
    return [name for minimum, name in PRECISIONS if at_least(cc, minimum)]


@check("gpu.precision", "Mixed precision", requires=nvidia_gpus)
def mixed_precision(facts: Facts, policy: Policy) -> Outcome:
    stack = facts.get(nvidia)
    lines, known = [], set()
    for x in stack.gpus:
        cc = x.compute_capability or ARCH_CC.get(x.architecture, "")
        if not cc:
            lines.append(f"{label(x)}: compute capability unknown")
            continue
        known.add(cc)
        shown = f"sm_{cc.replace('.', '')}" if x.compute_capability else f"{x.architecture}"
        fast = precisions(cc)
        lines.append(f"{label(x)}: {shown}, tensor cores: {', '.join(fast) or 'none (FP32 only)'}")
    if not known:
        return skipped("compute capability not reported", lines)
    common = precisions(min(known, key=lambda cc: [int(p) for p in cc.split(".")]))
    if "BF16" in common:
        summary = f"AMP with BF16 runs natively ({', '.join(common)})"
    elif "FP16" in common:
        summary = (
            "AMP with FP16 runs natively; BF16 is emulated (slow) before compute capability 8.0"
        )
    else:
        summary = "no tensor cores: mixed precision brings little"
    return passed(summary, lines)
