"""Build step that pyproject.toml cannot say: the documentation pages go into the wheel.

The Markdown pages of ``docs/`` (the site's sources, the same text) are copied to ``mfu_sweep/_docs/`` of the
built package, so that ``mfu-sweep docs`` prints them wherever the wheel is installed, offline. A checkout (an
editable install) reads ``docs/`` itself. Everything else is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DOCS = Path(__file__).resolve().parent / "docs"


class BuildWithDocs(build_py):
    """``build_py`` that also copies ``docs/**/*.md`` (not the build hooks) into ``mfu_sweep/_docs``."""

    def run(self) -> None:
        super().run()
        if self.editable_mode or not DOCS.is_dir():  # a checkout reads docs/ where it is
            return
        target = Path(self.build_lib) / "mfu_sweep" / "_docs"
        for page in sorted(DOCS.rglob("*.md")):
            rel = page.relative_to(DOCS)
            if rel.parts[0] == "hooks":
                continue
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, target / rel)


setup(cmdclass={"build_py": BuildWithDocs})
