"""What the GPU tier's parsers share: a JSON document found in a tool's noisy stdout, and
what a measuring command's answer says when it is no output to parse."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dldoctor.active import measure
from dldoctor.host.base import Answer, AnswerStatus

T = TypeVar("T")


def json_document(text: str) -> Any:
    """The first JSON object in `text` that starts a line (tools print warnings before
    and after theirs: "WARNING: Failed to acquire log file lock"); None: none there."""
    decoder = json.JSONDecoder()
    at = 0
    while True:
        start = text.find("{", at)
        if start < 0:
            return None
        if start == 0 or text[start - 1] == "\n":
            try:
                return decoder.raw_decode(text, start)[0]
            except (ValueError, RecursionError):
                pass
        at = start + 1


def unanswered(answer: Answer, tool: str) -> str:
    """Why `tool` gave nothing to parse, in one line ("" when it ran and printed)."""
    if answer.status == AnswerStatus.NOT_INSTALLED:
        return f"{tool} is not installed"
    if not answer.ok:
        return answer.describe()
    return ""


def said(answer: Answer) -> str:
    """The last line a command that failed printed (its stderr first), for a finding."""
    result = answer.value
    text = (result.stderr or result.stdout).decode("utf-8", "replace").strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"exit status {result.returncode}"


def tool_run(
    ctx,
    argv: Sequence[str],
    *,
    cost_s: float,
    what: str,
    parse: Callable[[str], T],
    got: Callable[[T], bool],
    none: Callable[..., T],
) -> T:
    """A field tool's measurement parsed: `none(installed=..., error=...)` when it is not
    installed, did not answer, or failed without printing anything `got` accepts."""
    tool = argv[0]
    answer = measure(ctx, argv, cost_s=cost_s, what=what).require()
    why = unanswered(answer, tool)
    if why:
        return none(installed=answer.status != AnswerStatus.NOT_INSTALLED, error=why)
    found = parse(answer.text)
    if answer.value.returncode != 0 and not got(found):
        return none(error=f"{tool} failed: {said(answer)}")
    return found
