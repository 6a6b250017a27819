"""User names -> user-0001: from /etc/passwd, $USER and the like, and /home/<name>."""

from __future__ import annotations

import re

from dldoctor.snapshots.redact.pseudonyms import Pseudonyms

USER_VARS = ("USER", "LOGNAME", "USERNAME", "SUDO_USER")
HOME = re.compile(r"(?<![\w.])/home/([^/\s\"'<>:;,=\\\0]+)")


def human_uid(uid: str) -> bool:
    """A uid of a person's account (a system account's name is no one's)."""
    return uid.isdigit() and 1000 <= int(uid) < 65534


class UserMap:
    def __init__(self, store: Pseudonyms) -> None:
        self.store = store

    def user(self, name: str) -> str:
        return self.store.named("user", name, "user-%04d")

    def passwd_line(self, line: str) -> str:
        """An /etc/passwd line with a person's account name replaced."""
        fields = line.split(":")
        if len(fields) >= 7 and human_uid(fields[2]):
            fields[0] = self.user(fields[0])
        return ":".join(fields)
