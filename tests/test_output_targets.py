"""Every output a user names (`--output`, `--junit`, `--md`, `--prometheus`, `genconf -o`)
follows one rule (docs/outputs.md): a device, a FIFO or an open descriptor is written into,
a symbolic link is followed and stays a link, only a regular file (or nothing) is replaced
atomically."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from dldoctor.atomicfile import output_target, write_output
from tests.support.cli import run_dldoctor
from tests.support.fixroots import BLACKLIST_NOUVEAU, nouveau_root
from tests.support.paths import HOSTS

HOST = str(HOSTS / "hgx-h100x8-gpu3-x8")
HEALTHY = str(HOSTS / "hgx-h100x8-healthy")
# Each writer, as a command line writing to PATH.
WRITERS = {
    "--output": ["--from", HOST, "--format", "json", "--output"],
    "--junit": ["--from", HOST, "--check", "--junit"],
    "--md": ["--from", HOST, "--check", "--md"],
    "--prometheus": ["--from", HOST, "--check", "--prometheus"],
    "genconf -o": ["genconf", "--from", HEALTHY, "-o"],
}
FIRST_BYTES = {
    "--output": b"{",
    "--junit": b"<?xml",
    "--md": b"#",
    "--prometheus": b"# HELP",
    "genconf -o": b"#",
}


def read_fifo(path, got: list[bytes]) -> threading.Thread:
    def drain():
        with open(path, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_fifo_is_written_into_and_stays_a_fifo(tmp_path, writer):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = read_fifo(fifo, got)
    proc = run_dldoctor(*WRITERS[writer], str(fifo))
    reader.join(30)
    assert proc.returncode in (0, 1), proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].startswith(FIRST_BYTES[writer]), got
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.fifo"]


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_link_is_followed_and_stays_a_link(tmp_path, writer):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "report"
    target.write_bytes(b"old\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    proc = run_dldoctor(*WRITERS[writer], str(link))
    assert proc.returncode in (0, 1), proc.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes().startswith(FIRST_BYTES[writer])
    # The temporary file lay beside the target, and is gone.
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["report"]


def test_a_dangling_link_gets_its_target_written(tmp_path):
    link = tmp_path / "link"
    link.symlink_to("made.xml")  # relative: to the link's folder
    assert run_dldoctor(*WRITERS["--junit"], str(link)).returncode == 1
    assert link.is_symlink()
    assert (tmp_path / "made.xml").read_bytes().startswith(b"<?xml")


@pytest.fixture
def writes_into_streams(tmp_path):
    """A device test runs as root here: a writer that replaced what stands at its path
    would replace /dev/null itself. So first a FIFO of our own must prove, through the same
    function the CLI writes with, that streams are written into."""
    from dldoctor.cli import write_file

    fifo = tmp_path / "probe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = read_fifo(fifo, got)
    write_file(str(fifo), b"probe")
    reader.join(10)
    if not (stat.S_ISFIFO(os.lstat(fifo).st_mode) and got == [b"probe"]):
        pytest.fail("the output writer replaces a FIFO: not run on a real device")
    for device in ("/dev/null", "/dev/full"):
        assert output_target(device) == (device, True)
    assert output_target("/dev/stdout") == ("/proc/self/fd/1", True)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_dev_full_is_exit_6_in_one_line(writer, writes_into_streams):
    proc = run_dldoctor(*WRITERS[writer], "/dev/full")
    assert proc.returncode == 6, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "/dev/full" in proc.stderr
    assert "No space left" in proc.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_dev_null_stays_a_character_device(writes_into_streams):
    proc = run_dldoctor(*WRITERS["--junit"], "/dev/null")
    assert proc.returncode == 1, proc.stderr
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_descriptor_is_written_into_not_replaced(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"kept\n")
    with open(log, "ab") as f:  # the shell's `3>>log`
        fd = f.fileno()
        assert output_target(f"/proc/self/fd/{fd}") == (f"/proc/self/fd/{fd}", True)
        assert output_target(f"/dev/fd/{fd}")[1]
        write_output(f"/dev/fd/{fd}", b"added\n")
    assert log.read_bytes() == b"kept\nadded\n"


def test_output_to_dev_stdout_reaches_the_pipe(writes_into_streams):
    proc = run_dldoctor(*WRITERS["--junit"], "/dev/stdout")
    assert proc.returncode == 1, proc.stderr
    assert "<?xml" in proc.stdout and "Doctor found issues" in proc.stdout


def test_a_regular_file_is_still_replaced(tmp_path):
    out = tmp_path / "r"
    out.write_bytes(b"old")
    before = os.stat(out).st_ino
    write_output(str(out), b"new")
    assert out.read_bytes() == b"new" and os.stat(out).st_ino != before


def test_a_loop_of_links_is_an_error_not_a_hang(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    proc = run_dldoctor(*WRITERS["--junit"], str(tmp_path / "a"))
    assert proc.returncode == 6 and "Too many levels of symbolic links" in proc.stderr


def test_a_missing_folder_is_one_line_after_every_other_output(tmp_path):
    junit, md = tmp_path / "r.xml", tmp_path / "r.md"
    prom = tmp_path / "no" / "such" / "dldoctor.prom"
    proc = run_dldoctor(
        "--from", HOST, "--json", "--junit", str(junit), "--prometheus", str(prom),
        "--md", str(md),
    )  # fmt: skip
    assert proc.returncode == 6
    assert proc.stderr.strip() == f"dldoctor: cannot write {prom}: no folder {prom.parent}"
    assert junit.read_bytes().startswith(b"<?xml") and md.read_bytes().startswith(b"#")
    assert proc.stdout.startswith("{")  # the --json report, still on stdout


def test_the_readme_example_writes_where_debian_node_exporter_reads():
    from pathlib import Path

    root = Path(__file__).parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    example = next(ln for ln in readme.splitlines() if ln.startswith("dldoctor --check --json -"))
    prom = example.split("--prometheus ")[1].split()[0]
    # Debian's and Ubuntu's prometheus-node-exporter package reads this folder.
    assert os.path.dirname(prom) == "/var/lib/prometheus/node-exporter"
    assert "/var/lib/prometheus/node-exporter" in (root / "docs" / "prometheus.md").read_text()


def said_full_in_one_line(*args: str) -> None:
    """`dldoctor *args > /dev/full`: exit 6, and one line saying so."""
    import subprocess
    import sys

    with open("/dev/full", "w") as full:  # the shell's `> /dev/full`
        proc = subprocess.run([sys.executable, "-m", "dldoctor", *args], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 6, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "No space left" in proc.stderr


def test_fix_history_into_a_full_stdout_is_exit_6(tmp_path):
    root, _, env = nouveau_root(tmp_path)
    applied = run_dldoctor(
        "fix", BLACKLIST_NOUVEAU, "--apply", "--yes", "--root", str(root), env=env
    )
    assert applied.returncode == 0, applied.stderr
    said_full_in_one_line("fix", "--history", "--root", str(root))


def test_snapshot_help_offers_only_what_a_snapshot_uses():
    import re

    help_text = run_dldoctor("snapshot", "--help").stdout
    offered = set(re.findall(r"^ +(?:-\w(?: [A-Z]+)?, )?(--[\w-]+)", help_text, re.M))
    assert "--output" in offered and "--deadline" in offered
    assert not offered & {"--check", "--json", "--verbose", "--color"}
    assert "--output PATH" in help_text and "--deadline" in help_text
    proc = run_dldoctor("snapshot", "--json")
    assert proc.returncode == 2 and "unrecognized arguments: --json" in proc.stderr
    main_help = run_dldoctor("--help").stdout
    assert all(flag in main_help for flag in ("--check", "--json", "--verbose", "--color"))


def test_diff_reads_a_packed_bundle_as_its_help_and_docs_say(tmp_path):
    from pathlib import Path

    packed = tmp_path / "healthy.tar.gz"
    made = run_dldoctor("snapshot", "--from", HEALTHY, "--no-redact", "-o", str(packed))
    assert made.returncode == 0, made.stderr
    same = run_dldoctor("diff", HEALTHY, str(packed))
    assert same.returncode == 0, same.stderr
    assert run_dldoctor("diff", str(packed), HOST).returncode == 1
    help_text = " ".join(run_dldoctor("diff", "--help").stdout.split())
    assert "a bundle (a directory or a .tar.gz) or a report JSON file" in help_text
    doc = " ".join((Path(__file__).parent.parent / "docs" / "diff.md").read_text().split())
    assert "a directory or a `.tar.gz`" in doc and "read once `--from` reads them" not in doc


def test_the_readme_names_every_built_in_check():
    import re
    from pathlib import Path

    from dldoctor.registry import builtin_checks

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## What it checks\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\|.*?\|", section, re.M))
    named_ids = {i for row in named for i in re.findall(r"`([a-z0-9_.]+)`", row)}
    # The measuring checks (the active tier) too: they run only with --active.
    ids = {spec.id for spec in builtin_checks(active=True)}
    assert "gpu.nvlink" in ids
    assert ids - named_ids == set(), "checks the README's 'What it checks' does not name"
    assert named_ids - ids == set(), "ids in 'What it checks' that no check has"


def test_the_readme_counts_the_parts_benchmarks_speed_has():
    import re
    from pathlib import Path

    root = Path(__file__).parent.parent
    speed = (root / "benchmarks" / "speed.py").read_text(encoding="utf-8")
    parts = re.search(r'"--only", default="([^"]+)"', speed).group(1).split(",")
    readme = (root / "README.md").read_text(encoding="utf-8")
    said = re.search(r"benchmarks/speed\.py +# all (\w+) parts", readme).group(1)
    words = ["one", "two", "three", "four", "five", "six"]
    assert words.index(said) + 1 == len(parts), (said, parts)
    assert all(f"{i}. {p}:" in speed for i, p in enumerate(parts, 1))  # its docstring's list


def snapshot_to(path) -> list[str]:
    return ["snapshot", "--from", HEALTHY, "--no-redact", "--deadline", "60", "-o", str(path)]


def test_a_snapshot_into_a_fifo_streams_the_archive(tmp_path):
    fifo = tmp_path / "bundle.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = read_fifo(fifo, got)
    proc = run_dldoctor(*snapshot_to(fifo))
    reader.join(30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # no path: the stream may be stdout itself
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (tmp_path / "copy.tar.gz").write_bytes(got[0])
    replayed = run_dldoctor("--from", str(tmp_path / "copy.tar.gz"), "--check")
    assert replayed.returncode == 0 and "No issues found" in replayed.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.fifo", "copy.tar.gz"]


def test_a_snapshot_follows_a_dangling_link_and_refuses_to_replace_a_file(tmp_path):
    (tmp_path / "real").mkdir()
    link = tmp_path / "b.tar.gz"
    link.symlink_to(tmp_path / "real" / "b.tar.gz")
    proc = run_dldoctor(*snapshot_to(link))
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and (tmp_path / "real" / "b.tar.gz").stat().st_size > 0
    assert proc.stdout.strip() == str(tmp_path / "real" / "b.tar.gz")
    again = run_dldoctor(*snapshot_to(link))  # its target exists now: never replaced
    assert again.returncode == 6 and "already exists" in again.stderr


def test_a_snapshot_into_dev_full_is_exit_6_and_dev_null_stays_a_device(writes_into_streams):
    full = run_dldoctor(*snapshot_to("/dev/full"))
    assert full.returncode == 6 and "No space left" in full.stderr
    folder = run_dldoctor(*snapshot_to("/dev/null"), "--dir")
    assert folder.returncode == 6 and "cannot be written into a device" in folder.stderr
    assert run_dldoctor(*snapshot_to("/dev/null")).returncode == 0
    for device in ("/dev/null", "/dev/full"):
        assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_a_fix_step_still_leaves_a_regular_file_never_writing_through(tmp_path):
    """Fixes write through write_atomically, not the output rule: a FIFO or a link at a
    fix's declared path is replaced by the declared file, never written into or through."""
    from dldoctor.fixes.plan import Target, WriteFile

    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    os.mkfifo(root / "etc" / "fifo.conf")  # nobody reads it: writing into it would hang
    outside = tmp_path / "outside"
    outside.write_bytes(b"untouched\n")
    (root / "etc" / "link.conf").symlink_to(outside)
    target = Target(str(root))
    for name in ("fifo.conf", "link.conf"):
        WriteFile(f"/etc/{name}", b"options x=1\n", 0o644).apply(target)
        written = root / "etc" / name
        assert stat.S_ISREG(os.lstat(written).st_mode) and written.read_bytes() == b"options x=1\n"
    assert outside.read_bytes() == b"untouched\n"


@pytest.mark.parametrize(
    "args",
    [["--help"], ["--version"], ["snapshot", "--help"], ["diff", "--help"], ["fix", "--help"],
     ["genconf", "--help"], ["fleet", "run", "--help"], ["slurm-healthcheck", "--help"]],
)  # fmt: skip
def test_help_into_a_full_stdout_is_exit_6(args):
    # argparse swallows the write's error: the help went nowhere and the exit said 0
    said_full_in_one_line(*args)
    assert run_dldoctor(*args).returncode == 0  # the same into a pipe: the help, exit 0
