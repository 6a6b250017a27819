"""Marks shared by test modules."""

from __future__ import annotations

import os

import pytest

# Tests of what a user without root gets: .ci/run runs them (`-m nonroot`) as an
# unprivileged user; under root, which reads everything, they cannot show it.
NONROOT = (
    pytest.mark.nonroot,
    pytest.mark.skipif(
        os.geteuid() == 0, reason="root reads everything: .ci/run runs these as nobody"
    ),
)


def nonroot(test):
    for mark in NONROOT:
        test = mark(test)
    return test


# Runs that must end inside a deadline with a core to themselves, and runs that take every
# core (tools printing without end, a sweep eight nodes wide): one pytest-xdist worker runs
# them one at a time (`--dist loadgroup`), as the suite did before it had workers, so that
# no two of them starve each other; the other worker runs ordinary tests beside them.
DEADLINES = pytest.mark.xdist_group("deadlines")
