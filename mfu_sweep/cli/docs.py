"""``mfu-sweep docs``: the documentation pages, wherever the package is installed and offline.

A wheel carries the site's Markdown pages in ``mfu_sweep/_docs/`` (setup.py copies ``docs/`` there); a checkout
reads ``docs/`` beside the package. The site itself (``make docs``) is built from the same pages.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

PACKAGE = Path(__file__).resolve().parents[1]
SITE_URL = "https://mfu-sweep.a-seed-7ecabdf4.example/docs/"  # pyproject.toml's Documentation, mkdocs.yml's site_url


def docs_dir() -> Path | None:
    """The folder of the documentation pages: the wheel's bundled copy, else a checkout's ``docs/``."""
    for folder in (PACKAGE / "_docs", PACKAGE.parent / "docs"):
        if (folder / "index.md").is_file():
            return folder
    return None


def pages(folder: Path) -> dict[str, Path]:
    """Page name (``api``, ``reference/...``: the path without ``.md``) -> file, in name order."""
    found = {p.relative_to(folder).with_suffix("").as_posix(): p for p in folder.rglob("*.md")
             if "hooks" not in p.relative_to(folder).parts}
    return dict(sorted(found.items()))


def title(path: Path) -> str:
    """A page's first heading."""
    match = re.search(r"^# (.+)$", path.read_text(encoding="utf-8"), re.M)
    return match[1].strip() if match else path.stem


@click.command()
@click.argument("page", required=False)
@click.option("--path", "show_path", is_flag=True, help="Print where the pages are (or PAGE's file) and nothing else.")
def docs(page: str | None, show_path: bool) -> None:
    """Show the documentation: the list of pages, or PAGE's text (Markdown).

    The pages are installed with the package, so this works offline and
    wherever the wheel is installed; the same pages make the site
    (https://mfu-sweep.a-seed-7ecabdf4.example/docs/, or `make docs` in a
    checkout). PAGE is a name from the list (api, install, analysis ...).

    \b
    Example:
        mfu-sweep docs
        mfu-sweep docs api | less
        mfu-sweep docs --path
    """
    folder = docs_dir()
    if folder is None:
        raise click.ClickException(f"no documentation pages are installed with this copy of mfu-sweep; read them "
                                   f"at {SITE_URL}")
    found = pages(folder)
    if page is None:
        if show_path:
            click.echo(str(folder))
            return
        click.echo(f"documentation pages in {folder} (mfu-sweep docs PAGE prints one; site: {SITE_URL}):")
        width = max(map(len, found))
        for name, path in found.items():
            click.echo(f"  {name:<{width}}  {title(path)}")
        return
    key = page.removesuffix(".md")
    if key not in found:
        near = [n for n in found if key.lower() in n.lower()]
        raise click.BadParameter(f"no page {page!r}" + (f"; did you mean {', '.join(near)}?" if near else
                                 "; `mfu-sweep docs` lists them"), param_hint="PAGE")
    click.echo(str(found[key]) if show_path else found[key].read_text(encoding="utf-8"), nl=show_path)
