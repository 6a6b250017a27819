"""fix.pci.iommu_passthrough (and kernel_args under it) under a temporary root copied from
the IOMMU-translated fixture host: previewed, applied with the family's boot loader tool
(recorded, not run), re-checked on the changed root, verified after a simulated boot,
undone byte for byte; and once through `dldoctor fix` with a fake update-grub."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from dldoctor.facts import Facts
from dldoctor.facts.acs import Iommu, iommu
from dldoctor.facts.cpu import CpuInfo, cpu_info
from dldoctor.fixes import builder
from dldoctor.fixes.boot import GRUB_DEFAULTS, edit_grub_defaults, iommu_args, kernel_args
from dldoctor.fixes.plan import FixError, Journal, RunCommand, Target, WriteFile, apply, undo
from dldoctor.fixes.verify import BOOT_ID, after_boot, recheck, verdict
from dldoctor.host.live import LiveHost
from dldoctor.policy import Policy
from tests.support.cli import report_of, run_dldoctor
from tests.support.commands import fake_command
from tests.support.faults import FaultyHost
from tests.support.fixroots import IOMMU_HOST, IOMMU_PASSTHROUGH, iommu_root
from tests.support.paths import HOSTS
from tests.support.recording import Recorder
from tests.support.trees import tree

HOST = IOMMU_HOST
FIX = IOMMU_PASSTHROUGH
KERNEL = "BOOT_IMAGE=/vmlinuz-5.15.0-105-generic root=/dev/nvme0n1p2 ro"
GROUP_TYPE = "sys/kernel/iommu_groups/0/type"
# /etc/default/grub as anaconda writes it on RHEL 8 (BLS entries, grubby edits them).
RHEL_GRUB = """GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR="$(sed 's, release .*$,,g' /etc/system-release)"
GRUB_DEFAULT=saved
GRUB_DISABLE_SUBMENU=true
GRUB_TERMINAL_OUTPUT="console"
GRUB_CMDLINE_LINUX="crashkernel=auto rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap rhgb quiet"
GRUB_DISABLE_RECOVERY="true"
GRUB_ENABLE_BLSCFG=true
"""
RHEL_LINE = (
    'GRUB_CMDLINE_LINUX="crashkernel=auto rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap rhgb quiet'
)


def _root(tmp_path, *, rhel=False, amd=False, grubby=False, grub_cfg=""):
    """The fixture host's files, as a RHEL-family host (its own /etc/default/grub, grubby
    or a grub.cfg), or with an AMD CPU (no intel_iommu=on anywhere, an AMD-Vi unit)."""
    root = iommu_root(tmp_path)
    if rhel:
        shutil.copy(HOSTS / "rhel72-legacy/files/etc/os-release", root / "etc/os-release")
        (root / GRUB_DEFAULTS.lstrip("/")).write_text(RHEL_GRUB)
        (root / "proc/cmdline").write_text(
            "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-4.18.0-513.5.1.el8_9.x86_64 root=/dev/mapper/"
            "rhel-root ro crashkernel=auto rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap rhgb quiet\n"
        )
    if amd:
        cpuinfo = root / "proc/cpuinfo"
        cpuinfo.write_text(cpuinfo.read_text().replace("GenuineIntel", "AuthenticAMD"))
        for name in ("proc/cmdline", GRUB_DEFAULTS.lstrip("/")):
            (root / name).write_text((root / name).read_text().replace("intel_iommu=on", ""))
        (root / "sys/class/iommu/dmar0").rename(root / "sys/class/iommu/ivhd0")
    if grubby:
        (root / "usr/sbin").mkdir(parents=True)
        (root / "usr/sbin/grubby").write_text("#!/bin/sh\n")
    if grub_cfg:
        (root / grub_cfg.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / grub_cfg.lstrip("/")).write_text("### BEGIN /etc/grub.d/10_linux ###\n")
        if grub_cfg.startswith("/boot/efi/"):
            (root / "sys/firmware/efi").mkdir(parents=True)
    return root


def boot_with(root, added: str) -> None:
    """The boot after the fix: the kernel started with `added` on its command line, the
    IOMMU's groups in the identity (passthrough) domain, a new boot id."""
    cmdline = root / "proc/cmdline"
    cmdline.write_text(cmdline.read_text().strip() + f" {added}\n")
    (root / GROUP_TYPE).write_text("identity\n")
    (root / BOOT_ID.lstrip("/")).write_text("22222222-boot-two\n")


