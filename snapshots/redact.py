"""Redaction of a bundle directory, in the spirit of `sos clean`.

Every identifying value (hostnames, addresses, users, serials, GUIDs, secrets) becomes a
stable pseudonym of the same *shape*, so that the facts parse a redacted bundle exactly as
they parsed the original: a MAC stays a MAC, a link-local GID stays link-local, a private
IPv4 stays private. The map from values to pseudonyms is private: it is saved outside the
bundle (mode 0600) and reused with `Redactor.load` so that a fleet's bundles share pseudonyms.
docs/bundle-format.md ("Redaction") lists what is redacted and what is kept.
"""

from __future__ import annotations

import base64
import collections
import functools
import ipaddress
import json
import math
import os
import re
import shutil
import stat
import tempfile
import time
from typing import Any

from dldoctor.snapshots.bundle import (
    COMMANDS,
    FILES,
    MANIFEST,
    REPORT,
    _json_bytes,
    command_folders,
    file_digests,
)

MAP_FORMAT = "dldoctor-redaction-map"
# A long text (a kernel log) is redacted this many characters at a time, the deadline
# looked at in between: about a fifth of a second of work on a loaded machine.
CHUNK_CHARS = 1 << 18
LEFT_OUT = "[dldoctor: %d more characters not redacted by the deadline: left out]\n"
# The members written from the others (snapshots/take.py): a report, never a source.
DERIVED = frozenset({REPORT, "report.md", "report.html"})
MAP_VERSION = 1

# Where a host's own names are written; each file holds just the name.
HOSTNAME_FILES = ("files/etc/hostname", "files/proc/sys/kernel/hostname")
DOMAIN_FILE = "files/proc/sys/kernel/domainname"
# Words that also mean something else in a bundle (a distro, a sysfs folder, a default
# account): a host or user of that name is replaced only where it is known to be one
# (its hostname file, its passwd line, /home/<name>, $USER), never as a bare word.
COMMON_WORDS = frozenset(
    "localhost localdomain local lan home internal none (none) ubuntu debian centos rhel "
    "redhat fedora rocky alma almalinux suse opensuse linux gpu gpus node nodes nvidia cuda "
    "root admin user users docker kubernetes host server compute test default nobody daemon "
    "sys bin system devices kernel module driver class bus pci net block".split()
)
PLACEHOLDERS = frozenset(
    s.lower()
    for s in (
        "N/A", "[N/A]", "NA", "None", "Not Specified", "Not Applicable", "Not Present",
        "Unknown", "To Be Filled By O.E.M.", "To be filled by O.E.M.", "Default string",
        "System Serial Number", "Chassis Serial Number", "Base Board Serial Number",
        "0123456789", "Unspecified", "Empty", "(none)",
    )
)  # fmt: skip
_SECRET_PARTS = frozenset("KEY KEYS AUTH SESSION PASS PASSPHRASE PAT PW".split())
# A lower-case option (`password=` in mount options, `ipmi.pass=` on the kernel command line)
# is a secret by these parts only: `key=ps.index` in a script is no secret. ($PWD is a folder.)
_OPTION_PARTS = frozenset("PASS PASSPHRASE PW".split())
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE", "APIKEY",
                 "PRIVATE", "JWT", "WEBHOOK")  # fmt: skip
_USER_VARS = ("USER", "LOGNAME", "USERNAME", "SUDO_USER")
# The environment keeps the values of what a check reads (grep doctor/facts and checks for
# `environ`: PATH, CUDA_HOME, CUDA_PATH, NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_GID_INDEX,
# PID 1's `container`) and of what support reads beside them; any other variable keeps its
# name only (SSHPASS, DATABASE_URL, MYVAR=ghp_…: a value's name does not say it is harmless).
ENV_KEPT = frozenset("PATH LD_LIBRARY_PATH LD_PRELOAD PYTHONPATH VIRTUAL_ENV container".split())
ENV_KEPT_PREFIXES = ("CUDA_", "NCCL_", "CONDA_")

