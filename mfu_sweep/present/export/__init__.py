"""Exports: records, fits and crossovers as tidy CSV, Markdown or LaTeX tables (tables), the records as
nvbench JSON (nvbench), and the step files' runs (steps).

May import: ``analysis/``, the ground, the shared modules of ``present/`` (words) and ``report/``'s step
series and rendering; no matplotlib at import. Never ``measure/``, ``workflow/``, ``cli/``, torch or Click.
"""
