"""Analysis: what the measurements say, torch-free and matplotlib-free.

Series per (label, dtype, mode) and merging (``series``, ``merge``), roofline fits (``fit`` on
``roofline``/``lsq``), per-shape lead evidence (``evidence``) and comparisons (``compare`` is the entry
point), fleet and leaderboard views, replicate spread and step prediction (``tests/test_layout.py``).
"""
