"""Secrets -> secret-0001: the values of secret-named variables and options, credentials in
URLs, and tokens of a key's shape or randomness (after gitleaks' rules and detect-secrets'
plugins). The environment keeps the values of what a check reads only."""

from __future__ import annotations

import collections
import functools
import math
import re

from dldoctor.snapshots.redact.pseudonyms import Pseudonyms

_SECRET_PARTS = frozenset("KEY KEYS AUTH SESSION PASS PASSPHRASE PAT PW".split())
# A lower-case option (`password=` in mount options, `ipmi.pass=` on the kernel command line)
# is a secret by these parts only: `key=ps.index` in a script is no secret. ($PWD is a folder.)
_OPTION_PARTS = frozenset("PASS PASSPHRASE PW".split())
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE", "APIKEY",
                 "PRIVATE", "JWT", "WEBHOOK")  # fmt: skip
# The environment keeps the values of what a check reads (grep doctor/facts and checks for
# `environ`: PATH, CUDA_HOME, CUDA_PATH, NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_GID_INDEX,
# PID 1's `container`) and of what support reads beside them; any other variable keeps its
# name only (SSHPASS, DATABASE_URL, MYVAR=ghp_…: a value's name does not say it is harmless).
ENV_KEPT = frozenset("PATH LD_LIBRARY_PATH LD_PRELOAD PYTHONPATH VIRTUAL_ENV container".split())
ENV_KEPT_PREFIXES = ("CUDA_", "NCCL_", "CONDA_")

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


class SecretMap:
    def __init__(self, store: Pseudonyms) -> None:
        self.store = store

    def secret(self, value: str) -> str:
        return self.store.named("secret", value, "secret-%04d")

    def credential(self, userinfo: str) -> str:
        """The user:password of a URL."""
        return self.store.named("userinfo", userinfo, "cred-%04d")

    def tokens(self, text: str) -> str:
        """`text` with every token of a secret's shape replaced."""
        return SECRET_TOKENS.sub(self._secret_shape, text)

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
