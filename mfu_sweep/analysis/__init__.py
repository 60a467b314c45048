"""Analysis: what the measurements say, torch-free and matplotlib-free.

Split by the question each part answers, bottom to top (``tests/test_layout.py`` enforces the order):

- ``ground/`` (series, summary) and ``sources/``: the shared ground. What one measured curve is (a
  series per label, dtype and mode), its one-number summary, and which files make it (merging,
  runs under one label).
- ``fits/``: what one device's curve says on its own (roofline fits, their solver, physical limits).
- ``verdicts/``: who leads where between two series (band verdicts, their evidence, crossovers,
  timing calibration, the ``compare`` entry point).
- ``fleet/``: many devices at once (leaderboards against a reference, the fleet view, replicate spread).
- ``refine/``: where to measure next (proposals, curve bends).
- ``steps/``: a step's GEMM time from the fits, time to N steps of a workload, first calls included; when
  compile pays.

A part imports only the parts listed before it (``steps/`` beside ``fleet/``: the ground, ``fits/`` and
``verdicts/``).

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``) and its own parts, each only parts of a
lower rank (ground and sources, fits, verdicts, fleet and steps, refine); never ``measure/``, ``importers/``,
``present/``, ``workflow/``, ``cli/``, torch, matplotlib or Click.
"""