_HEX = "[0-9A-Fa-f]"
_UUID = rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
# One pass over the text with every shape at once: a pseudonym is never redacted again,
# and the first shape that matches at a place wins (a MAC is not read as an IPv6). Each
# shape starts with the character class of its first character and looks behind only
# after it: the regex engine then skips a shape at a place in one step, which makes the
# pass several times faster than shapes that open with a look-behind. The empty group that
# ends a shape names it (`lastgroup`); the whole match is what is replaced, unless said.
_SHAPES = [
    # https://user:pass@host/: the userinfo (the match less its "//")
    r"//(?<=://)[^\s/@:'\"<>]+(?::[^\s/@'\"<>]*)?(?=@)(?P<userinfo>)",
    rf"(?:G(?<!\wG)PU|M(?<!\wM)IG)-{_UUID}\b(?P<uuid>)",
    # a container id (cgroup paths): a container's hostname is its first 12 digits
    rf"{_HEX}(?<!{_HEX}{_HEX}){_HEX}{{63}}(?!{_HEX})(?P<container>)",
    r"/(?<![\w.]/)home/(?P<homeuser>[^/\s\"'<>:;,=\\\0]+)",  # the user only
    rf"[Gg](?<!\w[Gg])(?i:uid):\s*0[xX](?P<guidxv>{_HEX}{{16}})\b",  # the digits only
    # 6 octets: Ethernet; 8: EUI-64; 20: an IPoIB hardware address (it holds the port GID)
    rf"{_HEX}(?<![0-9A-Fa-f:]{_HEX}){_HEX}(?::{_HEX}{{2}}){{5}}(?:(?::{_HEX}{{2}}){{14}}"
    rf"|(?::{_HEX}{{2}}){{2}})?(?![0-9A-Fa-f:])(?P<mac>)",
    rf"{_HEX}(?<![0-9A-Fa-f:]{_HEX}){_HEX}{{3}}(?::{_HEX}{{4}}){{3}}(?![0-9A-Fa-f:])(?P<guid>)",
    # (2 to 7 groups of up to 4 digits and a colon, the first one begun by the first class)
    rf"[0-9A-Fa-f:](?<![\w:.][0-9A-Fa-f:])(?:(?<=:)|{_HEX}{{0,3}}:)(?:{_HEX}{{0,4}}:){{1,6}}"
    rf"(?:{_HEX}{{1,4}}|(?:\d{{1,3}}\.){{3}}\d{{1,3}})?(?:%[\w.-]+)?(?![\w:])(?P<ipv6>)",
    # Four octets, not part of a version: 9.1.0.70 in "cudnn-9.1.0.70", "==9.1.0.70" or
    # "Version: 9.1.0.70" stays.
    r"\d(?<![\w.+~-]\d)(?<![<>=!~]=\d)(?<!(?i:version) \d)(?<!(?i:version): \d)"
    r"(?<!(?i:version)=\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?![\w+]|\.\d|-\d)(?P<ipv4>)",
    # NAME=value in text (a command line, a unit's Environment=): a secret name loses the
    # value. Upper case only: `key=ps.index` in a script is no variable. The value is looked
    # at, not consumed, so that the rest of the text is read in its own context (no recursion).
    r"[A-Z_](?<![\w.-][A-Z_])[A-Z0-9_]*=(?=(?P<avalue>[^\s\0\"'&;,]+))",
    # an option of any case whose name says secret: password= (CIFS mount options),
    # rootpassword=, ipmi.pass= (kernel command line), client_secret=; never
    # iommu.passthrough=. The match begins at the word (the value is what is replaced).
    r"[pPsStTcCaAjJ](?i:(?<=p)ass(?:word|wd|phrase)?|(?<=s)ecret|(?<=t)oken|(?<=c)redentials?"
    r"|(?<=a)pi[_-]?key|(?<=j)wt)(?:[_.-][\w.-]{0,40})?=(?=(?P<ovalue>[^\s\0\"'&;,]+))",
    # a command-line flag that takes a secret: --password X, --token=X
    r"-(?<![\w-]-)-?[\w-]{0,40}?(?i:pass(?:word|wd|phrase)?|token|secret|api-?key)"
    r"(?:=|[ \0]+)(?=(?P<fvalue>[^\s\0\"'-][^\s\0\"']*))",
]
SHAPES = re.compile("|".join(_SHAPES))  # (and the words learnt: Redactor._compiled)
# Secret shapes, after the field's scanners (gitleaks' rules, detect-secrets' plugins):
# vendors' key prefixes, JSON web tokens, private key blocks, webhook URLs, and long tokens
# of high entropy. The scan finds tokens of 20 or more key characters (one shape, begun by
# its class: fast), and the key shapes are looked for inside each token found; webhooks and
# key blocks are found after their fixed text. Each quantifier is bounded or runs over a
# class its follower is not in, so both are linear (tests/test_regex_linear.py).
SECRET_TOKENS = re.compile(
    r"[A-Za-z0-9+/_.-](?<![A-Za-z0-9+/_.-].)[A-Za-z0-9+/_.-]{19,}={0,2}"
    r"(?![A-Za-z0-9+/_.=-])(?P<token>)"
    r"|hooks\.slack\.com/(?P<slack>(?:services|workflows|triggers)/[A-Za-z0-9/_+-]{8,255})"
    r"|/api/webhooks/(?P<webhook>[0-9]{1,30}/[A-Za-z0-9_-]{1,255})"
    r"|PRIVATE KEY-----(?P<keyblock>[A-Za-z0-9+/=\s]{1,1000000})"
)
KEY_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255}"
    r"|gl(?:pat|rt|ptt|dt|cbt|soat)-[A-Za-z0-9_-]{20,64}|xox[abposr]-[A-Za-z0-9-]{10,255}"
    r"|(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA)[A-Z0-9]{16}"
    r"|AIza[A-Za-z0-9_-]{35}|[rsp]k_(?:live|test)_[A-Za-z0-9]{16,255}"
    r"|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,255}|hf_[A-Za-z0-9]{30,64}|npm_[A-Za-z0-9]{36}"
    r"|pypi-[A-Za-z0-9_-]{50,255}|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"
    r"|dop_v1_[a-f0-9]{64}|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}|glc_[A-Za-z0-9+/]{32,400}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)"
)
_PLAIN_WORD = re.compile(r"[A-Za-z][a-z]{2,}")  # a path's folder: "home", "Downloads"
ENTROPY_MIN_BITS = 4.5  # detect-secrets' limit for base64 strings; a random 40-char key: 4.8
_HOME = re.compile(r"(?<![\w.])/home/([^/\s\"'<>:;,=\\\0]+)")
_EXPLICIT = {  # lines that name a serial or a UUID, whatever the tool
    "serial": re.compile(
        r"(?:<serial>\s*([^<\s][^<]*?)\s*</serial>|(?:Serial Number|Serial No|SerialNumber|"
        r"Device Serial Number)\s*[:=]?\s*([^\s<>\"',]+))",
        re.I,
    ),
    "uuid": re.compile(rf"(?:<uuid>\s*({_UUID})\s*</uuid>|\bUUID\s*[:=]\s*({_UUID})\b)", re.I),
}
_WORD_EDGE = r"A-Za-z0-9-"
_LITERAL_KINDS = ("host", "domain", "user", "serial", "uuid", "secret")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def secret_name(name: str) -> bool:
    """A variable or option whose value must not leave the host (HF_TOKEN, AWS_SECRET_…,
    SSHPASS, CI_JOB_JWT, SLACK_WEBHOOK_URL, password=, ipmi.pass=)."""
    upper = name.upper()
    if any(word in upper for word in _SECRET_WORDS) or upper.endswith("PASS"):
        return True
    parts = _SECRET_PARTS if name == upper else _OPTION_PARTS
    return any(part in parts for part in re.split(r"[_.-]", upper))


