"""What every command of `dldoctor` shares: its parser, its errors (each said in one line
with its exit code by dldoctor.cli), the four options of a request, the active tier's two,
and the writers of an output (stdout, a file)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from dldoctor.exitcodes import ExitCode


class UsageError(Exception):
    pass


class InputError(Exception):
    pass


class OutputError(Exception):
    """The report could not be written (stdout closed, full, or failing)."""


class BadCommandLine(SystemExit):
    """argparse's refusal (exit 2), its message kept for a plugin protocol's answer."""

    def __init__(self, message: str):
        super().__init__(ExitCode.USAGE)
        self.message = message


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        # One line, as for every other refusal (argparse prints its whole usage block).
        line = f"{message} (see {self.prog} --help)"
        sys.stderr.write(f"{self.prog}: {line}\n")
        raise BadCommandLine(line)

    def _print_message(self, message: str, file=None) -> None:
        # argparse drops a write that fails: `--help > /dev/full` would exit 0 having said
        # nothing. --help and --version are outputs like any other (exit 6).
        if message and file in (None, sys.stdout):
            write_output(lambda: sys.stdout.write(message))
        else:
            super()._print_message(message, file)


def id_list(text: str) -> list[str]:
    ids = [t.strip() for t in text.split(",") if t.strip()]
    if not ids:  # `--only ''` must not mean "everything"
        raise argparse.ArgumentTypeError("expected check ids, id prefixes or categories")
    return ids


# The options every command takes, each with the same meaning and the same errors
# (dldoctor.request reads them). Their dests are what request_from reads.
REQUEST_OPTIONS = {
    "--policy": ("policy", "FILE", "TOML policy file (default: built-in)"),
    "--from": (
        "bundle",
        "BUNDLE",
        "diagnose a recorded bundle (a directory or a .tar.gz), a sos report (a directory, "
        ".tar.xz or .tar.gz) or an nvidia-bug-report log, instead of this host",
    ),
    "--timeout": (
        "timeout",
        "SECONDS",
        "time limit of each command and filesystem probe (more than 0, at most 3600)",
    ),
    "--deadline": (
        "deadline",
        "SECONDS",
        "the whole run ends by then, whatever hangs (default 20; policy timeouts.deadline_s)",
    ),
}


class _Refused(argparse.Action):
    """An option that has no meaning for this command: refused in one line (exit 2)."""

    def __init__(self, *args, why: str, **kwargs):
        super().__init__(*args, help=f"refused here (exit 2): {why}", **kwargs)
        self.why = why

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string}: {self.why}")


def add_request_arguments(
    p: argparse.ArgumentParser,
    *,
    helps: Mapping[str, str] | None = None,
    refused: Mapping[str, str] | None = None,
) -> None:
    """--policy, --from, --timeout and --deadline on `p`: `helps` words one for this
    command; `refused` names those without a meaning here, with the reason said when
    given (and in --help)."""
    for flag, (dest, metavar, text) in REQUEST_OPTIONS.items():
        why = (refused or {}).get(flag)
        if why is not None:
            p.add_argument(flag, dest=dest, metavar=metavar, action=_Refused, why=why)
            continue
        kind = float if flag in ("--timeout", "--deadline") else str
        text = (helps or {}).get(flag, text)
        p.add_argument(flag, dest=dest, metavar=metavar, type=kind, help=text)


# The active tier's options (docs/active.md), read by request_from as Request.active and
# Request.force. `--force` has a meaning of its own in `fix` and `genconf` (apply, write
# anyway): this one's dest is its own, so that theirs never lets a measurement load GPUs.
ACTIVE_OPTIONS = {
    "--active": (
        "active",
        "also run the measuring checks (category perf, docs/active.md): they load the GPUs, "
        "disks, memory and network, one at a time, for at most the policy's "
        "timeouts.active_s (default 120 s) more",
    ),
    "--force": (
        "force_measure",
        "with --active: measure GPUs that other processes are using too (their jobs slow "
        "down, and the figures with them)",
    ),
}


def add_active_arguments(
    p: argparse.ArgumentParser,
    *,
    helps: Mapping[str, str] | None = None,
    refused: Mapping[str, str] | None = None,
    only: tuple[str, ...] = tuple(ACTIVE_OPTIONS),
) -> None:
    """--active and --force on `p` (`only`: those of them this command takes; a command
    with a --force of its own leaves this one out); `refused` as in add_request_arguments."""
    for flag, (dest, text) in ACTIVE_OPTIONS.items():
        why = (refused or {}).get(flag)
        if why is not None:
            p.add_argument(flag, dest=dest, nargs=0, action=_Refused, why=why)
        elif flag in only:
            p.add_argument(flag, dest=dest, action="store_true",
                           help=(helps or {}).get(flag, text))  # fmt: skip


def add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """--only and --skip, for every command that runs the checks."""
    for flag, what in (
        ("--only", "run only these checks: ids, id prefixes or categories, comma-separated"),
        ("--skip", "skip these checks (same forms as --only)"),
    ):
        p.add_argument(
            flag,
            type=id_list,
            action="extend",
            default=[],
            metavar="IDS",
            help=what,
        )


def write_output(write) -> None:
    """Run `write` on stdout: a reader that went away is no error, a full or closed
    stdout is (OutputError, exit 6)."""
    if sys.stdout is None:  # started with stdout closed (`>&-`)
        raise OutputError("cannot write the report: standard output is closed")
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`dldoctor --check | head`): the verdict still stands.
        discard_stdout()
    except OSError as exc:  # a full disk (`> /dev/full`), an I/O error
        discard_stdout()
        raise OutputError(f"cannot write the report: {exc.strerror or exc}") from None


def write_file(path: str, data: bytes) -> None:
    """An output beside stdout's, replaced atomically (a collector or a CI job reading it
    never sees half a file) or written into a device, FIFO or descriptor (docs/outputs.md);
    OutputError (exit 6) when it cannot be written."""
    from dldoctor.atomicfile import write_output as write_target

    try:
        write_target(path, data)
    except FileNotFoundError:
        folder = os.path.dirname(os.path.abspath(path))
        why = "no such file or directory" if os.path.isdir(folder) else f"no folder {folder}"
        raise OutputError(f"cannot write {path}: {why}") from None
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def discard_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered must not fail again at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
