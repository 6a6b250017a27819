"""The Report as one JSON document (schema in docs/json-schema.md)."""

from __future__ import annotations

import io
import json
import sys
from typing import TextIO

from dldoctor.model import Report


def render_json(
    report: Report, *, stream: TextIO | None = None, indent: bool | None = None
) -> None:
    """Indented for a person at a terminal; one compact line for a program (`indent=None`
    decides by the stream). Compact is the C encoder: the indenting one is pure Python and
    costs more than the whole diagnosis on a 64-GPU host's document."""
    stream = stream or sys.stdout
    if indent is None:
        indent = _isatty(stream)
    # ASCII escapes: the document stays valid JSON whatever encoding stdout has. One write:
    # json.dump writes each token on its own, a system call each on an unbuffered stdout.
    if indent:
        text = json.dumps(report.to_dict(), indent=2, ensure_ascii=True)
    else:
        text = json.dumps(report.to_dict(), separators=(",", ":"), ensure_ascii=True)
    stream.write(text + "\n")


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no such method, or a closed stream
        return False


def json_bytes(report: Report) -> bytes:
    """The document for a file (`--output`): compact, as for a program."""
    stream = io.StringIO()
    render_json(report, stream=stream, indent=False)
    return stream.getvalue().encode("ascii")
