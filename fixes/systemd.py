"""What fixes ask of systemd units: where a unit file is, whether it is enabled."""

from __future__ import annotations

UNIT_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
WANTS = ("multi-user.target.wants", "graphical.target.wants")


def unit_file(host, unit: str) -> str:
    """The path of `unit`'s file, "" when it is not installed."""
    return next((p for p in (f"{d}/{unit}" for d in UNIT_DIRS) if host.read(p).ok), "")


def enabled(host, unit: str) -> bool:
    """Enabled for the boot: its link in a target's .wants folder (what `systemctl
    enable` makes), read without running systemctl, so a temporary root answers too."""
    return any(host.readlink(f"/etc/systemd/system/{w}/{unit}").ok for w in WANTS)