GRUB_CFG_BIOS, GRUB_CFG_EFI = "/boot/grub2/grub.cfg", "/boot/efi/EFI/redhat/grub.cfg"
CASES = {  # root options, the edited line, the commands of apply, of undo, the boot's addition
    "ubuntu-intel": (
        {},
        'GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt"',  # intel_iommu=on was there: kept once
        [["update-grub"]],
        [["update-grub"]],
        "iommu=pt",
    ),
    "ubuntu-amd": (
        {"amd": True},
        'GRUB_CMDLINE_LINUX="iommu=pt"',
        [["update-grub"]],
        [["update-grub"]],
        "iommu=pt",
    ),  # fmt: skip
    "rhel8-grubby-intel": (
        {"rhel": True, "grubby": True},
        RHEL_LINE + ' iommu=pt intel_iommu=on"',
        [["grubby", "--update-kernel=ALL", "--args=iommu=pt intel_iommu=on"]],
        [["grubby", "--update-kernel=ALL", "--remove-args=iommu=pt intel_iommu=on"]],
        "iommu=pt intel_iommu=on",
    ),
    "rhel8-grubby-amd": (
        {"rhel": True, "grubby": True, "amd": True},
        RHEL_LINE + ' iommu=pt"',
        [["grubby", "--update-kernel=ALL", "--args=iommu=pt"]],
        [["grubby", "--update-kernel=ALL", "--remove-args=iommu=pt"]],
        "iommu=pt",
    ),
    "rhel7-bios-amd": (
        {"rhel": True, "amd": True, "grub_cfg": GRUB_CFG_BIOS},
        RHEL_LINE + ' iommu=pt"',
        [["grub2-mkconfig", "-o", GRUB_CFG_BIOS]],
        [["grub2-mkconfig", "-o", GRUB_CFG_BIOS]],
        "iommu=pt",
    ),
    "rhel7-efi-intel": (
        {"rhel": True, "grub_cfg": GRUB_CFG_EFI},
        RHEL_LINE + ' iommu=pt intel_iommu=on"',
        [["grub2-mkconfig", "-o", GRUB_CFG_EFI]],
        [["grub2-mkconfig", "-o", GRUB_CFG_EFI]],
        "iommu=pt intel_iommu=on",
    ),
}


def _grub_line(root) -> str:
    text = (root / GRUB_DEFAULTS.lstrip("/")).read_text()
    return re.search(r"^GRUB_CMDLINE_LINUX=.*$", text, re.M).group(0)


@pytest.mark.parametrize("case", CASES)
def test_previewed_applied_rechecked_and_undone_byte_for_byte(tmp_path, case):
    options, line, commands, undo_commands, _ = CASES[case]
    root = _root(tmp_path, **options)
    old_file = (root / GRUB_DEFAULTS.lstrip("/")).read_text()
    old_line = _grub_line(root)
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    runner = Recorder()
    target = Target(str(root), runner)
    before = tree(root)
    text = plan.preview(target)
    assert tree(root) == before and runner.ran == []
    assert f"-{old_line}\n+{line}\n" in text and "a reboot is needed" in text

    record = apply(plan, target)
    assert runner.ran == commands
    # Exactly that line changed: every other byte of the file is as it was.
    assert (root / GRUB_DEFAULTS.lstrip("/")).read_text() == old_file.replace(old_line, line)
    statuses = recheck(plan.resolves, LiveHost(str(root)), Policy())
    assert statuses == {"pci.iommu": "warn"}  # the running kernel still translates
    assert verdict(plan, statuses, rebooted=False) == "pending a reboot"

    runner.ran.clear()
    undo(record["id"], target)
    assert runner.ran == undo_commands  # grubby's own undo, or grub.cfg rebuilt after the file
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before


@pytest.mark.parametrize("case", CASES)
def test_verified_after_the_reboot(tmp_path, case):
    options, _, _, _, added = CASES[case]
    root = _root(tmp_path, **options)
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    target = Target(str(root), Recorder())
    record = apply(plan, target)
    record["verdict"] = verdict(
        plan, recheck(plan.resolves, LiveHost(str(root)), Policy()), rebooted=False
    )
    Journal(target).save(record)
    assert (
        after_boot(target, LiveHost(str(root)), Policy()) == []
    )  # same boot: nothing to judge yet

    boot_with(root, added)
    (judged,) = after_boot(target, LiveHost(str(root)), Policy())
    assert judged["verdict"] == "verified after reboot"
    assert recheck(plan.resolves, LiveHost(str(root)), Policy()) == {"pci.iommu": "pass"}


def test_grubby_leaves_what_the_kernel_has_and_undo_puts_back_what_it_replaced(tmp_path):
    root = _root(tmp_path, rhel=True, grubby=True)
    cmdline = root / "proc/cmdline"
    cmdline.write_text(cmdline.read_text().strip() + " intel_iommu=on iommu=nopt\n")
    (step,) = [
        s for s in builder(FIX)(Facts(LiveHost(str(root))), Policy()).steps if s.touches() == ()
    ]
    assert step == RunCommand(
        ("grubby", "--update-kernel=ALL", "--args=iommu=pt"),
        ("grubby", "--update-kernel=ALL", "--remove-args=iommu=pt", "--args=iommu=nopt"),
    )


