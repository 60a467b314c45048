"""The report's blocks rendered: Markdown (figures beside it) and one self-contained HTML page.

A :class:`~mfu_sweep.present.report.blocks.FigureRef` with ``embed=False`` (per-device detail of
``report --detail``) becomes a link to its PNG in both, so the page stays small.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence

from mfu_sweep.present.report.blocks import Block, Bullets, FigureRef, Heading, Para, Table

_SURROGATE = re.compile("[\ud800-\udfff]")  # an undecodable byte of a file name (os.fsdecode) or a lone one
# what makes code, emphasis and links inline: a backslash, a backtick, a star, an underscore at a word's edge (one
# inside a word, as in sm_90, emphasises nothing) and a bracket that closes a link's text (](url), ][ref], ]: url)
_MD_INLINE = re.compile(r"([\\`*]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|\](?=[(\[:]))")
# a heading, quote, list (``-``, ``+``, ``1.``, ``1)``), rule or link definition ([ref]: url) at a block's start
_MD_LEADING = re.compile(r"^([#>+\[-]|\d+(?=[.)](\s|$)))")


def plain(text: str) -> str:
    """``text`` as one line of valid Unicode: line breaks become spaces (a label cannot start a new block of
    a document or a row of a table), a lone surrogate (a file name's undecodable byte) becomes U+FFFD."""
    return _SURROGATE.sub("\ufffd", " ".join(text.splitlines()))


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


def to_markdown(blocks: Sequence[Block], figure_dir: str = "figures") -> str:
    """Markdown of the report, every text escaped (:func:`md_text`); figures are ``<figure_dir>/<stem>.png``."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * b.level} {md_text(b.text)}")
        elif isinstance(b, Para):
            out.append(f"**{md_text(b.text)}**" if b.css == "warn" else md_text(b.text))
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {md_text(item)}" for item in b.items))
        elif isinstance(b, Table):
            header = [md_cell(h) or " " for h in b.header]
            lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in b.rows]
            out.append("\n".join(lines))
        elif isinstance(b, FigureRef) and not b.embed:
            out.append(f"- [{md_text(b.stem)}]({figure_dir}/{b.stem}.png): {md_text(b.caption)}")
        elif isinstance(b, FigureRef):
            out.append(f"![{md_text(b.stem)}]({figure_dir}/{b.stem}.png)\n\n*{md_text(b.caption)}*")
    return "\n\n".join(out) + "\n"


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 60rem; margin: 1rem auto;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2.2rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; } h1 + p { margin: 0 0 .4rem; font-size: .9rem; color: #444; }
h1 + p + h2, h1 + p + p + h2 { font-size: 1.25rem; margin: .4rem 0 .3rem; }
p.intro { font-size: .85rem; margin: .2rem 0 .3rem; color: #444; line-height: 1.3; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } td { overflow-wrap: break-word; }
table.kv td:first-child { white-space: nowrap; color: #555; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .9rem; color: #444; }
.warn { background: #fff3cd; border: 1px solid #e0c36c; padding: .5rem .75rem; font-weight: 600; }
p.intro + .warn { font-size: .85rem; line-height: 1.3; padding: .2rem .5rem; margin: .3rem 0; }
table.strip { margin: .2rem 0 .3rem; font-size: .75rem; line-height: 1.25; max-width: 100%; }
table.strip th, table.strip td { padding: .05rem .25rem; overflow-wrap: anywhere; }
table.strip td:first-child { color: #555; }
""".strip()


def to_html(blocks: Sequence[Block], images: Mapping[str, bytes], title: str = "mfu-sweep report",
            figure_dir: str = "figures") -> str:
    """A self-contained HTML page: inline stylesheet, figures as base64 PNG, every text escaped.

    Figures not embedded are links to ``<figure_dir>/<stem>.png``.
    """
    def esc(text: str) -> str:
        return html.escape(_SURROGATE.sub("\ufffd", text))

    body: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f"<h{b.level}>{esc(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            cls = f' class="{esc(b.css)}"' if b.css else ""
            body.append(f"<p{cls}>{esc(b.text)}</p>")
        elif isinstance(b, Bullets):
            body.append("<ul>" + "".join(f"<li>{esc(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            head = "" if not any(b.header) else "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in b.header) + "</tr>"
            rows = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in b.rows)
            cls = f' class="{esc(b.css)}"' if b.css else ""
            body.append(f"<table{cls}>{head}{rows}</table>")
        elif isinstance(b, FigureRef) and not b.embed:
            body.append(f'<p><a href="{figure_dir}/{esc(b.stem)}.png">{esc(b.stem)}</a>: {esc(b.caption)}</p>')
        elif isinstance(b, FigureRef):
            data = base64.b64encode(images[b.stem]).decode("ascii")
            body.append(f'<figure><img alt="{esc(b.stem)}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{esc(b.caption)}</figcaption></figure>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc(title)}</title>\n<style>\n{STYLE}\n</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
