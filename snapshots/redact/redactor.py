"""The Redactor: the text pass (every shape and learnt word at once) and the members it
redacts (files, environments, JSON), over the maps of each kind of value."""

from __future__ import annotations

import base64
import re
import time
from typing import Any

from dldoctor.snapshots.bundle import FILES
from dldoctor.snapshots.redact.addresses import AddressMap
from dldoctor.snapshots.redact.hosts import COMMON_WORDS, HOSTNAME_FILES, HostMap
from dldoctor.snapshots.redact.identifiers import IdentifierMap, is_placeholder
from dldoctor.snapshots.redact.pseudonyms import WORD_KINDS, Pseudonyms
from dldoctor.snapshots.redact.secrets import SecretMap, env_kept, secret_name
from dldoctor.snapshots.redact.shapes import VALUE_AFTER, with_words
from dldoctor.snapshots.redact.users import UserMap

# A long text (a kernel log) is redacted this many characters at a time, the deadline
# looked at in between: about a fifth of a second of work on a loaded machine.
CHUNK_CHARS = 1 << 18
LEFT_OUT = "[dldoctor: %d more characters not redacted by the deadline: left out]\n"
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


class Redactor:
    """Values -> stable pseudonyms, per kind (`Pseudonyms`, written by the map of each kind);
    the same value gets the same pseudonym in every member, in member names, and in every
    bundle redacted with the same (loaded) map."""

    def __init__(self, store: Pseudonyms | None = None) -> None:
        self.store = store if store is not None else Pseudonyms()
        self.hosts = HostMap(self.store)
        self.users = UserMap(self.store)
        self.identifiers = IdentifierMap(self.store)
        self.addresses = AddressMap(self.store)
        self.secrets = SecretMap(self.store)
        # kind (a shape's name, a learnt word's kind) -> what replaces a value of it
        self._map_of = {
            "host": self.hosts.host,
            "domain": self.hosts.domain,
            "user": self.users.user,
            "serial": self.identifiers.serial,
            "uuid": self.identifiers.uuid,
            "container": self.identifiers.container,
            "mac": self.addresses.mac,
            "guid": self.addresses.guid,
            "ipv4": self.addresses.ipv4,
            "ipv6": self.addresses.ipv6,
            "secret": self.secrets.secret,
        }
        self._pattern: re.Pattern[str] | None = None
        self._words: dict[str, tuple[str, str]] = {}
        # Text derived from the bundle (its reports): four numbers there are an address only
        # when its sources showed them as one ("cuDNN 9.1.0.70" is a version).
        self.known_addresses_only = False
        self._memo: dict[tuple[str, str], str] = {}  # (shape, text) -> its replacement
        # time.monotonic() past which the rest of a long text is left out, not redacted
        self.deadline: float | None = None

    # --- the map ---------------------------------------------------------------------

    @classmethod
    def load(cls, path: str) -> Redactor:
        """A redactor that continues the map saved at `path` (a missing file: a new map)."""
        return cls(Pseudonyms.load(path))

    def save(self, path: str) -> None:
        self.store.save(path)

    @property
    def kinds(self) -> dict[str, dict[str, str]]:
        return self.store.kinds

    @property
    def shown(self) -> dict[str, str]:
        return self.store.shown

    def restore(self, text: str) -> str:
        return self.store.restore(text)

    def replace(self, kind: str, value: str) -> str:
        """The pseudonym of `value`, a value of `kind` ("host", "user", "ipv4", ...)."""
        return self._map_of[kind](value)

    def file_name(self, text: str) -> str:
        """`text` redacted, and every host name known replaced inside a file name too, where
        `-` and `_` join it to other words (sosreport-<host>-2026-12-01-abcdef.tar.xz)."""
        text = self.text(text)
        hosts = self.store.learnt("host")
        if not hosts:
            return text
        words = "|".join(map(re.escape, sorted(hosts, key=len, reverse=True)))
        pattern = re.compile(rf"(?<![A-Za-z0-9])(?:{words})(?![A-Za-z0-9])", re.I)
        return pattern.sub(lambda m: self.hosts.host(m.group()), text)

    # --- text ------------------------------------------------------------------------

    def learn(self, kind: str, value: str) -> None:
        """A value found in the bundle, to be replaced wherever it appears."""
        value = value.strip()
        if kind in ("host", "user"):
            if value.lower() in COMMON_WORDS or len(value) < 3 or value.isdigit():
                return  # only where it is known to be a name (see COMMON_WORDS)
            if kind == "host" and value.lower().startswith("localhost"):
                return
        elif is_placeholder(value):
            return
        self.replace(kind, value)

    def _learnt_words(self) -> dict[str, tuple[str, str]]:
        """Text to replace as a word (lower case) -> (kind, the value as learnt)."""
        found = {}
        for kind in WORD_KINDS:
            for value in self.store.learnt(kind):
                if kind == "secret" and len(value) < 8:
                    continue  # "1" in AUTH_ENABLED=1: only where it is assigned
                if kind in ("host", "user") and value.lower() in COMMON_WORDS:
                    continue
                if kind == "domain" and "." not in value:
                    continue  # a one-word domain ("corp") is a word too
                found[value.lower()] = (kind, value)
        for short in self.kinds.get("host", {}):
            for domain in self.kinds.get("domain", {}):
                found.setdefault(f"{short}.{domain}", ("host", f"{short}.{domain}"))
        return found

    def _compiled(self) -> re.Pattern[str]:
        if self._pattern is None or self.store.words_changed:
            self._words = self._learnt_words()
            self._pattern = with_words(list(self._words))
            self.store.words_changed = False
        return self._pattern

    def text(self, text: str) -> str:
        """`text` with every value this redactor recognises replaced by its pseudonym."""
        text = self.secrets.tokens(text)
        out, done = [], 0
        for m in self._compiled().finditer(text):
            if m.start() < done:
                continue  # inside a secret value already replaced
            out.append(text[done : m.start()])
            new, done = self._replace(m)
            out.append(new)
        out.append(text[done:])
        return "".join(out)

    def _replace(self, m: re.Match[str]) -> tuple[str, int]:
        """(what replaces the match, where the text goes on)"""
        group = m.lastgroup
        found = m.group()
        if group in VALUE_AFTER:  # NAME=, looking at its value
            if group == "avalue" and not secret_name(found[:-1]):
                return found, m.end()  # the value is read on, in its context
            return found + self.secrets.secret(m.group(group)), m.end(group)
        key = (group, found)
        new = None if self.known_addresses_only else self._memo.get(key)
        if new is None:
            new = self._pseudonym_of(group, found, m)
            if new != found:
                self.shown.setdefault(new, found)
            if not self.known_addresses_only:
                self._memo[key] = new
        return new, m.end()

    def _pseudonym_of(self, group: str, found: str, m: re.Match[str]) -> str:
        if group == "literal":
            kind, value = self._words[found.lower()]
            return self.replace(kind, value)
        if group in ("homeuser", "guidxv"):  # the value after its label
            cut = m.start(group) - m.start()
            handler = self.users.user if group == "homeuser" else self.addresses.guid
            return found[:cut] + handler(found[cut:])
        if group == "userinfo":
            return "//" + self.secrets.credential(found[2:])
        if group in ("ipv4", "ipv6") and self.known_addresses_only:
            # an address already met as one, else `found` (a version)
            return self.replace(group, found) if self.addresses.met(group, found) else found
        return self.replace(group, found)

    # --- members ---------------------------------------------------------------------

    def environ(self, data: bytes) -> bytes:
        """/proc/<pid>/environ: NUL-separated NAME=value, values may hold spaces. A value is
        kept only for the names a check reads (`env_kept`); any other keeps its name."""
        out = []
        for item in data.split(b"\0"):
            name, sep, value = item.decode("utf-8", "surrogateescape").partition("=")
            if not (sep and value):
                pass
            elif not env_kept(name):
                value = ""
            elif secret_name(name):
                value = self.secrets.secret(value)
            else:
                value = self.text(value)
            out.append((name + sep + value).encode("utf-8", "surrogateescape"))
        return b"\0".join(out)

    def json_value(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if k == "content_b64" and isinstance(v, str):
                    try:
                        raw = base64.b64decode(v, validate=True)
                    except ValueError:
                        out[k] = v
                        continue
                    out[k] = base64.b64encode(self.member(key, raw)).decode()
                elif isinstance(v, str) and v and _ENV_NAME.fullmatch(k) and secret_name(k):
                    out[self.text(k)] = self.secrets.secret(v)
                elif isinstance(v, str) and v and k in ("hostname", "fqdn"):
                    out[k] = self.hosts.host(v)
                else:
                    out[self.text(k)] = self.json_value(v, k)
            return out
        if isinstance(value, list):
            return [self.json_value(v, key) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def member(self, path: str, data: bytes) -> bytes:
        """The redacted bytes of a file read from host `path` (or bundle member `path`)."""
        name = path.lstrip("/").removeprefix(FILES + "/")
        if re.fullmatch(r"proc/[^/]+/environ", name):
            return self.environ(data)
        if b"\0" in data[:8192] and not name.endswith("cmdline"):
            return data  # binary (PCI config space): offsets matter, no text to replace
        text = data.decode("utf-8", "surrogateescape")
        if f"{FILES}/{name}" in HOSTNAME_FILES and text.strip():
            stripped = text.strip()
            text = text.replace(stripped, self.hosts.host(stripped))
        elif name == "etc/passwd":
            text = "\n".join(self.users.passwd_line(line) for line in text.split("\n"))
        return self.long_text(text).encode("utf-8", "surrogateescape")

    def long_text(self, text: str) -> str:
        """`text` redacted a chunk of lines at a time; what is left at the deadline is left
        out with a line that says so: never sent unredacted, never past the deadline."""
        out, start = [], 0
        while start < len(text):
            if self.deadline is not None and time.monotonic() > self.deadline:
                out.append(LEFT_OUT % (len(text) - start))
                break
            end = text.find("\n", start + CHUNK_CHARS) + 1 or len(text)
            out.append(self.text(text[start:end]))
            start = end
        return "".join(out)
