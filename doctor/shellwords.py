"""Shell words as `shlex.split` reads them (POSIX mode, no comments), in linear time.

shlex builds each word a character at a time: quadratic on one long word, 20 s and more on
a 1 MB line of a hostile os-release or command name. The pieces here are whole runs."""

from __future__ import annotations

import re

# A run of plain characters, a quoted string, an escaped character, or blanks. Each
# character belongs to one alternative only, so a failed match backtracks linearly.
_PIECE = re.compile(r"""[^ \t\r\n'"\\]+|'[^']*'|"(?:[^"\\]|\\.)*"|\\.|[ \t\r\n]+""", re.S)
_IN_DOUBLE = re.compile(r'\\([\\"])')  # the only escapes inside double quotes
_BLANK = " \t\r\n"


def split(text: str) -> list[str]:
    """`shlex.split(text)`; ValueError on an unclosed quote or a trailing backslash."""
    words: list[str] = []
    word: list[str] | None = None
    at = 0
    while at < len(text):
        m = _PIECE.match(text, at)
        if m is None:
            unclosed = text[at] in "'\""
            raise ValueError("no closing quotation" if unclosed else "no escaped character")
        piece, at = m.group(), m.end()
        first = piece[0]
        if first in _BLANK:
            if word is not None:
                words.append("".join(word))
            word = None
            continue
        if word is None:
            word = []
        if first == "'":
            word.append(piece[1:-1])
        elif first == '"':
            word.append(_IN_DOUBLE.sub(r"\1", piece[1:-1]))
        elif first == "\\":
            word.append(piece[1])
        else:
            word.append(piece)
    if word is not None:
        words.append("".join(word))
    return words
