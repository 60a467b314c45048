"""Who leads where between two series: one verdict per FLOP band, the evidence behind it, segments and
crossovers, how each side was timed, and ``compare`` (the entry point for every pair of series).

Imports the ground of ``analysis/`` and ``fits/`` (a comparison reports fit crossovers beside its data).

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``), ``analysis/ground/``, ``sources/`` and
``fits/``; never fleet, steps or refine, and no torch, matplotlib or Click.
"""
