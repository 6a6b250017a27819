"""What the GPU tier's parsers share: a JSON document found in a tool's noisy stdout, and
what a measuring command's answer says when it is no output to parse."""

from __future__ import annotations

import json
from typing import Any

from dldoctor.host.base import Answer, AnswerStatus


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