def env_kept(name: str) -> bool:
    """A variable whose value a bundle keeps (docs/bundle-format.md, "The environment")."""
    return name in ENV_KEPT or name.startswith(ENV_KEPT_PREFIXES)


def _is_placeholder(value: str) -> bool:
    v = value.strip()
    return len(v) < 6 or v.lower() in PLACEHOLDERS or len(set(v.replace("-", ""))) <= 1


class Redactor:
    """Values -> stable pseudonyms, per kind; the same value gets the same pseudonym in every
    member, in member names, and in every bundle redacted with the same (loaded) map."""

    def __init__(self) -> None:
        self.kinds: dict[str, dict[str, str]] = {}  # kind -> value (normalised) -> pseudonym
        self._taken: dict[str, set[str]] = {}  # kind -> its pseudonyms (left as they are)
        self.shown: dict[str, str] = {}  # pseudonym as written -> the text it replaced
        self._pattern: re.Pattern[str] | None = None
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
        redactor = cls()
        if not os.path.exists(path):
            return redactor
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
                redactor.kinds.setdefault(kind, {})[value] = pseudonym
                redactor._taken.setdefault(kind, set()).add(pseudonym)
        return redactor

    def save(self, path: str) -> None:
        """Write the map, readable by its owner only (it undoes the redaction)."""
        data = {"format": MAP_FORMAT, "format_version": MAP_VERSION, "kinds": self.kinds}
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".redact-map-", dir=folder)  # mkstemp: mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_json_bytes(data))
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
        pattern = re.compile(rf"(?<![{_WORD_EDGE}])(?:{'|'.join(map(re.escape, names))})"
                             rf"(?![{_WORD_EDGE}])")  # fmt: skip
        return pattern.sub(lambda m: self.shown[m.group()], text)

    # --- pseudonyms ------------------------------------------------------------------

    def pseudonym(self, kind: str, value: str, make) -> str:
        """The pseudonym of `value`; `make(n)` writes the n-th one of this kind."""
        table = self.kinds.setdefault(kind, {})
        if value in table:
            return table[value]
        taken = self._taken.setdefault(kind, set())
        if value in taken:  # already a pseudonym: a bundle redacted twice stays the same
            return value
        new = make(len(table) + 1)
        while new in taken:  # a hand-edited map: never give two values one pseudonym
            new = make(len(table) + len(taken) + 1)
        table[value] = new
        taken.add(new)
        if kind in _LITERAL_KINDS:
            self._pattern = None  # a new word to look for
        return new

    def file_name(self, text: str) -> str:
        """`text` redacted, and every host name known replaced inside a file name too, where
        `-` and `_` join it to other words (sosreport-<host>-2026-12-01-abcdef.tar.xz)."""
        text = self.text(text)
        hosts = [h for h in self.kinds.get("host", {}) if h not in self._taken.get("host", ())]
        if not hosts:
            return text
        words = "|".join(map(re.escape, sorted(hosts, key=len, reverse=True)))
        pattern = re.compile(rf"(?<![A-Za-z0-9])(?:{words})(?![A-Za-z0-9])", re.I)
        return pattern.sub(lambda m: self.host(m.group()), text)

    def _named(self, kind: str, value: str, fmt: str) -> str:
        new = self.pseudonym(kind, value, lambda n: fmt % n)
        self.shown.setdefault(new, value)
        return new

    def host(self, name: str) -> str:
        name = name.strip().rstrip(".")
        if "." not in name:
            return self._named("host", name.lower(), "host-%04d")
        short, domain = name.split(".", 1)
        return f"{self.host(short)}.{self.domain(domain)}"

    def domain(self, domain: str) -> str:
        return self._named("domain", domain.lower(), "domain-%04d.example")

    def user(self, name: str) -> str:
        return self._named("user", name, "user-%04d")

    def serial(self, value: str) -> str:
        return self._named("serial", value.strip(), "serial-%04d")

    def secret(self, value: str) -> str:
        return self._named("secret", value, "secret-%04d")

    def uuid(self, value: str) -> str:
        cut = 4 if value[:4].upper() in ("GPU-", "MIG-") else 0
        prefix, bare = value[:cut], value[cut:]
        pseudo = self.pseudonym("uuid", bare.lower(), lambda n: f"00000000-0000-0000-0000-{n:012x}")
        return prefix + (pseudo.upper() if bare.isupper() else pseudo)

    def container(self, text: str) -> str:
        return self.pseudonym("container", text.lower(), lambda n: f"{n:064x}")

    def mac(self, text: str) -> str:
        octets = text.lower().split(":")
        if len(set(octets)) == 1 and octets[0] in ("00", "ff"):
            return text  # lo's 00:00:00:00:00:00 and the broadcast address identify nothing

        def make(n: int) -> str:
            tail = n.to_bytes(3, "big").hex()
            raw = "02" + "00" * (len(octets) - 4) + tail
            return ":".join(raw[i : i + 2] for i in range(0, len(raw), 2))

        return self.pseudonym(f"mac{len(octets)}", ":".join(octets), make)

    def guid(self, text: str) -> str:
        digits = text.lower().replace(":", "").removeprefix("0x")
        if set(digits) == {"0"}:
            return text
        pseudo = self.pseudonym("guid", digits, lambda n: f"{0x0200000000000000 + n:016x}")
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
        for kind, pool, test in _V4_POOLS:
            if test(address):
                return self.pseudonym(kind, text, lambda n, p=pool: str(p + n))
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
            for kind, pool, test in _V6_POOLS:
                if test(address):
                    new = ipaddress.IPv6Address(
                        self.pseudonym(kind, address.exploded, lambda n, p=pool: (p + n).exploded)
                    )
                    break
        return _v6_text(bare, new, new.compressed) + zone + scope

    # --- text ------------------------------------------------------------------------

    def learn(self, kind: str, value: str) -> None:
        """A value found in the bundle, to be replaced wherever it appears."""
        value = value.strip()
        if kind in ("host", "user"):
            if value.lower() in COMMON_WORDS or len(value) < 3 or value.isdigit():
                return  # only where it is known to be a name (see COMMON_WORDS)
            if kind == "host" and value.lower().startswith("localhost"):
                return
        elif _is_placeholder(value):
            return
        getattr(self, kind)(value)

    def _literals(self) -> dict[str, tuple[str, str]]:
        """Text to replace as a word (lower case) -> (kind, the value as learnt)."""
        found = {}
        for kind in _LITERAL_KINDS:
            for value in self.kinds.get(kind, {}):
                if value in self._taken.get(kind, ()):
                    continue
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
        if self._pattern is None:
            self._literal_kinds = self._literals()
            shapes = list(_SHAPES)
            if self._literal_kinds:
                # first character, then the rest of each word that begins with it (the
                # shapes' form; longest first, so that an FQDN wins over its host)
                words = sorted(self._literal_kinds, key=len, reverse=True)
                firsts = "".join(sorted({c for w in words for c in (w[0].lower(), w[0].upper())}))
                rests = "|".join(f"(?<={re.escape(w[0])}){re.escape(w[1:])}" for w in words)
                shapes.append(
                    rf"[{re.escape(firsts)}](?<![{_WORD_EDGE}].)(?i:{rests})"
                    rf"(?![{_WORD_EDGE}])(?P<literal>)"
                )
            self._pattern = re.compile("|".join(shapes)) if self._literal_kinds else SHAPES
        return self._pattern

    def text(self, text: str) -> str:
        """`text` with every value this redactor recognises replaced by its pseudonym."""
        text = SECRET_TOKENS.sub(self._secret_shape, text)
        out, done = [], 0
        for m in self._compiled().finditer(text):
            if m.start() < done:
                continue  # inside a secret value already replaced
            out.append(text[done : m.start()])
            new, done = self._replace(m)
            out.append(new)
        out.append(text[done:])
        return "".join(out)

    def _secret_shape(self, m: re.Match[str]) -> str:
        group = m.lastgroup
        found = m.group()
        if group != "token":  # a webhook's path, a key block's body
            return found[: m.start(group) - m.start()] + self.secret(m.group(group))
        keyed = KEY_SHAPES.sub(lambda k: self.secret(k.group()), found)
        if keyed != found:
            return keyed
        # dots part words, versions and domains (base64 has none); a piece with a plain
        # word for a folder is a path
        return ".".join(self.secret(piece) if _random_token(piece) else piece
                        for piece in found.split("."))  # fmt: skip

    def _replace(self, m: re.Match[str]) -> tuple[str, int]:
        """(what replaces the match, where the text goes on)"""
        group = m.lastgroup
        found = m.group()
        if group in ("avalue", "ovalue", "fvalue"):  # NAME=, looking at its value
            if group == "avalue" and not secret_name(found[:-1]):
                return found, m.end()  # the value is read on, in its context
            return found + self.secret(m.group(group)), m.end(group)
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
            kind, value = self._literal_kinds[found.lower()]
            return getattr(self, kind)(value)
        if group in ("homeuser", "guidxv"):  # the value after its label
            cut = m.start(group) - m.start()
            handler = self.user if group == "homeuser" else self.guid
            return found[:cut] + handler(found[cut:])
        if group == "userinfo":
            return "//" + self._named("userinfo", found[2:], "cred-%04d")
        if group in ("ipv4", "ipv6") and self.known_addresses_only:
            return self._known_address(group, found)
        return getattr(self, group)(found)

    def _known_address(self, group: str, text: str) -> str:
        """The pseudonym of an address already met as one, else `text` (a version)."""
        key = text
        if group == "ipv6":
            try:
                key = ipaddress.IPv6Address(text.partition("%")[0]).exploded
            except ValueError:
                return text
        for kind, table in self.kinds.items():
            if kind.startswith(group + "-") and key in table:
                return getattr(self, group)(text)
        return text

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
                value = self.secret(value)
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
                    out[self.text(k)] = self.secret(v)
                elif isinstance(v, str) and v and k in ("hostname", "fqdn"):
                    out[k] = self.host(v)
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
            text = text.replace(stripped, self.host(stripped))
        elif name == "etc/passwd":
            text = "\n".join(self._passwd_line(line) for line in text.split("\n"))
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

    def _passwd_line(self, line: str) -> str:
        fields = line.split(":")
        if len(fields) >= 7 and _human_uid(fields[2]):
            fields[0] = self.user(fields[0])
        return ":".join(fields)


