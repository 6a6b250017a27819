"""The values only their place in a bundle shows (a hostname file, a passwd line, a serial's
sysfs file, a "Serial Number:" line, $USER), learnt before any member is redacted so that
they are replaced in every member, the ones read before them too."""

from __future__ import annotations

import json
import re

from dldoctor.snapshots.bundle import COMMANDS, FILES
from dldoctor.snapshots.redact.hosts import DOMAIN_FILE, HOSTNAME_FILES
from dldoctor.snapshots.redact.identifiers import EXPLICIT
from dldoctor.snapshots.redact.redactor import Redactor
from dldoctor.snapshots.redact.users import HOME, USER_VARS, human_uid


def host_path(rel: str) -> str:
    """files/home/x -> /home/x (so that it reads as the path it stands for); else ""."""
    return rel[len(FILES) :] if rel.startswith(f"{FILES}/") else ""


def discover(contents: dict[str, bytes], names: list[str], redactor: Redactor) -> None:
    """Learn the values of the members `contents` (bundle-relative name -> bytes) and of the
    member `names` that their place shows."""

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
                if len(fields) >= 7 and human_uid(fields[2]):
                    redactor.learn("user", fields[0])
        elif re.fullmatch(rf"{FILES}/proc/[^/]+/environ", rel):
            for item in read(rel).split("\0"):
                name, _, value = item.partition("=")
                if name in USER_VARS and value != "root":
                    redactor.learn("user", value)
        elif rel.startswith(f"{FILES}/") and "serial" in base:
            redactor.learn("serial", read(rel))
        elif base == "product_uuid":
            redactor.learn("uuid", read(rel))
        if rel.endswith((".json", "stdout")) or not rel.startswith(f"{FILES}/"):
            text = read(rel)
            lower = text.lower()
            for kind, pattern in EXPLICIT.items():
                if kind not in lower:
                    continue  # a 15 MB kernel log names no serial: not scanned for one
                for m in pattern.finditer(text):
                    redactor.learn(kind, m.group(1) or m.group(2))
            if rel.endswith(".json"):
                _discover_json(text, redactor)
        if b"/home/" in contents[rel]:
            for m in HOME.finditer(read(rel)):
                redactor.learn("user", m.group(1))
    for rel in names:
        for m in re.finditer(r"^/home/([^/]+)", host_path(rel)):
            redactor.learn("user", m.group(1))


def _discover_json(text: str, redactor: Redactor) -> None:
    try:
        data = json.loads(text)
    except ValueError:
        return
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            # A process of the gpu_users probe: its user, when a person's account.
            user, uid = value.get("user"), value.get("uid")
            if isinstance(user, str) and isinstance(uid, int) and human_uid(str(uid)):
                redactor.learn("user", user)
            for k, v in value.items():
                inner = v.get("value") if isinstance(v, dict) else v
                if isinstance(inner, str) and k in ("serial", "uuid"):
                    redactor.learn(k, inner)
                elif isinstance(inner, str) and k in ("hostname", "fqdn"):
                    redactor.learn("host", inner)
                stack.append(v)
        elif isinstance(value, list):
            stack.extend(value)
