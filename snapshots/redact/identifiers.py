"""Serial numbers, UUIDs (the machine's, GPU-/MIG- ones) and container ids: the same shape,
numbered (serial-0001, 00000000-0000-0000-0000-000000000001)."""

from __future__ import annotations

import re

from dldoctor.snapshots.redact.pseudonyms import Pseudonyms
from dldoctor.snapshots.redact.shapes import UUID

PLACEHOLDERS = frozenset(
    s.lower()
    for s in (
        "N/A", "[N/A]", "NA", "None", "Not Specified", "Not Applicable", "Not Present",
        "Unknown", "To Be Filled By O.E.M.", "To be filled by O.E.M.", "Default string",
        "System Serial Number", "Chassis Serial Number", "Base Board Serial Number",
        "0123456789", "Unspecified", "Empty", "(none)",
    )
)  # fmt: skip
EXPLICIT = {  # lines that name a serial or a UUID, whatever the tool
    "serial": re.compile(
        r"(?:<serial>\s*([^<\s][^<]*?)\s*</serial>|(?:Serial Number|Serial No|SerialNumber|"
        r"Device Serial Number)\s*[:=]?\s*([^\s<>\"',]+))",
        re.I,
    ),
    "uuid": re.compile(rf"(?:<uuid>\s*({UUID})\s*</uuid>|\bUUID\s*[:=]\s*({UUID})\b)", re.I),
}


def is_placeholder(value: str) -> bool:
    """A value that a vendor writes where it has none (N/A, "To Be Filled By O.E.M.")."""
    v = value.strip()
    return len(v) < 6 or v.lower() in PLACEHOLDERS or len(set(v.replace("-", ""))) <= 1


class IdentifierMap:
    def __init__(self, store: Pseudonyms) -> None:
        self.store = store

    def serial(self, value: str) -> str:
        return self.store.named("serial", value.strip(), "serial-%04d")

    def uuid(self, value: str) -> str:
        cut = 4 if value[:4].upper() in ("GPU-", "MIG-") else 0
        prefix, bare = value[:cut], value[cut:]
        pseudo = self.store.pseudonym(
            "uuid", bare.lower(), lambda n: f"00000000-0000-0000-0000-{n:012x}"
        )
        return prefix + (pseudo.upper() if bare.isupper() else pseudo)

    def container(self, text: str) -> str:
        return self.store.pseudonym("container", text.lower(), lambda n: f"{n:064x}")
