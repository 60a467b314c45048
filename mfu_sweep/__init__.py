"""mfu-sweep: GEMM throughput and MFU sweeps across accelerators.

Library first: everything the CLI does is importable, e.g.::

    from mfu_sweep.results import load_sweeps
    sweeps = load_sweeps(["sweeps/amd-epyc-cpu.json"])
"""

__version__ = "0.1.0"
