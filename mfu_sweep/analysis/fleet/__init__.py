"""Many devices at once: leaderboards per FLOP band against one reference (linear in devices), the fleet
view of one chip's devices against the median of the rest, and the spread of a replicate run.

Imports the ground of ``analysis/``, ``fits/`` and ``verdicts/``.

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``), ``analysis/ground/``, ``sources/``,
``fits/`` and ``verdicts/``; never steps or refine, and no torch, matplotlib or Click.
"""
