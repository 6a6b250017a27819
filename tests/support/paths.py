"""Where the suite's files are."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent.parent
FIXTURES = TESTS / "fixtures"
HOSTS = FIXTURES / "hosts"