@functools.lru_cache(maxsize=4096)  # a log repeats its tokens
def _random_token(token: str) -> bool:
    """A token of 20 or more characters with upper and lower case letters and digits, as
    random as a key is, and no plain word for a folder."""
    if len(token) < 20 or not (
        re.search("[a-z]", token) and re.search("[A-Z]", token) and re.search("[0-9]", token)
    ):
        return False
    if any(_PLAIN_WORD.fullmatch(part) for part in token.split("/")):
        return False
    counts = collections.Counter(token)
    bits = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    return bits >= ENTROPY_MIN_BITS


def _human_uid(uid: str) -> bool:
    return uid.isdigit() and 1000 <= int(uid) < 65534


def _v6_text(original: str, new: ipaddress.IPv6Address, compressed: str) -> str:
    """`new` written the way `original` was: sysfs GIDs are fully spelled out."""
    return new.exploded if "::" not in original and len(original) == 39 else compressed


_SHARED, _UNIQUE_LOCAL = ipaddress.IPv4Network("100.64.0.0/10"), ipaddress.IPv6Network("fc00::/7")
_V4_POOLS = (
    ("ipv4-link-local", ipaddress.IPv4Address("169.254.0.0"), lambda a: a.is_link_local),
    ("ipv4-shared", ipaddress.IPv4Address("100.64.0.0"), _SHARED.__contains__),
    ("ipv4-private", ipaddress.IPv4Address("10.255.0.0"), lambda a: a.is_private),
    ("ipv4-global", ipaddress.IPv4Address("11.0.0.0"), lambda a: True),
)  # fmt: skip
_V6_POOLS = (
    ("ipv6-link-local", ipaddress.IPv6Address("fe80::"), lambda a: a.is_link_local),
    ("ipv6-unique-local", ipaddress.IPv6Address("fd00::"), _UNIQUE_LOCAL.__contains__),
    ("ipv6-site-local", ipaddress.IPv6Address("fec0::"), lambda a: a.is_site_local),
    ("ipv6-global", ipaddress.IPv6Address("2000::"), lambda a: True),
)  # fmt: skip


