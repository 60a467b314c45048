"""The report's document model: headings, paragraphs, bullets, tables and figure references.

:mod:`mfu_sweep.present.report.write` builds a list of these and renders it as
Markdown and HTML; section builders such as :mod:`mfu_sweep.present.report.fleet`
return them too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    text: str
    css: str = ""


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    css: str = ""


@dataclass(frozen=True)
class FigureRef:
    """A figure by file stem; ``embed=False``: a link to its file instead (detail the page does not carry)."""

    stem: str
    caption: str
    embed: bool = True


Block = Heading | Para | Bullets | Table | FigureRef
