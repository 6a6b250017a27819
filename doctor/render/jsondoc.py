"""The Report as one JSON document (schema in docs/json-schema.md)."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from dldoctor.model import Report


def render_json(report: Report, *, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    # ASCII escapes: the document stays valid JSON whatever encoding stdout has.
    json.dump(report.to_dict(), stream, indent=2, ensure_ascii=True)
    stream.write("\n")
