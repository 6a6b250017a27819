"""NVIDIA's driver requirements per CUDA runtime, with minor-version compatibility."""

from __future__ import annotations

import pytest

from dldoctor.cudacompat import MINOR_COMPAT, SUPPORTED, TOO_OLD, UNKNOWN, judge


@pytest.mark.parametrize("runtime, driver, result, needed", [
    ("12.1", "535.154.05", SUPPORTED, "530.30.02"),
    ("12.1", "525.85.12", MINOR_COMPAT, "530.30.02"),   # 12.x runs on ≥ 525.60.13
    ("12.1", "470.82.01", TOO_OLD, "530.30.02"),
    ("11.8", "470.82.01", MINOR_COMPAT, "520.61.05"),   # 11.x runs on ≥ 450.80.02
    ("13.0", "550.54.15", TOO_OLD, "580.65.06"),        # 13.x needs R580, no exceptions
    ("13.5", "580.95.05", SUPPORTED, "580.65.06"),      # newer than the table: the floor
    ("12", "470.82.01", TOO_OLD, "525.60.13"),          # JAX's cuda12 plugin: major only
    ("12", "550.54.15", SUPPORTED, "525.60.13"),
    ("10.2", "440.33.01", UNKNOWN, ""),                 # before the table
    ("garbage", "550", UNKNOWN, ""),
])  # fmt: skip
def test_judge(runtime, driver, result, needed):
    verdict = judge(runtime, driver)
    assert (verdict.result, verdict.needed) == (result, needed)
