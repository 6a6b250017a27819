"""fix.gpu.persistence under a temporary root copied from a fixture host, with a fake
nvidia-smi first on PATH printing a real `nvidia-smi -q -x` capture (an A100 with
persistence mode off) and a fake systemctl/nvidia-smi -pm that switch it on the way the
daemon would: the re-check reads persistence mode through the same nvidia-smi."""

from __future__ import annotations

import os
import shutil

import pytest

from dldoctor.facts import Facts
from dldoctor.fixes import builder
from dldoctor.fixes.gpu import PERSISTENCED_DROPIN
from dldoctor.host.live import LiveHost
from dldoctor.policy import Policy
from tests.support.cli import report_of, run_dldoctor
from tests.support.commands import fake_command
from tests.support.paths import FIXTURES, HOSTS
from tests.support.trees import tree

FIX = "fix.gpu.persistence"
XML = FIXTURES / "corpus/nvidia-smi-xml/telegraf-a100-sxm4-v12.xml"
UNITS = FIXTURES / "systemd"


def _setup(tmp_path, release_from: str, unit: str | None):
    root = tmp_path / "root"
    shutil.copytree(HOSTS / "hgx-h100x8-healthy/files", root, symlinks=True)
    shutil.copy(HOSTS / release_from / "files/etc/os-release", root / "etc/os-release")
    if unit:
        where = root / "usr/lib/systemd/system"
        where.mkdir(parents=True, exist_ok=True)
        shutil.copy(UNITS / unit, where / "nvidia-persistenced.service")
    on = tmp_path / "persistence-on"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "ran.log"
    fake_command(
        bindir,
        "nvidia-smi",
        f"""echo "nvidia-smi $*" >> {log}
case "$1" in
  -pm) if [ "$2" = 1 ]; then touch {on}; else rm -f {on}; fi ;;
  -q) if [ -e {on} ]; then sed 's|<persistence_mode>Disabled|<persistence_mode>Enabled|' {XML}
      else cat {XML}; fi ;;
esac""",
    )
    # The daemon turns persistence mode on unless its ExecStart (the drop-in's, if any)
    # says --no-persistence-mode; stopping it leaves it off.
    dropin = root / PERSISTENCED_DROPIN.lstrip("/")
    unit_file = root / "usr/lib/systemd/system/nvidia-persistenced.service"
    fake_command(
        bindir,
        "systemctl",
        f"""echo "systemctl $*" >> {log}
start() {{ if grep -hs '^ExecStart=/' {dropin} {unit_file} | head -1 | grep -q -- --no-persistence-mode
  then rm -f {on}; else touch {on}; fi; }}
case "$1 $2" in
  "restart "*|"enable --now") start ;;
  "disable --now") rm -f {on} ;;
esac""",
    )
    env = {"PATH": f"{bindir}:{os.environ['PATH']}"}
    return root, log, env


def _ran(log) -> list[str]:
    """What changed something: the commands run, less the re-checks' reads."""
    ran = log.read_text().splitlines() if log.exists() else []
    return [ln for ln in ran if ln != "nvidia-smi -q -x"]


@pytest.mark.parametrize(
    "release_from, unit, commands, dropin",
    [
        # Ubuntu's static unit, started with --no-persistence-mode: an ExecStart override.
        ("hgx-h100x8-healthy", "ubuntu-nvidia-persistenced.service",
         ["systemctl daemon-reload", "systemctl restart nvidia-persistenced.service"], True),
        # NVIDIA's own unit (the RHEL packages ship it): enabled and started.
        ("rhel72-legacy", "nvidia-template-nvidia-persistenced.service",
         ["systemctl enable --now nvidia-persistenced.service"], False),
        # No daemon installed: nvidia-smi until the next reboot.
        ("rhel72-legacy", None, ["nvidia-smi -pm 1"], False),
    ],
)  # fmt: skip
def test_persistence_previewed_applied_fixed_and_undone(
    tmp_path, release_from, unit, commands, dropin
):
    root, log, env = _setup(tmp_path, release_from, unit)
    before = tree(root)
    listing = run_dldoctor("--check", "--json", "--only", "gpu.persistence", "--root", str(root),
                           env=env)  # fmt: skip
    (finding,) = report_of(listing)["findings"]
    assert finding["status"] == "warn" and finding["fixes"] == [FIX]

    preview = run_dldoctor("fix", FIX, "--root", str(root), env=env)
    assert preview.returncode == 0 and "nothing was changed" in preview.stdout
    assert tree(root) == before and _ran(log) == []
    assert ("lasts until the next reboot" in preview.stdout) == (unit is None)

    applied = run_dldoctor("fix", FIX, "--apply", "--yes", "--root", str(root), env=env)
    assert applied.returncode == 0, applied.stderr
    assert "fixed (gpu.persistence pass)" in applied.stdout
    assert _ran(log) == commands
    override = root / PERSISTENCED_DROPIN.lstrip("/")
    assert override.exists() == dropin
    if dropin:
        assert override.read_text().endswith(
            "[Service]\nExecStart=\n"
            "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --verbose\n"
        )

    journal_id = run_dldoctor("fix", "--history", "--root", str(root)).stdout.split()[0]
    undone = run_dldoctor("fix", "--undo", journal_id, "--root", str(root), env=env)
    assert undone.returncode == 0, undone.stderr
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before
    again = report_of(run_dldoctor("--check", "--json", "--only", "gpu.persistence",
                                   "--root", str(root), env=env))  # fmt: skip
    assert again["findings"][0]["status"] == "warn"  # off again, as it was


def test_an_enabled_unit_is_restarted_not_enabled_again(tmp_path):
    root, _, _ = _setup(tmp_path, "rhel72-legacy", "nvidia-template-nvidia-persistenced.service")
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True)
    os.symlink("/usr/lib/systemd/system/nvidia-persistenced.service",
               wants / "nvidia-persistenced.service")  # fmt: skip
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert [s.argv for s in plan.steps] == [("systemctl", "restart", "nvidia-persistenced.service")]
