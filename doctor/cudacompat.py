"""Which NVIDIA driver a CUDA runtime needs.

Source: NVIDIA CUDA Toolkit Release Notes, Table 3 "CUDA Toolkit and Corresponding Driver
Versions" (Linux x86_64, the GA release of each minor version), and the CUDA
Compatibility guide's minor-version compatibility floors. Rows after 13.2 were not
available when this table was written: newer 13.x runtimes are judged by the 13.x floor.
"""

from __future__ import annotations

from dataclasses import dataclass

from dldoctor.versions import at_least, version_tuple

# CUDA minor release -> minimum Linux x86_64 driver of its GA toolkit.
TOOLKIT_DRIVER = {
    "11.0": "450.36.06", "11.1": "455.23", "11.2": "460.27.03", "11.3": "465.19.01",
    "11.4": "470.42.01", "11.5": "495.29.05", "11.6": "510.39.01", "11.7": "515.43.04",
    "11.8": "520.61.05", "12.0": "525.60.13", "12.1": "530.30.02", "12.2": "535.54.03",
    "12.3": "545.23.06", "12.4": "550.54.14", "12.5": "555.42.02", "12.6": "560.28.03",
    "12.8": "570.26", "12.9": "575.51.03", "13.0": "580.65.06", "13.1": "590.44.01",
    "13.2": "595.45.04",
}  # fmt: skip

# Minor-version compatibility: any driver at or above the floor of a CUDA major runs that
# major's runtimes (without PTX JIT of newer code), up to the next major's floor.
MINOR_COMPAT_FLOOR = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}

SUPPORTED = "supported"  # the driver is at least the toolkit's own minimum
MINOR_COMPAT = "minor_compat"  # runs through minor-version compatibility
TOO_OLD = "too_old"  # the driver cannot run this runtime
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Verdict:
    runtime: str  # "12.1"
    driver: str
    result: str  # one of the constants above
    needed: str  # the driver that makes it fully supported ("" when unknown)
    floor: str = ""  # the minor-compatibility floor for its major


def judge(runtime: str, driver: str) -> Verdict:
    parts = version_tuple(runtime)
    if not parts or not version_tuple(driver):
        return Verdict(runtime, driver, UNKNOWN, "")
    if len(parts) == 1:  # only the major is known (JAX's jax-cuda12-plugin)
        floor = MINOR_COMPAT_FLOOR.get(str(parts[0]), "")
        if not floor:
            return Verdict(runtime, driver, UNKNOWN, "")
        result = SUPPORTED if at_least(driver, floor) else TOO_OLD
        return Verdict(runtime, driver, result, floor, floor)
    minor = f"{parts[0]}.{parts[1]}"
    major = str(parts[0])
    needed = TOOLKIT_DRIVER.get(minor, "")
    floor = MINOR_COMPAT_FLOOR.get(major, "")
    known = [version_tuple(k) for k in TOOLKIT_DRIVER if k.startswith(major + ".")]
    if not needed and floor and known and parts[:2] > max(known):
        needed = floor  # a release newer than this table: only the major's floor is known
    if needed and at_least(driver, needed):
        return Verdict(minor, driver, SUPPORTED, needed, floor)
    if floor and at_least(driver, floor):
        return Verdict(minor, driver, MINOR_COMPAT, needed, floor)
    if not needed and not floor:
        return Verdict(minor, driver, UNKNOWN, "")
    return Verdict(minor, driver, TOO_OLD, needed or floor, floor)
