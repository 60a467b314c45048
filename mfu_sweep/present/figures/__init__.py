"""Figures: one module per figure kind (mfu, roofline, compile, grid, fleet, steps), the house look (theme,
marks), what a figure picks from the records (select), which figures a report draws (choice), arranging and
saving them (arrange) and ``plot``, the one import for notebooks.

May import: ``analysis/``, the ground (``records/``, ``gemm/``, ``specs/``, ``util/``), matplotlib and the
shared modules directly inside ``present/`` (words, group_metric, machine_facts) and ``export/`` (the step
series a steps figure shares with the report and the export); never ``report/``. Never ``measure/``,
``workflow/``, ``cli/``, torch or Click.
"""
