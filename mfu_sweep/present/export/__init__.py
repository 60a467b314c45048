"""Exports: records, fits and crossovers as tidy CSV, Markdown or LaTeX tables (tables), the records as
nvbench JSON (nvbench), and the step files' runs (steps); the lowest room of ``present/``: the step series
(steps) and the escaping of text (escape) that the figures and the report share live here.

May import: ``analysis/``, the ground and the shared modules directly inside ``present/`` (words); never
``figures/`` or ``report/``, no matplotlib at import. Never ``measure/``, ``workflow/``, ``cli/``, torch or Click.
"""
