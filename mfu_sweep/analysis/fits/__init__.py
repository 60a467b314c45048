"""What one device's curve says on its own: roofline-with-overhead fits, their batched solver and bootstrap,
and which fitted memory roofs are physically plausible.

Imports only the ground of ``analysis/`` (``series``, ``summary``, ``sources/``) and the top-level modules.

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``), ``analysis/ground/`` and
``analysis/sources/``; never verdicts, fleet, steps or refine, and no torch, matplotlib or Click.
"""
