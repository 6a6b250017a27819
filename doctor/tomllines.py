"""TOML as text: where each key of a document is written (the line a policy error
names), and how `dldoctor genconf` writes a string.

tomllib returns plain dicts without positions, so the document's text is scanned again,
only after tomllib has accepted it: the scanner may assume valid TOML and only needs to
follow its structure (table headers, arrays of tables, dotted keys, inline tables,
arrays, strings that may hold any of those characters). Keys come out in the policy
loader's spelling: `firmware.minimums[1].min_version`, `os.supported[0]`.
"""

from __future__ import annotations

import bisect
import re

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SPACE = " \t"
# The key paths noted may hold this many characters per character of the document: a
# policy notes a few, a long key repeated in every element of a long array would note a
# quadratic number (a line number is not worth that).
_NOTED_PER_CHAR = 16
# tomllib recurses into nested arrays (600 levels: RecursionError) and spends quadratic time
# on a key's parts (a 100 kB dotted key: 103 s and 14 GiB); a policy nests 3 deep.
MAX_NESTING = 32
MAX_KEY_PARTS = 32


def line_of(text: str, key: str) -> int | None:
    """The line (from 1) where `key` or, failing that, the nearest table above it is
    written; None when neither is found. Never raises."""
    try:
        lines = key_lines(text)
    except Exception:  # noqa: BLE001 - a line number is a courtesy, never a new failure
        return None
    while key:
        if key in lines:
            return lines[key]
        key = key[: max(key.rfind("."), key.rfind("["), 0)]
    return None


def key_lines(text: str) -> dict[str, int]:
    """Every key, table and array element of a valid TOML document -> its first line.
    ValueError when their paths would be many times the document's size."""
    return _Scanner(text).run()


def shape_problem(text: str) -> str:
    """Why tomllib should not be given `text` (nesting or a dotted key past the caps), or
    "" when it may. One pass that skips strings and comments; it need not be exact, only
    bound what tomllib is given."""
    depth, dots, i, n = 0, 0, 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            i = _string_end(text, i)
            continue
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return f"arrays or tables nested more than {MAX_NESTING} deep"
        elif c in "]}":
            depth = max(depth - 1, 0)
        if c == ".":
            dots += 1
            if dots >= MAX_KEY_PARTS:
                return f"a dotted key of more than {MAX_KEY_PARTS} parts"
        elif c in "=,\n[]{}":
            dots = 0
        i += 1
    return ""


def _string_end(text: str, i: int) -> int:
    """The offset past the string opened at `i` (the end of the text when it is open)."""
    quote = text[i]
    width = 3 if text.startswith(quote * 3, i) else 1
    close = quote * width
    j = i + width
    while True:
        end = text.find(close, j)
        if end < 0:
            return len(text)
        if quote == "'":
            return end + width
        # a basic string's quote is escaped by an odd run of backslashes before it
        k = end
        while k > j and text[k - 1] == "\\":
            k -= 1
        if (end - k) % 2 == 0:
            return end + width
        j = end + 1