def test_edit_grub_defaults_replaces_a_conflict_where_it_is_and_adds_once():
    text = (
        "# site\nGRUB_CMDLINE_LINUX_DEFAULT='quiet iommu=nopt'  # for the NICs\n"
        "GRUB_CMDLINE_LINUX=console=ttyS0\r\n"
    )
    args = ("iommu=pt", "intel_iommu=on")
    edited = edit_grub_defaults(text, args)
    assert edited == (
        "# site\nGRUB_CMDLINE_LINUX_DEFAULT='quiet iommu=pt'  # for the NICs\n"
        'GRUB_CMDLINE_LINUX="console=ttyS0 intel_iommu=on"\r\n'
    )
    assert edit_grub_defaults(edited, args) == edited  # applied twice: nothing added twice
    # iommu.passthrough and intel_iommu are other parameters than iommu.
    other = 'GRUB_CMDLINE_LINUX="iommu.passthrough=0 intel_iommu=on"\n'
    assert edit_grub_defaults(other, ("iommu=pt",)) == (
        'GRUB_CMDLINE_LINUX="iommu.passthrough=0 intel_iommu=on iommu=pt"\n'
    )
    assert edit_grub_defaults("GRUB_TIMEOUT=5", ("iommu=pt",)) == (
        'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="iommu=pt"\n'
    )


@pytest.mark.parametrize(
    "line",
    ['GRUB_CMDLINE_LINUX="a \\"b\\""\n', 'GRUB_CMDLINE_LINUX="quiet \\\n  splash"\n',
     "GRUB_CMDLINE_LINUX=$EXTRA\n", 'GRUB_CMDLINE_LINUX="`cat /etc/args`"\n'],
)  # fmt: skip
def test_a_command_line_it_cannot_edit_safely_is_left_alone(tmp_path, line):
    assert edit_grub_defaults(line, ("iommu=pt",)) is None
    root = _root(tmp_path)
    (root / GRUB_DEFAULTS.lstrip("/")).write_text(line)
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert plan.steps == () and "does not edit" in plan.notes[0]


def test_no_guessed_tool_where_the_boot_loader_is_unknown(tmp_path):
    root = _root(tmp_path)
    (root / "etc/os-release").write_text('ID=plan9\nNAME="Plan 9"\n')
    unknown = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert unknown.steps == () and unknown.notes == (
        "unknown distribution: add iommu=pt intel_iommu=on to the kernel command line of "
        "your boot loader and reboot",
    )
    with pytest.raises(FixError, match="nothing to apply"):
        apply(unknown, Target(str(root), Recorder()))
    shutil.copy(HOST / "files/etc/os-release", root / "etc/os-release")
    (root / GRUB_DEFAULTS.lstrip("/")).unlink()  # systemd-boot, say
    (note,) = builder(FIX)(Facts(LiveHost(str(root))), Policy()).notes
    assert note.startswith(f"no {GRUB_DEFAULTS}")
    rhel7 = _root(tmp_path / "rhel", rhel=True)  # neither grubby nor a grub.cfg
    (note,) = builder(FIX)(Facts(LiveHost(str(rhel7))), Policy()).notes
    assert note.startswith("no grubby, and no single grub.cfg")


@pytest.mark.parametrize(
    "efi_boot, efi_ids, expected",
    [
        (False, ("redhat",), GRUB_CFG_BIOS),  # both there: the firmware booted through BIOS
        (True, ("redhat",), GRUB_CFG_EFI),
        (True, ("centos", "redhat"), ""),  # which one the firmware reads is not known here
    ],
)
def test_grub2_mkconfig_writes_the_grub_cfg_the_firmware_boots(
    tmp_path, efi_boot, efi_ids, expected
):
    root = _root(tmp_path, rhel=True, grub_cfg=GRUB_CFG_BIOS)
    for name in (*efi_ids, "BOOT"):
        (root / f"boot/efi/EFI/{name}").mkdir(parents=True)
        (root / f"boot/efi/EFI/{name}/grub.cfg").write_text("")
    if efi_boot:
        (root / "sys/firmware/efi").mkdir(parents=True)
    steps, notes = kernel_args(Facts(LiveHost(str(root))), ("iommu=pt",))
    if expected:
        assert steps[-1] == RunCommand(("grub2-mkconfig", "-o", expected), regenerate=True)
    else:
        assert steps == () and notes[0].startswith("no grubby, and no single grub.cfg")


