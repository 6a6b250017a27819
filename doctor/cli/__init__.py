"""`dldoctor` on the command line. Exit codes: dldoctor.exitcodes (and the README).

main() picks the command (COMMANDS: `dldoctor NAME ...`; none: the diagnosis itself),
runs it under the guard (signals, and for the program the deadline's watchdog), and says
each refusal in one line with its exit code. The commands: check.py (`--check`, the app),
snapshot.py, and the modules COMMANDS names; what they share: shared.py.

This package is on the `--check` fast path: it imports neither Textual nor py-cpuinfo.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dldoctor.cli.check import build_parser, diagnose_for, selected_checks
from dldoctor.cli.guard import Terminated, catch_signals, release_signals
from dldoctor.cli.shared import (
    BadCommandLine,
    InputError,
    OutputError,
    Parser,
    UsageError,
    id_list,
    write_file,
    write_output,
)
from dldoctor.cli.snapshot import SNAPSHOT_WRITE_SHARE
from dldoctor.exitcodes import ExitCode

__all__ = [
    "COMMANDS",
    "SNAPSHOT_WRITE_SHARE",
    "BadCommandLine",
    "Command",
    "InputError",
    "OutputError",
    "Parser",
    "Terminated",
    "UsageError",
    "build_parser",
    "diagnose_for",
    "id_list",
    "main",
    "selected_checks",
    "write_file",
    "write_output",
]

DEBUG_ENV = "DLDOCTOR_DEBUG"


@dataclass(frozen=True)
class Command:
    """`dldoctor NAME ...`: its runner, imported only when used."""

    name: str
    runner: str  # "module:function", (argv after NAME[, watchdog]) -> exit code
    # It guards its own deadline (a watchdog and a backstop when it is the program).
    watchdog: bool = False
    # `--format nagios` / `npd` answer for its failures too (it runs checks, or might).
    plugin_failures: bool = True

    def run(self, argv: list[str], watchdog: list[int] | None) -> int:
        module, function = self.runner.split(":")
        run: Callable = getattr(importlib.import_module(module), function)
        return run(argv, watchdog) if self.watchdog else run(argv)


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "snapshot", "dldoctor.cli.check:run_snapshot", watchdog=True, plugin_failures=False
        ),
        Command("diff", "dldoctor.diffing:main", plugin_failures=False),
        Command("fix", "dldoctor.fixes.command:main", plugin_failures=False),
        Command("slurm-healthcheck", "dldoctor.slurm:main", watchdog=True),
        Command("genconf", "dldoctor.genconf:main"),
        Command("fleet", "dldoctor.fleet.command:main"),
    )
}
# No command named: the diagnosis of this host (`--check`, the app, `--from`).
DIAGNOSIS = Command("", "dldoctor.cli.check:run_check", watchdog=True)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line. `argv` None: the program itself (signals are ignored once it is
    done, a watchdog enforces the deadline); a list: a caller in-process (tests)."""
    program = argv is None
    if program:  # descendants that leave their command's group are reparented to us
        from dldoctor.reaper import become_subreaper

        become_subreaper()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="dldoctor: %(message)s")
    previous = catch_signals()
    code = [int(ExitCode.INCOMPLETE)]
    try:
        code[0] = _run(list(sys.argv[1:] if argv is None else argv), code if program else None)
        return code[0]
    finally:
        release_signals(previous, program=program)


def _run(args: list[str], watchdog: list[int] | None) -> int:
    command = COMMANDS.get(args[0]) if args else None
    plugin = _plugin_format(args) if (command or DIAGNOSIS).plugin_failures else None
    try:
        if command is None:
            return DIAGNOSIS.run(args, watchdog)
        return command.run(args[1:], watchdog)
    except BadCommandLine as exc:
        if plugin is None:
            raise
        return _failed(plugin, ExitCode.USAGE, exc.message)
    except Terminated as exc:
        import signal

        print(
            "dldoctor: interrupted" if exc.signum == signal.SIGINT else "dldoctor: terminated",
            file=sys.stderr,
        )
        return 128 + exc.signum
    except UsageError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return _failed(plugin, ExitCode.USAGE, str(exc))
    except InputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return _failed(plugin, ExitCode.BAD_INPUT, str(exc))
    except OutputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return _failed(plugin, ExitCode.OUTPUT, str(exc))
    except KeyboardInterrupt:
        print("dldoctor: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        print(
            f"dldoctor: internal error: {type(exc).__name__}: {exc} "
            f"(set {DEBUG_ENV}=1 for the traceback)",
            file=sys.stderr,
        )
        return _failed(plugin, ExitCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")


def _plugin_format(args: list[str]):
    """The monitoring plugin protocol asked for (`--format nagios`, `npd`), whose exit codes
    answer for dldoctor's own failures too: a usage error's 2 is CRITICAL to Nagios."""
    from dldoctor.render.formats import asked

    fmt = asked(args)
    return fmt if fmt is not None and fmt.failure else None


def _failed(plugin, code: int, message: str) -> int:
    """`code`, or with a plugin protocol its answer: its line on stdout, its exit code."""
    if plugin is None:
        return code
    data, code = plugin.failed(message)
    with contextlib.suppress(OutputError):
        write_output(lambda: (sys.stdout.buffer.write(data), sys.stdout.buffer.flush()))
    return code
