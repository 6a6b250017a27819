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
import ipaddress
import json
import os
import re
import shutil
import stat
import tempfile
from typing import Any

from dldoctor.snapshots.bundle import (
    COMMANDS,
    FILES,
    MANIFEST,
    _json_bytes,
    command_folders,
    file_digests,
)

MAP_FORMAT = "dldoctor-redaction-map"
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
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE", "APIKEY",
                 "PRIVATE")  # fmt: skip
_USER_VARS = ("USER", "LOGNAME", "USERNAME", "SUDO_USER")

_HEX = "[0-9A-Fa-f]"
_UUID = rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
# One pass over the text with every shape at once: a pseudonym is never redacted again,
# and the first shape that matches at a place wins (a MAC is not read as an IPv6).
_SHAPES = [
    # https://user:pass@host/: the userinfo
    r"(?P<userinfo>(?<=://)[^\s/@:'\"<>]+(?::[^\s/@'\"<>]*)?(?=@))",
    rf"(?P<uuid>\b(?:GPU|MIG)-{_UUID}\b)",
    # a container id (cgroup paths): a container's hostname is its first 12 digits
    rf"(?P<container>(?<![0-9A-Fa-f]){_HEX}{{64}}(?![0-9A-Fa-f]))",
    r"(?P<home>(?<![\w.])/home/)(?P<homeuser>[^/\s\"'<>:;,=\\\0]+)",
    rf"(?P<guidx>\bguid:\s*0x)(?P<guidxv>{_HEX}{{16}})\b",
    # 6 octets: Ethernet; 8: EUI-64; 20: an IPoIB hardware address (it holds the port GID)
    rf"(?P<mac>(?<![0-9A-Fa-f:]){_HEX}{{2}}(?::{_HEX}{{2}}){{5}}(?:(?::{_HEX}{{2}}){{14}}"
    rf"|(?::{_HEX}{{2}}){{2}})?(?![0-9A-Fa-f:]))",
    rf"(?P<guid>(?<![0-9A-Fa-f:]){_HEX}{{4}}(?::{_HEX}{{4}}){{3}}(?![0-9A-Fa-f:]))",
    rf"(?P<ipv6>(?<![\w:.])(?:{_HEX}{{0,4}}:){{2,7}}(?:{_HEX}{{1,4}}|(?:\d{{1,3}}\.){{3}}\d{{1,3}})?"
    r"(?:%[\w.-]+)?(?![\w:]))",
    # Four octets, not part of a version: 9.1.0.70 in "cudnn-9.1.0.70", "==9.1.0.70" or
    # "Version: 9.1.0.70" stays.
    r"(?P<ipv4>(?<![\w.+~-])(?<![<>=!~]=)(?<!version )(?<!version: )(?<!version=)"
    r"(?:\d{1,3}\.){3}\d{1,3}(?![\w+]|\.\d|-\d))",
    # NAME=value in text (a command line, a unit's Environment=): secret names lose the
    # value. Upper case only: `key=ps.index` in a script is no variable.
    r"(?P<assign>(?<![\w.-])(?P<aname>(?-i:[A-Z_][A-Z0-9_]*))=)(?P<avalue>[^\s\0\"'&;,]+)",
]
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
    """An environment variable whose value must not leave the host (HF_TOKEN, AWS_SECRET_…)."""
    upper = name.upper()
    if any(word in upper for word in _SECRET_WORDS):
        return True
    return any(part in _SECRET_PARTS for part in upper.split("_"))


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
        for kind, table in data.get("kinds", {}).items():
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
                words = sorted(self._literal_kinds, key=len, reverse=True)
                alternatives = "|".join(map(re.escape, words))
                shapes.append(
                    rf"(?P<literal>(?<![{_WORD_EDGE}])(?:{alternatives})(?![{_WORD_EDGE}]))"
                )
            self._pattern = re.compile("|".join(shapes), re.I)
        return self._pattern

    def text(self, text: str) -> str:
        """`text` with every value this redactor recognises replaced by its pseudonym."""
        return self._compiled().sub(self._replace, text)

    def _replace(self, m: re.Match[str]) -> str:
        group = m.lastgroup
        found = m.group()
        if group == "literal":
            kind, value = self._literal_kinds[found.lower()]
            new = getattr(self, kind)(value)
        elif group == "homeuser":
            new = m.group("home") + self.user(m.group("homeuser"))
        elif group == "guidxv":
            new = m.group("guidx") + self.guid(m.group("guidxv"))
        elif group == "avalue":
            name, value = m.group("aname"), m.group("avalue")
            new = m.group("assign") + (
                self.secret(value) if secret_name(name) else self.text(value)
            )
        elif group == "userinfo":
            new = self._named("userinfo", found, "cred-%04d")
        else:
            new = getattr(self, group)(found)
        if new != found and group != "avalue":  # NAME=value: its parts are recorded
            self.shown.setdefault(new, found)
        return new

    def environ(self, data: bytes) -> bytes:
        """/proc/<pid>/environ: NUL-separated NAME=value, values may hold spaces."""
        out = []
        for item in data.split(b"\0"):
            name, sep, value = item.decode("utf-8", "surrogateescape").partition("=")
            if sep and secret_name(name) and value:
                value = self.secret(value)
            elif sep and name in _USER_VARS and value and value != "root":
                value = self.user(value)
            elif sep:
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
        return self.text(text).encode("utf-8", "surrogateescape")

    def _passwd_line(self, line: str) -> str:
        fields = line.split(":")
        if len(fields) >= 7 and _human_uid(fields[2]):
            fields[0] = self.user(fields[0])
        return ":".join(fields)


