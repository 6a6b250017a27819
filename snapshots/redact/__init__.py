"""Redaction of a bundle directory, in the spirit of `sos clean`.

Every identifying value (hostnames, addresses, users, serials, GUIDs, secrets) becomes a
stable pseudonym of the same *shape*, so that the facts parse a redacted bundle exactly as
they parsed the original: a MAC stays a MAC, a link-local GID stays link-local, a private
IPv4 stays private. The map from values to pseudonyms is private: it is saved outside the
bundle (mode 0600) and reused with `Redactor.load` so that a fleet's bundles share pseudonyms.
docs/bundle-format.md ("Redaction") lists what is redacted and what is kept.

As sos's cleaner keeps its parsers and its maps apart, the parsers here are `shapes` (the
text pass's regex) and `discover` (values their place in the bundle shows), and there is
one map per kind of value: `hosts`, `users`, `identifiers` (serials, UUIDs, container
ids), `addresses` (MAC, GUID, IPv4, IPv6) and `secrets`, all writing into one saved
`pseudonyms` table. `redactor` runs the text pass over members; `rewrite` the bundle.
"""

from dldoctor.snapshots.redact.pseudonyms import MAP_FORMAT
from dldoctor.snapshots.redact.redactor import CHUNK_CHARS, LEFT_OUT, Redactor
from dldoctor.snapshots.redact.rewrite import redact_bundle
from dldoctor.snapshots.redact.secrets import env_kept, secret_name

__all__ = [
    "CHUNK_CHARS",
    "LEFT_OUT",
    "MAP_FORMAT",
    "Redactor",
    "env_kept",
    "redact_bundle",
    "secret_name",
]
