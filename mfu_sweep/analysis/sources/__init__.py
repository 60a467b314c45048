"""Which sweeps make one series: merging files into one, and telling runs under one label apart.

Ground of ``analysis/``: imports only ``analysis.series`` and the top-level modules.

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``) and ``analysis/ground/``; never fits,
verdicts, fleet, steps or refine, and no torch, matplotlib or Click.
"""
