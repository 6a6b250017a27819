"""The Report as one JSON document (schema in docs/json-schema.md)."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from dldoctor.model import Report


def render_json(report: Report, *, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    json.dump(report.to_dict(), stream, indent=2, ensure_ascii=False)
    stream.write("\n")
