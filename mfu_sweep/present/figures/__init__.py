"""Figures: one module per figure kind (mfu, roofline, compile, grid, fleet, steps), the house look (theme,
marks), which figures a report draws (choice), arranging and saving them (arrange) and ``plot``, the one
import for notebooks.

May import: ``analysis/``, the ground (``records/``, ``gemm/``, ``specs/``, ``util/``), matplotlib and the
shared modules of ``present/`` (select, words, group_metric, machine_facts); ``report/`` only for the step
series a steps figure shares with the report's steps section. Never ``measure/``, ``workflow/``, ``cli/``,
torch or Click.
"""