# --- bundles ---------------------------------------------------------------------------


def _walk(root: str):
    """(bundle-relative name, lstat) of every entry, sorted, folders before their contents."""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel_folder = os.path.relpath(folder, root)
        for name in sorted(dirs) + sorted(files):
            rel = name if rel_folder == "." else f"{rel_folder}/{name}"
            yield rel, os.lstat(os.path.join(root, rel))


def _discover(contents: dict[str, bytes], names: list[str], redactor: Redactor) -> None:
    """Learn the values that only their place in the bundle shows (names, serials), so
    that they are replaced in every member, the ones read before them too."""

    def read(rel: str) -> str:
        return contents[rel].decode("utf-8", "replace")

    for rel in contents:
        base = rel.rsplit("/", 1)[-1]
        if rel in HOSTNAME_FILES or re.fullmatch(rf"{COMMANDS}/hostname[^/]*/stdout", rel):
            for name in read(rel).split():
                redactor.learn("host", name)
        elif rel == DOMAIN_FILE:
            redactor.learn("domain", read(rel).strip())
        elif rel == f"{FILES}/etc/passwd":
            for line in read(rel).splitlines():
                fields = line.split(":")
                if len(fields) >= 7 and _human_uid(fields[2]):
                    redactor.learn("user", fields[0])
        elif re.fullmatch(rf"{FILES}/proc/[^/]+/environ", rel):
            for item in read(rel).split("\0"):
                name, _, value = item.partition("=")
                if name in _USER_VARS and value != "root":
                    redactor.learn("user", value)
        elif rel.startswith(f"{FILES}/") and "serial" in base:
            redactor.learn("serial", read(rel))
        elif base == "product_uuid":
            redactor.learn("uuid", read(rel))
        if rel.endswith((".json", "stdout")) or not rel.startswith(f"{FILES}/"):
            text = read(rel)
            lower = text.lower()
            for kind, pattern in _EXPLICIT.items():
                if kind not in lower:
                    continue  # a 15 MB kernel log names no serial: not scanned for one
                for m in pattern.finditer(text):
                    redactor.learn(kind, m.group(1) or m.group(2))
            if rel.endswith(".json"):
                _discover_json(text, redactor)
        if b"/home/" in contents[rel]:
            for m in _HOME.finditer(read(rel)):
                redactor.learn("user", m.group(1))
    for rel in names:
        for m in re.finditer(r"^/home/([^/]+)", _host_path(rel)):
            redactor.learn("user", m.group(1))


