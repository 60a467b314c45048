"""Which sweeps make one series: merging files into one, and telling runs under one label apart.

Ground of ``analysis/``: imports only ``analysis.series`` and the top-level modules.
"""
