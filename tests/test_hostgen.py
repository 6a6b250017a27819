"""The committed synthetic hosts are exactly what tests/support/hostgen.py builds (no hand edits
drifting away from the generator, no generator change left un-regenerated)."""

from __future__ import annotations

import pytest

from tests.support.hostgen import HOSTS, SCENARIOS, build
from tests.support.trees import bundle_contents


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_committed_bundle_matches_the_generator(tmp_path, name):
    assert bundle_contents(build(tmp_path, name)) == bundle_contents(HOSTS / name), (
        f"run `python -m tests.support.hostgen` and review the diff of fixtures/hosts/{name}"
    )
