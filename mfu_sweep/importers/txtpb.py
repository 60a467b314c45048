"""A small reader for the protobuf text format, enough for XLA's ``GemmPerfTable``.

Why not the ``protobuf`` package: its ``text_format`` parser needs the message
descriptors, i.e. XLA's ``xla_data.proto`` compiled for Python, which is neither
shipped on PyPI nor small. The table uses a tiny subset of the text format
(``name: scalar``, ``name { ... }``, ``# comments``, double-quoted strings and
integers), so a careful tokenizer and a recursive reader of about a hundred
lines cover it and report a truncated or foreign file by line number.

:func:`parse` returns a :class:`Message`: an ordered list of ``(name, value)``
pairs where a value is ``str``, ``int``, ``float``, an identifier string, or a
nested :class:`Message`. Repeated fields are just repeated pairs.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}:<>;,\[\]])
    """,
    re.VERBOSE,
)
MAX_DEPTH = 32  # XLA's table nests 4 levels
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}


class TextProtoError(ValueError):
    """The text is not valid (subset) protobuf text format; the message gives the line."""


@dataclass
class Message:
    """An ordered list of fields; ``fields[i] = (name, value, line)``."""

    fields: list[tuple[str, Any, int]] = field(default_factory=list)

    def all(self, name: str) -> list[Any]:
        return [v for n, v, _ in self.fields if n == name]

    def one(self, name: str, where: str) -> Any:
        values = self.all(name)
        if len(values) != 1:
            raise TextProtoError(f"{where}: expected one {name!r} field, found {len(values)}")
        return values[0]

    def names(self) -> set[str]:
        return {n for n, _, _ in self.fields}


def _unquote(tok: str, line: int) -> str:
    body, out, i = tok[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            if i + 1 >= len(body):
                raise TextProtoError(f"line {line}: bad escape in string")
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _tokens(text: str) -> Iterator[tuple[str, str, int]]:
    """The tokens of ``text`` one at a time (a list of them would hold millions for a large foreign file)."""
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            snippet = text[pos:pos + 20].split("\n")[0]
            raise TextProtoError(f"line {line}: unexpected text {snippet!r}")
        kind = m.lastgroup or ""
        if kind == "nl":
            line += 1
        elif kind not in ("ws", "comment"):
            yield kind, m.group(), line
        pos = m.end()


def _scalar(kind: str, tok: str, line: int) -> Any:
    if kind == "string":
        return _unquote(tok, line)
    if kind == "number":
        t = tok.rstrip("fF")
        return float(t) if any(c in t for c in ".eE") else int(t)
    if kind == "ident":
        return tok
    raise TextProtoError(f"line {line}: expected a value, got {tok!r}")


def parse(text: str, top: Collection[str] | None = None) -> Message:
    """Parse text-format protobuf into a :class:`Message` (raises :class:`TextProtoError`).

    ``top``: the field names a top-level field may have; another one stops the parse at its line, so a
    foreign file fails at its first field instead of after all of it. Messages nest at most
    :data:`MAX_DEPTH` levels.
    """
    toks = _tokens(text)
    stack: list[tuple[Message, str, str, int]] = []  # (parent, field name, closing bracket, line opened)
    current = Message()
    tok = next(toks, None)
    while tok is not None:
        kind, word, line = tok
        if kind == "punct" and word in "}>":
            if not stack:
                raise TextProtoError(f"line {line}: unmatched {word!r}")
            parent, name, close, opened = stack.pop()
            if word != close:
                raise TextProtoError(f"line {line}: {word!r} closes {name!r} opened with the other bracket")
            parent.fields.append((name, current, opened))
            current = parent
            tok = next(toks, None)
            continue
        if kind == "punct" and word in ";,":
            tok = next(toks, None)
            continue
        if kind != "ident":
            raise TextProtoError(f"line {line}: expected a field name, got {word!r}")
        name = word
        if top is not None and not stack and name not in top:
            raise TextProtoError(f"line {line}: top-level field {name!r}, where only {', '.join(map(repr, top))} "
                                 "may stand")
        tok = next(toks, None)
        if tok is not None and tok[1] == ":":
            tok = next(toks, None)
        if tok is None:
            raise TextProtoError(f"line {line}: file ends after field {name!r} (truncated?)")
        kind, word, line2 = tok
        if kind == "punct" and word in "{<":
            if len(stack) >= MAX_DEPTH:
                raise TextProtoError(f"line {line2}: messages nested deeper than {MAX_DEPTH} levels")
            stack.append((current, name, "}" if word == "{" else ">", line2))
            current = Message()
        else:
            current.fields.append((name, _scalar(kind, word, line2), line2))
        tok = next(toks, None)
    if stack:
        _, name, _, opened = stack[-1]
        raise TextProtoError(f"file ends inside {name!r} opened at line {opened} (truncated?)")
    return current
