"""`dldoctor fix` through the real CLI, under a temporary root (a hidden --root), with the
initramfs tool faked first on PATH: nothing on this machine is changed."""

from __future__ import annotations

from dldoctor.fixes.gpu import NOUVEAU_CONF
from tests.support.cli import run_dldoctor
from tests.support.fixroots import BLACKLIST_NOUVEAU, NOUVEAU_HOST, nouveau_root
from tests.support.marks import nonroot
from tests.support.paths import HOSTS
from tests.support.trees import tree

NOUVEAU = NOUVEAU_HOST
FIX = BLACKLIST_NOUVEAU


def test_list_preview_apply_history_undo(tmp_path):
    root, log, env = nouveau_root(tmp_path)
    listing = run_dldoctor("fix", "--from", str(NOUVEAU))
    assert (
        listing.returncode == 0 and f"{FIX}" in listing.stdout and "gpu.nouveau" in listing.stdout
    )
    before = tree(root)
    preview = run_dldoctor("fix", FIX, "--root", str(root), env=env)
    assert preview.returncode == 0 and "nothing was changed" in preview.stdout
    assert tree(root) == before and not log.exists()
    applied = run_dldoctor("fix", FIX, "--apply", "--yes", "--root", str(root), env=env)
    assert applied.returncode == 0, applied.stderr
    assert "applied (" in applied.stdout and "pending a reboot (gpu.nouveau fail)" in applied.stdout
    assert (root / NOUVEAU_CONF.lstrip("/")).exists()
    assert log.read_text() == "update-initramfs -u\n"
    history = run_dldoctor("fix", "--history", "--root", str(root))
    journal_id = history.stdout.split()[0]
    assert f"{FIX}" in history.stdout and "applied: pending a reboot" in history.stdout
    undone = run_dldoctor("fix", "--undo", journal_id, "--root", str(root), env=env)
    assert undone.returncode == 0 and "undone" in undone.stdout
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before


def test_apply_refuses_without_a_confirmation_and_on_a_bundle(tmp_path):
    root, log, env = nouveau_root(tmp_path)
    before = tree(root)
    unconfirmed = run_dldoctor("fix", FIX, "--apply", "--root", str(root), env=env)  # no TTY
    assert unconfirmed.returncode == 1
    assert (
        unconfirmed.stderr == "dldoctor: not applied: no confirmation (answer y, or pass --yes)\n"
    )
    replayed = run_dldoctor("fix", FIX, "--apply", "--yes", "--from", str(NOUVEAU))
    assert replayed.returncode == 2 and replayed.stdout == ""  # refused before the preview
    assert replayed.stderr == "dldoctor: a replayed bundle can preview a fix, never apply it\n"
    unknown = run_dldoctor("fix", "fix.no.such", "--root", str(root))
    assert unknown.returncode == 1 and "no fix 'fix.no.such'" in unknown.stderr
    assert tree(root) == before and not log.exists()


@nonroot
def test_apply_without_root_refuses_naming_the_sudo_command():
    proc = run_dldoctor("fix", FIX, "--apply", "--yes")
    assert proc.returncode == 1
    assert proc.stderr == f"dldoctor: applying a fix needs root: sudo dldoctor fix {FIX} --apply\n"


def test_the_first_run_after_the_boot_reports_the_fix_that_waited_for_it(tmp_path):
    from dldoctor.fixes.verify import BOOT_ID
    from tests.support.fixroots import boot_without_nouveau

    root, log, env = nouveau_root(tmp_path)
    boot = root / BOOT_ID.lstrip("/")
    boot.parent.mkdir(parents=True, exist_ok=True)
    boot.write_text("11111111-boot-one\n")
    applied = run_dldoctor("fix", FIX, "--apply", "--yes", "--root", str(root), env=env)
    assert "pending a reboot" in applied.stdout, applied.stderr
    same_boot = run_dldoctor("--only", "gpu", "--root", str(root))
    assert "fix.gpu.blacklist_nouveau" not in same_boot.stderr

    boot_without_nouveau(root)  # and the initramfs obeyed the file
    after = run_dldoctor("--only", "gpu", "--root", str(root))
    assert f"fix {FIX}: verified after reboot (" in after.stderr
    again = run_dldoctor("--only", "gpu", "--root", str(root))
    assert FIX not in again.stderr  # judged once
    history = run_dldoctor("fix", "--history", "--root", str(root))
    assert "applied: verified after reboot" in history.stdout


def test_a_bundle_archive_is_listed_and_previewed_and_a_missing_one_is_a_clear_error(tmp_path):
    from dldoctor.snapshots.archive import write_archive

    archive = tmp_path / "nouveau.tar.gz"
    write_archive(str(NOUVEAU), str(archive))
    listing = run_dldoctor("fix", "--from", str(archive))
    assert listing.returncode == 0 and FIX in listing.stdout, listing.stderr
    preview = run_dldoctor("fix", FIX, "--from", str(archive))
    assert preview.returncode == 0 and "+blacklist nouveau" in preview.stdout
    missing = run_dldoctor("fix", "--from", str(tmp_path / "none.tar.gz"))
    assert missing.returncode == 4
    assert missing.stderr == f"dldoctor: bundle not found: {tmp_path / 'none.tar.gz'}\n"


DEFAULT_LIMITS = HOSTS / "hgx-h100x8-default-limits"  # logins at 1024 open files (soft)


def test_the_listing_offers_only_the_fixes_for_what_fails_under_the_policy(tmp_path):
    built_in = run_dldoctor("fix", "--from", str(DEFAULT_LIMITS))
    assert built_in.returncode == 0, built_in.stderr
    assert "fix.limits.nofile" in built_in.stdout and "judged by" not in built_in.stdout
    # A site whose policy asks no more open files than the host has: limits.nofile passes
    # there, and nothing is offered for it; what still fails keeps its fix.
    policy = tmp_path / "site.toml"
    policy.write_text("[limits]\nmin_nofile = 1024\n")
    site = run_dldoctor("fix", "--from", str(DEFAULT_LIMITS), "--policy", str(policy))
    assert site.returncode == 0, site.stderr
    assert "fix.limits.nofile" not in site.stdout and "fix.limits.memlock" in site.stdout
    assert site.stdout.startswith(f"judged by the policy {policy}\n")


def test_an_unreadable_policy_is_one_line_and_exit_4(tmp_path):
    policy = tmp_path / "site.toml"
    policy.write_text("[limits]\nmin_nofile = 'many'\n")
    proc = run_dldoctor("fix", "fix.limits.nofile", "--from", str(DEFAULT_LIMITS),
                        "--policy", str(policy))  # fmt: skip
    assert proc.returncode == 4 and proc.stdout == ""
    assert proc.stderr.startswith(f"dldoctor: policy {policy}, line 2: limits.min_nofile")
    assert proc.stderr.count("\n") == 1
