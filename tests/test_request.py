"""Every command takes the same --policy, --from, --timeout and --deadline, refuses the
ones it has no use for in one line (exit 2, and says so in --help), and says a bad policy
file or a bad --timeout in the same line with the same exit code (docs/architecture.md,
"A request's path")."""

from __future__ import annotations

import argparse
import json

import pytest

from dldoctor.cli.shared import BadCommandLine
from dldoctor.request import Request, request_from
from tests.support.cli import run_dldoctor

OPTIONS = {"--policy": "site.toml", "--from": "bundle", "--timeout": "5", "--deadline": "9"}


def _parsers():
    from dldoctor import diffing, genconf, slurm
    from dldoctor.cli.check import build_parser
    from dldoctor.fixes.command import parser as fix_parser
    from dldoctor.fleet.command import build_parser as fleet_parser

    return {
        "": (build_parser, []),
        "snapshot": (lambda: build_parser(snapshot=True), []),
        "diff": (diffing.build_parser, ["A", "B"]),
        "fix": (fix_parser, []),
        "genconf": (genconf.build_parser, []),
        "slurm-healthcheck": (slurm.build_parser, []),
        "fleet run": (fleet_parser, ["run", "-w", "node1"]),
        "fleet report": (fleet_parser, ["report", "DIR"]),
    }


# (command, option) -> why it is refused; every other pair is accepted.
REFUSED = {
    ("diff", "--from"),
    ("slurm-healthcheck", "--from"),
    ("fleet run", "--from"),
    ("fleet run", "--deadline"),
    ("fleet report", "--policy"),
    ("fleet report", "--from"),
    ("fleet report", "--timeout"),
    ("fleet report", "--deadline"),
}
COMMANDS = list(_parsers())


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("command", COMMANDS)
def test_each_option_is_accepted_or_refused_in_one_line(command, option, capsys):
    make, positional = _parsers()[command]
    parser = make()
    argv = [*positional, option, OPTIONS[option]]
    if (command, option) not in REFUSED:
        args = parser.parse_args(argv)
        dest = {"--from": "bundle"}.get(option, option[2:])
        value = getattr(args, dest)
        assert value == (
            float(OPTIONS[option]) if option in ("--timeout", "--deadline") else OPTIONS[option]
        )
        return
    with pytest.raises(BadCommandLine) as refused:
        parser.parse_args(argv)
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f": {option}: " in err
    why = err.split(f": {option}: ", 1)[1].split(" (see ")[0]
    helped = run_dldoctor(*command.split(), "--help")  # the refusal is said there too
    assert helped.returncode == 0 and why in " ".join(helped.stdout.split())


def _argv(command: str, *extra: str) -> list[str]:
    positional = {"diff": ["A", "B"], "fleet run": ["-w", "node1"], "fleet report": ["DIR"]}
    batch = ["--check"] if command == "" else []  # no terminal here, but say it
    return [*command.split(), *positional.get(command, []), *batch, *extra]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_policy_file_is_the_same_line_everywhere(command, tmp_path):
    missing = tmp_path / "none.toml"
    proc = run_dldoctor(*_argv(command, "--policy", str(missing)))
    if (command, "--policy") in REFUSED:
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
        return
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr == f"dldoctor: cannot read policy {missing}: No such file or directory\n"


@pytest.mark.parametrize("value", ["0", "nan", "-1"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_timeout_is_the_same_line_everywhere(command, value):
    proc = run_dldoctor(*_argv(command, "--timeout", value))
    assert proc.returncode == 2, proc.stderr
    if (command, "--timeout") in REFUSED:
        assert len(proc.stderr.splitlines()) == 1 and "--timeout: " in proc.stderr
        return
    # fleet run's --timeout is each node's, up to a day; the checks' up to an hour.
    most = "86400" if command == "fleet run" else "3600"
    expected = f"dldoctor: --timeout must be more than 0 and at most {most} seconds\n"
    assert proc.stderr == expected


@pytest.mark.parametrize("command", [c for c in COMMANDS if (c, "--from") not in REFUSED])
def test_a_missing_from_path_is_the_same_line_everywhere(command, tmp_path):
    missing = tmp_path / "none.tar.gz"
    proc = run_dldoctor(*_argv(command, "--from", str(missing)))
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr == f"dldoctor: bundle not found: {missing}\n"


def test_a_request_is_built_once_from_the_parsed_line(tmp_path):
    policy = tmp_path / "site.toml"
    policy.write_text("[timeouts]\ndeadline_s = 30\n")
    args = argparse.Namespace(
        policy=str(policy), bundle=None, root="/srv", timeout=2.0, deadline=None,
        only=["gpu"], skip=[], strict=True, no_plugins=False,
    )  # fmt: skip
    request = request_from(args, started=100.0)
    assert isinstance(request, Request) and request.policy_source == str(policy)
    assert request.policy.timeouts.command_s == 2.0 and request.deadline_at == 130.0
    assert (request.root, request.only, request.strict) == ("/srv", ("gpu",), True)
    with pytest.raises(AttributeError):
        request.strict = False  # frozen: no command changes what was asked


def test_fix_refuses_to_apply_to_a_bundle_in_one_line_as_its_help_says():
    for action in (["fix.gpu.blacklist_nouveau", "--apply", "--yes"], ["--undo", "x"]):
        proc = run_dldoctor("fix", *action, "--from", "anything")
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr == "dldoctor: a replayed bundle can preview a fix, never apply it\n"
    helped = " ".join(run_dldoctor("fix", "--help").stdout.split())
    assert "with --apply or --undo it is refused (exit 2)" in helped


def test_diff_judges_a_bundle_under_the_requested_policy(tmp_path):
    from tests.support.paths import HOSTS

    healthy = str(HOSTS / "hgx-h100x8-healthy")
    recorded = tmp_path / "healthy.json"  # judged under the built-in policy
    recorded.write_text(run_dldoctor("--check", "--json", "--from", healthy).stdout)
    assert run_dldoctor("diff", healthy, str(recorded)).returncode == 0
    site = tmp_path / "site.toml"
    site.write_text("[gpu]\nexpected_count = 4\n")
    proc = run_dldoctor("diff", "--json", "--policy", str(site), healthy, str(recorded))
    assert proc.returncode == 1, proc.stderr
    (changed,) = json.loads(proc.stdout)["findings"]["changed"]
    assert changed["id"] == "gpu.count" and changed["a"]["status"] == "fail"
