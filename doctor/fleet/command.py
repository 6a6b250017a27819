"""`dldoctor fleet run` and `dldoctor fleet report`: the command lines (docs/fleet.md)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from dldoctor.exitcodes import ExitCode
from dldoctor.policy import PerfPolicy

STRAGGLER = PerfPolicy().straggler

DEFAULT_NODE_TIMEOUT_S = 120.0
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
    g.add_argument(
        "--html",
        action="store_true",
        help="print it as one self-contained page: a heatmap of node sets by checks",
    )
    p.add_argument(
        "--since",
        metavar="OLD_DIR",
        help="also list the nodes whose findings or key facts changed since that sweep",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="warnings, odd ones out and stragglers also fail (exit 1)",
    )
    p.add_argument(
        "--straggler",
        type=_fraction,
        default=STRAGGLER,
        metavar="FRACTION",
        help="a measured part below this fraction of the fleet's median is a straggler "
        f"(default {STRAGGLER}, the policy's perf.straggler)",
    )


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:  # NaN too
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in (0, 1]")
    return value


def build_parser() -> argparse.ArgumentParser:
    from dldoctor.cli.shared import Parser, add_active_arguments, add_request_arguments

    p = Parser(
        prog="dldoctor fleet",
        description="Sweep many nodes with dldoctor through ClusterShell, and fold their "
        "reports into one: per check, the nodes that pass, warn, fail or error; per key "
        "fact, the majority and the odd ones out.",
        epilog=EPILOG,
    )
    sub = p.add_subparsers(dest="action", required=True, parser_class=Parser)
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
    add_request_arguments(
        run,
        helps={
            "--policy": "this policy file (read here) goes to every node on its stdin",
            # Not the checks' --timeout: the sweep's, of each node's whole run.
            "--timeout": "per node: one still running then is timed out (default 120, "
            "at most 86400)",
        },
        refused={
            "--from": "a sweep runs on the nodes; fold recorded reports or bundles with "
            "`dldoctor fleet report`",
            "--deadline": "each node's run ends by --timeout",
        },
    )
    add_active_arguments(
        run,
        helps={
            "--active": "each node also runs the measuring checks (docs/active.md); the "
            "default --timeout grows by the policy's timeouts.active_s",
            "--force": "with --active: each node measures GPUs that other processes use too",
        },
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
    add_request_arguments(
        report,
        refused={
            "--policy": "a node's report keeps the verdicts its own run gave",
            "--from": "the inputs of a fleet report are DIR|FILE",
            "--timeout": "folding reports runs nothing on a node",
            "--deadline": "folding reports runs nothing on a node",
        },
    )
    add_active_arguments(
        report,
        refused={
            "--active": "a fleet report folds what the nodes measured (their reports' figures)",
            "--force": "folding reports runs nothing on a node",
        },
    )
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
        from dldoctor.request import request_from

        # The sweep's --timeout is each node's, not the checks': the request has none.
        request = request_from(argparse.Namespace(**{**vars(args), "timeout": None}))
        # A node that measures runs for its measuring budget more.
        measuring = request.policy.timeouts.active_s if request.active else 0.0
        node_timeout = DEFAULT_NODE_TIMEOUT_S + measuring if args.timeout is None else args.timeout
        return _report([sweep(args, request, node_timeout)], args)
    return _report(args.inputs, args)


def _report(inputs: list[str], args) -> int:
    from dldoctor.cli.shared import write_output
    from dldoctor.fleet import render
    from dldoctor.fleet.nodes import InputError, entries
    from dldoctor.fleet.report import build

    try:
        since = (args.since, list(entries([args.since]))) if args.since else None
        doc = build(entries(inputs), since=since, strict=args.strict, straggler=args.straggler)
    except InputError as exc:
        print(f"dldoctor: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if args.json:
        text = json.dumps(doc, indent=2, ensure_ascii=True) + "\n"
    elif args.md:
        text = render.render_markdown(doc)
    elif args.html:
        from dldoctor.fleet.page import render_html

        text = render_html(doc)
    else:
        text = render.render_text(doc)
    write_output(lambda: sys.stdout.write(text))
    return doc["summary"]["exit_code"]
