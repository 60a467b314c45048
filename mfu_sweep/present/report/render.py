"""The report's blocks rendered: Markdown (figures beside it) and one self-contained HTML page.

A :class:`~mfu_sweep.present.report.blocks.FigureRef` with ``embed=False`` (per-device detail of
``report --detail``) becomes a link to its PNG in both, so the page stays small.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence

from mfu_sweep.present.export.escape import SURROGATE, md_cell, md_text
from mfu_sweep.present.report.blocks import Block, Bullets, FigureRef, Heading, Para, Table


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
        return html.escape(SURROGATE.sub("\ufffd", text))

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
