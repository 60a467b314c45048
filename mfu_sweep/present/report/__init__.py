"""The one-shot report: its sections (numbers, leads, compare, fleet, steps, text), the blocks they are made
of, rendering them as Markdown and HTML (render), writing the report folder (write) and the sentences the
terminal prints after a sweep or a compare (headline); the top room of ``present/``.

May import: ``analysis/``, the ground, ``present/figures/`` (the report draws them), ``present/export/``
(its tables) and the shared modules of ``present/``. Never ``measure/``, ``workflow/``, ``cli/``, torch or
Click.
"""
