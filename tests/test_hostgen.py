"""The committed synthetic hosts are exactly what tests/hostgen.py builds (no hand edits
drifting away from the generator, no generator change left un-regenerated)."""

from __future__ import annotations

import os

import pytest

from tests.hostgen import HOSTS, SCENARIOS, build


def tree(root):
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                found[rel] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    found[rel] = ("file", f.read())
    return found


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_committed_bundle_matches_the_generator(tmp_path, name):
    assert tree(build(tmp_path, name)) == tree(HOSTS / name), (
        f"run `python -m tests.hostgen` and review the diff of fixtures/hosts/{name}"
    )
