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


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, pos, line = [], 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            snippet = text[pos:pos + 20].split("\n")[0]
            raise TextProtoError(f"line {line}: unexpected text {snippet!r}")
        kind = m.lastgroup or ""
        if kind == "nl":
            line += 1
        elif kind not in ("ws", "comment"):
            out.append((kind, m.group(), line))
        pos = m.end()
    return out


def _scalar(kind: str, tok: str, line: int) -> Any:
    if kind == "string":
        return _unquote(tok, line)
    if kind == "number":
        t = tok.rstrip("fF")
        return float(t) if any(c in t for c in ".eE") else int(t)
    if kind == "ident":
        return tok
    raise TextProtoError(f"line {line}: expected a value, got {tok!r}")


def parse(text: str) -> Message:
    """Parse text-format protobuf into a :class:`Message` (raises :class:`TextProtoError`)."""
    toks = _tokens(text)
    pos = 0
    stack: list[tuple[Message, str, str, int]] = []  # (parent, field name, closing bracket, line opened)
    current = Message()
    while pos < len(toks):
        kind, tok, line = toks[pos]
        if kind == "punct" and tok in "}>":
            if not stack:
                raise TextProtoError(f"line {line}: unmatched {tok!r}")
            parent, name, close, opened = stack.pop()
            if tok != close:
                raise TextProtoError(f"line {line}: {tok!r} closes {name!r} opened with the other bracket")
            parent.fields.append((name, current, opened))
            current = parent
            pos += 1
            continue
        if kind == "punct" and tok in ";,":
            pos += 1
            continue
        if kind != "ident":
            raise TextProtoError(f"line {line}: expected a field name, got {tok!r}")
        name = tok
        pos += 1
        if pos < len(toks) and toks[pos][1] == ":":
            pos += 1
        if pos >= len(toks):
            raise TextProtoError(f"line {line}: file ends after field {name!r} (truncated?)")
        kind, tok, line2 = toks[pos]
        if kind == "punct" and tok in "{<":
            stack.append((current, name, "}" if tok == "{" else ">", line2))
            current = Message()
            pos += 1
            continue
        current.fields.append((name, _scalar(kind, tok, line2), line2))
        pos += 1
    if stack:
        _, name, _, opened = stack[-1]
        raise TextProtoError(f"file ends inside {name!r} opened at line {opened} (truncated?)")
    return current
