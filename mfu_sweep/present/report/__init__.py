"""The one-shot report: its sections (numbers, leads, compare, fleet, steps, text), the blocks they are made
of, rendering them as Markdown and HTML (render) and writing the report folder (write).

May import: ``analysis/``, the ground, ``present/figures/`` (the report draws them), ``present/export/``
(its tables) and the shared modules of ``present/``. Never ``measure/``, ``workflow/``, ``cli/``, torch or
Click.
"""
