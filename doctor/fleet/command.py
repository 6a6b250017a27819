"""`dldoctor fleet run` and `dldoctor fleet report`: the command lines (docs/fleet.md)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from dldoctor.exitcodes import ExitCode

EPILOG = (
    "Exit codes as for --check: 0 no node failed a check, 1 some node failed one (or, with "
    "--strict, warned or is an odd one out), 2 usage error, 3 no failure but some node "
    "was not reported or a check could not finish, 4 an input could not be read, 6 the "
    "output could not be written."
)


def _output_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print the fleet document as JSON")
    g.add_argument("--md", action="store_true", help="print it as Markdown")
    p.add_argument(
        "--since",
        metavar="OLD_DIR",
        help="also list the nodes whose findings or key facts changed since that sweep",
    )
    p.add_argument(
        "--strict", action="store_true", help="warnings and odd ones out also fail (exit 1)"
    )


def build_parser() -> argparse.ArgumentParser:
    from dldoctor.cli import _Parser

    p = _Parser(
        prog="dldoctor fleet",
        description="Sweep many nodes with dldoctor through ClusterShell, and fold their "
        "reports into one: per check, the nodes that pass, warn, fail or error; per key "
        "fact, the majority and the odd ones out.",
        epilog=EPILOG,
    )
    sub = p.add_subparsers(dest="action", required=True, parser_class=_Parser)
    run = sub.add_parser(
        "run",
        help="run dldoctor on every node of a node set and report",
        description="Run `dldoctor --check --json` on every node of a ClusterShell node set "
        "(over ssh, or a local command per node with --exec), keep each node's report in "
        "DIR, then print the fleet report.",
        epilog=EPILOG,
    )
    run.add_argument(
        "-w",
        dest="nodes",
        metavar="NODESET",
        required=True,
        help="the nodes: node[001-128], @gpu (ClusterShell groups), a,b,c",
    )
    run.add_argument("-x", dest="exclude", metavar="NODESET", help="nodes to leave out")
    run.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="where the reports go (new or empty; default dldoctor-fleet-<UTC time>)",
    )
    run.add_argument(
        "--policy",
        metavar="FILE",
        help="this policy file (read here) goes to every node on its stdin",
    )
    run.add_argument(
        "--snapshot",
        action="store_true",
        help="bring back each node's support bundle instead of its report",
    )
    run.add_argument(
        "--fanout",
        type=int,
        default=64,
        metavar="N",
        help="nodes at a time (ClusterShell's fan-out; default 64)",
    )
    run.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="per node: one still running then is timed out (default 120)",
    )
    run.add_argument(
        "--ssh-options",
        metavar="OPTIONS",
        help="extra ssh options, as ClusterShell passes them "
        "(with '=': --ssh-options='-oPort=2222 -l admin')",
    )
    run.add_argument(
        "--exec",
        dest="exec_command",
        metavar="COMMAND",
        help="run COMMAND here once per node instead of ssh, %%h replaced by "
        "the node's name; it prints the node's report (or base64 bundle)",
    )
    _output_flags(run)
    report = sub.add_parser(
        "report",
        help="fold node reports into one",
        description="Fold node reports into one fleet report. Inputs: a folder `fleet "
        "run` wrote, report JSON files, bundles (directories or .tar.gz), mixed; each "
        "file is one node, named after the file (node017.json is node017).",
        epilog=EPILOG,
    )
    report.add_argument("inputs", nargs="+", metavar="DIR|FILE")
    _output_flags(report)
    return p


def main(argv: Sequence[str]) -> int:
    """Usage, input and output errors propagate to dldoctor.cli, which says them in one
    line with their exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return int(exc.code or 0)
    if args.action == "run":
        from dldoctor.fleet.run import sweep

        return _report([sweep(args)], args)
    return _report(args.inputs, args)


def _report(inputs: list[str], args) -> int:
    from dldoctor.cli import _write_output
    from dldoctor.fleet import render
    from dldoctor.fleet.nodes import InputError, entries
    from dldoctor.fleet.report import build

    try:
        since = (args.since, list(entries([args.since]))) if args.since else None
        doc = build(entries(inputs), since=since, strict=args.strict)
    except InputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if args.json:
        text = json.dumps(doc, indent=2, ensure_ascii=True) + "\n"
    elif args.md:
        text = render.render_markdown(doc)
    else:
        text = render.render_text(doc)
    _write_output(lambda: sys.stdout.write(text))
    return doc["summary"]["exit_code"]
