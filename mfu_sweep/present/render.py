"""The report's blocks rendered: Markdown (figures beside it) and one self-contained HTML page.

A :class:`~mfu_sweep.present.blocks.FigureRef` with ``embed=False`` (per-device detail of
``report --detail``) becomes a link to its PNG in both, so the page stays small.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence

from mfu_sweep.present.blocks import Block, Bullets, FigureRef, Heading, Para, Table


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: Sequence[Block], figure_dir: str = "figures") -> str:
    """Markdown of the report; figures are referenced as ``<figure_dir>/<stem>.png``."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * b.level} {b.text}")
        elif isinstance(b, Para):
            out.append(f"**{b.text}**" if b.css == "warn" else b.text)
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {item}" for item in b.items))
        elif isinstance(b, Table):
            header = [_md_cell(h) or " " for h in b.header]
            lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            out.append("\n".join(lines))
        elif isinstance(b, FigureRef) and not b.embed:
            out.append(f"- [{b.stem}]({figure_dir}/{b.stem}.png): {b.caption}")
        elif isinstance(b, FigureRef):
            out.append(f"![{b.stem}]({figure_dir}/{b.stem}.png)\n\n*{b.caption}*")
    return "\n\n".join(out) + "\n"


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2.2rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } td { overflow-wrap: break-word; }
table.kv td:first-child { white-space: nowrap; color: #555; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .9rem; color: #444; }
.warn { background: #fff3cd; border: 1px solid #e0c36c; padding: .5rem .75rem; font-weight: 600; }
table.strip { margin: .3rem 0 .5rem; font-size: .8rem; }
table.strip th, table.strip td { padding: .1rem .4rem; } table.strip th { white-space: nowrap; }
table.strip td:first-child { color: #555; }
""".strip()


def to_html(blocks: Sequence[Block], images: Mapping[str, bytes], title: str = "mfu-sweep report",
            figure_dir: str = "figures") -> str:
    """A self-contained HTML page: inline stylesheet, figures as base64 PNG, every text escaped.

    Figures not embedded are links to ``<figure_dir>/<stem>.png``.
    """
    esc = html.escape
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
