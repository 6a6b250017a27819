"""The map from values to pseudonyms that the map of each kind writes into: one table per
kind, saved outside the bundle (mode 0600: it undoes the redaction) and loaded again so that
a fleet's bundles share pseudonyms."""

from __future__ import annotations

import json
import os
import re
import tempfile

from dldoctor.snapshots.bundle import json_bytes
from dldoctor.snapshots.redact.shapes import WORD_EDGE

MAP_FORMAT = "dldoctor-redaction-map"
MAP_VERSION = 1
# The kinds replaced as words wherever they appear; the others are found by their shape.
WORD_KINDS = ("host", "domain", "user", "serial", "uuid", "secret")


class Pseudonyms:
    """Values -> stable pseudonyms, per kind: the same value gets the same pseudonym in every
    member, in member names, and in every bundle redacted with the same (loaded) map."""

    def __init__(self) -> None:
        self.kinds: dict[str, dict[str, str]] = {}  # kind -> value (normalised) -> pseudonym
        self.taken: dict[str, set[str]] = {}  # kind -> its pseudonyms (left as they are)
        self.shown: dict[str, str] = {}  # pseudonym as written -> the text it replaced
        self.words_changed = True  # a word to look for came since the text pattern was built

    @classmethod
    def load(cls, path: str) -> Pseudonyms:
        """The map saved at `path`, to continue (a missing file: a new map)."""
        store = cls()
        if not os.path.exists(path):
            return store
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict) or data.get("format") != MAP_FORMAT:
            raise ValueError(f"{path} is not a {MAP_FORMAT} file")
        kinds = data.get("kinds", {})
        if not isinstance(kinds, dict) or not all(
            isinstance(table, dict)
            and all(isinstance(v, str) and isinstance(p, str) for v, p in table.items())
            for table in kinds.values()
        ):
            raise ValueError(f"{path}: 'kinds' must map each kind to {{value: pseudonym}} strings")
        for kind, table in kinds.items():
            for value, pseudonym in table.items():
                store.kinds.setdefault(kind, {})[value] = pseudonym
                store.taken.setdefault(kind, set()).add(pseudonym)
        return store

    def save(self, path: str) -> None:
        """Write the map, readable by its owner only (it undoes the redaction)."""
        data = {"format": MAP_FORMAT, "format_version": MAP_VERSION, "kinds": self.kinds}
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".redact-map-", dir=folder)  # mkstemp: mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(json_bytes(data))
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def restore(self, text: str) -> str:
        """`text` with every pseudonym written in this session put back (for comparisons)."""
        if not self.shown:
            return text
        names = sorted(self.shown, key=len, reverse=True)
        pattern = re.compile(rf"(?<![{WORD_EDGE}])(?:{'|'.join(map(re.escape, names))})"
                             rf"(?![{WORD_EDGE}])")  # fmt: skip
        return pattern.sub(lambda m: self.shown[m.group()], text)

    def pseudonym(self, kind: str, value: str, make) -> str:
        """The pseudonym of `value`; `make(n)` writes the n-th one of this kind."""
        table = self.kinds.setdefault(kind, {})
        if value in table:
            return table[value]
        taken = self.taken.setdefault(kind, set())
        if value in taken:  # already a pseudonym: a bundle redacted twice stays the same
            return value
        new = make(len(table) + 1)
        while new in taken:  # a hand-edited map: never give two values one pseudonym
            new = make(len(table) + len(taken) + 1)
        table[value] = new
        taken.add(new)
        if kind in WORD_KINDS:
            self.words_changed = True
        return new

    def named(self, kind: str, value: str, fmt: str) -> str:
        """The pseudonym `fmt % n` of `value`, remembered as shown (for `restore`)."""
        new = self.pseudonym(kind, value, lambda n: fmt % n)
        self.shown.setdefault(new, value)
        return new

    def learnt(self, kind: str) -> list[str]:
        """The values of `kind` met so far, less the pseudonyms a loaded map holds."""
        taken = self.taken.get(kind, ())
        return [value for value in self.kinds.get(kind, {}) if value not in taken]
