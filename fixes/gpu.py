"""Fixes for the GPU checks."""

from __future__ import annotations

from dldoctor.facts import Facts
from dldoctor.facts.system import os_release
from dldoctor.fixes.plan import Plan, RunCommand, WriteFile

NOUVEAU_CONF = "/etc/modprobe.d/blacklist-nouveau.conf"
NOUVEAU_LINES = (
    b"# written by dldoctor (fix.gpu.blacklist_nouveau)\n"
    b"blacklist nouveau\noptions nouveau modeset=0\n"
)


def family(facts: Facts) -> str:
    """ "debian", "rhel" or "" (unknown): where the tools of a fix differ."""
    release = facts.get(os_release)
    names = {release.id, *release.id_like}
    if names & {"debian", "ubuntu"}:
        return "debian"
    if names & {"rhel", "fedora", "centos", "rocky", "almalinux", "ol"}:
        return "rhel"
    return ""


INITRAMFS = {"debian": ("update-initramfs", "-u"), "rhel": ("dracut", "-f")}


def blacklist_nouveau(facts: Facts) -> Plan:
    """Nouveau kept from loading at boot: the modprobe.d file, and the initramfs rebuilt
    so that the early boot (which loads GPU drivers from it) obeys it too."""
    steps: list = [WriteFile(NOUVEAU_CONF, NOUVEAU_LINES)]
    notes: tuple[str, ...] = ()
    rebuild = INITRAMFS.get(family(facts))
    if rebuild:
        steps.append(RunCommand(rebuild, regenerate=True))
    else:
        notes = ("unknown distribution: rebuild the initramfs yourself before the reboot",)
    return Plan(
        "fix.gpu.blacklist_nouveau",
        "keep Nouveau from loading (the NVIDIA driver needs the GPU)",
        tuple(steps),
        resolves=("gpu.nouveau",),
        reboot=True,
        notes=notes,
    )
