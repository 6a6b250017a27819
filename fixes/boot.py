"""Fixes that change the kernel command line of the next boots, through the boot loader's
defaults (`kernel_args`, shared by every such fix), and the first of them: the IOMMU in
passthrough mode."""

from __future__ import annotations

import re
from collections.abc import Sequence

from dldoctor.facts import FactFailed, Facts
from dldoctor.facts.acs import iommu
from dldoctor.facts.cpu import cpu_info
from dldoctor.facts.system import kernel_cmdline
from dldoctor.fixes.gpu import family
from dldoctor.fixes.looking import names_in
from dldoctor.fixes.plan import Plan, RunCommand, Step, WriteFile
from dldoctor.host.base import ProbeFailed
from dldoctor.policy import Policy

GRUB_DEFAULTS = "/etc/default/grub"
GRUB_DEFAULTS_D = "/etc/default/grub.d"
GRUBBY = ("/usr/sbin/grubby", "/sbin/grubby")
BIOS_GRUB_CFG = "/boot/grub2/grub.cfg"
EFI_DIR = "/boot/efi/EFI"

# One assignment of GRUB_CMDLINE_LINUX or GRUB_CMDLINE_LINUX_DEFAULT that can be edited
# as a list of words: double-quoted without escapes or command substitution, single-quoted,
# or a bare word; a trailing comment is kept.
_SETS = re.compile(r"\s*(?:export\s+)?GRUB_CMDLINE_LINUX(?:_DEFAULT)?=")
_ASSIGNMENT = re.compile(
    r"(?P<head>\s*(?:export\s+)?(?P<name>GRUB_CMDLINE_LINUX(?:_DEFAULT)?)=)"
    r"""(?:"(?P<dq>[^"\\`]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s"'\\`$;&|<>()#]*))"""
    r"(?P<tail>\s*(?:#.*)?)"
)


def _key(arg: str) -> str:
    return arg.partition("=")[0]


def _put(value: str, arg: str) -> str:
    """`value` with every word named like `arg` replaced by `arg`."""
    word = re.compile(rf"(?<!\S){re.escape(_key(arg))}(?:=\S*)?(?!\S)")
    return word.sub(lambda _: arg, value)


def edit_grub_defaults(text: str, args: Sequence[str]) -> str | None:
    """/etc/default/grub with `args` on the kernel command line; None when it sets the
    command line in a way this does not edit safely (a continued line, an escape).

    An argument whose name is already in GRUB_CMDLINE_LINUX or GRUB_CMDLINE_LINUX_DEFAULT
    is set where it is (grub writes _DEFAULT after the other, so a conflicting value left
    there would win); the others are added to the last GRUB_CMDLINE_LINUX, which every
    entry gets, recovery ones included. Every other byte is kept."""
    lines = text.splitlines(keepends=True)
    found: dict[int, dict[str, str]] = {}
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        if not _SETS.match(body):
            continue
        m = _ASSIGNMENT.fullmatch(body)
        if m is None:
            return None
        quote = '"' if m["dq"] is not None else "'" if m["sq"] is not None else ""
        value = next(v for v in (m["dq"], m["sq"], m["bare"]) if v is not None)
        found[i] = {**m.groupdict(), "quote": quote, "value": value, "end": line[len(body) :]}
    missing = []
    for arg in args:
        named = [i for i, a in found.items() if _key(arg) in map(_key, a["value"].split())]
        for i in named:
            found[i]["value"] = _put(found[i]["value"], arg)
        if not named:
            missing.append(arg)
    linux = [i for i, a in found.items() if a["name"] == "GRUB_CMDLINE_LINUX"]
    if missing and linux:
        a = found[linux[-1]]
        space = " " if a["value"].strip() and not a["value"].endswith(" ") else ""
        a["value"] += space + " ".join(missing)
        a["quote"] = a["quote"] or '"'  # a bare word gets company: quoted now
    for i, a in found.items():
        lines[i] = f"{a['head']}{a['quote']}{a['value']}{a['quote']}{a['tail']}{a['end']}"
    new = "".join(lines)
    if missing and not linux:
        new += "" if not new or new.endswith("\n") else "\n"
        new += f'GRUB_CMDLINE_LINUX="{" ".join(missing)}"\n'
    return new


def _exists(host, path: str) -> bool:
    folder, _, name = path.rpartition("/")
    return name in names_in(host, folder or "/")


def _grub_cfg(host) -> str:
    """The grub.cfg that grub2-mkconfig must write: the EFI one when the machine booted
    through EFI, else the BIOS one; "" when that is not clear here."""
    efi = [f"{EFI_DIR}/{d}/grub.cfg" for d in names_in(host, EFI_DIR) if d != "BOOT"]
    efi = [p for p in efi if _exists(host, p)]
    bios = [BIOS_GRUB_CFG] if _exists(host, BIOS_GRUB_CFG) else []
    choices = (efi if host.listdir("/sys/firmware/efi").ok else bios) or efi + bios
    return choices[0] if len(choices) == 1 else ""


def _overridden_by(host) -> tuple[str, ...]:
    """Debian's grub-mkconfig reads /etc/default/grub.d/*.cfg after /etc/default/grub."""
    names = names_in(host, GRUB_DEFAULTS_D, ".cfg")
    return tuple(
        f"{GRUB_DEFAULTS_D}/{n}"
        for n in names
        if "GRUB_CMDLINE_LINUX" in host.read(f"{GRUB_DEFAULTS_D}/{n}").text
    )


