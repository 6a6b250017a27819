"""Fixes for the GPU checks."""

from __future__ import annotations

from dldoctor.facts import Facts
from dldoctor.facts.nvidia import no_nvidia_device
from dldoctor.facts.system import os_release
from dldoctor.fixes.plan import Plan, RunCommand, WriteFile
from dldoctor.fixes.systemd import enabled, unit_file
from dldoctor.policy import Policy

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


def blacklist_nouveau(facts: Facts, policy: Policy) -> Plan:
    """Nouveau kept from loading at boot: the modprobe.d file, and the initramfs rebuilt
    so that the early boot (which loads GPU drivers from it) obeys it too. Not on a host
    whose PCI bus, read in full, has no NVIDIA device: Nouveau is in no one's way there."""
    if no_nvidia_device(facts):
        return Plan(
            "fix.gpu.blacklist_nouveau",
            "keep Nouveau from loading: not needed here",
            (),
            resolves=("gpu.nouveau",),
            notes=(
                "no NVIDIA device on the PCI bus: Nouveau keeps no NVIDIA driver from a GPU, "
                "so blacklisting it is not needed (unload it with `modprobe -r nouveau` "
                "if it is unwanted)",
            ),
        )
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


PERSISTENCED = "nvidia-persistenced.service"
PERSISTENCED_DROPIN = f"/etc/systemd/system/{PERSISTENCED}.d/90-dldoctor-persistence.conf"


def persistence(facts: Facts, policy: Policy) -> Plan:
    """Persistence mode through the driver's daemon where its unit is installed (enabled,
    so it survives reboots); `nvidia-smi -pm 1` only where it is not."""
    host = facts.host
    unit = unit_file(host, PERSISTENCED)
    title = "persistence mode on, so each job does not pay the GPU's initialisation"
    if not unit:
        return Plan(
            "fix.gpu.persistence",
            title,
            (RunCommand(("nvidia-smi", "-pm", "1"), undo_argv=("nvidia-smi", "-pm", "0")),),
            resolves=("gpu.persistence",),
            notes=(
                "no nvidia-persistenced unit here: this lasts until the next reboot; "
                "install the driver's nvidia-persistenced for a lasting one",
            ),  # fmt: skip
        )
    steps: list = []
    text = host.read(unit).text
    starts = [ln for ln in text.splitlines() if ln.startswith("ExecStart=")]
    if starts and "--no-persistence-mode" in starts[-1]:
        # Ubuntu's packaged unit starts the daemon with persistence mode off: an override
        # of ExecStart (the empty line clears the packaged one) without that flag.
        start = " ".join(a for a in starts[-1].split() if a != "--no-persistence-mode")
        steps += [
            WriteFile(
                PERSISTENCED_DROPIN,
                b"# written by dldoctor (fix.gpu.persistence)\n[Service]\nExecStart=\n"
                + start.encode()
                + b"\n",
            ),
            RunCommand(("systemctl", "daemon-reload"), regenerate=True),
        ]
    if enabled(host, PERSISTENCED) or "[Install]" not in text:
        # Running already (a static unit is started by the driver's udev rule, and cannot
        # be enabled): restarted, and restarted again on undo once the unit is as it was.
        steps.append(RunCommand(("systemctl", "restart", PERSISTENCED), regenerate=True))
    else:
        steps.append(
            RunCommand(
                ("systemctl", "enable", "--now", PERSISTENCED),
                undo_argv=("systemctl", "disable", "--now", PERSISTENCED),
            )
        )
    return Plan("fix.gpu.persistence", title, tuple(steps), resolves=("gpu.persistence",))