def _host_path(rel: str) -> str:
    """files/home/x -> /home/x (so that it reads as the path it stands for); else ""."""
    return rel[len(FILES) :] if rel.startswith(f"{FILES}/") else ""


def _member_name(rel: str, redactor: Redactor) -> str:
    path = _host_path(rel)
    return FILES + redactor.text(path) if path else redactor.text(rel)


def _discover_json(text: str, redactor: Redactor) -> None:
    try:
        data = json.loads(text)
    except ValueError:
        return
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                inner = v.get("value") if isinstance(v, dict) else v
                if isinstance(inner, str) and k in ("serial", "uuid"):
                    redactor.learn(k, inner)
                elif isinstance(inner, str) and k in ("hostname", "fqdn"):
                    redactor.learn("host", inner)
                stack.append(v)
        elif isinstance(value, list):
            stack.extend(value)


def _command_folder(rel: str, folder_map: dict[str, str]) -> str:
    parts = rel.split("/")
    if len(parts) >= 2 and parts[0] == COMMANDS and parts[1] in folder_map:
        parts[1] = folder_map[parts[1]]
        return "/".join(parts)
    return ""


def _command_folders(root: str, redactor: Redactor) -> dict[str, str]:
    """commands/<name> -> the name its redacted argv gets (the name can hold a hash of it)."""
    found = {}
    top = os.path.join(root, COMMANDS)
    for name in sorted(os.listdir(top)) if os.path.isdir(top) else ():
        try:
            with open(os.path.join(top, name, "command.json"), "rb") as f:
                argv = json.loads(f.read()).get("argv")
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or not argv:
            continue
        old = command_folders(argv)
        if name not in old:
            continue
        new = command_folders([redactor.text(a) for a in argv])
        found[name] = new[old.index(name)]
    return found


