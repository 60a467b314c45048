"""Text made safe for a table or a page: one line of valid Unicode (:func:`plain`), Markdown that renders as
the text and nothing else (:func:`md_text`), one cell of a Markdown table (:func:`md_cell`).

Here, at the bottom of ``present/``'s rooms, because the export tables and the report's renderer
(``report/render.py``) both escape with them.
"""

from __future__ import annotations

import html
import re

SURROGATE = re.compile("[\ud800-\udfff]")  # an undecodable byte of a file name (os.fsdecode) or a lone one
# what makes code, emphasis and links inline: a backslash, a backtick, a star, an underscore at a word's edge (one
# inside a word, as in sm_90, emphasises nothing) and a bracket that closes a link's text (](url), ][ref], ]: url)
_MD_INLINE = re.compile(r"([\\`*]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|\](?=[(\[:]))")
# a heading, quote, list (``-``, ``+``, ``1.``, ``1)``), rule or link definition ([ref]: url) at a block's start
_MD_LEADING = re.compile(r"^([#>+\[-]|\d+(?=[.)](\s|$)))")


def plain(text: str) -> str:
    """``text`` as one line of valid Unicode: line breaks become spaces (a label cannot start a new block of
    a document or a row of a table), a lone surrogate (a file name's undecodable byte) becomes U+FFFD."""
    return SURROGATE.sub("\ufffd", " ".join(text.splitlines()))


def md_text(text: str) -> str:
    """Plain ``text`` as Markdown that renders as that text and nothing else.

    HTML's ``<`` and ``&`` become entities (no tag, comment or autolink survives, whatever renders the
    page: Python-Markdown, as MkDocs, passes raw HTML through); the characters that make code spans,
    emphasis and links are backslash-escaped (``]`` only where it would close a link's text, so
    ``[95%]`` and ``sm_90`` stay as they are); ``~`` becomes ``&#126;`` (GitHub's strikethrough and
    fences; Python-Markdown has no backslash escape for it); leading whitespace is dropped (four spaces
    make a code block, and a paragraph's leading whitespace shows nowhere); a heading, quote, list
    (``-``, ``+``, ``1.``, ``1)``) or link-definition marker at the start is escaped; line breaks become
    spaces (:func:`plain`).
    """
    text = html.escape(plain(text).lstrip(), quote=False).replace("&gt;", ">")
    text = _MD_INLINE.sub(r"\\\1", text).replace("~", "&#126;")
    return _MD_LEADING.sub(_escape_marker, text, count=1)


def _escape_marker(m: re.Match[str]) -> str:
    """``# x`` -> ``\\# x``; ``1. x`` -> ``1\\. x`` and ``1) x`` -> ``1\\) x`` (the dot or parenthesis is what
    makes the list)."""
    marker = m.group(1)
    return f"{marker}\\" if marker[0].isdigit() else f"\\{marker}"


def md_cell(text: str) -> str:
    """``text`` as one cell of a Markdown table: :func:`md_text`, and ``|`` escaped."""
    return md_text(text).replace("|", "\\|")
