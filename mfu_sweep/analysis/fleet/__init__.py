"""Many devices at once: leaderboards per FLOP band against one reference (linear in devices), the fleet
view of one chip's devices against the median of the rest, and the spread of a replicate run.

Imports the ground of ``analysis/``, ``fits/`` and ``verdicts/``.
"""
