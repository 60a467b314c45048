"""The shared ground of every analysis: series per (label, dtype, mode) from sweeps (series) and one value
per shape with the series summary every view shows (summary).

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``) and ``analysis/sources/``; never
another part of ``analysis/`` (fits, verdicts, fleet, steps, refine), ``measure/``, ``present/``, torch,
matplotlib or Click.
"""