def kernel_args(facts: Facts, args: Sequence[str]) -> tuple[tuple[Step, ...], tuple[str, ...]]:
    """The steps that put `args` ("name=value" or "name") on the kernel command line of
    every boot from the next one on, for this host's distribution family, and notes: the
    instructions instead of steps where nothing can be changed safely here.

    Debian/Ubuntu: /etc/default/grub, then update-grub. RHEL family: /etc/default/grub (for
    the kernels installed later) and grubby on the boot entries there are, or, without
    grubby, grub2-mkconfig. An argument already there is not added twice; one of the
    same name with another value is replaced."""
    host = facts.host
    how = f"add {' '.join(args)} to the kernel command line of your boot loader and reboot"
    kind = family(facts)
    answer = host.read(GRUB_DEFAULTS)
    if not kind:
        return (), (f"unknown distribution: {how}",)
    if not answer.ok:
        return (), (f"no {GRUB_DEFAULTS} (a boot loader other than GRUB?): {how}",)
    old = answer.value.decode("utf-8", "surrogateescape")
    new = edit_grub_defaults(old, args)
    if new is None:
        return (), (
            f"{GRUB_DEFAULTS} sets the command line in a way dldoctor does not edit: {how}",
        )
    edit = (WriteFile(GRUB_DEFAULTS, new.encode("utf-8", "surrogateescape")),) if new != old else ()
    if kind == "debian":
        notes = tuple(
            f"{other} also sets the kernel command line, after {GRUB_DEFAULTS}: check that "
            f"it keeps {' '.join(args)}"
            for other in _overridden_by(host)
        )
        return (*edit, RunCommand(("update-grub",), regenerate=True)), notes
    if any(_exists(host, p) for p in GRUBBY):
        try:
            running = facts.get(kernel_cmdline).text.split()
        except ProbeFailed as failed:  # read as empty, undo would remove what was there
            return (), (f"the running kernel's command line: {failed.answer.describe()}: {how}",)
        steps = (*edit, *_grubby(args, running))
        there = f"{' '.join(args)} already in {GRUB_DEFAULTS} and on the running kernel's"
        return steps, () if steps else (f"{there} command line: nothing to change",)
    cfg = _grub_cfg(host)
    if not cfg:
        return (), (f"no grubby, and no single grub.cfg ({BIOS_GRUB_CFG} or "
                    f"{EFI_DIR}/<id>/grub.cfg) to regenerate: {how}",)  # fmt: skip
    return (*edit, RunCommand(("grub2-mkconfig", "-o", cfg), regenerate=True)), ()


def _grubby(args: Sequence[str], running: Sequence[str]) -> tuple[RunCommand, ...]:
    """grubby on every boot entry (BLS entries on RHEL 8 and later). Its undo removes what
    it added and puts back what it replaced, as the running kernel's command line had it;
    arguments the running kernel already has are not given, so undo never removes them."""
    new = [a for a in args if a not in running]
    if not new:
        return ()
    replaced = [w for w in running if _key(w) in {_key(a) for a in new}]
    undo = ("grubby", "--update-kernel=ALL", f"--remove-args={' '.join(new)}")
    undo += (f"--args={' '.join(replaced)}",) if replaced else ()
    return (RunCommand(("grubby", "--update-kernel=ALL", f"--args={' '.join(new)}"), undo),)


# --- the IOMMU in passthrough mode ------------------------------------------------------

IOMMU_FIX = "fix.pci.iommu_passthrough"


def _intel_iommu_on(facts: Facts) -> str:
    """intel_iommu=on, keeping the other options of a value the host already has
    (sm_on, igfx_off): whether the Intel IOMMU is on without it is a kernel build option
    (CONFIG_INTEL_IOMMU_DEFAULT_ON), so passthrough asks for it explicitly."""
    try:
        have = [p.partition("=")[2] for p in facts.get(iommu).cmdline if _key(p) == "intel_iommu"]
    except (ProbeFailed, FactFailed):
        have = []
    options = [o for o in (have[-1].split(",") if have else ()) if o and o not in ("on", "off")]
    return "intel_iommu=" + ",".join(["on", *options])


def iommu_args(facts: Facts) -> tuple[str, ...]:
    """iommu=pt on x86 (with intel_iommu=on on Intel; the AMD IOMMU is on wherever the
    firmware describes it, and amd_iommu= has no "on"); iommu.passthrough=1, the
    architecture-neutral spelling, elsewhere (Arm: Grace) and where the CPU is unknown."""
    try:
        vendor = facts.get(cpu_info).vendor
    except (ProbeFailed, FactFailed):
        vendor = ""
    if vendor == "GenuineIntel":
        return ("iommu=pt", _intel_iommu_on(facts))
    return ("iommu=pt",) if vendor == "AuthenticAMD" else ("iommu.passthrough=1",)


def iommu_passthrough(facts: Facts, policy: Policy) -> Plan:
    """The host's own devices in IOMMU passthrough (identity) from the next boot on, the
    IOMMU itself left on for the devices given to VMs or containers."""
    args = iommu_args(facts)
    steps, notes = kernel_args(facts, args)
    return Plan(
        IOMMU_FIX,
        f"IOMMU passthrough for the host's devices ({' '.join(args)} on the kernel command line)",
        steps,
        resolves=("pci.iommu",),
        reboot=True,
        notes=notes,
    )
