"""Presentation: figures (one module per kind, a shared theme), the one-shot report and export tables.

Never imports device code, torch or Click (``tests/test_layout.py``). Its rooms are ranked: the shared modules
directly inside (words, group_metric, machine_facts) import no room; ``export/`` imports only them;
``figures/`` them and ``export/``; ``report/``, on top, any of them.

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``), ``analysis/`` and matplotlib; never
``measure/``, ``workflow/``, ``cli/``, torch or Click.
"""

# What `plot --figure` picks from (kept here, free of matplotlib, so the CLI can offer it without
# importing the figures): the MFU (or TFLOP/s) vs FLOPs panels, the roofline, first-call cost, compile
# speedup, fleet and leaderboard heatmaps, MFU heatmaps of grids, the status overview, and time to N steps
# of a model family.
FIGURE_KINDS = ("vs-flops", "roofline", "first-call", "speedup", "fleet", "heatmap", "status", "steps")