def redact_bundle(bundle_dir: str, redactor: Redactor, deadline: float | None = None) -> None:
    """Rewrite the bundle directory in place: every member's bytes and name redacted, and
    the manifest's sha256 entries recomputed. The redacted tree is built beside the bundle
    and swapped in at the end, so an interrupted run leaves the original whole.

    Past `deadline` (time.monotonic()), what is left of a long text is left out (LEFT_OUT).
    Save `redactor` (its map) somewhere outside the bundle afterwards."""
    redactor.deadline = deadline
    root = os.path.abspath(bundle_dir)
    # The reports are derived from the other members: redacted last, with what those taught.
    entries = sorted(_walk(root), key=lambda entry: entry[0] in DERIVED)
    contents = {}
    for rel, st in entries:
        if stat.S_ISREG(st.st_mode):
            with open(os.path.join(root, rel), "rb") as f:
                contents[rel] = f.read()
    _discover(contents, [rel for rel, _ in entries], redactor)
    folders = _command_folders(root, redactor)
    parent = os.path.dirname(root)
    new_root = tempfile.mkdtemp(prefix=".dldoctor-redact-", dir=parent)
    written: dict[str, bytes] = {}
    manifest = None
    try:
        for rel, st in entries:
            new_rel = _command_folder(rel, folders) or _member_name(rel, redactor)
            target = os.path.join(new_root, new_rel)
            source = os.path.join(root, rel)
            if stat.S_ISDIR(st.st_mode):
                os.makedirs(target, exist_ok=True)
            elif stat.S_ISLNK(st.st_mode):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.symlink(redactor.text(os.readlink(source)), target)
            elif stat.S_ISREG(st.st_mode):
                if rel == MANIFEST:
                    manifest = contents[rel]
                    continue
                redactor.known_addresses_only = rel in DERIVED
                data = _redact_member(rel, contents[rel], redactor)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as f:
                    f.write(data)
                os.chmod(target, stat.S_IMODE(st.st_mode))
                written[new_rel] = data
            # anything else (a FIFO, a device) is no member a reader accepts: left out
        redactor.known_addresses_only = False
        if manifest is not None:
            with open(os.path.join(new_root, MANIFEST), "wb") as f:
                f.write(_redact_manifest(manifest, written, redactor))
        os.chmod(new_root, stat.S_IMODE(os.stat(root).st_mode))
        old_root = tempfile.mkdtemp(prefix=".dldoctor-unredacted-", dir=parent)
        moved = os.path.join(old_root, "bundle")
        os.rename(root, moved)
        try:
            os.rename(new_root, root)
        except BaseException:
            os.rename(moved, root)
            raise
        shutil.rmtree(old_root)
    except BaseException:
        shutil.rmtree(new_root, ignore_errors=True)
        raise


def _redact_member(rel: str, data: bytes, redactor: Redactor) -> bytes:
    if rel.startswith(f"{FILES}/"):
        return redactor.member(rel, data)
    if rel.endswith(".json"):
        try:
            parsed = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return redactor.member(rel, data)
        try:
            # answers.json is keyed by host path: a content_b64 is redacted as that file
            return _json_bytes(redactor.json_value(parsed))
        except RecursionError:  # nested deeper than Python recurses: redacted as text
            pass
    return redactor.member(rel, data)


def _redact_manifest(data: bytes, written: dict[str, bytes], redactor: Redactor) -> bytes:
    try:
        manifest = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        manifest = None
    if not isinstance(manifest, dict):
        return redactor.member(MANIFEST, data)
    manifest = {k: v if k == "files" else redactor.json_value(v) for k, v in manifest.items()}
    if isinstance(manifest.get("argv"), list):  # --from sosreport-<host>-….tar.xz
        manifest["argv"] = [redactor.file_name(a) if isinstance(a, str) else a
                            for a in manifest["argv"]]  # fmt: skip
    manifest["files"] = file_digests(written)
    return _json_bytes(manifest)
