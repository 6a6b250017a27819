"""What the fix builders ask of the host beyond the facts: the names in a folder. A
folder that cannot be listed (missing, no permission, a timeout) has no names: a builder
then plans without what it would have found there, and says so where it matters."""

from __future__ import annotations


def names_in(host, folder: str, suffix: str = "") -> list[str]:
    """The sorted names in `folder` ending with `suffix`; [] when it cannot be listed."""
    listing = host.listdir(folder)
    return sorted(n for n in (listing.value if listing.ok else ()) if n.endswith(suffix))