def test_a_grub_d_file_that_sets_the_command_line_is_named(tmp_path):
    root = _root(tmp_path)
    (root / "etc/default/grub.d").mkdir()
    (root / "etc/default/grub.d/50-cloudimg-settings.cfg").write_text(
        'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"\n'
    )
    (root / "etc/default/grub.d/init-select.cfg").write_text("GRUB_TIMEOUT=1\n")
    steps, notes = kernel_args(Facts(LiveHost(str(root))), ("iommu=pt",))
    assert [type(s) for s in steps] == [WriteFile, RunCommand]
    assert notes == (
        "/etc/default/grub.d/50-cloudimg-settings.cfg also sets the kernel command line, "
        "after /etc/default/grub: check that it keeps iommu=pt",
    )


@pytest.mark.parametrize(
    "vendor, cmdline, expected",
    [
        ("GenuineIntel", (), ("iommu=pt", "intel_iommu=on")),
        ("GenuineIntel", ("intel_iommu=sm_on",), ("iommu=pt", "intel_iommu=on,sm_on")),
        ("GenuineIntel", ("intel_iommu=on,igfx_off",), ("iommu=pt", "intel_iommu=on,igfx_off")),
        ("AuthenticAMD", ("amd_iommu=on",), ("iommu=pt",)),
        ("NVIDIA", (), ("iommu.passthrough=1",)),  # Grace: iommu=pt is an x86 parameter
        ("", (), ("iommu.passthrough=1",)),
    ],
)
def test_the_arguments_per_cpu_vendor(vendor, cmdline, expected):
    facts = Facts.given(
        {
            cpu_info: CpuInfo("x", vendor, 1, 1, 1, frozenset()),
            iommu: Iommu(True, "translated", cmdline),
        }
    )
    assert iommu_args(facts) == expected


def test_the_finding_offers_the_fix():
    report = report_of(run_dldoctor("--check", "--json", "--from", str(HOST)))
    (finding,) = [f for f in report["findings"] if f["id"] == "pci.iommu"]
    assert finding["status"] == "warn" and finding["fixes"] == [FIX]


def test_through_the_cli_with_a_fake_update_grub(tmp_path):
    """update-grub writes grub.cfg from /etc/default/grub the way grub-mkconfig's
    10_linux joins the two variables; the boot then starts the kernel with that line."""
    root = _root(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    cfg = root / "boot/grub/grub.cfg"
    fake_command(
        bindir,
        "update-grub",
        f"""set -e
eval "$(grep -E '^GRUB_CMDLINE_LINUX(_DEFAULT)?=' {root}/etc/default/grub)"
mkdir -p {cfg.parent}
echo "linux /vmlinuz-5.15.0-105-generic root=/dev/nvme0n1p2 ro $GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT" > {cfg}""",
    )
    env = {"PATH": f"{bindir}:{os.environ['PATH']}"}
    subprocess.run([bindir / "update-grub"], check=True)  # the grub.cfg the host booted from
    before = tree(root)

    applied = run_dldoctor("fix", FIX, "--apply", "--yes", "--root", str(root), env=env)
    assert applied.returncode == 0, applied.stderr
    assert "pending a reboot (pci.iommu warn)" in applied.stdout
    linux = cfg.read_text().split(" ", 1)[1].strip()
    assert linux == "/vmlinuz-5.15.0-105-generic root=/dev/nvme0n1p2 ro intel_iommu=on iommu=pt"

    (root / "proc/cmdline").write_text(f"BOOT_IMAGE={linux}\n")  # the boot, from grub.cfg
    (root / GROUP_TYPE).write_text("identity\n")
    (root / BOOT_ID.lstrip("/")).write_text("22222222-boot-two\n")
    history = run_dldoctor("fix", "--history", "--root", str(root))
    assert f"{FIX}" in history.stdout and "applied: verified after reboot" in history.stdout

    journal_id = history.stdout.split()[0]
    undone = run_dldoctor("fix", "--undo", journal_id, "--root", str(root), env=env)
    assert undone.returncode == 0, undone.stderr
    booted = {"proc/cmdline", GROUP_TYPE, BOOT_ID.lstrip("/")}
    after = {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k}
    assert {k: v for k, v in after.items() if k not in booted} == {
        k: v for k, v in before.items() if k not in booted
    }  # /etc/default/grub restored, and grub.cfg rebuilt from it as it was


def test_grubby_is_not_planned_on_a_command_line_that_could_not_be_read(tmp_path):
    # read as empty, grubby's undo would remove arguments the running kernel has
    root = _root(tmp_path, rhel=True, grubby=True)
    host = FaultyHost(LiveHost(str(root)), "timeout", lambda op, key: key == "/proc/cmdline")
    steps, notes = kernel_args(Facts(host), ("iommu=pt",))
    assert steps == ()
    assert notes[0].startswith("the running kernel's command line: read /proc/cmdline did not")
