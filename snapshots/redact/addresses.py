"""Network addresses -> pseudonyms of the same shape and class: a MAC stays a MAC (locally
administered), a GUID a GUID, a link-local or private address stays link-local or private,
so the facts read a redacted bundle as they read the original."""

from __future__ import annotations

import ipaddress

from dldoctor.snapshots.redact.pseudonyms import Pseudonyms

_SHARED, _UNIQUE_LOCAL = ipaddress.IPv4Network("100.64.0.0/10"), ipaddress.IPv6Network("fc00::/7")
# (kind, the pool's first address less one, whether an address belongs to it): first match
V4_POOLS = (
    ("ipv4-link-local", ipaddress.IPv4Address("169.254.0.0"), lambda a: a.is_link_local),
    ("ipv4-shared", ipaddress.IPv4Address("100.64.0.0"), _SHARED.__contains__),
    ("ipv4-private", ipaddress.IPv4Address("10.255.0.0"), lambda a: a.is_private),
    ("ipv4-global", ipaddress.IPv4Address("11.0.0.0"), lambda a: True),
)  # fmt: skip
V6_POOLS = (
    ("ipv6-link-local", ipaddress.IPv6Address("fe80::"), lambda a: a.is_link_local),
    ("ipv6-unique-local", ipaddress.IPv6Address("fd00::"), _UNIQUE_LOCAL.__contains__),
    ("ipv6-site-local", ipaddress.IPv6Address("fec0::"), lambda a: a.is_site_local),
    ("ipv6-global", ipaddress.IPv6Address("2000::"), lambda a: True),
)  # fmt: skip


def _v6_text(original: str, new: ipaddress.IPv6Address, compressed: str) -> str:
    """`new` written the way `original` was: sysfs GIDs are fully spelled out."""
    return new.exploded if "::" not in original and len(original) == 39 else compressed


class AddressMap:
    def __init__(self, store: Pseudonyms) -> None:
        self.store = store

    def mac(self, text: str) -> str:
        octets = text.lower().split(":")
        if len(set(octets)) == 1 and octets[0] in ("00", "ff"):
            return text  # lo's 00:00:00:00:00:00 and the broadcast address identify nothing

        def make(n: int) -> str:
            tail = n.to_bytes(3, "big").hex()
            raw = "02" + "00" * (len(octets) - 4) + tail
            return ":".join(raw[i : i + 2] for i in range(0, len(raw), 2))

        return self.store.pseudonym(f"mac{len(octets)}", ":".join(octets), make)

    def guid(self, text: str) -> str:
        digits = text.lower().replace(":", "").removeprefix("0x")
        if set(digits) == {"0"}:
            return text
        pseudo = self.store.pseudonym("guid", digits, lambda n: f"{0x0200000000000000 + n:016x}")
        if ":" in text:
            return ":".join(pseudo[i : i + 4] for i in range(0, 16, 4))
        return pseudo

    def ipv4(self, text: str) -> str:
        try:
            address = ipaddress.IPv4Address(text)
        except ValueError:
            return text  # 96.00.74.00 (a VBIOS version) is not an address
        value = int(address)
        inverted = ~value & 0xFFFFFFFF
        netmask = value >= 0x80000000 and inverted & (inverted + 1) == 0  # 255.255.255.0
        if address.is_loopback or address.is_unspecified or address.is_multicast or netmask:
            return text
        for kind, pool, test in V4_POOLS:
            if test(address):
                return self.store.pseudonym(kind, text, lambda n, p=pool: str(p + n))
        return text  # pragma: no cover - the last pool takes every address

    def ipv6(self, text: str) -> str:
        bare, zone, scope = text.partition("%")
        try:
            address = ipaddress.IPv6Address(bare)
        except ValueError:
            return text
        if address.is_loopback or address.is_unspecified or address.is_multicast:
            return text
        if bare.startswith("::") and address.ipv4_mapped is None:
            return text  # "lspci -d ::0604" is a device class; hosts have a prefix
        if address.ipv4_mapped is not None:
            v4 = self.ipv4(str(address.ipv4_mapped))
            new = ipaddress.IPv6Address("::ffff:" + v4)
            if "." in bare:
                return _v6_text(bare, new, f"::ffff:{v4}") + zone + scope
        else:
            for kind, pool, test in V6_POOLS:
                if test(address):
                    new = ipaddress.IPv6Address(
                        self.store.pseudonym(
                            kind, address.exploded, lambda n, p=pool: (p + n).exploded
                        )
                    )
                    break
        return _v6_text(bare, new, new.compressed) + zone + scope

    def met(self, kind: str, text: str) -> bool:
        """Whether `text` was met as an address of `kind` ("ipv4", "ipv6") already."""
        key = text
        if kind == "ipv6":
            try:
                key = ipaddress.IPv6Address(text.partition("%")[0]).exploded
            except ValueError:
                return False
        return any(
            name.startswith(kind + "-") and key in table for name, table in self.store.kinds.items()
        )
