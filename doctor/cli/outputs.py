"""The outputs of a `--check` run: its options (--format, --output, --NAME FILE) and their
writing; each output that cannot be written is OutputError (exit 6) once all are tried."""

from __future__ import annotations

import argparse
import sys

from dldoctor.cli.shared import OutputError, UsageError, write_file, write_output
from dldoctor.exitcodes import ExitCode, exit_code_for


def add_output_arguments(p: argparse.ArgumentParser) -> None:
    from dldoctor.render.formats import FORMATS

    g = p.add_argument_group(
        "outputs",
        "Files are replaced atomically: a reader never sees half. A device, a FIFO or "
        "/dev/stdout is written into, a symbolic link followed (docs/outputs.md).",
    )
    g.add_argument(
        "--format",
        choices=list(FORMATS),
        help="the report's format: "
        + "; ".join(f"{f.name}, {f.help}" for f in FORMATS.values())
        + " (--json: --format json)",
    )
    g.add_argument(
        "--output",
        metavar="FILE",
        help="write the report (in --format) to FILE instead of standard output",
    )
    for f in FORMATS.values():
        if f.file_flag:
            g.add_argument(
                f"--{f.name}",
                metavar="FILE",
                dest=f"file_{f.name}",
                help=f"also write the report to FILE as {f.name}: {f.help}",
            )


def output_format(args: argparse.Namespace) -> str:
    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json and --format {args.format} ask for two formats")
    return "json" if args.json else args.format or "text"


def write_outputs(args: argparse.Namespace, report, *, stdout: bool = True) -> ExitCode:
    """Each `--NAME FILE`, then the report in its format on stdout (or --output); the exit
    code is the verdict's, or the one the format's protocol defines (Nagios, npd). One
    output that cannot be written does not stop the others: OutputError once all are tried."""
    from dldoctor.render.formats import FORMATS

    fmt = FORMATS[output_format(args)]
    failed: list[str] = []

    def attempt(write) -> None:
        try:
            write()
        except OutputError as exc:
            failed.append(str(exc))

    for name, f in FORMATS.items():
        path = getattr(args, f"file_{name}", None) if f.file_flag else None
        if path:
            attempt(lambda path=path, f=f: write_file(path, f.render(report)))
    if args.output:
        attempt(lambda: write_file(args.output, fmt.render(report)))
    elif stdout:  # else stdout holds another picture (--topology)
        attempt(lambda: write_output(stdout_writer(fmt, args, report)))
    if failed:
        raise OutputError("; ".join(failed))
    code = fmt.exit_code(report)
    return exit_code_for(report.findings, strict=args.strict) if code is None else code


def stdout_writer(fmt, args: argparse.Namespace, report):
    """What prints the report in `fmt` on stdout: JSON and text stream as they render."""
    if fmt.name == "json":
        from dldoctor.render.jsondoc import render_json

        return lambda: render_json(report)
    if fmt.name == "text":
        from dldoctor.render.text import render_text

        return lambda: render_text(report, verbose=args.verbose, color=args.color)
    data = fmt.render(report)
    return lambda: (sys.stdout.buffer.write(data), sys.stdout.buffer.flush())
