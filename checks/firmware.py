"""Firmware judged one way for every part: against the policy's `[firmware] minimums`, and
the parts of one model on one host against each other (mixed versions). The checks that use
it live with their parts: `gpu.vbios` (checks/driver.py), `network.firmware`
(checks/network.py), `storage.firmware` (checks/storage.py).

Firmware versions are not all dotted numbers: a VBIOS ends in hex (`96.00.74.00.1F`), an
Intel NIC adds an eetrack id (`4.22 0x80010446 1.3197.0`), an NVMe drive has a code
(`1B2QEXP7`). They are compared part by part: numbers as numbers, `0x` parts as hex, other
parts as text only against a part of the same length; anything else is "cannot compare",
said, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from dldoctor.checks.needs import gpu_words
from dldoctor.model import Outcome, errored, passed, skipped, warned
from dldoctor.policy import Policy

_PARENS = re.compile(r"\([^)]{0,200}\)")  # mlx5's ethtool adds the PSID: "(MT_0000000838)"
_SEP = re.compile(r"[\s.,/_-]+")
MAX_PARTS = 16


@dataclass(frozen=True)
class Part:
    name: str  # how a finding names it: "GPU 0", "mlx5_0", "nvme0", "enp59s0f0"
    model: str  # what a minimum's `match` is looked for in, and what mixed versions group by
    version: str  # "" when the part reports none


def _token(text: str) -> tuple[int, int | str]:
    if text.isdigit():
        return 0, int(text)
    if text[:2].lower() == "0x":
        try:
            return 1, int(text, 16)
        except ValueError:
            pass
    return 2, text.upper()


def _tokens(version: str) -> list[tuple[int, int | str]]:
    parts = [p for p in _SEP.split(_PARENS.sub(" ", version)) if p]
    return [_token(p) for p in parts[:MAX_PARTS] if len(p) <= 40]


def firmware_at_least(found: str, minimum: str) -> bool | None:
    """found >= minimum, part by part; None when they cannot be compared."""
    have, want = _tokens(found), _tokens(minimum)
    if not have or not want:
        return None
    for (kind_a, a), (kind_b, b) in zip(have, want, strict=False):
        if kind_a != kind_b or (kind_a == 2 and len(str(a)) != len(str(b))):
            return None
        if a != b:
            return a > b  # type: ignore[operator]
    # Equal as far as both go: a longer minimum is met only by zeros ("14.23" vs "14.23.0").
    return all(value in (0, "0") for _, value in want[len(have) :])


def _names(parts: list[Part]) -> str:
    names = [p.name for p in parts]
    numbers = [n.removeprefix("GPU ") for n in names]
    if all(n.isdigit() for n in numbers):
        return gpu_words([int(n) for n in numbers])  # "GPU 0-6"
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def mixed_versions(parts: Iterable[Part]) -> list[str]:
    """One line per model whose parts run more than one version, naming who runs which."""
    by_model: dict[str, dict[str, list[Part]]] = {}
    for p in parts:
        if p.version:
            by_model.setdefault(p.model, {}).setdefault(p.version, []).append(p)
    lines = []
    for model, versions in by_model.items():
        if len(versions) > 1:
            # The odd ones out first: the fewest parts on a version.
            order = sorted(versions.items(), key=lambda item: (len(item[1]), item[0]))
            each = "; ".join(f"{v} on {_names(ps)}" for v, ps in order)
            lines.append(f"{model or 'unknown model'}: {len(versions)} versions ({each})")
    return lines


def below_minimums(parts: Iterable[Part], policy: Policy) -> tuple[list[str], list[str]]:
    """(the parts older than a [firmware] minimum that matches their model, the parts a
    minimum matches whose version cannot be compared with it)."""
    old, unjudged = [], []
    for p in parts:
        for rule in policy.firmware.minimums:
            if not rule.match or rule.match.lower() not in p.model.lower():
                continue
            verdict = firmware_at_least(p.version, rule.min_version) if p.version else None
            if verdict is False:
                old.append(f"{p.name} {p.model}: {p.version} older than {rule.min_version}")
            elif verdict is None:
                said = p.version or "no version"
                unjudged.append(f"{p.name}: {said} cannot be compared with {rule.min_version}")
    return old, unjudged


def judge(
    parts: list[Part],
    policy: Policy,
    *,
    what: str,
    none: str,
    notes: Iterable[str] = (),
    unread: Iterable[str] = (),
) -> Outcome:
    """The outcome of a firmware check over `parts` (`what`: "GPU(s)"; `none`: the skip;
    `notes`: said last; `unread`: versions that failed to read, which turn a pass into an
    error: the doctor could not look)."""
    notes, unread = list(notes), list(unread)
    if not parts:
        return skipped(none, list(notes))
    lines = [f"{p.name} {p.model}: {p.version or 'not reported'}" for p in parts]
    lines += notes
    old, unjudged = below_minimums(parts, policy)
    mixed = [] if policy.firmware.allow_mixed else mixed_versions(parts)
    if old:
        return warned(
            f"{len(old)} {what} below the policy's firmware minimum", old + mixed + unjudged + lines
        )
    if mixed:
        return warned(
            mixed[0] if len(mixed) == 1 else f"{len(mixed)} models with mixed firmware",
            mixed + unjudged + lines,
            remediation="Parts of one model on one host should run one firmware: a part "
            "missed by the last update (or swapped in since) behaves apart from its siblings. "
            "Update it to the version the others run, or set [firmware] allow_mixed during a "
            "staged rollout.",
        )
    if unread:
        return errored(
            f"the firmware of {len(unread)} part(s) could not be read", unread + unjudged + lines
        )
    versions = sorted({p.version for p in parts if p.version})
    shown = f": {', '.join(versions[:4])}" if versions else ": no version reported"
    pinned = f"; {len(policy.firmware.minimums)} minimum(s) in the policy" if (
        policy.firmware.minimums) else ""  # fmt: skip
    return passed(f"{len(parts)} {what}{shown}{pinned}", unjudged + lines)
