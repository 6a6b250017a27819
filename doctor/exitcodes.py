"""Exit codes of `dldoctor --check`: one table, documented in the README and tested.

0 and 1 are verdicts on the host; 2 to 6 say the doctor could not do (all of) its job.

| code | name        | meaning                                                                  |
|------|-------------|--------------------------------------------------------------------------|
| 0    | OK          | no check failed (warnings allowed unless --strict)                       |
| 1    | PROBLEMS    | at least one check failed, or (with --strict) warned                     |
| 2    | USAGE       | bad command line: unknown option or check id, empty selection, bad value |
| 3    | INCOMPLETE  | no check failed, but at least one could not finish (crashed, timed out)  |
| 4    | BAD_INPUT   | the bundle (--from) or the policy (--policy) could not be read           |
| 5    | INTERNAL    | dldoctor itself failed outside any check (a bug: please report it)       |
| 6    | OUTPUT      | the report could not be written: stdout closed, full, or failing         |
| 130  | INTERRUPTED | stopped with Ctrl-C                                                      |
| 143  | TERMINATED  | stopped by SIGTERM (129: SIGHUP); children killed, no report written     |
| 137  | KILLED      | killed by its backstop 2 s past the deadline: stuck in native code       |

A reader that closes the pipe early (`dldoctor --check | head`) is not an output error: the
verdict's code stands.

A failed check outranks one that could not finish: a host that is known to be broken is
reported as broken (1), with the errors listed in the report.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    PROBLEMS = 1
    USAGE = 2
    INCOMPLETE = 3
    BAD_INPUT = 4
    INTERNAL = 5
    OUTPUT = 6
    INTERRUPTED = 130
    TERMINATED = 143
    KILLED = 137  # SIGKILL from the backstop (dldoctor.cli.guard.backstop): the shell's 128 + 9


def exit_code_for(findings, *, strict: bool = False) -> ExitCode:
    statuses = {f.status.value for f in findings}
    if "fail" in statuses:
        return ExitCode.PROBLEMS
    if "error" in statuses:
        return ExitCode.INCOMPLETE
    if strict and "warn" in statuses:
        return ExitCode.PROBLEMS
    return ExitCode.OK
