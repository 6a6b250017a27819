"""NVMe controllers and the storage fixtures of the storage tests."""

from __future__ import annotations

from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import FIXTURES

OWN = FIXTURES / "storage"


def nvme_bundle(tmp_path, state="live") -> BundleBuilder:
    b = BundleBuilder(tmp_path / "b")
    base = "/sys/class/nvme/nvme0"
    for attr, value in (("model", "SAMSUNG MZQL23T8HCLS-00A07               "),
                        ("serial", "S64HNE0T000000"), ("firmware_rev", "GDC5602Q"),
                        ("state", state), ("transport", "pcie")):  # fmt: skip
        b.file(f"{base}/{attr}", value + "\n")
    b.file(f"{base}/nvme0n1/size", "7501476528\n")
    b.file(f"{base}/power/control", "on\n")
    return b
