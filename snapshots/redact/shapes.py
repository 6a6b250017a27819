"""The shapes the text pass looks for: one regex over the text with every shape at once.

One pass, so a pseudonym is never redacted again, and the first shape that matches at a
place wins (a MAC is not read as an IPv6). Each shape starts with the character class of
its first character and looks behind only after it: the regex engine then skips a shape at
a place in one step, which makes the pass several times faster than shapes that open with a
look-behind. The empty group that ends a shape names it (`lastgroup`, the kind of value it
is); the whole match is what is replaced, unless said.
"""

from __future__ import annotations

import re

HEX = "[0-9A-Fa-f]"
UUID = rf"{HEX}{{8}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{12}}"
# What continues a word: a learnt name is replaced only where it is a whole word.
WORD_EDGE = r"A-Za-z0-9-"

_SHAPES = [
    # https://user:pass@host/: the userinfo (the match less its "//")
    r"//(?<=://)[^\s/@:'\"<>]+(?::[^\s/@'\"<>]*)?(?=@)(?P<userinfo>)",
    rf"(?:G(?<!\wG)PU|M(?<!\wM)IG)-{UUID}\b(?P<uuid>)",
    # a container id (cgroup paths): a container's hostname is its first 12 digits
    rf"{HEX}(?<!{HEX}{HEX}){HEX}{{63}}(?!{HEX})(?P<container>)",
    r"/(?<![\w.]/)home/(?P<homeuser>[^/\s\"'<>:;,=\\\0]+)",  # the user only
    rf"[Gg](?<!\w[Gg])(?i:uid):\s*0[xX](?P<guidxv>{HEX}{{16}})\b",  # the digits only
    # 6 octets: Ethernet; 8: EUI-64; 20: an IPoIB hardware address (it holds the port GID)
    rf"{HEX}(?<![0-9A-Fa-f:]{HEX}){HEX}(?::{HEX}{{2}}){{5}}(?:(?::{HEX}{{2}}){{14}}"
    rf"|(?::{HEX}{{2}}){{2}})?(?![0-9A-Fa-f:])(?P<mac>)",
    rf"{HEX}(?<![0-9A-Fa-f:]{HEX}){HEX}{{3}}(?::{HEX}{{4}}){{3}}(?![0-9A-Fa-f:])(?P<guid>)",
    # (2 to 7 groups of up to 4 digits and a colon, the first one begun by the first class)
    rf"[0-9A-Fa-f:](?<![\w:.][0-9A-Fa-f:])(?:(?<=:)|{HEX}{{0,3}}:)(?:{HEX}{{0,4}}:){{1,6}}"
    rf"(?:{HEX}{{1,4}}|(?:\d{{1,3}}\.){{3}}\d{{1,3}})?(?:%[\w.-]+)?(?![\w:])(?P<ipv6>)",
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
SHAPES = re.compile("|".join(_SHAPES))  # (and the words learnt: `with_words`)
# The shapes that stand for the value after them (NAME=, an option, a flag): the value is
# replaced, the rest of the text is read on.
VALUE_AFTER = ("avalue", "ovalue", "fvalue")


def with_words(words: list[str]) -> re.Pattern[str]:
    """SHAPES and, last, the learnt `words` (lower case) as whole words (group "literal")."""
    if not words:
        return SHAPES
    # first character, then the rest of each word that begins with it (the shapes' form;
    # longest first, so that an FQDN wins over its host)
    words = sorted(words, key=len, reverse=True)
    firsts = "".join(sorted({c for w in words for c in (w[0].lower(), w[0].upper())}))
    rests = "|".join(f"(?<={re.escape(w[0])}){re.escape(w[1:])}" for w in words)
    literal = rf"[{re.escape(firsts)}](?<![{WORD_EDGE}].)(?i:{rests})(?![{WORD_EDGE}])(?P<literal>)"
    return re.compile("|".join([*_SHAPES, literal]))