class _Scanner:
    def __init__(self, text: str):
        self.s = text
        self.i = 0
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.found: dict[str, int] = {}
        self.arrays: dict[str, int] = {}  # array-of-tables path -> entries so far
        self.budget = _NOTED_PER_CHAR * len(text) + 4096

    def line(self, at: int) -> int:
        return bisect.bisect_right(self.starts, at)

    def note(self, path: str, at: int) -> None:
        self.budget -= len(path)
        if self.budget < 0:
            raise ValueError("the key paths are too long for the document's size")
        self.found.setdefault(path, self.line(at))

    def run(self) -> dict[str, int]:
        table = ""
        while self._skip(newlines=True) < len(self.s):
            at = self.i
            if self.s.startswith("[[", at):
                self.i += 2
                parts = self._key("]")
                self.i += 2
                table = self._resolve(parts[:-1], parts[-1], new_entry=True)
            elif self.s[at] == "[":
                self.i += 1
                parts = self._key("]")
                self.i += 1
                table = self._resolve(parts[:-1], parts[-1], new_entry=False)
            else:
                self._pair(table)
                continue
            # The header's tables, and the array of tables itself, where first written.
            for m in re.finditer(r"[.\[]", table + "."):
                self.note(table[: m.start()], at)
        return self.found

    def _resolve(self, parents: list[str], last: str, *, new_entry: bool) -> str:
        path = ""
        for part in parents:
            path = _join(path, part)
            if path in self.arrays:  # a table inside the latest entry of an array of tables
                path += f"[{self.arrays[path] - 1}]"
        path = _join(path, last)
        if new_entry:
            self.arrays[path] = self.arrays.get(path, 0) + 1
            path += f"[{self.arrays[path] - 1}]"
        return path

    def _pair(self, table: str) -> None:
        at = self.i
        path = table
        for part in self._key("="):
            path = _join(path, part)
            self.note(path, at)
        self.i += 1  # "="
        self._skip()
        self._value(path)

    def _key(self, end: str) -> list[str]:
        """Dotted key parts up to `end` (left at `end`)."""
        parts = []
        while True:
            self._skip()
            c = self.s[self.i]
            if c in "\"'":
                start = self.i
                self._string()
                parts.append(_unquote(self.s[start : self.i]))
            else:
                m = _BARE.match(self.s, self.i)
                if m is None:
                    raise ValueError(f"no key at offset {self.i}")
                parts.append(m.group(0))
                self.i = m.end()
            self._skip()
            if self.s[self.i] == ".":
                self.i += 1
                continue
            if not self.s.startswith(end, self.i):
                raise ValueError(f"expected {end!r} at offset {self.i}")
            return parts

    def _value(self, path: str) -> None:
        c = self.s[self.i]
        if c in "\"'":
            self._string()
        elif c == "{":
            self.i += 1
            while self._skip(newlines=True) < len(self.s) and self.s[self.i] != "}":
                if self.s[self.i] == ",":
                    self.i += 1
                    continue
                self._pair(path)
            self.i += 1
        elif c == "[":
            self.i += 1
            index = 0
            while self._skip(newlines=True) < len(self.s) and self.s[self.i] != "]":
                if self.s[self.i] == ",":
                    self.i += 1
                    continue
                self.note(f"{path}[{index}]", self.i)
                self._value(f"{path}[{index}]")
                index += 1
            self.i += 1
        else:  # a number, a boolean or a date: up to the next separator
            while self.i < len(self.s) and self.s[self.i] not in ",]}#\n":
                self.i += 1

    def _string(self) -> None:
        quote = self.s[self.i]
        if self.s.startswith(quote * 3, self.i):
            end = self.s.index(quote * 3, self.i + 3) if quote == "'" else self._basic_end(3)
            self.i = end + 3
            while self.s.startswith(quote, self.i):  # up to two quotes end the content
                self.i += 1
        elif quote == "'":
            self.i = self.s.index("'", self.i + 1) + 1
        else:
            self.i = self._basic_end(1) + 1

    def _basic_end(self, width: int) -> int:
        """Offset of the closing quote(s) of a basic string opened at self.i."""
        j = self.i + width
        while True:
            if self.s[j] == "\\":
                j += 2
            elif self.s.startswith('"' * width, j):
                return j
            else:
                j += 1

    def _skip(self, *, newlines: bool = False) -> int:
        """Past blanks and comments (and line ends, with `newlines`); the new offset."""
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in _SPACE or (newlines and c in "\r\n"):
                self.i += 1
            elif c == "#":
                end = self.s.find("\n", self.i)
                self.i = len(self.s) if end < 0 else end
            else:
                break
        return self.i


# TOML refuses control characters and DEL unescaped; everything else may stand as it is.
_CONTROLS = {chr(c): f"\\u{c:04x}" for c in (*range(0x20), 0x7F)}


def basic_string(text: str) -> str:
    """A TOML basic string holding any text. Whole-string replaces, one per character that
    needs escaping (the backslash first): a character at a time took seconds on megabytes,
    and so does `str.translate` to longer strings."""
    out = str(text).replace("\\", "\\\\").replace('"', '\\"')
    for char, escaped in _CONTROLS.items():
        if char in out:
            out = out.replace(char, escaped)
    return '"' + out + '"'


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part


def _unquote(token: str) -> str:
    if token.startswith("'"):
        return token[1:-1]
    from dldoctor.policy import toml_parser  # a basic string's escapes, decoded as TOML does

    return toml_parser().loads(f"k = {token}")["k"]