def _human_uid(uid: str) -> bool:
    return uid.isdigit() and 1000 <= int(uid) < 65534


def _v6_text(original: str, new: ipaddress.IPv6Address, compressed: str) -> str:
    """`new` written the way `original` was: sysfs GIDs are fully spelled out."""
    return new.exploded if "::" not in original and len(original) == 39 else compressed


_V4_POOLS = (
    ("ipv4-link-local", ipaddress.IPv4Address("169.254.0.0"), lambda a: a.is_link_local),
    ("ipv4-shared", ipaddress.IPv4Address("100.64.0.0"),
     lambda a: a in ipaddress.IPv4Network("100.64.0.0/10")),
    ("ipv4-private", ipaddress.IPv4Address("10.255.0.0"), lambda a: a.is_private),
    ("ipv4-global", ipaddress.IPv4Address("11.0.0.0"), lambda a: True),
)  # fmt: skip
_V6_POOLS = (
    ("ipv6-link-local", ipaddress.IPv6Address("fe80::"), lambda a: a.is_link_local),
    ("ipv6-unique-local", ipaddress.IPv6Address("fd00::"),
     lambda a: a in ipaddress.IPv6Network("fc00::/7")),
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
            for kind, pattern in _EXPLICIT.items():
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


def redact_bundle(bundle_dir: str, redactor: Redactor) -> None:
    """Rewrite the bundle directory in place: every member's bytes and name redacted, and
    the manifest's sha256 entries recomputed. The redacted tree is built beside the bundle
    and swapped in at the end, so an interrupted run leaves the original whole.

    Save `redactor` (its map) somewhere outside the bundle afterwards."""
    root = os.path.abspath(bundle_dir)
    entries = list(_walk(root))
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
                data = _redact_member(rel, contents[rel], redactor)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as f:
                    f.write(data)
                os.chmod(target, stat.S_IMODE(st.st_mode))
                written[new_rel] = data
            # anything else (a FIFO, a device) is no member a reader accepts: left out
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
        # answers.json is keyed by host path: a content_b64 is redacted as that file
        return _json_bytes(redactor.json_value(parsed))
    return redactor.member(rel, data)


def _redact_manifest(data: bytes, written: dict[str, bytes], redactor: Redactor) -> bytes:
    try:
        manifest = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        manifest = None
    if not isinstance(manifest, dict):
        return redactor.member(MANIFEST, data)
    manifest = {k: v if k == "files" else redactor.json_value(v) for k, v in manifest.items()}
    manifest["files"] = file_digests(written)
    return _json_bytes(manifest)
